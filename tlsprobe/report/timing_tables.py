"""The rich table of a handshake timing run (`tlsprobe timing`, `probe --timing`).

The result model, its statistics and the ranking live in tlsprobe/model/timing.py.
"""

from __future__ import annotations

import io
from typing import IO, TYPE_CHECKING, TypeAlias

from tlsprobe.model.timing import (
    FAILING,
    MEASURED,
    MISMATCH,
    NOT_RUN,
    REFUSED,
    TIMING_SCHEMA,
    EntryTiming,
    Ranking,
    Stats,
    TimingReport,
    figures,
    median_ci_ranks,
    percentile,
    rank,
)
from tlsprobe.model.units import host_port

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table
    from rich.text import Text


# -- rich --------------------------------------------------------------------------------------
def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _ci(s: Stats | None) -> str:
    if s is None or s.ci_low is None:
        return "n too small" if s is not None else "-"
    return f"{_ms(s.ci_low)}-{_ms(s.ci_high)}"


BAR_WIDTH = 12
_EIGHTHS = "▏▎▍▌▋▊▉"


def bar(value: float | None, maximum: float, width: int = BAR_WIDTH) -> str:
    """`value` as a bar of block characters, `width` cells for `maximum` (eighths of a
    cell); at least one eighth for any positive value, "-" for none."""
    if value is None or value <= 0 or maximum <= 0:
        return "-"
    eighths = max(1, round(min(value / maximum, 1.0) * width * 8))
    full, part = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[part - 1] if part else "")


def _rank_cell(e: EntryTiming) -> str:
    if e.rank is None:
        return "-"
    return f"{e.rank}" + ("~" if e.ci_overlaps_previous else "")


#: a table cell: plain text, or styled text (the bar, a status)
Cell: TypeAlias = "str | Text"
#: the notes under the table, part by part
NOTES = (("times: from our ClientHello to our Finished (the bar after the median: the slowest "
         "median fills it); CI: confidence interval of the median; hs/s: 1000 / median of "
         "connect + handshake"),
         ("client CPU: our own work in the handshake (kex: key generation and shared secret "
         "alone); server+net: the rest, the wait for the server"))


def _head(e: EntryTiming) -> list[Cell]:
    """Version and group; a pinned suite goes under the group, keeping the width."""
    suite = e.offered_suite
    short = (suite.openssl_name or suite.iana_name).removeprefix("TLS_") if suite else ""
    return [e.version.name, e.label + (f"\n{short}" if suite else "")]


def _unranked_row(e: EntryTiming) -> list[Cell]:
    """No figures: the why goes to the notes (a long line would squeeze the table)."""
    from rich.text import Text
    return [*_head(e), *["-"] * 9, Text(e.status, style="yellow")]


def _ranked_row(e: EntryTiming, slowest: float) -> list[Cell]:
    from rich.text import Text
    hs = e.handshake_ms
    median = hs.median if hs else None
    return [*_head(e), _ms(e.connect_ms.median if e.connect_ms else None), _ms(median),
            Text(bar(median, slowest).ljust(BAR_WIDTH), style="cyan"),
            _ms(hs.p90 if hs else None), _ci(hs),
            f"{e.handshakes_per_s:.0f}" if e.handshakes_per_s else "-",
            _ms(e.client_cpu_ms.median if e.client_cpu_ms else None),
            _ms(e.client_kex_ms), _ms(e.wait_ms.median if e.wait_ms else None), _rank_cell(e)]


def _rows(report: TimingReport) -> list[list[Cell]]:
    """A row per entry, cheapest first per version."""
    slowest = max((e.handshake_ms.median for e in report.entries
                   if e.ranked and e.handshake_ms), default=0.0)
    return [_ranked_row(e, slowest) if e.ranked else _unranked_row(e) for e in report.entries]


def _table(report: TimingReport) -> Table:
    """The table of figures. Figures are never cut: each figure column is as wide as its
    widest cell; only the group label wraps when the console is narrow (and render_timing
    widens the console when even that is not enough)."""
    from rich import box
    from rich.table import Table
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                  collapse_padding=True,
                  title=f"Handshake timing, {host_port(report.host, report.port)}: {report.runs} "
                        f"run{'s' if report.runs != 1 else ''} per group after "
                        f"{report.warmup} warm-up round{'s' if report.warmup != 1 else ''} (ms)",
                  title_justify="left")
    columns = ["Version", "Group", "connect", "median", "", "p90",
               f"{report.confidence * 100:g}% CI", "hs/s", "client CPU", "kex", "server+net",
               "rank"]
    rows = _rows(report)
    for i, name in enumerate(columns):
        widest = max([len(name)] + [len(str(row[i])) for row in rows])
        if name == "":   # the median's bar: the slowest group's fills it
            table.add_column(name, justify="left", no_wrap=True, min_width=BAR_WIDTH)
        elif name == "Group":
            table.add_column(name, justify="left", overflow="fold", min_width=12)
        else:
            table.add_column(name, justify="left" if name == "Version" else "right",
                             no_wrap=True, min_width=widest)
    for row in rows:
        table.add_row(*row)
    return table


def _notes(report: TimingReport) -> list[str]:
    """What the columns mean, the report's notes, then why each entry was not ranked or
    failed."""
    notes = list(NOTES)
    if any(e.ci_overlaps_previous for e in report.entries):
        notes.append("rank~: its interval overlaps the one ranked above it (or a run count "
                     "too small gives one of them none), so the order of the two is not "
                     "established")
    notes += list(report.notes)
    notes += [note for e in report.entries if (note := _entry_note(e, report.runs))]
    return notes


def _entry_note(e: EntryTiming, runs: int) -> str | None:
    """Why an entry was not ranked, or what qualifies the figures of a ranked one: fewer
    runs than the title says, failed handshakes; None when there is nothing to add."""
    head = f"{e.name} ({e.version.name}): "
    if not e.ranked:
        return f"{head}{e.status}: {e.detail}"
    parts = []
    if e.runs < runs:
        parts.append(f"only {e.runs} of {runs} runs measured")
    if e.failures:
        parts.append(f"{e.failures} failed handshake(s), last: {e.detail}")
    if e.hello_retry:
        parts.append("the server answered with a HelloRetryRequest: its times include that "
                     "second round trip")
    if not parts:
        return None
    return head + (f"{e.status}: " if e.status != MEASURED else "") + "; ".join(parts)


def _below(report: TimingReport) -> list[RenderableType]:
    """The verdicts, an early stop, the notes (escaped: error details may quote the
    server)."""
    from rich.text import Text

    from tlsprobe.report.escape import shown
    parts: list[RenderableType] = [Text(r.verdict, style="bold") for r in report.rankings]
    if report.stopped:
        parts.append(Text(shown(f"stopped early: {report.stopped}"), style="red"))
    parts += [Text(shown(f"note: {n}"), style="dim") for n in _notes(report)]
    return parts


def timing_table(report: TimingReport) -> RenderableType:
    """One table: a row per entry (cheapest first per version), the verdicts, the notes."""
    from rich.console import Group
    return Group(_table(report), *_below(report))


def _widths(table: Table) -> tuple[int, int]:
    """(the narrowest console that shows the table's figures whole (the label may wrap),
    the console in which no label wraps either)."""
    from tlsprobe.report.console import Console
    console = Console(file=io.StringIO(), width=1000)
    measured = console.measure(table)
    return measured.minimum, measured.maximum


def render_timing(report: TimingReport, out: IO[str], width: int | None = None) -> None:
    """Rich on a terminal; elsewhere plain lines without trailing blanks, `width` columns
    if given, else 120 or as wide as the table needs for no group label to wrap (piped
    output keeps one line per group whatever the figures' widths)."""
    from rich.console import Group

    from tlsprobe.report.console import Console
    table = _table(report)
    needed, natural = _widths(table)
    renderable = Group(table, *_below(report))
    if out.isatty():
        console = Console(file=out, highlight=False, width=width)
        if console.width < needed:   # wider than the terminal rather than cut figures
            console = Console(file=out, highlight=False, width=needed)
        console.print(renderable)
        return
    console = Console(file=io.StringIO(), highlight=False,
                      width=max(width or max(120, natural), needed), color_system=None)
    with console.capture() as capture:
        console.print(renderable)
    for line in capture.get().splitlines():
        print(line.rstrip(), file=out)


__all__ = ["FAILING", "MEASURED", "MISMATCH", "NOT_RUN", "REFUSED", "TIMING_SCHEMA",
           "EntryTiming", "Ranking", "Stats", "TimingReport", "figures", "median_ci_ranks",
           "percentile", "rank", "render_timing", "timing_table"]
