"""Benchmark key exchange groups, signatures and AEADs like `openssl speed`.

`tlsprobe speed [ALGORITHM...]` measures `cryptography`'s speed for each operation for
--seconds (default 3, as openssl) and prints openssl-style tables, or JSON with --json.
--compare-openssl then runs `openssl speed` on the primitives it knows and prints the
ratio per primitive (ML-KEM and ML-DSA only with an openssl 3.5+; an older one is not asked
and the row says so). `--list` names the algorithms, as JSON with --json. --seconds is at
least 0.01; --bytes with no AEAD selected is a `tlsprobe: note:` on stderr. A progress line is drawn on stderr only when it is a terminal.
Ctrl-C stops at once (workers included), prints the figures completed so far and one line
`tlsprobe: interrupted` on stderr, and exits 130 as the other commands do.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tlsprobe.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TlsprobeError, UsageError

if TYPE_CHECKING:
    from tlsprobe.speed import SpeedReport
    from tlsprobe.speed.base import Algorithm

# tlsprobe.speed (its catalog is built from `cryptography` objects) is imported when the
# command runs or its help is shown, never to build the parser: `tlsprobe --help`,
# `--version` and the other commands stay fast (tests/project/test_startup.py).

_MAX_BLOCK = 1 << 20

# Shortest --seconds: below this a figure is a handful of calls (often one) and its rate
# says more about the clock than about the primitive.
MIN_SECONDS = 0.01


def _openssl_tests() -> int:
    """How many timed tests `openssl speed` runs for --compare-openssl over everything."""
    from tlsprobe.speed import DEFAULT_BLOCK_SIZES, catalog
    total = 0
    for algorithm in catalog.ALGORITHMS:
        if algorithm.openssl is None:
            continue
        if algorithm.kind == "aead":
            total += len(DEFAULT_BLOCK_SIZES)
        elif algorithm.kind == "kex":
            total += 1  # openssl times the derive only
        else:
            total += len(algorithm.operations)
    return total


def _time_note() -> str:
    from tlsprobe.speed import DEFAULT_BLOCK_SIZES, catalog, figure_total
    figures = figure_total(catalog.ALGORITHMS, DEFAULT_BLOCK_SIZES)
    return (f"With no ALGORITHM every algorithm runs: {len(catalog.ALGORITHMS)} algorithms, "
            f"{figures} figures of SECONDS each plus a few seconds of key generation "
            f"(about {figures * 3 / 60:.0f} minutes at the default 3 s, about a minute with "
            f"--seconds 0.5). --compare-openssl adds openssl speed's own run, up to "
            f"{_openssl_tests()} tests of max(1, round(SECONDS)) s each (openssl takes whole "
            "seconds only). See --list for names; groups such as ecdh, ffdh, mlkem, hybrid, "
            "rsa, ecdsa, eddsa, mldsa, aead select several.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tlsprobe.commands.common import ArgumentParser
    if isinstance(parser, ArgumentParser):
        parser.epilog_factory = _time_note   # counted from the catalog when --help asks
    else:
        parser.epilog = _time_note()
    parser.add_argument("algorithms", nargs="*", metavar="ALGORITHM",
                        help="algorithms or groups to measure (default: all); see --list")
    parser.add_argument("--seconds", default="3", metavar="S",
                        help=f"measuring time per figure, in seconds (float, {MIN_SECONDS} to "
                             "3600; default 3)")
    parser.add_argument("--multi", default="1", metavar="N",
                        help="run N processes at once and sum their figures (openssl -multi)")
    parser.add_argument("--bytes", default=None, metavar="N[,N...]",
                        help="AEAD block sizes (default 16,64,256,1024,8192,16384); "
                             "a note on stderr when no AEAD is selected")
    parser.add_argument("--json", action="store_true",
                        help="print the results (or the --list) as JSON")
    parser.add_argument("--list", action="store_true",
                        help="list algorithm names (those selected by ALGORITHM, if given) and exit")
    parser.add_argument("--compare-openssl", action="store_true",
                        help="also run `openssl speed` on the same primitives and print ratios")
    parser.add_argument("--openssl", default=None, metavar="PATH",
                        help="openssl binary for --compare-openssl, which it implies "
                             "(default: openssl on PATH); it must exist and be openssl")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help="also draw the figures as a chart, PNG or SVG by the extension "
                             "(needs matplotlib: pip install matplotlib)")


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise UsageError(f"--seconds: not a number: {value!r}") from None
    if not math.isfinite(seconds) or seconds < MIN_SECONDS or seconds > 3600:
        raise UsageError(f"--seconds must be at least {MIN_SECONDS} and at most 3600, "
                         f"not {value}")
    return seconds


def _positive_int(option: str, value: str, limit: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{option}: not a whole number: {value!r}") from None
    if not 1 <= number <= limit:
        raise UsageError(f"{option} must be between 1 and {limit}, not {number}")
    return number


def _block_sizes(value: str | None) -> tuple[int, ...]:
    from tlsprobe.speed import DEFAULT_BLOCK_SIZES
    if value is None:
        return DEFAULT_BLOCK_SIZES
    sizes = [_positive_int("--bytes", part.strip(), _MAX_BLOCK) for part in value.split(",")]
    return tuple(dict.fromkeys(sizes))


def list_lines(algorithms: Sequence[Algorithm] | None = None) -> list[str]:
    """The --list text: each algorithm (default: the whole catalog) with its aliases and
    openssl speed name."""
    from tlsprobe.speed import catalog
    if algorithms is None:
        algorithms = catalog.ALGORITHMS
    rows = [("kind", "name", "description", "also accepted", "openssl speed")]
    for algorithm in algorithms:
        spec = algorithm.openssl
        theirs = "-" if spec is None else (
            f"-evp {spec.cipher} -aead" if spec.cipher else " ".join(spec.names))
        rows.append((algorithm.kind, algorithm.name, algorithm.description,
                     ", ".join(algorithm.aliases) or "-", theirs))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths)) + "  " + row[4]
             for row in rows]
    lines.append("")
    lines.append("groups: " + ", ".join(sorted(catalog.groups())))
    lines.append("Names ignore case, '-', '_' and spaces (ML-KEM-768 = mlkem768); "
                 "ML-KEM/ML-DSA need openssl 3.5+ for --compare-openssl.")
    return lines


LIST_SCHEMA = "tlsprobe.speed-list/1"


def list_json(algorithms: Sequence[Algorithm] | None = None) -> dict[str, object]:
    """The --list --json document: each algorithm (default: the whole catalog), what it
    measures and what it needs.

    {"schema": "tlsprobe.speed-list/1",
     "algorithms": [{"name": "mlkem768", "kind": "kem", "description": "ML-KEM-768",
                     "operations": ["keygen", "encaps", "decaps"],   # AEAD: ["encrypt"]
                     "aliases": ["ML-KEM-768"], "groups": ["mlkem", "kem", "kex"],
                     "openssl_speed": ["ML-KEM-768"],   # its arguments; null: no equivalent
                     "needs": {"openssl_speed": "OpenSSL 3.5+"}}],  # for --compare-openssl
     "groups": {"aead": ["aes-128-gcm", ...], ...}}   # every group word, whole catalog
    """
    from tlsprobe.speed import catalog
    if algorithms is None:
        algorithms = catalog.ALGORITHMS
    entries: list[dict[str, object]] = []
    for algorithm in algorithms:
        spec = algorithm.openssl
        theirs = None if spec is None else (
            ["-evp", spec.cipher, "-aead"] if spec.cipher else list(spec.names))
        entries.append({
            "name": algorithm.name, "kind": algorithm.kind,
            "description": algorithm.description, "operations": list(algorithm.operations),
            "aliases": list(algorithm.aliases), "groups": list(algorithm.groups),
            "openssl_speed": theirs,
            "needs": {"openssl_speed": None if spec is None else spec.needs}})
    return {"schema": LIST_SCHEMA, "algorithms": entries,
            "groups": {word: [a.name for a in members]
                       for word, members in sorted(catalog.groups().items())}}


def _selection(names: list[str]) -> list[Algorithm]:
    from tlsprobe.speed import UnknownAlgorithm, catalog
    try:
        return catalog.resolve(names)
    except UnknownAlgorithm as exc:
        raise UsageError(str(exc)) from None


def _openssl_binary(path: str | None) -> str | None:
    """Check an explicit --openssl before minutes of measuring, not after (exit 2)."""
    if path is None:
        return None
    from tlsprobe.speed import openssl as openssl_compare
    try:
        openssl_compare.check_binary(path)
    except openssl_compare.OpensslUnusable as exc:
        raise UsageError(str(exc)) from None
    return path


def _print(report: SpeedReport, as_json: bool) -> None:
    from tlsprobe.speed import text
    if as_json:
        from tlsprobe.model.encode import dumps
        print(dumps(report, indent=2))
    else:
        sys.stdout.write(text.format_report(report))
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    from tlsprobe.speed import SpeedError, SpeedInterrupted, figure_total, run_speed
    algorithms = _selection(args.algorithms)
    if args.list:
        if args.json:
            from tlsprobe.model.encode import run_head, started_at
            clock = time.monotonic()
            listing = list_json(algorithms)   # a JSON document: with the run's members
            took = time.monotonic() - clock
            listing.update({**run_head(), "started_at": started_at(took),
                            "duration_s": round(took, 6)})
            print(json.dumps(listing, indent=2))
        else:
            print("\n".join(list_lines(algorithms)))
        return 0
    seconds = _seconds(args.seconds)
    processes = _positive_int("--multi", args.multi, 256)
    block_sizes = _block_sizes(args.bytes)
    if args.bytes is not None and not any(a.kind == "aead" for a in algorithms):
        print("tlsprobe: note: --bytes sets AEAD block sizes and no AEAD is selected "
              "(add aead or a cipher name); ignored", file=sys.stderr)
    openssl_binary = _openssl_binary(args.openssl)
    if args.plot:
        from tlsprobe.report.plots import check_plot
        check_plot(args.plot)
    compare = args.compare_openssl or openssl_binary is not None
    total = figure_total(algorithms, block_sizes)
    interrupted = False
    from tlsprobe.report.progress import SpeedDisplay
    with SpeedDisplay(total) as display:
        progress: Callable[[int, int, str], None] = display.figure
        try:
            report = run_speed(algorithms, seconds, processes=processes,
                               block_sizes=block_sizes, progress=progress,
                               compare_openssl=compare, openssl_binary=openssl_binary,
                               openssl_progress=display.note)
        except SpeedInterrupted as exc:
            report, interrupted = exc.report, True
        except SpeedError as exc:
            raise TlsprobeError(str(exc), exit_code=EXIT_INTERNAL) from None
    _print(report, args.json)
    if args.plot:
        from tlsprobe.commands.common import written_to
        from tlsprobe.report.plots import plot_speed
        with written_to("--plot", args.plot):
            plot_speed(report, args.plot)
    if interrupted:
        print("tlsprobe: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0
