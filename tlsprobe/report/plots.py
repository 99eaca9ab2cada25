"""Charts with matplotlib (the optional `plot` extra: `pip install '.[plot]'` in the checkout).

- `plot_speed`: `tlsprobe speed --plot FILE`: operations per second per group and signature
  scheme (one bar per operation; log scale, the primitives differ a thousandfold) and AEAD
  throughput per block size; with --compare-openssl, openssl speed's figures beside them
  (hatched bars, dashed lines).
- `plot_timing`: `tlsprobe timing --plot FILE` and `probe --timing --plot FILE`: the
  distribution of the handshake times of each group (box plot of every sample) with the
  confidence interval of the median drawn over it.
- `plot_capture`: `pcap --stats --plot FILE`: connections per protocol version and per
  negotiated group over the capture's time (stacked counts per round time bin; the nine
  commonest categories of a panel in nine distinct colours, the rest as one grey "other").

The format follows the extension (.png or .svg; SVG keeps text as <text> elements).
matplotlib is imported only when a chart is drawn, with the Agg backend (no display), so
that the commands and `--help` stay light; `check_plot` tells a missing matplotlib or a
bad file name as a usage error (exit 2) before any measuring starts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.model.units import host_port
from tlsprobe.report.timebins import TimeBins, Weighted

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from tlsprobe.model.capture import BriefReport, ConnectionReport
    from tlsprobe.model.speed import AlgorithmResult, SpeedReport
    from tlsprobe.model.timing import EntryTiming, TimingReport

FORMATS = (".png", ".svg")
MISSING = "--plot needs matplotlib: pip install matplotlib (or pip install '.[plot]' in the tlsprobe checkout)"
_KIND_TITLES = {"kex": "Key exchange (operations per second)",
                "kem": "Key encapsulation, ML-KEM and hybrids (operations per second)",
                "sig": "Signatures (operations per second)"}


def check_plot(path: str) -> None:
    """Before any work: the extension is .png or .svg, the file can be written and
    matplotlib is installed (each a usage error, exit 2, with one line)."""
    if os.path.splitext(path)[1].lower() not in FORMATS:
        raise UsageError(f"--plot {path}: the file name must end in .png or .svg")
    from tlsprobe.report.csv_out import check_writable
    check_writable(path, "--plot")
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(MISSING)


#: openssl speed's figures: (algorithm, operation, block size) -> per second
OpensslFigures = dict[tuple[str, str, int | None], float]


def _pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend; SVG keeps text as text."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError(MISSING) from None
    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9,
                                "svg.hashsalt": "tlsprobe"})
    import matplotlib.pyplot as plt
    return plt


def _save(plt: ModuleType, fig: Figure, path: str) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight",
                metadata={"Date": None} if path.lower().endswith(".svg") else None)
    plt.close(fig)


def _t(text: str) -> str:
    """A label as plain text: a `$` would start matplotlib's math mode."""
    return text.replace("$", r"\$")


def _si(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


# -- speed -------------------------------------------------------------------------------------
def plot_speed(report: SpeedReport, path: str) -> None:
    """Operations per second (kex, kem, sig) and AEAD throughput per block size."""
    plt = _pyplot()
    openssl: OpensslFigures = {}
    if report.comparison is not None:
        openssl = {(r.algorithm, r.operation, r.block_size): r.openssl
                   for r in report.comparison.rows if r.openssl is not None}
    kinds = [k for k in ("kex", "kem", "sig") if any(r.kind == k for r in report.results)]
    aead = [r for r in report.results if r.kind == "aead"]
    heights = [0.3 * max(3, sum(len(r.figures) for r in report.results if r.kind == k)
                         * (2 if openssl else 1)) + 1.1 for k in kinds]
    if aead:
        heights.append(3.6)
    if not heights:
        heights = [1.5]
    fig, axes = plt.subplots(len(heights), 1, figsize=(9, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    axes = [row[0] for row in axes]
    drawn: list[float] = []
    for ax, kind in zip(axes, kinds):
        drawn += _rate_bars(ax, [r for r in report.results if r.kind == kind], openssl)
        ax.set_title(_KIND_TITLES[kind], loc="left", fontweight="bold")
    for ax in axes[:len(kinds)]:   # one scale for every rate panel: x25519 against the hybrid
        if drawn:
            ax.set_xlim(min(drawn) / 3, max(drawn) * 8)
    if aead:
        _aead_lines(axes[len(kinds)], aead, report.block_sizes, openssl)
    if not kinds and not aead:
        axes[0].text(0.5, 0.5, "no figure was measured", ha="center", va="center")
        axes[0].set_axis_off()
    runs = f"{report.seconds:g} s per figure" + (
        f", {report.processes} processes" if report.processes > 1 else "")
    fig.suptitle(f"tlsprobe speed: cryptography {report.cryptography_version} with "
                 f"{report.openssl_version} ({runs})"
                 + (", interrupted" if report.interrupted else ""), fontsize=10)
    fig.tight_layout()
    _save(plt, fig, path)


def _rate_bars(ax: Axes, results: Sequence[AlgorithmResult],
               openssl: OpensslFigures) -> list[float]:
    """One horizontal bar per (algorithm, operation), grouped by algorithm; openssl's
    figure for the same pair (if measured) as a hatched bar just under it. Returns the
    values drawn."""
    labels, values, colours, hatches, ys = [], [], [], [], []
    palette = {"keygen": "#4c72b0", "derive": "#55a868", "encaps": "#dd8452",
               "decaps": "#c44e52", "sign": "#8172b3", "verify": "#937860"}
    y = 0.0
    ticks, tick_labels = [], []
    for result in results:
        start = y
        for fig in result.figures:
            for who, value in (("tlsprobe", fig.per_second),
                               ("openssl", openssl.get((result.algorithm, fig.operation,
                                                        None)))):
                if value is None or value <= 0:
                    continue
                labels.append(f"{fig.operation}" + (" (openssl speed)" if who == "openssl"
                                                    else ""))
                values.append(value)
                colours.append(palette.get(fig.operation, "#777777"))
                hatches.append("///" if who == "openssl" else "")
                ys.append(y)
                y += 1
        ticks.append((start + y - 1) / 2)
        tick_labels.append(result.algorithm)
        y += 0.8
    bars = ax.barh(ys, values, color=colours, edgecolor="white", height=0.9)
    for bar, value, label, hatch in zip(bars, values, labels, hatches):
        bar.set_hatch(hatch)
        ax.text(value, bar.get_y() + bar.get_height() / 2, f" {_si(value)}/s {label}",
                va="center", fontsize=8)
    ax.set_yticks(ticks, tick_labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _si(v)))
    ax.set_xlabel("operations per second (log scale)")
    ax.grid(axis="x", alpha=0.3)
    return values


def _aead_lines(ax: Axes, results: Sequence[AlgorithmResult], sizes: Sequence[int],
                openssl: OpensslFigures) -> None:
    """Throughput (bytes/s) against block size, a line per AEAD; openssl's dashed."""
    for result in results:
        rates = {s: f.bytes_per_second for s in sizes
                 if (f := result.figure("encrypt", s)) is not None}
        xs = [s for s, rate in rates.items() if rate is not None]
        ys = [rate / 1e6 for rate in rates.values() if rate is not None]
        (line,) = ax.plot(xs, ys, marker="o", label=result.description)
        theirs = [(s, openssl[(result.algorithm, "encrypt", s)] / 1e6) for s in sizes
                  if (result.algorithm, "encrypt", s) in openssl]
        if theirs:
            ax.plot([s for s, _ in theirs], [v for _, v in theirs], linestyle="--",
                    marker="s", color=line.get_color(),
                    label=f"{result.description} (openssl speed)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes), [str(s) for s in sizes])
    ax.set_xlabel("block size (bytes)")
    ax.set_ylabel("MB per second")
    ax.set_title("AEAD encryption throughput per block size", loc="left", fontweight="bold")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


# -- timing ------------------------------------------------------------------------------------
def plot_timing(report: TimingReport, path: str) -> None:
    """Box plot of each measured entry's handshake times, the median's CI over it."""
    plt = _pyplot()
    _save(plt, timing_figure(report), path)


def _qualifier(e: EntryTiming, runs: int) -> str:
    """What the label of a box adds, as the table's notes say it: an entry cut short
    (failing, or the run stopped), one whose times include a HelloRetryRequest's round trip."""
    return ((f" (only {e.runs} of {runs} runs)" if e.runs < runs else "")
            + (" (after a HelloRetryRequest)" if e.hello_retry else ""))


def timing_figure(report: TimingReport) -> Figure:
    """The timing chart: a horizontal box per (version, group) on a log time axis (an
    ffdhe8192 handshake at 300 ms and an x25519 one at 3 ms both keep a readable box), the
    median's confidence interval over each box, and the legend right of the axes, off the
    data."""
    plt = _pyplot()
    entries = [e for e in report.entries if e.samples_ms]
    fig: Figure
    ax: Axes
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.5 * max(2, len(entries))))
    level = f"{report.confidence * 100:g}%"
    # the bar is named only when one is drawn: too few runs give no interval
    drawn = any(e.handshake_ms is not None and e.handshake_ms.ci_low is not None
                and e.handshake_ms.ci_high is not None for e in entries)
    bar = (f"bar: {level} confidence interval of the median" if drawn else
           f"too few runs for a {level} confidence interval of the median")
    runs = f"{report.runs} run{'s' if report.runs != 1 else ''}"
    ax.set_title(_t(f"Handshake time per group, {host_port(report.host, report.port)} "
                    f"({runs} per group; {bar})"), loc="left", fontsize=9)
    if not entries:
        ax.text(0.5, 0.5, "no group was measured", ha="center", va="center")
        ax.set_axis_off()
        return fig
    labels = [_t(f"{e.version.name} {e.name}" + _qualifier(e, report.runs)) for e in entries]
    positions = list(range(1, len(entries) + 1))
    import matplotlib
    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    sideways = {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}
    ax.boxplot([list(e.samples_ms) for e in entries], positions=positions, widths=0.6,
               showfliers=True, flierprops={"markersize": 3}, **sideways)
    for y, e in zip(positions, entries):
        s = e.handshake_ms
        if s is not None and s.ci_low is not None and s.ci_high is not None:
            ax.plot([s.ci_low, s.ci_high], [y, y], color="#c44e52", linewidth=5,
                    solid_capstyle="butt", alpha=0.75,
                    label=f"{level} CI of the median" if y == 1 else None)
    ax.set_yticks(positions, labels)
    ax.invert_yaxis()
    _log_ms_axis(ax, [v for e in entries for v in e.samples_ms])
    ax.set_xlabel("handshake time (ms, log scale), ClientHello to our Finished")
    ax.grid(axis="x", which="both", alpha=0.3)
    if drawn:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def _log_ms_axis(ax: Axes, values: Sequence[float]) -> None:
    """A log x axis in milliseconds with plain numbers as tick labels (3, 10, 300, not
    10^2), and labelled minor ticks (2, 5) unless the data spans three decades or more
    (where they would crowd)."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    positive = [v for v in values if v > 0]
    ax.set_xscale("log")
    if positive:
        low, high = min(positive), max(positive)
        ax.set_xlim(low / 1.5, high * 1.5)
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    if positive and max(positive) / min(positive) < 1000:
        ax.xaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
        ax.xaxis.set_minor_formatter(plain)


# -- captures ----------------------------------------------------------------------------------
class CaptureTimeline:
    """`pcap --stats --plot`: each connection's start time, version and negotiated group,
    gathered as the reports come (in bounded memory: `timebins.TimeBins`) and drawn by
    `write`."""

    def __init__(self) -> None:
        self.bins = TimeBins()
        self.untimed = 0

    @property
    def points(self) -> list[tuple[float, str, str]]:
        """The connections kept one by one (none once they are counted in bins)."""
        return self.bins.points or []

    def add(self, report: ConnectionReport | BriefReport) -> None:
        from tlsprobe.report.offline_tables import _group
        timings = getattr(report, "timings", None)
        start = timings.start if timings is not None else None
        if start is None:
            self.untimed += 1
            return
        version = report.version.name if report.version else "no ServerHello"
        self.bins.add(start, _t(version), _t(_group(report)))

    def write(self, path: str) -> None:
        plt = _pyplot()
        _save(plt, capture_figure((), self.untimed, self.bins), path)


#: categories drawn in their own colour per panel of `pcap --stats --plot`; the rest are
#: stacked as one grey "other (N kinds)" band
TOP_CATEGORIES = 9
#: matplotlib's tab10 without its grey (kept for "other"): nine colours no reader confuses
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#bcbd22", "#17becf")
OTHER_COLOUR = "#7f7f7f"
#: bin widths in seconds a reader can count with (1 ms to 4 weeks)
_NICE_BINS = tuple(m * 10.0 ** e for e in range(-3, 2) for m in (1, 2, 5)) + (
    60, 120, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400,
    2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400)
_UNITS = ((86400.0, "days", "day"), (3600.0, "h", "h"), (60.0, "min", "min"),
          (1.0, "s", "s"))


def bin_width(span: float, count: int) -> float:
    """A round bin width (1, 2 or 5 times a power of ten seconds, or whole minutes, hours,
    days) giving at most 40 bins and about one bin per two connections."""
    wanted = max(1, min(40, count // 2))
    return next((w for w in _NICE_BINS if span / w <= wanted), _NICE_BINS[-1] * max(
        1, round(span / _NICE_BINS[-1] / 40 + 0.5)))


def _time_unit(width: float) -> tuple[float, str, str]:
    """(seconds per unit, axis unit, bin unit) for a bin of `width` seconds."""
    return next(u for u in _UNITS if width >= u[0] and width % u[0] == 0) if width >= 1 \
        else _UNITS[-1]


def _ranked(panel: Sequence[Weighted]) -> tuple[list[str], dict[str, str]]:
    """The categories by count (most first) and the label each is drawn under: the top
    TOP_CATEGORIES keep theirs, the rest become one "other (N kinds)"."""
    counts: dict[str, int] = {}
    for _time, name, n in panel:
        counts[name] = counts.get(name, 0) + n
    ranked = sorted(counts, key=lambda n: (-counts[n], n))
    if len(ranked) <= TOP_CATEGORIES:
        return ranked, {n: n for n in ranked}
    kept, rest = ranked[:TOP_CATEGORIES], ranked[TOP_CATEGORIES:]
    other = f"other ({len(rest)} kind{'s' if len(rest) > 1 else ''})"
    return kept + [other], {n: n if n in kept else other for n in ranked}


def plot_capture(points: Sequence[tuple[float, str, str]], path: str, untimed: int = 0) -> None:
    """Two stacked histograms over the capture's time: by version, by negotiated group."""
    _save(_pyplot(), capture_figure(points, untimed), path)


def capture_figure(points: Sequence[tuple[float, str, str]], untimed: int = 0,
                   bins: TimeBins | None = None) -> Figure:
    """`pcap --stats --plot`: connections per time bin stacked by version (top panel) and by
    negotiated group (bottom), each category in its own colour (the TOP_CATEGORIES commonest
    of a panel; the rest as one grey "other"), the bin width and time unit on the axes.
    From `points`, or from `bins` (a long capture's, counted in bins) when given."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator
    if bins is None:
        bins = TimeBins()
        for point in points:
            bins.add(*point)
    fig: Figure
    fig, axes = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    first = bins.low if bins.count else 0.0
    span = bins.high - first if bins.count else 0.0
    width = bin_width(span, bins.count)
    scale, unit, bin_unit = _time_unit(width)
    edges = [i * width / scale for i in range(max(1, int(span // width) + 1) + 1)]
    for ax, panel, what in zip(axes, bins.panels(), ("version", "negotiated group")):
        order, label_of = _ranked(panel)
        series = [[(t - first) / scale for t, key, _n in panel if label_of[key] == name]
                  for name in order]
        weights = [[n for _t, key, n in panel if label_of[key] == name] for name in order]
        if series:
            colours = [PALETTE[i] if i < TOP_CATEGORIES else OTHER_COLOUR
                       for i in range(len(order))]
            ax.hist(series, bins=edges, weights=weights, stacked=True, color=colours,
                    edgecolor="white", linewidth=0.3,
                    label=["none" if n == "-" else n for n in order])
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                      borderaxespad=0)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"Connections per {what} over the capture's time", loc="left",
                     fontweight="bold")
        ax.set_ylabel(f"connections per {width / scale:g} {bin_unit} bin")
        ax.grid(axis="y", alpha=0.3)
    note = f"; {untimed} without a capture time not drawn" if untimed else ""
    axes[1].set_xlabel(f"time from the first connection ({unit}; {bins.count} connections"
                       f"{note})")
    fig.tight_layout()
    return fig


__all__ = ["CaptureTimeline", "bin_width", "capture_figure", "check_plot", "plot_capture",
           "plot_speed", "plot_timing", "timing_figure"]
