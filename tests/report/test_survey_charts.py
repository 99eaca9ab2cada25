"""`survey summary DIR --plot FILE` and `--html FILE` (issue 33, section 4): the charts of a
real survey (two openssl servers with different groups and a refused port on loopback,
surveyed without Dask, as `survey` runs without the cluster extra), checked through
matplotlib's objects, and the page rendered in headless Chromium at 800 and 1280 pixels."""
from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import layout
from tests.helpers.servers import missing_reason, peer_unavailable

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None or
                                importlib.util.find_spec("matplotlib") is None,
                                reason="needs pyarrow and matplotlib")


def _cli(*args: Any, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tlsprobe", *map(str, args)],
                          env={**os.environ, "NO_COLOR": "1", **env}, capture_output=True,
                          text=True, timeout=180, check=False, stdin=subprocess.DEVNULL)


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def survey(server_cache: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One survey of three targets, its summary as JSON, --plot (SVG and PNG) and --html."""
    reason = missing_reason("openssl")
    if reason:
        peer_unavailable(reason)
    tmp = tmp_path_factory.mktemp("survey-charts")
    stub = tmp / "no-dask"
    stub.mkdir()
    (stub / "distributed.py").write_text("raise ImportError('no dask here (test stub)')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(stub), str(REPO)])}
    one = server_cache("openssl", groups=["X25519", "P-256"])
    two = server_cache("openssl", groups=["P-384", "X25519"])
    targets = tmp / "targets.txt"
    targets.write_text(f"127.0.0.1:{one.port}\n127.0.0.1:{two.port}\n"
                       f"127.0.0.1:{_refused_port()}\n")
    out = tmp / "out"
    run = _cli("survey", targets, "--out", out, "--no-progress", "--timeout", "4", env=env)
    assert run.returncode == 0, run.stderr
    summary = _cli("survey", "summary", out, "--json", "--plot", tmp / "s.svg", "--html",
                   tmp / "s.html", env=env)
    assert summary.returncode == 0, summary.stderr
    png = _cli("survey", "summary", out, "--plot", tmp / "s.png", env=env)
    assert png.returncode == 0, png.stderr
    import json
    return {"dir": tmp, "out": out, "summary": json.loads(summary.stdout), "env": env,
            "text": png.stdout}


def test_summary_chart_draws_every_section_as_shares_of_the_targets(survey: dict[str, Any]
                                                                     ) -> None:
    from tlsprobe.report.survey_charts import sections, summary_figure
    summary = survey["summary"]
    found = sections(summary)
    titles = [t for t, _ in found]
    for title in ("TLS versions spoken", "Post-quantum verdict",
                  "Supported groups (any version)", "Failures by kind"):
        assert title in titles, titles
    fig = summary_figure(summary)
    if os.environ.get("TLSPROBE_KEEP_CHARTS"):
        fig.savefig(Path(os.environ["TLSPROBE_KEEP_CHARTS"]) / "survey.png",
                    bbox_inches="tight")
    assert len(fig.axes) == len(found)
    total = summary["targets"]
    assert total == 3
    for ax, (title, counts) in zip(fig.axes, found):
        assert ax.get_title(loc="left").startswith(title)
        assert ax.get_xlabel() == f"share of the {total} targets (%)"
        assert [t.get_text() for t in ax.get_yticklabels()] == list(counts)
        widths = [bar.get_width() for bar in ax.patches]
        assert widths == pytest.approx([100 * v["share"] for v in counts.values()])
        assert ax.get_xlim()[1] >= 100
    groups = dict(zip(titles, [c for _, c in found]))["Supported groups (any version)"]
    assert groups["x25519"]["targets"] == 2       # both servers, counted once each
    assert (survey["dir"] / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<text" in (survey["dir"] / "s.svg").read_text() or "TLS versions spoken" in (
        survey["dir"] / "s.svg").read_text()


@pytest.mark.parametrize("width", [800, 1280])
def test_summary_page_shows_the_tables_and_the_chart_without_sideways_scroll(
        survey: dict[str, Any], width: int) -> None:
    page = survey["dir"] / "s.html"
    text = page.read_text(encoding="utf-8")
    assert "<h1>tlsprobe survey summary: 3 targets" in text
    assert "<h3>Supported groups (any version)</h3>" in text and "<td>x25519</td>" in text
    assert "src='data:image/svg+xml;base64," in text and "<script" not in text
    metrics = layout(page, width, survey["dir"] / f"chrome-{width}")
    assert metrics["innerWidth"] == width
    assert metrics["scrollWidth"] <= width, metrics
    assert metrics["images"] and all(w > 0 for w in metrics["images"]), metrics  # drawn


def test_summary_page_escapes_the_survey_text(tmp_path: Path) -> None:
    from tlsprobe.report.survey_charts import summary_page
    hostile = "<img src=x onerror=alert(1)>\x1b[2J"
    page = summary_page({"targets": 1, "failures": {hostile: {"targets": 1, "share": 1.0}}})
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;\\x1b[2J" in page
    from tlsprobe.report.survey_charts import summary_figure
    (label,) = summary_figure({"targets": 1, "failures": {hostile: {"targets": 1, "share": 1.0}}
                               }).axes[0].get_yticklabels()
    assert label.get_text() == "<img src=x onerror=alert(1)>\\x1b[2J"


def test_plot_and_html_outside_summary_are_one_usage_line(survey: dict[str, Any]) -> None:
    done = _cli("survey", survey["dir"] / "targets.txt", "--out", survey["dir"] / "o2",
                "--html", "x.html", env=survey["env"])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().endswith("--plot and --html draw a survey's summary: tlsprobe "
                                        "survey summary DIR --plot FILE (or --html FILE)")
    done = _cli("survey", "summary", survey["out"], "--plot", "x.pdf", env=survey["env"])
    assert done.returncode == 2 and "must end in .png or .svg" in done.stderr
