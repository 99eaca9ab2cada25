"""`scan --html FILE` and `scan --csv FILE` against a real openssl s_server on loopback, the
page opened in headless Chromium (issue 17, item 2).

One scan (every section: the default checks and `all`) of a server with three known groups
and a certificate whose subject and subjectAltName hold markup (`<script>`, an `<img>` with
an onerror handler) and a bidi override. One Chromium start takes the screenshot and dumps
the DOM; the tests read the rendered text of each section from that DOM and compare it with
the same run's JSON, check that the hostile names are text (no element, no script ran), and
read the CSV back.
"""
from __future__ import annotations

import csv
import dataclasses
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.lab_servers.certs import CertSet, named_set
from tests.helpers.servers import missing_reason, peer_unavailable, start_server
from tlsprobe.report.escape import shown

REPO_ROOT = Path(__file__).resolve().parents[2]
CN = "<script>document.title='owned'</script><b>bold</b>\u202eevil"
SAN = "x<img src=x onerror=\"document.title='img'\">.example"
GROUPS = {"x25519", "secp256r1", "x448"}
SECTIONS = ("Protocol versions", "Groups, TLS 1.3", "Groups, TLS 1.2", "Post-quantum, TLS 1.3",
            "Cipher suites, TLS 1.3", "Cipher suites, TLS 1.2", "Signature schemes, TLS 1.3",
            "Signature schemes, TLS 1.2", "Certificate chain", "Vulnerability checks",
            "Hygiene checks", "Tolerance checks", "HTTP checks", "Certificate checks",
            "Findings")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--window-size=1200,2400")


def _hostile_certs(directory: Path) -> CertSet:
    return named_set(directory, CN, SAN, "h")


class _Sections(html.parser.HTMLParser):
    """The rendered text under each <h3> (h2 and h3 titles as keys), the tags seen, and
    every attribute that would load something."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, list[str]] = {}
        self.tags: set[str] = set()
        self.loads: list[tuple[str, str | None]] = []
        self.classes: list[str] = []
        self._heading: str | None = None
        self._current = "(top)"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.loads += [(k, v) for k, v in attrs if k in ("src", "href") or k.startswith("on")]
        self.classes += [v for k, v in attrs if k == "class" and v]
        if tag in ("h2", "h3"):
            self._heading = ""

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h2", "h3") and self._heading is not None:
            self._current = self._heading
            self.sections.setdefault(self._current, [])
            self._heading = None
        elif tag in ("td", "th", "p", "li", "div", "tr"):
            self.sections.setdefault(self._current, []).append("\n")

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading += data
        else:
            self.sections.setdefault(self._current, []).append(data)

    def text(self, start: str) -> str:
        (key,) = [k for k in self.sections if k.startswith(start)]
        return "".join(self.sections[key])


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One scan with --html, --csv and --json, one Chromium run over the page."""
    reason = missing_reason("openssl")
    if reason:
        peer_unavailable(reason)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        peer_unavailable("chromium not installed (apt-get install chromium)")
    tmp = tmp_path_factory.mktemp("html")
    server = start_server("openssl", groups="X25519:P-256:X448", cert="ecdsa",
                          certs=_hostile_certs(tmp), workdir=tmp / "srv")
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), NO_COLOR="1")
        scan = subprocess.run(
            [sys.executable, "-m", "tlsprobe", "scan", f"127.0.0.1:{server.port}",
             "--checks", "versions,groups,pq,suites,sigalgs,cert,all", "--json",
             "--no-progress", "--timeout", "4", "--html", str(tmp / "audit.html"),
             "--csv", str(tmp / "audit.csv")],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    assert scan.returncode == 0, scan.stderr
    dom = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}",
         f"--screenshot={tmp / 'shot.png'}", "--dump-dom", (tmp / "audit.html").as_uri()],
        cwd=tmp, capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Sections()
    parsed.feed(dom.stdout)
    return {"report": json.loads(scan.stdout), "dom": dom.stdout, "parsed": parsed,
            "html": (tmp / "audit.html").read_text("utf-8"), "png": tmp / "shot.png",
            "csv": list(csv.DictReader((tmp / "audit.csv").open(encoding="utf-8")))}


def test_chromium_renders_a_screenshot_of_the_page(page: dict[str, Any]) -> None:
    data = page["png"].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1200, 2400)
    assert len(data) > 50_000    # tables and coloured text, not a blank page (~5 kB)


def test_every_section_is_rendered_in_order(page: dict[str, Any]) -> None:
    headings = [h for h in page["parsed"].sections if h != "(top)"]
    found = [next(i for i, h in enumerate(headings) if h.startswith(s)) for s in SECTIONS]
    assert found == sorted(found), headings
    assert page["parsed"].sections and "tlsprobe audit" in page["dom"]


def test_groups_are_listed_in_the_servers_order_with_the_full_lists(page: dict[str, Any]
                                                                     ) -> None:
    report, parsed = page["report"], page["parsed"]
    for audit in report["groups"]:
        version = audit["version"]["name"]
        text = parsed.text(f"Groups, {version}")
        names = [g["name"] for g in audit["supported"]]
        assert set(names) == GROUPS
        rows = [line.split() for line in text.split("\n\n") if line.strip()[:1].isdigit()]
        assert [r[1] for r in rows[:3]] == names, text
        refused = [g["name"] for g in audit["not_supported"]]
        assert len(refused) > 12    # longer than the text view shows
        assert f"Not supported: {len(refused)} group(s): {', '.join(refused)}" in text
        assert " more" not in text


def test_suites_signature_schemes_pq_and_checks_match_the_json(page: dict[str, Any]) -> None:
    report, parsed = page["report"], page["parsed"]
    for audit in report["suites"]:
        text = parsed.text(f"Cipher suites, {audit['version']['name']}")
        positions = [text.index(c["iana_name"]) for c in audit["supported"]]
        assert positions == sorted(positions) and positions
    for audit in report["signature_schemes"]:
        text = parsed.text(f"Signature schemes, {audit['version']['name']}")
        assert all(s["name"] in text for s in audit["supported"]) and audit["supported"]
    pq = parsed.text("Post-quantum")
    assert all(v["subject"] in pq for v in report["post_quantum"]) and report["post_quantum"]
    for result in report["check_results"]:
        section = {"vulnerability": "Vulnerability", "hygiene": "Hygiene",
                   "tolerance": "Tolerance", "http": "HTTP",
                   "certificate": "Certificate checks"}[result["category"]]
        text = parsed.text(section)
        assert result["title"] in text and result["verdict"] in text, result["name"]
        assert shown(", ".join(result["evidence"])) in text    # the whole evidence, never cut


def test_findings_are_coloured_by_severity(page: dict[str, Any]) -> None:
    report, parsed = page["report"], page["parsed"]
    text = parsed.text("Findings")
    assert report["findings"]
    for finding in report["findings"]:
        assert shown(finding["message"]) in text and finding["code"] in text
        assert f"sev sev-{finding['severity']}" in parsed.classes
        if finding["items"]:    # the whole list; a name from the server escaped as text
            assert shown(f"all {len(finding['items'])}: {', '.join(finding['items'])}") \
                in text
    style = page["html"].split("<style>", 1)[1].split("</style>", 1)[0]
    for severity in ("critical", "high", "medium", "low", "info"):
        assert f".sev-{severity}{{background:" in style


def test_hostile_certificate_names_are_text_and_the_page_loads_nothing(page: dict[str, Any]
                                                                        ) -> None:
    parsed, dom = page["parsed"], page["dom"]
    cert = parsed.text("Certificate chain")
    subject = page["report"]["certificates"][0]["subject"]    # RFC 4514 escapes: CN=\<script\>
    assert "script" in subject and "\u202e" in subject
    assert shown(subject) in cert and "\\u202eevil" in cert
    assert SAN in cert
    assert "<title>tlsprobe audit: 127.0.0.1" in dom    # no script changed the title
    assert parsed.tags.isdisjoint({"script", "img", "b", "link", "iframe", "object"})
    # nothing loads: the only links are the per-target table's, to sections of the page
    assert [x for x in parsed.loads if x != ("href", "#target-1")] == []
    assert 'id="target-1"' in page["html"]
    assert "\u202e" not in dom


def test_csv_has_one_row_per_fact_with_a_section_column(page: dict[str, Any]) -> None:
    report, rows = page["report"], page["csv"]
    assert list(rows[0]) == ["target", "section", "version", "rank", "name", "code", "status",
                             "severity", "detail", "kx", "weak"]
    assert {r["target"] for r in rows} == {f"127.0.0.1:{report['port']}"}
    for audit in report["groups"]:
        version = audit["version"]["name"]
        got = [(r["rank"], r["name"]) for r in rows
               if r["section"] == "group" and r["version"] == version]
        # a rank only where the server enforces its order (tests/report/test_csv_rank.py)
        assert got == [(str(i) if audit["order"] == "server" else "", g["name"])
                       for i, g in enumerate(audit["supported"], 1)]
    for audit in report["suites"]:
        got = [r["name"] for r in rows
               if r["section"] == "suite" and r["version"] == audit["version"]["name"]]
        assert got == [c["iana_name"] for c in audit["supported"]]
    findings = [r for r in rows if r["section"] in ("finding", "inconclusive")]
    assert [(r["section"], r["code"], r["severity"], r["detail"]) for r in findings] == [
        ("inconclusive" if f.get("inconclusive") else "finding", f["code"], f["severity"],
         shown(", ".join(f["items"]))) for f in report["findings"]]
    assert len([r for r in rows if r["section"] == "check"]) == len(report["check_results"])


def test_a_target_in_error_and_a_bad_line_keep_their_section_and_csv_rows(tmp_path: Path
                                                                          ) -> None:
    from tlsprobe.model.audit import AuditReport
    from tlsprobe.report.csv_out import write_scan_csv
    from tlsprobe.report.html import render_html
    refused = AuditReport(host="127.0.0.1", port=1, error="connect: <refused>\x1b[2J",
                          error_kind="network")
    bad = AuditReport(host="a..b", port=0, error="targets:3: bad host 'a..b'",
                      error_kind="usage")
    page = render_html([refused, bad], 3, "1 target(s) with an error")
    assert "<h2>Audit of 127.0.0.1:1</h2>" in page and "<h2>Skipped &#x27;a..b&#x27;</h2>" in page
    assert "Error: connect: &lt;refused&gt;\\x1b[2J" in page and "\x1b" not in page
    assert "Exit code 3: 1 target(s) with an error" in page
    write_scan_csv(str(tmp_path / "e.csv"), [refused, bad])
    rows = list(csv.reader((tmp_path / "e.csv").open(encoding="utf-8", newline="")))
    assert rows[1:] == [
        ["127.0.0.1:1", "error", "", "", "", "", "network", "", "connect: <refused>\\x1b[2J",
         "", ""],
        ["a..b:0", "error", "", "", "", "", "usage", "", "targets:3: bad host 'a..b'", "", ""]]


# -- colour is good or bad news, every problem row has its severity (issue 30, item 3) ------
class _Rows(html.parser.HTMLParser):
    """Each table row's cells, with the classes of the spans in each cell."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[tuple[str, list[str]]]] = []
        self._cell: list[Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = ["", []]
        elif tag == "span" and self._cell is not None:
            self._cell[1].append(dict(attrs).get("class") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append((self._cell[0].strip(), self._cell[1]))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[0] += data

    def row(self, first: str) -> list[tuple[str, list[str]]]:
        (found,) = [r for r in self.rows if r and r[0][0] == first]
        return found


def _rows(page: str) -> _Rows:
    parsed = _Rows()
    parsed.feed(page)
    return parsed


def test_weak_server_colours_mean_good_or_bad_and_every_problem_has_a_badge(
        tmp_path: Path) -> None:
    """A real openssl s_server speaking TLS 1.0 to 1.3 with every suite its build has
    (NULL and anonymous ones too) and 1024-bit DH parameters: TLS 1.0 and 1.1 spoken are
    red, TLS 1.2/1.3 spoken and SSL 3.0 refused green; each vulnerable check row carries
    the severity of the findings that state its facts (NULL, anonymous: suite.weak; DH:
    dh.weak), as BEAST carries its own; a check that is not vulnerable is green, none has
    a badge."""
    reason = missing_reason("openssl")
    if reason:
        peer_unavailable(reason)
    server = start_server("openssl", ciphers="ALL:COMPLEMENTOFALL:@SECLEVEL=0", proto="all",
                          dhparam="rfc5114_1024_160", workdir=tmp_path / "srv")
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), NO_COLOR="1")
        scan = subprocess.run(
            [sys.executable, "-m", "tlsprobe", "scan", f"127.0.0.1:{server.port}",
             "--checks", "versions,suites,groups,vulns", "--json", "--no-progress",
             "--timeout", "4", "--html", str(tmp_path / "weak.html")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    assert scan.returncode == 0, scan.stderr
    report = json.loads(scan.stdout)
    page = _rows((tmp_path / "weak.html").read_text("utf-8"))
    spoken = {v["version"]["name"]: v["status"] for v in report["versions"]}
    assert spoken["TLS 1.0"] == spoken["TLS 1.3"] == "supported", spoken
    assert spoken["SSL 3.0"] == "not_supported", spoken
    for name, tone in (("TLS 1.3", "v-good"), ("TLS 1.2", "v-good"), ("TLS 1.1", "v-bad"),
                       ("TLS 1.0", "v-bad"), ("SSL 3.0", "v-good")):
        assert page.row(name)[1][1][0] == tone, (name, page.row(name))
    findings = report["findings"]
    for check in report["check_results"]:
        cells = page.row(check["title"])
        verdict_class, badges = cells[1][1][0], cells[2][1]
        if check["verdict"] == "vulnerable":
            assert verdict_class == "v-bad" and len(badges) == 1, (check["name"], cells)
            want = check["severity"] or {
                "null": "critical", "anon": "critical", "dh": "medium"}[check["name"]]
            assert badges == [f"sev sev-{want}"], (check["name"], cells)
            assert any(f["severity"] == want for f in findings)
        elif check["verdict"] == "not vulnerable":
            assert verdict_class == "v-good" and badges == [], (check["name"], cells)
    assert {c["name"] for c in report["check_results"] if c["verdict"] == "vulnerable"} >= \
        {"null", "anon", "dh", "beast"}


def _weak_model_report() -> Any:
    """An audit built in the test, judged by the real derived checks and findings: RC4,
    3DES and anonymous suites in TLS 1.2, a CBC suite in TLS 1.0, 1024-bit DH parameters,
    two hygiene checks with findings (low, info) and HSTS supported."""
    from tlsprobe.model.audit import (AuditReport, DheAudit, DhParameters, GroupAudit,
                                      SuiteAudit, VersionSupport)
    from tlsprobe.model.checks import CheckResult, Verdict
    from tlsprobe.model.probe import Cipher, Codepoint
    from tlsprobe.probes.checks.derived import DERIVED, derive_checks
    from tlsprobe.policy.findings import findings_for
    V = Codepoint.version
    suites = {0x0303: (0xC02F, 0x0005, 0x000A, 0x00A6),  # RC4, 3DES, anonymous
              0x0301: (0x002F,)}
    versions = tuple(VersionSupport(V(v), "supported" if v in suites else "not_supported")
                     for v in (0x0304, 0x0303, 0x0302, 0x0301, 0x0300))
    dhe = DheAudit("fixed", fixed=DhParameters("dh_1024_160", 1024, None, "RFC 5114", "known"))
    r = AuditReport("127.0.0.1", 443, versions=versions,
                    suites=tuple(SuiteAudit(V(v), tuple(Cipher.of(c) for c in cs), "server")
                                 for v, cs in suites.items()),
                    groups=(GroupAudit(V(0x0303), True, "server_key_exchange",
                                       (Codepoint.group(0x1D),), dhe=dhe),),
                    checks=(*DERIVED, "versions", "suites", "groups", "ems",
                            "ocsp_stapling"))
    hygiene = (CheckResult("ems", "extended master secret (RFC 7627)", Verdict.not_supported,
                           "no", category="hygiene", code="check.ems", severity="low"),
               CheckResult("ocsp_stapling", "OCSP stapling", Verdict.not_supported, "no",
                           category="hygiene", code="check.ocsp_stapling", severity="info"),
               CheckResult("hsts", "HSTS", Verdict.supported, "yes", category="http"))
    r = dataclasses.replace(r, check_results=derive_checks(r) + hygiene)
    r = dataclasses.replace(r, findings=findings_for(r, []))
    return r


def test_rc4_and_sweet32_rows_carry_the_severity_of_their_findings() -> None:
    """The suites this machine's OpenSSL no longer has: every vulnerable row has the badge
    of the suite.weak finding of its suites; 'supported' and 'not supported' are coloured
    by whether they are a problem, not by their words."""
    from tlsprobe.model.checks import Verdict
    from tlsprobe.report.html import render_html
    r = _weak_model_report()
    page = _rows(render_html([r], 0, "ok"))
    want = {"rc4": "high", "sweet32": "high", "anon": "critical", "dh": "medium",
            "beast": "low"}
    for c in r.check_results:
        cells = page.row(c.title)
        if c.name in want:
            assert c.verdict is Verdict.vulnerable, c
            assert cells[1][1] == ["v-bad"] and cells[2][1] == [f"sev sev-{want[c.name]}"], \
                (c.name, cells)
    assert page.row("extended master secret (RFC 7627)")[1][1] == ["v-bad"]
    assert page.row("OCSP stapling")[1][1] == ["v-none"]
    assert page.row("HSTS")[1][1] == ["v-good"]
    assert page.row("TLS 1.0")[1][1] == ["v-bad"] and page.row("SSL 3.0")[1][1] == ["v-good"]
    assert page.row("TLS 1.3")[1][1] == ["v-none"]    # not spoken, no finding says it should


def test_post_quantum_rows_coloured_by_their_findings() -> None:
    """A post-quantum 'no' is bad news only when a finding is about it (a refused hello
    with a hybrid share: pq.intolerant, medium, with its badge); a group the server does
    not offer is neutral; 'yes' is good."""
    from tlsprobe.model.audit import PqVerdict
    from tlsprobe.policy.findings import findings_for
    from tlsprobe.report.html import render_html
    r = dataclasses.replace(_weak_model_report(), post_quantum=(
        PqVerdict("capability", "MLKEM1024", "no", "refused"),
        PqVerdict("capability", "X25519MLKEM768", "yes", "accepted"),
        PqVerdict("tolerance", "a hello with X25519MLKEM768", "no", "reset")),
        checks=(*_weak_model_report().checks, "pq"))
    r = dataclasses.replace(r, findings=findings_for(r, []))
    rows = [row for row in _rows(render_html([r], 0, "ok")).rows
            if row and row[0][0] in ("capability", "tolerance")]
    got = {(row[1][0], row[2][0].split()[0]): row[2][1] for row in rows}
    assert got == {("MLKEM1024", "no"): ["v-none"], ("X25519MLKEM768", "yes"): ["v-good"],
                   ("a hello with X25519MLKEM768", "no"): ["v-bad", "sev sev-medium"]}, got


def test_terminal_colours_mean_good_or_bad_too() -> None:
    """The text report colours by the same rule: TLS 1.0 spoken red, SSL 3.0 refused and
    TLS 1.2 spoken green; a hygiene 'not supported' with a finding red, HSTS 'supported'
    green; a post-quantum 'no' without a finding is not red."""
    import io
    import re

    from rich.console import Console

    from tlsprobe.model.audit import PqVerdict
    from tlsprobe.report.audit_tables import audit_renderables
    r = dataclasses.replace(_weak_model_report(), post_quantum=(
        PqVerdict("capability", "MLKEM1024", "no", "refused"),
        PqVerdict("capability", "X25519MLKEM768", "yes", "accepted")))
    console = Console(file=io.StringIO(), width=160, force_terminal=True,
                      color_system="standard")
    for part in audit_renderables(r):
        console.print(part)
    text = console.file.getvalue()
    red, green = "\x1b[1;31m", "\x1b[32m"

    def cell(row: str, word: str) -> str:
        line = next(line for line in text.splitlines() if re.match(
            re.escape(row).replace(r"\ ", r"\s+"), re.sub(r"\x1b\[[0-9;]*m", "", line)))
        return line[:line.index(word)][-12:]

    assert cell("TLS 1.0", "yes").endswith(red) and cell("SSL 3.0", "no").endswith(green)
    assert cell("TLS 1.2", "yes").endswith(green)
    assert cell("extended master secret", "not supported").endswith(red)
    assert cell("HSTS", "supported").endswith(green)
    assert not cell("capability MLKEM1024", "no").endswith(red)
    assert cell("capability X25519MLKEM768", "yes").endswith(green)
