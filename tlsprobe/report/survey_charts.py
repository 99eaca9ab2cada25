"""`tlsprobe survey summary DIR --plot FILE` and `--html FILE`: the population shares of a
survey as charts, and as one HTML page with the summary's tables and the chart.

The input is the summary as `survey.summary.summarize` returns it (the JSON of
`survey summary --json`): a dict whose sections are counts, `{name: {"targets": n,
"share": s}}`, or counts per version (`preferred_group`). Every such section is drawn,
also the ones this module does not name (a section added to the summary later is drawn
under its key), so the chart and the page never fall behind the summary.

Each section is a panel of horizontal bars: the share of the targets (in %) per category,
the count and share written at the bar's end; at most TOP_BARS bars per panel, the others
counted in the panel's title (they stay in the page's tables, which list every category).
The page embeds the chart as an SVG data URI (an <img>: no script can run from it) and
escapes every text it shows (`report.html._e`: control characters as the terminal shows
them, then HTML).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeGuard

from tlsprobe.report.escape import shown
from tlsprobe.report.html import STYLE
from tlsprobe.report.html_parts import e as _e
from tlsprobe.report.html_targets import LAYOUT_CSS
from tlsprobe.report.plots import PALETTE, _pyplot, _save, _t

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: the categories drawn per panel, most targets first
TOP_BARS = 15
Counts = Mapping[str, Mapping[str, float]]
#: the summary as `survey summary --json` gives it
Summary = Mapping[str, object]
_TITLES = {"versions": "TLS versions spoken",
           "preferred_group": "Preferred group (server's first choice)",
           "pq_verdict": "Post-quantum verdict",
           "supported_groups": "Supported groups (any version)",
           "server_order": "Servers enforcing their group order",
           "failures": "Failures by kind",
           "checks_failing": "Checks failing",
           "unreachable": "Unreachable targets by kind"}


def _label(text: object) -> str:
    """Text from the survey for the chart: control characters escaped as the terminal shows
    them (no glyph is missing, no warning), `$` not starting math mode."""
    return _t(shown(str(text)))


def _is_counts(value: object) -> TypeGuard[Counts]:
    return isinstance(value, Mapping) and all(
        isinstance(v, Mapping) and "targets" in v and "share" in v for v in value.values())


def _title(key: str) -> str:
    return _TITLES.get(key, key.replace("_", " ").capitalize())


def sections(summary: Summary) -> list[tuple[str, Counts]]:
    """(title, counts) of every count section of the summary, in the summary's order; a
    section of counts per version gives one entry per version ("Preferred group, TLS 1.3").
    An empty mapping is a section only under a key this module names (no category seen)."""
    found: list[tuple[str, Counts]] = []
    for key, value in summary.items():
        if not isinstance(value, Mapping):
            continue
        if value and _is_counts(value):
            found.append((_title(key), value))
        elif value and all(isinstance(v, Mapping) and v and _is_counts(v)
                           for v in value.values()):
            found += [(f"{_title(key)}, {sub}", counts) for sub, counts in value.items()
                      if _is_counts(counts)]
        elif not value and key in _TITLES:
            found.append((_title(key), {}))
    return found


def _heading(summary: Summary) -> str:
    parts = [f"{summary.get('targets', 0)} targets"]
    for key in ("reachable", "unreachable_targets"):
        if isinstance(summary.get(key), int):
            parts.append(f"{summary[key]} {key.split('_')[0]}")
    if "shards_done" in summary:
        parts.append(f"{summary['shards_done']} of {summary.get('shards_total', '?')} "
                     "shards done")
    return "tlsprobe survey summary: " + ", ".join(parts)


def summary_figure(summary: Summary) -> Figure:
    """One panel per section: horizontal bars of the share of targets (%) per category."""
    plt = _pyplot()
    found = sections(summary)
    heights = [0.35 * max(1, min(TOP_BARS, len(c))) + 0.9 for _, c in found] or [1.5]
    fig: Figure
    fig, axes = plt.subplots(len(heights), 1, figsize=(9, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    fig.suptitle(_label(_heading(summary)), x=0.01, ha="left", fontsize=10, fontweight="bold")
    total = summary.get("targets", 0)
    for i, (row, (title, counts)) in enumerate(zip(axes, found)):
        _panel(row[0], title, counts, PALETTE[i % len(PALETTE)], total)
    if not found:
        axes[0][0].text(0.5, 0.5, "the summary has no counts", ha="center", va="center")
        axes[0][0].set_axis_off()
    fig.tight_layout()
    return fig


def _share_text(value: Mapping[str, object], digits: int) -> str:
    """A category's share as text: "x %", and the targets that did not establish it (the
    versions and supported groups: their share is of those that did)."""
    share, unknown = value.get("share"), value.get("not_established") or 0
    if share is None:
        return f"not established on {unknown}"
    return f"{100 * float(str(share)):.{digits}f} %" + (
        f"; not established on {unknown}" if unknown else "")


def _panel(ax: Axes, title: str, counts: Counts, colour: str, total: object) -> None:
    """Bars of one section, most targets first; the count and share at each bar's end."""
    items = list(counts.items())[:TOP_BARS]
    more = len(counts) - len(items)
    ax.set_title(_label(title + (f" ({more} more in the table)" if more else "")), loc="left",
                 fontweight="bold", fontsize=9)
    ax.set_xlim(0, 118)        # room for the "n (x %)" at a 100 % bar's end
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel(f"share of the {total} targets (%)", fontsize=8)
    if not items:
        ax.set_yticks([])
        ax.text(1, 0, "(none)", va="center", fontsize=8)
        ax.set_ylim(-1, 1)
        return
    shares = [100 * float(v["share"] or 0.0) for _, v in items]
    ys = list(range(len(items)))
    ax.barh(ys, shares, color=colour, height=0.7)
    for y, share, (_, v) in zip(ys, shares, items):
        ax.text(share + 1, y, f"{int(v['targets'])} ({_share_text(v, 1)})", va="center",
                fontsize=8)
    ax.set_yticks(ys, [_label(k) for k, _ in items], fontsize=8)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def plot_summary(summary: Summary, path: str) -> None:
    """`survey summary --plot FILE`: the chart, PNG or SVG by the extension."""
    plt = _pyplot()
    _save(plt, summary_figure(summary), path)


def _svg_uri(summary: Summary) -> str:
    plt = _pyplot()
    fig = summary_figure(summary)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def summary_page(summary: Summary) -> str:
    """`survey summary --html FILE`: the heading, the chart and one table per section."""
    tables = []
    for title, counts in sections(summary):
        rows = "".join(f"<tr><td>{_e(k)}</td><td>{int(v['targets'])}</td>"
                       f"<td>{_e(_share_text(v, 2))}</td></tr>"
                       for k, v in counts.items()) or "<tr><td colspan=3>(none)</td></tr>"
        tables.append(f"<h3>{_e(title)}</h3>\n<table><tr><th>Category</th>"
                      f"<th>Targets</th><th>Share</th></tr>{rows}</table>")
    heading = _e(_heading(summary))
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>{heading}</title>\n<style>{STYLE}{LAYOUT_CSS}\nimg.chart{{max-width:100%;"
            "height:auto}}</style></head>\n"
            f"<body><h1>{heading}</h1>\n<h2>Charts</h2>\n<img class=chart alt='the shares "
            f"of the targets per section' src='{_svg_uri(summary)}'>\n<h2>Tables</h2>\n"
            + "\n".join(tables) + "\n</body></html>\n")


def write_summary_page(summary: Summary, path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(summary_page(summary))


__all__ = ["TOP_BARS", "plot_summary", "sections", "summary_figure", "summary_page",
           "write_summary_page"]
