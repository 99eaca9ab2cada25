"""`pcap --plot` in a long live capture: the timeline keeps one point per connection only up
to `timebins.MAX_POINTS`, then counts per time bin, so its memory stays flat for millions of
connections (it grew by a point each), and the chart drawn from the counts puts every
connection in the bin it belongs to, or next to its edge."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib (the plot extra) is not installed")

#: a child that feeds CaptureTimeline synthetic reports (8 versions and groups, a week of
#: start times) and prints its peak RSS (KiB) after 100,000 and after 1,500,000 of them
CHILD = textwrap.dedent("""
    import resource
    from types import SimpleNamespace as NS
    from tlsprobe.report.plots import CaptureTimeline
    from tlsprobe.model.capture import KeyExchange  # noqa: F401 (imported before measuring)
    kxs = [NS(group=NS(name=f"group{i}"), dh_group_name=None, kind="ECDHE") for i in range(8)]
    versions = [NS(name=f"TLS 1.{i % 4}") for i in range(8)]
    timeline = CaptureTimeline()
    def feed(first, last):
        for i in range(first, last):
            timeline.add(NS(timings=NS(start=1.7e9 + i * 0.4), version=versions[i % 8],
                            key_exchange=kxs[(i // 3) % 8], hello_retry_request=None))
    feed(0, 100_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    feed(100_000, 1_500_000)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(before, after)
""")


def test_the_timeline_of_a_million_connections_stays_flat_in_memory() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=300, cwd=REPO, check=False,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    before, after = (int(v) for v in done.stdout.split())
    # a point per connection held 1.4 million more tuples: over 100 MiB
    assert after - before < 16 * 1024, (before, after)


def _bar_totals(ax: Any) -> dict[float, float]:
    """The stacked bars' total height at each bin's left edge."""
    totals: dict[float, float] = {}
    for patch in ax.patches:
        x = round(patch.get_x(), 9)
        totals[x] = totals.get(x, 0.0) + patch.get_height()
    return totals


@needs_matplotlib
def test_the_chart_from_binned_counts_is_the_chart_of_every_point(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound (made 1,000 here) the chart's bins hold what the points gave them,
    to a connection within a fine bin's width of an edge; the count and legend stay."""
    import numpy

    from tlsprobe.report import plots, timebins
    rng = numpy.random.default_rng(7)
    starts = numpy.sort(rng.exponential(3600.0, 20_000)) + 1.7e9
    points = [(float(t), f"TLS 1.{i % 3 + 1}", f"g{int(rng.integers(0, 12)):02d}")
              for i, t in enumerate(starts)]
    exact = plots.capture_figure(points)
    monkeypatch.setattr(timebins, "MAX_POINTS", 1_000)
    binned = timebins.TimeBins()
    for point in points:
        binned.add(*point)
    assert binned.points is None and binned.size <= 2 * timebins.MAX_BINS * 12
    drawn = plots.capture_figure((), 0, binned)
    assert drawn.axes[1].get_xlabel() == exact.axes[1].get_xlabel()
    for ax_exact, ax_binned in zip(exact.axes, drawn.axes):
        want, got = _bar_totals(ax_exact), _bar_totals(ax_binned)
        assert want.keys() == got.keys()
        assert sum(got.values()) == sum(want.values()) == len(points)
        assert max(abs(got[x] - want[x]) for x in want) <= 0.01 * len(points), (want, got)
        assert ax_binned.get_legend_handles_labels()[1] == \
            ax_exact.get_legend_handles_labels()[1]
