"""Time full handshakes per key exchange group against one server and rank the groups.

`tlsprobe timing HOST[:PORT]` finds the groups the server accepts in TLS 1.3 and TLS 1.2
(or times --timing-groups), completes N handshakes with each, and prints median, p90, the
confidence interval of the median, handshakes per second, our own CPU time beside the wait
for the server, and which group is cheapest on this server. The probe command reuses this
module for `tlsprobe HOST --timing` through `add_timing_arguments` and `run_timing`.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, TYPE_CHECKING

from tlsprobe.commands.common import (
    add_sni_arguments,
    error_line,
    seconds,
    whole_number,
)
from tlsprobe.errors import EXIT_OK, TlsprobeError, exit_code_for
from tlsprobe.requests.timing import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RUNS,
    DEFAULT_TIMEOUT,
    DEFAULT_WARMUP,
    MAX_RUNS,
    MAX_WARMUP,
)

if TYPE_CHECKING:
    from tlsprobe.probes.timing.run import TimingOptions


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


def options_from_args(args: argparse.Namespace, host: str) -> TimingOptions:
    """TimingOptions from the --timing-* options (and --sni/--no-sni/--timeout if present),
    checked by the request layer the API's `timing()` uses too."""
    from tlsprobe.requests.names import CLI
    from tlsprobe.requests.timing import timing_options
    timeout = args.timing_timeout
    if timeout is None:
        timeout = getattr(args, "timeout", None) or DEFAULT_TIMEOUT
    return timing_options(host, names=CLI, runs=args.timing_runs, warmup=args.timing_warmup,
                          timeout=timeout, versions=args.timing_versions,
                          groups=args.timing_groups,
                          suites=getattr(args, "timing_suites", None),
                          server_name=getattr(args, "sni", None) or None,
                          send_sni=not getattr(args, "no_sni", False),
                          confidence=getattr(args, "timing_confidence", None))


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
        from tlsprobe.requests.timing import check_explicit_groups
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


__all__ = ["add_arguments", "add_timing_arguments", "options_from_args",
           "run", "run_timing"]
