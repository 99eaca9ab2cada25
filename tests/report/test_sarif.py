"""`scan --sarif FILE` and `--junit FILE` against real loopback servers (issue 33 section 3):
the SARIF validated against the PUBLISHED SARIF 2.1.0 schema (tests/data/sarif, OASIS), a
rule per finding code, levels from severities, the target as location, waived findings
suppressed, an unreachable target as an error notification; the JUnit parsed back with
xml.etree, its counts equal to what the scan's JSON says."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

SCHEMA = Path(__file__).resolve().parents[1] / "data" / "sarif" / "sarif-schema-2.1.0.json"
LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "note",
         "info": "note"}
RANK = ("info", "low", "medium", "high", "critical")
#: the checks run: fast ones that read the audit or make a few connections each
CHECKS = "versions,suites,cert,sct,ems,sweet32,rc4,lucky13,heartbleed,hsts,chain"
WAIVED = ("check.sct", "our CA logs nothing; ticket SEC-12")


@pytest.fixture
def scanned(server_cache, run_cli, tmp_path: Path):
    """One scan of a modern server, a gnutls server with TLS 1.0, 3DES and RC4 (SWEET32 and
    RC4 vulnerable) and a refused port, with --json-out, --sarif and --junit, check.sct
    waived by a policy."""
    good = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    old = server_cache("gnutls", proto="all", ciphers="NORMAL:+3DES-CBC:+ARCFOUR-128:+RSA")
    policy = tmp_path / "ours.toml"
    policy.write_text(f'extends = "intermediate"\nname = "ours"\n[waive]\n'
                      f'"{WAIVED[0]}" = "{WAIVED[1]}"\n', encoding="utf-8")
    targets = [f"127.0.0.1:{good.port}", f"127.0.0.1:{old.port}", "127.0.0.1:1"]
    code, out, err = run_cli("scan", *targets, "--checks", CHECKS, "--no-progress",
                             "--retries", "0", "--policy", policy, "--fail-on", "medium",
                             "--json-out", tmp_path / "s.json", "--sarif", tmp_path / "s.sarif",
                             "--junit", tmp_path / "s.xml", timeout=120)
    reports = [json.loads(line) for line in
               (tmp_path / "s.json").read_text(encoding="utf-8").splitlines()]
    return code, out, err, reports, tmp_path


def test_sarif_is_valid_and_holds_every_finding(scanned) -> None:
    code, _out, err, reports, folder = scanned
    assert code == 1, err                       # findings at or above medium
    doc = json.loads((folder / "s.sarif").read_text(encoding="utf-8"))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft4Validator(schema).iter_errors(doc), key=str)
    assert errors == [], errors[0].message if errors else ""
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1
    run = doc["runs"][0]
    from tlsprobe import __version__
    assert run["tool"]["driver"]["name"] == "tlsprobe"
    assert run["tool"]["driver"]["version"] == __version__
    rules = run["tool"]["driver"]["rules"]
    findings = [(r, f, False) for r in reports for f in r["findings"]] + \
        [(r, f, True) for r in reports for f in r["waived"]]
    assert findings and any(waived for *_, waived in findings)
    # a rule per finding code, its level the worst severity's ("none" for a code seen only
    # in inconclusive findings, which are kind "open")
    worst: dict[str, str] = {}
    for _r, f, _w in findings:
        worst[f["code"]] = max(worst.get(f["code"], "info"), f["severity"], key=RANK.index)
    open_only = {c for c in worst
                 if all(f.get("inconclusive") for _r, f, _w in findings if f["code"] == c)}
    assert {rule["id"]: rule["defaultConfiguration"]["level"] for rule in rules} == \
        {c: "none" if c in open_only else LEVEL[s] for c, s in worst.items()}
    assert all(rule["shortDescription"]["text"] for rule in rules)
    # a result per finding, in order, with its level, target and suppression
    results = run["results"]
    assert len(results) == len(findings)
    got = sorted((x["ruleId"], x["level"], x["locations"][0]["logicalLocations"][0]["name"],
                  "suppressions" in x) for x in results)
    want = sorted((f["code"], "none" if f.get("inconclusive") else LEVEL[f["severity"]],
                   f"127.0.0.1:{r['port']}", w) for r, f, w in findings)
    assert got == want
    for x in results:
        assert rules[x["ruleIndex"]]["id"] == x["ruleId"]
        uri = x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri.startswith("tls/127.0.0.1/") and x["message"]["text"].startswith("127.0.0.1:")
        if "suppressions" in x:
            assert x["ruleId"] == WAIVED[0]
            assert WAIVED[1] in x["suppressions"][0]["justification"]
    # the refused port: an error notification, the run not successful, the scan's exit code
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 1
    notes = invocation["toolExecutionNotifications"]
    assert [n["level"] for n in notes] == ["error"] and "127.0.0.1:1" in notes[0]["message"]["text"]


def _failing(report: dict, threshold: str = "medium") -> int:
    """The test cases the JUnit must fail for `report`, counted from its JSON."""
    checks = {c["code"] for c in report.get("check_results", []) if c.get("code")}
    waived = {f["code"] for f in report["waived"]}
    bad = 0
    for c in report.get("check_results", []):
        own = [f for f in report["findings"]
               if f["code"] == c.get("code") and not f.get("inconclusive")]
        if any(RANK.index(f["severity"]) >= RANK.index(threshold) for f in own) or \
                (c["verdict"] in ("vulnerable", "not tolerated") and c.get("code") not in waived):
            bad += 1
    codes: dict[str, list[str]] = {}
    for f in report["findings"]:
        if f["code"] not in checks and not f.get("inconclusive"):
            codes.setdefault(f["code"], []).append(f["severity"])
    bad += sum(1 for sevs in codes.values()
               if max(RANK.index(s) for s in sevs) >= RANK.index(threshold))
    return bad


def test_junit_counts_match_the_scan_json(scanned) -> None:
    _code, _out, _err, reports, folder = scanned
    root = ET.parse(folder / "s.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"127.0.0.1:{r['port']}" for r in reports]
    for suite, report in zip(suites, reports):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        if report["error"]:
            assert [c.get("name") for c in cases] == ["audit"]
            assert cases[0].find("error") is not None and suite.get("errors") == "1"
            continue
        names = [c.get("name") for c in cases]
        checks = [c["name"] for c in report["check_results"]]
        assert names[:len(checks)] == checks
        finding_codes = {f["code"] for f in report["findings"] + report["waived"]} - \
            {c.get("code") for c in report["check_results"]}
        assert set(names[len(checks):]) - {"rating"} == finding_codes
        failed = [c for c in cases if c.find("failure") is not None]
        assert int(suite.get("failures")) == len(failed) == _failing(report)
        skipped = [c for c in cases if c.find("skipped") is not None]
        assert int(suite.get("skipped")) == len(skipped) > 0
        assert len(skipped) == sum(
            c["verdict"] in ("not applicable", "inconclusive") for c in report["check_results"])
        for case in skipped:        # never a silent pass: the verdict is its message
            assert case.find("skipped").get("message").split(":")[0] in \
                ("not applicable", "inconclusive")
        waived = [c for c in cases if c.get("name") == "sct"]
        if any(f["code"] == WAIVED[0] for f in report["waived"]):
            assert waived[0].find("failure") is None
            assert "waived" in waived[0].find("system-out").text
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)
    assert int(root.get("failures")) == sum(_failing(r) for r in reports if not r["error"])
    assert int(root.get("failures")) > 0


@pytest.mark.parametrize("option", ["--sarif", "--junit"])
def test_an_unwritable_report_file_is_one_line_before_the_audit(run_cli, tmp_path: Path,
                                                               option) -> None:
    missing = tmp_path / "none" / "out"
    code, _out, err = run_cli("scan", "127.0.0.1:1", option, missing)
    assert code == 2
    assert err.strip() == f"tlsprobe: error: {option} {missing}: no such directory " \
        f"{missing.parent}"


def test_hostile_text_stays_valid_xml_and_json() -> None:
    """A finding quoting what a server sent (control characters, a NUL, an escape sequence,
    markup) is escaped in the JUnit XML (which cannot hold those characters) and kept
    parseable in SARIF."""
    from tlsprobe.model.audit import AuditReport, Finding
    from tlsprobe.report.junit import junit_tree
    from tlsprobe.report.sarif import sarif_document
    nasty = "banner \x00\x1b[31m<evil attr=\"x\">&\x07 \ud800"
    report = AuditReport(host="::1", port=443, findings=(
        Finding("high", "check.server_banner", nasty, items=(nasty,)),),
        started_at="2026-12-06T10:20:31Z")
    bad_line = AuditReport(host="a\x01b\ud800", port=0, error="targets.txt:1: \x01 no target",
                           error_kind="usage")
    text = ET.tostring(junit_tree([report, bad_line], "high").getroot(), encoding="unicode")
    root = ET.fromstring(text)
    assert [s.get("name") for s in root.findall("testsuite")] == \
        ["[::1]:443", "a\\x01b\\ud800:0"]
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == "check.server_banner"
    failure = case.find("failure")
    assert failure is not None and "\\x00" in failure.get("message") and "<evil" in failure.get("message")
    doc = json.loads(json.dumps(sarif_document([report, bad_line], 1, "findings"),
                                ensure_ascii=False).encode("utf-8"))
    location = doc["runs"][0]["results"][0]["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "tls/%3A%3A1/443"
    assert location["logicalLocations"][0]["name"] == "[::1]:443"


def test_junit_shows_the_rating_gate_a_target_that_could_not_be_rated_fails(
        server_cache, run_cli, tmp_path: Path) -> None:
    """`--checks groups --fail-under B`: the target is not rated, which is below every gate
    (docs/RATING.md), so the scan exits 1; the JUnit had no rating test case then, and a CI
    test view showed every test passed beside a failed job."""
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "groups",
                             "--no-progress", "--fail-under", "B", "--junit",
                             tmp_path / "j.xml")
    assert code == 1, err
    cases = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    rating = [c for c in cases if c.get("name") == "rating"]
    assert len(rating) == 1, out
    failure = rating[0].find("failure")
    assert failure is not None and failure.get("message", "").startswith(
        "not rated (versions not run"), ET.tostring(rating[0])
    assert failure.get("message", "").endswith(", below --fail-under B")
    # without --fail-under there is nothing to gate: no rating test case for it
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "groups",
                             "--no-progress", "--junit", tmp_path / "k.xml")
    assert code == 0, err
    names = [c.get("name") for c in ET.parse(tmp_path / "k.xml").getroot().iter("testcase")]
    assert "rating" not in names
