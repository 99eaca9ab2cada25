"""Plain-text report in the layout of `openssl speed`.

Public-key tables give, per operation, the time per call and the calls per second
(`sign    verify    sign/s  verify/s`); the AEAD table is openssl's
"The 'numbers' are in 1000s of bytes per second processed." grid, one column per block size.
Each table ends with a bar column (block characters) so that the ratio between rows shows
at a glance. Plain strings only: tests and scripts read this, and rich stays in report/.
"""

from __future__ import annotations

from collections.abc import Sequence

from tlsprobe.model.speed import AlgorithmResult, Comparison, SpeedReport

_TABLE_TITLES = {"kex": "Key exchange", "kem": "Key encapsulation (ML-KEM and TLS hybrids)",
                 "sig": "Signatures", "aead": "AEAD encryption"}


def _rate(value: float) -> str:
    return f"{value:.1f}"


BAR_WIDTH = 20
_EIGHTHS = "▏▎▍▌▋▊▉"


def bar(value: float | None, maximum: float, width: int = BAR_WIDTH) -> str:
    """`value` as a bar of block characters, `width` cells for `maximum` (eighths of a
    cell): the ratio between rows at a glance. At least one eighth for a positive value,
    "-" for none."""
    if value is None or value <= 0 or maximum <= 0:
        return "-"
    eighths = max(1, round(min(value / maximum, 1.0) * width * 8))
    full, part = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[part - 1] if part else "")


def _bars(values: Sequence[float | None]) -> list[str]:
    """One bar per row, the largest value filling `BAR_WIDTH`."""
    top = max((v for v in values if v), default=0.0)
    return [bar(v, top) for v in values]


def public_key_table(results: Sequence[AlgorithmResult]) -> list[str]:
    """One openssl-style table: label, seconds per call for each operation, then calls/s,
    then a bar of the last operation's calls/s (the fastest row's fills it)."""
    operations: list[str] = []
    for result in results:
        for measured in result.figures:
            if measured.operation not in operations:
                operations.append(measured.operation)
    label_width = max(len(r.description) for r in results) + 1
    cells: list[list[str]] = []
    for result in results:
        times, rates = [], []
        for operation in operations:
            fig = result.figure(operation)
            ok = fig is not None and fig.per_second > 0
            times.append(f"{1.0 / fig.per_second:.6f}s" if fig and ok else "-")
            rates.append(_rate(fig.per_second) if fig and ok else "-")
        cells.append(times + rates)
    headers = operations + [f"{op}/s" for op in operations]
    widths = [max(10, len(h) + 1, *(len(row[i]) + 1 for row in cells))
              for i, h in enumerate(headers)]
    last = [fig.per_second if (fig := r.figure(operations[-1])) else None for r in results]
    lines = [" " * label_width + "".join(h.rjust(w) for h, w in zip(headers, widths))
             + f"  bar:{operations[-1]}/s"]
    for result, row, drawn in zip(results, cells, _bars(last)):
        lines.append(result.description.ljust(label_width)
                     + "".join(c.rjust(w) for c, w in zip(row, widths)) + "  " + drawn)
    return lines


def aead_table(results: Sequence[AlgorithmResult], block_sizes: Sequence[int]) -> list[str]:
    """openssl's throughput grid: 1000s of bytes per second per block size, then a bar of
    the largest block size's throughput (the fastest AEAD's fills it)."""
    width = max(13, *(len(r.description) + 2 for r in results))
    largest = max(block_sizes)
    lines = ["The 'numbers' are in 1000s of bytes per second processed.",
             "type".ljust(width) + "".join(f"{size:7d} bytes" for size in block_sizes)
             + f"  bar:{largest}"]
    drawn = _bars([fig.bytes_per_second if (fig := r.figure("encrypt", largest)) else None
                   for r in results])
    for result, result_bar in zip(results, drawn):
        row = result.description.ljust(width)
        for size in block_sizes:
            fig = result.figure("encrypt", size)
            rate = fig.bytes_per_second if fig else None
            row += f" {rate / 1e3:11.2f}k" if rate else f" {'-':>12}"
        lines.append(row + "  " + result_bar)
    return lines


def comparison_lines(comparison: Comparison, library: str) -> list[str]:
    """The side-by-side table with ratios, naming both library builds."""
    lines = ["Comparison with openssl speed on this machine (ratio = tlsprobe / openssl):",
             f"  tlsprobe: {library}"]
    if comparison.error:
        lines.append(f"  openssl:  {comparison.error}")
        return lines
    lines.append(f"  openssl:  {comparison.binary}: {comparison.version}"
                 f" (-elapsed -seconds {comparison.seconds})")
    name_width = max([9, *(len(row.algorithm) for row in comparison.rows)]) + 2
    header = (f"{'algorithm':<{name_width}}{'operation':<12}{'tlsprobe':>14}{'openssl':>14}"
              f"{'ratio':>8}")
    lines.append(header)
    for row in comparison.rows:
        if row.unit == "bytes/s":
            operation = f"{row.block_size} bytes"
            ours = f"{row.tlsprobe / 1e3:.2f}k"
            theirs = f"{row.openssl / 1e3:.2f}k" if row.openssl is not None else "-"
        else:
            operation = f"{row.operation}/s"
            ours = _rate(row.tlsprobe)
            theirs = _rate(row.openssl) if row.openssl is not None else "-"
        ratio = f"{row.ratio:.2f}" if row.ratio is not None else "-"
        line = f"{row.algorithm:<{name_width}}{operation:<12}{ours:>14}{theirs:>14}{ratio:>8}"
        lines.append(line + (f"  ({row.note})" if row.note else ""))
    if any(row.unit == "bytes/s" for row in comparison.rows):
        lines.append(AEAD_CALL_NOTE)
    lines.extend(f"  ran: {command}" for command in comparison.commands)
    return lines


# tlsprobe encrypts each block with one Python call into OpenSSL, `openssl speed` loops in C:
# at small blocks the ratio measures that call, at 16 KiB it compares the ciphers (and builds).
AEAD_CALL_NOTE = ("  note: tlsprobe makes one Python call per AEAD block; at small blocks the "
                  "ratio is the cost of that call, at 16384 bytes it compares the ciphers")


def library_line(report: SpeedReport) -> str:
    return f"cryptography {report.cryptography_version} with {report.openssl_version}"


def format_report(report: SpeedReport) -> str:
    """The whole plain-text report, ending with a newline."""
    lines = [f"tlsprobe {report.tlsprobe_version} speed: {library_line(report)}",
             (f"{report.seconds:g} s per figure, {report.processes} process"
              f"{'es (figures are sums)' if report.processes > 1 else ''}")]
    if report.interrupted:
        lines.append("interrupted: only the figures completed before Ctrl-C"
                     + ("" if report.results else " (none)"))
    for kind in ("kex", "kem", "sig", "aead"):
        results = [r for r in report.results if r.kind == kind]
        if not results:
            continue
        lines += ["", f"{_TABLE_TITLES[kind]}:"]
        if kind == "aead":
            lines += aead_table(results, report.block_sizes)
        else:
            lines += public_key_table(results)
    if report.comparison is not None:
        lines += [""] + comparison_lines(report.comparison, library_line(report))
    return "\n".join(lines) + "\n"
