"""Time full handshakes per key exchange group against one server and rank the groups.

`tlsprobe timing HOST[:PORT]` finds the groups the server accepts in TLS 1.3 and TLS 1.2
(or times --timing-groups), completes N handshakes with each, and prints median, p90, the
confidence interval of the median, handshakes per second, our own CPU time beside the wait
for the server, and which group is cheapest on this server. The probe command reuses this
module for `tlsprobe HOST --timing` through `add_timing_arguments` and `run_timing`.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from tlsprobe.commands.common import (
    add_sni_arguments,
    error_line,
    seconds,
    whole_number,
)
from tlsprobe.errors import EXIT_OK, TlsprobeError, UsageError, exit_code_for

if TYPE_CHECKING:
    from tlsprobe.probes.timing.run import TimingOptions

# engine.config's TLS13 and TLS12, written out: building the parser imports no engine,
# registry or `cryptography` module (tests/project/test_startup.py checks both).
TLS13, TLS12 = 0x0304, 0x0303
DEFAULT_RUNS = 20
DEFAULT_WARMUP = 2
DEFAULT_TIMEOUT = 5.0
DEFAULT_CONFIDENCE = 0.95
#: the most measured handshakes per entry and warm-up rounds: every run of every group (and
#: version and suite) is one handshake, so the bound is on the run's time
MAX_RUNS = 10_000
MAX_WARMUP = 1_000
_VERSIONS = {"1.3": TLS13, "13": TLS13, "tls1_3": TLS13, "tlsv1.3": TLS13, "tls1.3": TLS13,
             "1.2": TLS12, "12": TLS12, "tls1_2": TLS12, "tlsv1.2": TLS12, "tls1.2": TLS12}


def add_timing_arguments(parser: argparse._ActionsContainer) -> None:
    """The --timing-* options (an ArgumentParser or an argument group); none clashes with
    the probe's own options. Their defaults are None (resolved in `options_from_args`), so
    that the probe command can tell which were given."""
    parser.add_argument("--timing-runs", type=whole_number(1, MAX_RUNS), default=None,
                        metavar="N", help=f"measured handshakes per group, 1 to {MAX_RUNS} "
                        f"(default {DEFAULT_RUNS})")
    parser.add_argument("--timing-warmup", type=whole_number(0, MAX_WARMUP), default=None,
                        metavar="N", help=f"uncounted warm-up rounds first, 0 to {MAX_WARMUP} "
                        f"(default {DEFAULT_WARMUP})")
    parser.add_argument("--timing-groups", metavar="LIST", default=None,
                        help="time these groups (names or hex, ',' or ':' separated) instead "
                        "of the ones the server is found to accept")
    parser.add_argument("--timing-versions", metavar="LIST", default=None,
                        help="protocol versions to time: 1.3, 1.2, or both: 1.3,1.2 (the default)")
    parser.add_argument("--timing-suites", metavar="LIST", default=None,
                        help="also pin each of these cipher suites in turn ('all': every suite "
                        "the server accepts); default: the server chooses")
    parser.add_argument("--timing-timeout", type=seconds, default=None, metavar="SECONDS",
                        help="limit per handshake, connect included (default: --timeout, "
                        f"else {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--timing-confidence", type=float, default=None, metavar="P",
                        help="confidence of the median's interval, in [0.5, 1) (default "
                        f"{DEFAULT_CONFIDENCE})")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help="also draw each group's handshake times with the confidence "
                        "interval, PNG or SVG by the extension (needs matplotlib: pip install matplotlib)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="HOST[:PORT]", help="server to time (default port "
                        "443; IPv6 as [::1]:4433)")
    add_timing_arguments(parser)
    add_sni_arguments(parser)
    parser.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                        help=f"per-handshake limit (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    from tlsprobe.commands.common import add_json_out_argument
    add_json_out_argument(parser, "the result")
    from tlsprobe.commands.starttls_option import add_starttls_arguments
    add_starttls_arguments(parser)


def _versions(text: str | None) -> tuple[int, ...]:
    if text is None:
        return (TLS13, TLS12)
    from tlsprobe.requests.hello import once
    from tlsprobe.requests.names import CLI
    out: list[tuple[str | int, int]] = []
    for item in text.replace(",", " ").split():
        key = item.lower().replace(" ", "")
        if key not in _VERSIONS:
            raise UsageError(f"--timing-versions: unknown version {item!r} (use 1.3 or 1.2)")
        out.append((item, _VERSIONS[key]))
    if not out:
        raise UsageError("--timing-versions: no version given")
    once(out, "timing_versions", CLI)
    return tuple(code for _, code in out)


def _codes(text: str, parse: Callable[[str], int], option: str) -> tuple[int, ...]:
    from tlsprobe import registry
    from tlsprobe.requests.hello import once, split, split_suites
    from tlsprobe.requests.names import CLI
    items = split_suites(text) if parse is registry.parse_suite else split(text)
    try:
        codes: list[tuple[str | int, int]] = [(item, parse(item)) for item in items]
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if not codes:
        raise UsageError(f"{option}: empty list")
    once(codes, option.removeprefix("--").replace("-", "_"), CLI)
    return tuple(code for _, code in codes)


def _sni(args: argparse.Namespace, host: str) -> str | None:
    if getattr(args, "no_sni", False):
        return None
    if getattr(args, "sni", None):
        return str(args.sni)
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        return host


def options_from_args(args: argparse.Namespace, host: str) -> TimingOptions:
    """TimingOptions from the --timing-* options (and --sni/--no-sni/--timeout if present)."""
    from tlsprobe import registry
    from tlsprobe.probes.timing.run import TimingOptions
    runs = DEFAULT_RUNS if args.timing_runs is None else args.timing_runs
    warmup = DEFAULT_WARMUP if args.timing_warmup is None else args.timing_warmup
    if not 1 <= runs <= MAX_RUNS:
        raise UsageError(f"--timing-runs must be from 1 to {MAX_RUNS}")
    if not 0 <= warmup <= MAX_WARMUP:
        raise UsageError(f"--timing-warmup must be from 0 to {MAX_WARMUP}")
    timeout = args.timing_timeout
    if timeout is None:
        timeout = getattr(args, "timeout", None) or DEFAULT_TIMEOUT
    if not 0 < timeout < float("inf"):
        raise UsageError("--timing-timeout must be positive")
    confidence = getattr(args, "timing_confidence", None)
    confidence = DEFAULT_CONFIDENCE if confidence is None else confidence
    if not 0.5 <= confidence < 1:
        raise UsageError("--timing-confidence must be in [0.5, 1), e.g. 0.95")
    suites_text = getattr(args, "timing_suites", None)
    all_suites = suites_text is not None and suites_text.strip().lower() == "all"
    suites = None if suites_text is None or all_suites else \
        _codes(suites_text, registry.parse_suite, "--timing-suites")
    groups = None if args.timing_groups is None else \
        _codes(args.timing_groups, registry.parse_group, "--timing-groups")
    return TimingOptions(runs=runs, warmup=warmup, timeout=float(timeout),
                         versions=_versions(args.timing_versions), groups=groups,
                         suites=suites, all_suites=all_suites, server_name=_sni(args, host),
                         confidence=confidence)


def check_explicit_groups(options: TimingOptions) -> None:
    """Explicit groups none of which can be timed are a usage error, told before connecting
    (rather than "the enumeration found none", which would blame the server)."""
    from tlsprobe import kex, registry
    from tlsprobe.probes.timing.plan import explicit_plans
    if not options.groups:
        return
    if explicit_plans(options)[0]:
        return
    versions = " or ".join(registry.version_name(v) for v in options.versions)
    why = [f"{registry.group_label(g)}: "
           + ("no key share can be computed here" if not kex.is_computable(g)
              else f"not a {versions} group") for g in options.groups]
    raise UsageError("none of the groups given can be timed (" + "; ".join(why[:6])
                     + (" ..." if why[6:] else "") + "); give groups tlsprobe can compute, "
                     "e.g. x25519, secp256r1, ffdhe2048, X25519MLKEM768")


class _Progress:
    """A one-line progress display on stderr, only when stderr is a terminal."""

    def __init__(self, err: IO[str]) -> None:
        self.err = err
        self.shown = err.isatty()

    def __call__(self, done: int, planned: int, label: str) -> None:
        if self.shown and (done % 5 == 0 or done == planned):
            self.err.write(f"\rtiming handshakes: {done}/{planned} ({label})\x1b[K")
            self.err.flush()

    def clear(self) -> None:
        if self.shown:
            self.err.write("\r\x1b[K")
            self.err.flush()


def run_timing(target_text: str, args: argparse.Namespace | TimingOptions, *,
               out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Time `target_text` with the options in `args` (an argparse Namespace carrying the
    --timing-* options, or a TimingOptions); prints the table (JSON with args.json) and
    returns the exit code. Errors are one line on stderr, never a traceback."""
    from tlsprobe.net.tcp import parse_target
    from tlsprobe.probes.timing.run import TimingOptions, measure_timing
    out = out or sys.stdout
    err = err or sys.stderr
    progress = _Progress(err)
    plot: str | None = getattr(args, "plot", None)
    try:
        target = parse_target(target_text)
        if isinstance(args, TimingOptions):
            options = args
        else:
            from dataclasses import replace

            from tlsprobe.commands.starttls_option import spec_for
            options = replace(options_from_args(args, target.host),
                              starttls=spec_for(args, target, note=err))
        check_explicit_groups(options)
        if plot:   # before measuring, not after
            from tlsprobe.report.plots import check_plot
            check_plot(plot)
        from tlsprobe.commands.common import check_json_out
        if not isinstance(args, TimingOptions):
            check_json_out(args)
        if progress.shown and options.groups is None:
            err.write("timing: finding the groups the server accepts...")
            err.flush()
        report = measure_timing(target, options, on_progress=progress)
    except TlsprobeError as exc:
        progress.clear()
        print(error_line(exc), file=err)
        return exc.exit_code
    progress.clear()
    if getattr(args, "json", False):
        print(report.to_json(), file=out)
    elif report.entries:
        from tlsprobe.report.timing_tables import render_timing
        render_timing(report, out)
    json_out: str | None = getattr(args, "json_out", None)
    if json_out:
        from tlsprobe.commands.common import write_json_out
        try:
            write_json_out(json_out, [report.to_json()])
        except TlsprobeError as exc:
            print(error_line(exc), file=err)
            return exc.exit_code
    if plot and report.entries:
        from tlsprobe.commands.common import written_to
        from tlsprobe.report.plots import plot_timing
        with written_to("--plot", plot):
            plot_timing(report, plot)
    if report.error or report.stopped:
        why = report.error or f"stopped early: {report.stopped}"
        from tlsprobe.report.escape import shown
        print(f"tlsprobe: {shown(f'{target.display}: {why}')}", file=err)
        return exit_code_for(report.error_kind)
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    return run_timing(args.target, args)


__all__ = ["add_arguments", "add_timing_arguments", "check_explicit_groups", "options_from_args",
           "run", "run_timing"]
