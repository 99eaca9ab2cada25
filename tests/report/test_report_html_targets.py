"""`scan --html` with several targets (issue 33, section 4): a summary per target at the
top (target, rating, reachable, findings by severity, a link to its section) and no
sideways scroll in a 800 or 1280 pixel window (wide tables wrap or scroll in their own
box). One real scan of three loopback targets: an openssl server with TLS 1.0 to 1.3, an
openssl server with TLS 1.3 only, and a refused port; the page rendered in headless
Chromium."""
from __future__ import annotations

import html.parser
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import chromium, layout
from tests.helpers.servers import missing_reason, peer_unavailable, start_server

REPO_ROOT = Path(__file__).resolve().parents[2]


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Summary(html.parser.HTMLParser):
    """The rows of the table with class "targets" (cell texts, the row's links) and the ids
    of the page's elements."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[list[str], list[str]]] = []
        self.ids: set[str] = set()
        self._in_table = False
        self._cell: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "table" and "targets" in (values.get("class") or "").split():
            self._in_table = True
        elif self._in_table and tag == "tr":
            self.rows.append(([], []))
        elif self._in_table and tag == "td":
            self._cell = ""
        elif self._in_table and tag == "a" and values.get("href"):
            self.rows[-1][1].append(str(values["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1][0].append(" ".join(self._cell.split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One scan of three targets with --html and --json."""
    reason = missing_reason("openssl")
    if reason:
        peer_unavailable(reason)
    chromium()
    tmp = tmp_path_factory.mktemp("html-targets")
    old = start_server("openssl", groups="X25519:P-256", workdir=tmp / "old",
                       extra=["-cipher", "ALL:@SECLEVEL=0"])
    try:
        new = start_server("openssl", groups="X25519", proto="tls1_3", workdir=tmp / "new")
        try:
            targets = [f"127.0.0.1:{old.port}", f"127.0.0.1:{new.port}",
                       f"127.0.0.1:{_refused_port()}"]
            env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), NO_COLOR="1")
            scan = subprocess.run(
                [sys.executable, "-m", "tlsprobe", "scan", *targets, "--checks",
                 "versions,groups,pq,suites,sigalgs,cert", "--json", "--no-progress",
                 "--timeout", "4", "--html", str(tmp / "audit.html")],
                cwd=tmp, env=env, capture_output=True, text=True, timeout=180, check=False)
        finally:
            new.stop()
    finally:
        old.stop()
    assert (tmp / "audit.html").exists(), scan.stderr
    parsed = _Summary()
    parsed.feed((tmp / "audit.html").read_text("utf-8"))
    return {"tmp": tmp, "targets": targets, "parsed": parsed,
            "json": [json.loads(line) for line in scan.stdout.splitlines() if line.strip()],
            "path": tmp / "audit.html"}


@pytest.mark.parametrize("width", [800, 1280])
def test_several_targets_never_scroll_sideways(page: dict[str, Any], width: int) -> None:
    metrics = layout(page["path"], width, page["tmp"] / f"chrome-{width}")
    assert metrics["innerWidth"] == width
    assert metrics["scrollWidth"] <= width, metrics


def test_the_page_opens_with_a_summary_row_per_target(page: dict[str, Any]) -> None:
    rows = [r for r in page["parsed"].rows if r[0]]
    assert [r[0][0] for r in rows] == page["targets"]
    # one JSON document per target, in the order they finished
    by_target = {f"{r['host']}:{r['port']}": r for r in page["json"] if "host" in r}
    assert set(by_target) == set(page["targets"])
    for cells, links in rows:
        report = by_target[cells[0]]
        assert len(links) == 1 and links[0].startswith("#")
        assert links[0][1:] in page["parsed"].ids          # the link reaches its section
        reachable = not report.get("error")
        assert cells[2] == ("yes" if reachable else f"no: {report['error_kind']}"), cells
        counts: dict[str, int] = {}
        for finding in report.get("findings", []):
            counts[finding["severity"]] = counts.get(finding["severity"], 0) + 1
        expected = ", ".join(f"{counts[s]} {s}" for s in
                             ("critical", "high", "medium", "low", "info") if s in counts)
        assert cells[3] == (expected or "none"), cells
    assert rows[0][0][3] != "none"        # the old server's TLS 1.0 and weak suites
