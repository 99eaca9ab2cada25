"""Charts (`speed --plot`, `timing --plot`, `probe --timing --plot`, `pcap --stats --plot`), the
bar columns of the speed and timing tables, and `pcap --csv` (issue 17, items 2 and 3).

Each chart comes from a small real run: speed with --seconds 0.01 (openssl speed's figures
from a scripted `openssl` that prints its table layout), timing against a loopback openssl
s_server with six handshakes per group (the fewest with a 95% interval of the median),
pcap on the project's captures. SVG keeps text as <text> elements, so the titles, labels
and legends are read back from the file; PNG is checked by its header.
"""
from __future__ import annotations

import csv
import importlib.util
import os
import re
import struct
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tlsprobe.report.csv_out import cell
from tlsprobe.report.offline_tables import COLUMNS
from tlsprobe.report.timing_tables import bar as timing_bar
from tlsprobe.speed.text import bar as speed_bar

needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="matplotlib, the plot extra, is not installed "
                                      "(pip install '.[plot]')")

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
PCAPS = ("tls12_x25519.pcap", "tls13_hrr.pcap", "tls13_mlkem768.pcap", "tls13_p256.pcap")

_FAKE_OPENSSL = """#!{python}
import sys
args = sys.argv[1:]
if args == ["version"]:
    print("OpenSSL 3.0.22 25 Aug 2026 (Library: OpenSSL 3.0.22 25 Aug 2026)")
elif "ecdhx25519" in args:
    print("                              op      op/s")
    print(" 253 bits ecdh (X25519)   0.0000s  30000.0")
elif "-evp" in args:
    size = int(args[args.index("-bytes") + 1])
    print("The 'numbers' are in 1000s of bytes per second processed.")
    print("type             %d bytes" % size)
    print("AES-128-GCM      %.2fk" % (size * 100.0))
"""


def _svg_texts(path: Path) -> list[str]:
    """The text of every <text> element (matplotlib splits none of ours)."""
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_bars_are_proportional_and_never_empty_for_a_positive_value() -> None:
    assert speed_bar(40000.0, 40000.0) == "█" * 20
    assert speed_bar(20000.0, 40000.0) == "█" * 10
    assert speed_bar(1.0, 40000.0) == "▏"        # an eighth: there, but tiny
    assert speed_bar(None, 1.0) == speed_bar(0.0, 1.0) == "-"
    assert timing_bar(3.0, 12.0) == "███"
    assert timing_bar(6.5, 12.0) == "██████▌"


def test_csv_cells_never_start_a_formula() -> None:
    assert [cell(v) for v in ("=HYPERLINK(\"x\")", "+1", "@SUM(A1)", "-", "-2", None, 3)] == [
        "'=HYPERLINK(\"x\")", "'+1", "'@SUM(A1)", "-", "'-2", "", "3"]


@needs_matplotlib
def test_speed_plot_draws_each_kind_with_openssl_beside(run_cli: Any, tmp_path: Path) -> None:
    fake = tmp_path / "openssl"
    fake.write_text(_FAKE_OPENSSL.format(python=sys.executable))
    fake.chmod(0o755)
    code, out, err = run_cli("speed", "--seconds", "0.01", "--bytes", "16,1024", "x25519",
                             "X25519MLKEM768", "ed25519", "aes-128-gcm", "--openssl",
                             str(fake), "--plot", "speed.svg")
    assert code == 0, err
    texts = _svg_texts(tmp_path / "speed.svg")
    for title in ("Key exchange (operations per second)",
                  "Key encapsulation, ML-KEM and hybrids (operations per second)",
                  "Signatures (operations per second)",
                  "AEAD encryption throughput per block size"):
        assert title in texts
    assert {"x25519", "x25519mlkem768", "ed25519"} <= set(texts)   # one bar group each
    bars = [t for t in texts if re.fullmatch(r" \S+/s \w+( \(openssl speed\))?", t)]
    assert sorted(t.split()[-1] if "openssl" not in t else "openssl" for t in bars) == sorted(
        ["keygen", "derive", "keygen", "encaps", "decaps", "sign", "verify", "openssl"])
    assert " 30k/s derive (openssl speed)" in texts    # the scripted openssl's figure
    assert {"AES-128-GCM", "AES-128-GCM (openssl speed)", "block size (bytes)",
            "MB per second"} <= set(texts)
    # the text table ends each row with its bar
    kex = out.split("\nKey exchange:\n", 1)[1].splitlines()
    assert kex[0].split()[-1] == "bar:derive/s" and kex[1].endswith("█" * 20)


def test_plot_without_matplotlib_is_one_usage_line_before_any_work(
        run_cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # as if it were not installed
    code, out, err = run_cli("speed", "--seconds", "0.01", "x25519", "--plot", "s.png")
    assert (code, out) == (2, "")
    assert err == "tlsprobe: error: --plot needs matplotlib: pip install matplotlib (or pip install '.[plot]' in the tlsprobe checkout)\n"
    code, out, err = run_cli("speed", "x25519", "--plot", "s.pdf")
    assert code == 2 and "must end in .png or .svg" in err and out == ""


@needs_matplotlib
@pytest.mark.needs_impl("openssl")
def test_timing_plots_each_group_with_the_median_interval(run_cli: Any, server_cache: Any,
                                                          tmp_path: Path) -> None:
    srv = server_cache("openssl", groups=["X25519", "P-256"])
    target = f"127.0.0.1:{srv.port}"
    # three runs give no interval: the title does not name a bar that is not drawn, and
    # the ranking does not speak of intervals that overlap
    code, out, err = run_cli("timing", target, "--timing-runs", "3", "--timing-warmup", "0",
                             "--timing-versions", "1.3", "--timing-groups", "x25519,secp256r1",
                             "--plot", "few.svg")
    assert code == 0, err
    assert "n too small" in out and "their intervals overlap" not in out
    assert "at this confidence: too few runs for a confidence interval)" in " ".join(
        out.split())
    texts = _svg_texts(tmp_path / "few.svg")
    assert (f"Handshake time per group, {target} (3 runs per group; too few runs for a 95% "
            "confidence interval of the median)") in texts
    assert "95% CI of the median" not in texts
    code, out, err = run_cli("timing", target, "--timing-runs", "6", "--timing-warmup", "0",
                             "--timing-versions", "1.3", "--timing-groups", "x25519,secp256r1",
                             "--plot", "timing.svg")
    assert code == 0, err
    texts = _svg_texts(tmp_path / "timing.svg")
    assert (f"Handshake time per group, {target} (6 runs per group; bar: 95% confidence "
            "interval of the median)") in texts
    assert {"TLS 1.3 x25519 (0x001d)", "TLS 1.3 secp256r1 (0x0017)",
            "95% CI of the median",
            "handshake time (ms, log scale), ClientHello to our Finished"
            } <= set(texts)
    rows = [line for line in out.splitlines() if re.match(r"TLS 1\.3 +\S+ \(0x", line)]
    assert len(rows) == 2 and any("████████████" in row for row in rows)   # the slowest's bar
    code, _, err = run_cli(target, "--timing", "--tls1_3", "--groups", "x25519",
                           "--timing-runs", "6", "--timing-warmup", "0", "--plot", "t.png")
    assert code == 0, err
    width, height = _png_size(tmp_path / "t.png")
    assert width > 600 and height > 150
    code, _, err = run_cli(target, "--plot", "t.png")
    assert code == 2 and "--plot only applies to handshake timing; add --timing" in err


@needs_matplotlib
def test_pcap_stats_plot_and_csv_from_one_run(run_cli: Any, tmp_path: Path) -> None:
    files = [str(CAPTURES / name) for name in PCAPS]
    code, out, err = run_cli("pcap", *files, "--stats", "--no-progress", "--plot", "p.svg",
                             "--csv", "p.csv")
    assert code == 0, err
    with (tmp_path / "p.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["File", *COLUMNS]
    assert [r[0] for r in rows[1:]] == files      # one connection per capture, in order
    versions = {r[COLUMNS.index("Version") + 1] for r in rows[1:]}
    groups = {r[COLUMNS.index("Group") + 1] for r in rows[1:]}
    assert versions == {"TLS 1.2", "TLS 1.3"} and len(groups) == 4
    texts = _svg_texts(tmp_path / "p.svg")
    assert {"Connections per version over the capture's time",
            "Connections per negotiated group over the capture's time",
            "time from the first connection (s; 4 connections)",
            "connections per 10 s bin"} <= set(texts)
    assert versions | groups <= set(texts)        # the legends name the same values
    code, _, err = run_cli("pcap", files[0], "--plot", "p.png")
    assert code == 2 and "--plot draws the --stats summary: add --stats" in err


def _timing_report(target: str, groups: str) -> Any:
    """A real TimingReport of `target` (six TLS 1.3 handshakes per group), measured in this
    process so that the chart's matplotlib objects can be inspected."""
    import argparse

    from tlsprobe.commands import timing
    from tlsprobe.net.tcp import parse_target
    from tlsprobe.probes.timing.run import measure_timing
    parser = argparse.ArgumentParser()
    timing.add_arguments(parser)
    from tests.helpers.own_heap import earlier_objects_frozen
    args = parser.parse_args([target, "--timing-runs", "6", "--timing-warmup", "0",
                              "--timing-versions", "1.3", "--timing-groups", groups])
    with earlier_objects_frozen():   # its collections between rounds: only what it made
        return measure_timing(parse_target(target),
                              timing.options_from_args(args, "127.0.0.1"))


def _overlaps(box: Any, boxes: list[Any]) -> bool:
    return any(box.overlaps(other) for other in boxes if other.width > 0 and other.height > 0)


@needs_matplotlib
@pytest.mark.needs_impl("openssl")
def test_timing_chart_keeps_a_fast_and_a_slow_group_readable(server_cache: Any,
                                                             tmp_path: Path) -> None:
    """ffdhe8192 (hundreds of ms) and x25519 (a few ms) on one chart: the time axis is
    logarithmic, both boxes are wide enough to read and far apart, the axis names its unit,
    and the legend lies right of the axes, over no plotted artist."""
    from tlsprobe.report.plots import timing_figure
    srv = server_cache("openssl", groups=["X25519", "ffdhe8192"])
    report = _timing_report(f"127.0.0.1:{srv.port}", "x25519,ffdhe8192")
    medians = {e.name.split()[0]: e.handshake_ms.median for e in report.entries}
    assert medians["ffdhe8192"] > 5 * medians["x25519"], medians
    fig = timing_figure(report)
    fig.savefig(tmp_path / "timing.png", bbox_inches="tight")   # laid out as when saved
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert "(ms" in ax.get_xlabel()
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    boxes = [p.get_window_extent(renderer) for p in ax.lines + ax.patches + ax.collections]
    # each median in the axes' inner 90 % (on a linear axis x25519's would sit in the
    # first 1 %), and far apart
    xs = [(ax.transData.transform((m, 0))[0] - axes_box.x0) / axes_box.width
          for m in medians.values()]
    assert all(0.05 < x < 0.95 for x in xs) and abs(xs[0] - xs[1]) > 0.3, xs
    legend = ax.get_legend()
    assert legend is not None
    legend_box = legend.get_window_extent(renderer)
    assert legend_box.x0 >= axes_box.x1 and not _overlaps(legend_box, boxes)
    if os.environ.get("TLSPROBE_KEEP_CHARTS"):
        fig.savefig(Path(os.environ["TLSPROBE_KEEP_CHARTS"]) / "timing.png", bbox_inches="tight")


def _panel_colours(ax: Any) -> dict[str, set[tuple[float, ...]]]:
    """Each legend label of a stacked histogram panel (one bar container per category, in
    the legend's order) and the face colours of its bars and of its legend handle."""
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == len(ax.containers)
    colours: dict[str, set[tuple[float, ...]]] = {}
    for label, container, handle in zip(labels, ax.containers,
                                        ax.get_legend().legend_handles):
        colours[label] = {tuple(round(c, 3) for c in bar.get_facecolor())
                          for bar in [*container, handle]}
    return colours


def _distinct(colours: list[tuple[float, ...]]) -> bool:
    """No two colours alike: at least 0.25 apart in RGB (tab20's light/dark pairs are)."""
    return all(sum((a - b) ** 2 for a, b in zip(x[:3], y[:3])) ** 0.5 >= 0.25
               for i, x in enumerate(colours) for y in colours[i + 1:])


@needs_matplotlib
def test_pcap_chart_gives_every_category_its_own_colour_and_states_the_bin(
        tmp_path: Path) -> None:
    """Every project capture (30 connections, 15 kinds of key exchange, a week apart): each
    panel draws at most TOP_CATEGORIES + 1 categories, each in one colour of its own, the
    rest as one grey "other (N kinds)"; the y axis says connections per bin of a round width
    and the x axis its time unit."""
    from tlsprobe.api import read_capture
    from tlsprobe.report.plots import OTHER_COLOUR, TOP_CATEGORIES, CaptureTimeline, capture_figure
    timeline = CaptureTimeline()
    paths = sorted(p for p in CAPTURES.iterdir() if ".pcap" in p.name)
    for path in paths:
        for report in read_capture(path):
            timeline.add(report)
    groups = {p[2] for p in timeline.points}
    assert len(groups) > TOP_CATEGORIES + 1          # more kinds than colours
    fig = capture_figure(timeline.points, timeline.untimed)
    if os.environ.get("TLSPROBE_KEEP_CHARTS"):
        fig.savefig(Path(os.environ["TLSPROBE_KEEP_CHARTS"]) / "pcap.png", bbox_inches="tight")
    from matplotlib.colors import to_rgba
    for ax in fig.axes:
        panel = _panel_colours(ax)
        assert all(len(c) == 1 for c in panel.values()), panel       # one colour per category
        colours = [next(iter(c)) for c in panel.values()]
        assert _distinct(colours), panel
        assert len(panel) <= TOP_CATEGORIES + 1
        assert re.fullmatch(r"connections per (1|2|5|10|12|15|20|30|50)(\.\d+)? "
                            r"(s|min|h|day) bin", ax.get_ylabel()), ax.get_ylabel()
    others = [label for label in _panel_colours(fig.axes[1]) if label.startswith("other (")]
    assert others == [f"other ({len(groups) - TOP_CATEGORIES} kinds)"]
    assert next(iter(_panel_colours(fig.axes[1])[others[0]])) == tuple(
        round(c, 3) for c in to_rgba(OTHER_COLOUR))
    assert re.fullmatch(r"time from the first connection \((s|min|h|days); 33 connections\)",
                        fig.axes[1].get_xlabel()), fig.axes[1].get_xlabel()


def test_capture_bins_are_round_and_at_most_forty() -> None:
    from tlsprobe.report.plots import bin_width
    assert bin_width(100.0, 1000) == 5.0           # 20 bins of 5 s
    assert bin_width(3600.0, 1000) == 120          # 30 bins of 2 min
    assert bin_width(7 * 86400.0, 30) == 12 * 3600  # 14 bins of 12 h
    assert bin_width(0.05, 4) == 0.05              # 2 connections per bin at most
    for span in (0.3, 7.0, 95.0, 4000.0, 1e6, 1e9):
        assert span / bin_width(span, 10_000) <= 40


@needs_matplotlib
def test_pcap_chart_colours_stay_distinct_past_twenty_categories() -> None:
    """25 kinds of key exchange in one panel (a capture of a scanner's traffic): tab20
    repeated its colours after 20; now nine colours and one grey "other" band."""
    from tlsprobe.report.plots import TOP_CATEGORIES, capture_figure
    points = [(float(i), "TLS 1.3", f"group{i % 25:02d}") for i in range(200)]
    fig = capture_figure(points)
    panel = _panel_colours(fig.axes[1])
    colours = [c for cs in panel.values() for c in cs]
    assert len(colours) == len(panel) == TOP_CATEGORIES + 1 and _distinct(colours), panel
    assert list(panel)[-1] == "other (16 kinds)"
