"""The gates of `scan` and what the reports say about them, against real loopback servers.

What could not be established fails no gate: `scan --fail-on info` where the only findings
say something was NOT determined (audit.inconclusive after resets, certificate.not_verified
with --no-verify, LUCKY13's "potentially vulnerable") exits 0 in every output (exit code,
the JSON gate, JUnit, SARIF, the summary); a policy that names the code in its `severity`
table asks to be held to it (exit 1), an `AREA.*` key does not. A policy file that extends a
built-in one is shown under its own name and title, saying what it extends."""
from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers.faultproxy import RESET, FaultProxy, nth_matching
from tlsprobe.wire.hello import ClientHello

pytestmark = pytest.mark.needs_impl("openssl")
SERVER = dict(groups="X25519:P-256", serverpref=True,
              ciphers="ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-SHA")


def tls12_only(h: ClientHello) -> bool:
    return not h.supported_versions and h.legacy_version == 0x0303


@pytest.fixture
def flaky(server_cache):
    """A new proxy in front of openssl s_server each call, that resets the versions check's
    two TLS 1.2-only hellos (its full offer, then its minimal one): TLS 1.2 is
    inconclusive."""
    srv = server_cache("openssl", **SERVER)
    started: list[FaultProxy] = []

    def start() -> FaultProxy:
        started.append(FaultProxy([(srv.host, srv.port)],
                                  nth_matching(tls12_only, RESET, which=(1, 2))))
        return started[-1]
    yield start
    for proxy in started:
        proxy.close()


def scan(run_cli, tmp_path, port: int, *args: str):
    files = {"junit": tmp_path / "s.xml", "sarif": tmp_path / "s.sarif",
             "json": tmp_path / "s.jsonl", "csv": tmp_path / "s.csv"}
    code, out, err = run_cli("scan", f"127.0.0.1:{port}", "--retries", "0", "--no-progress",
                             "--junit", files["junit"], "--sarif", files["sarif"],
                             "--json-out", files["json"], "--csv", files["csv"], *args)
    doc = json.loads(files["json"].read_text().splitlines()[0])
    return code, out, err, doc, ET.parse(files["junit"]), json.loads(files["sarif"].read_text())


def csv_sections(tmp_path, code: str) -> list[str]:
    """The `section` of each row of the sheet `scan` wrote about finding `code`."""
    with open(tmp_path / "s.csv", newline="", encoding="utf-8") as fh:
        return [row["section"] for row in csv.DictReader(fh) if row["code"] == code]


def junit_case(tree: ET.ElementTree, name: str) -> ET.Element:
    return next(c for c in tree.iter("testcase") if c.get("name") == name)


def test_inconclusive_versions_fail_no_gate(run_cli, tmp_path, flaky):
    proxy = flaky()
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, proxy.port, "--checks",
                                             "versions", "--no-policy", "--fail-on", "info")
    assert len(proxy.faults()) == 2, err
    assert [f["code"] for f in doc["findings"]] == ["audit.inconclusive"]
    assert code == 0, (out, err)
    assert doc["findings"][0]["inconclusive"] is True
    assert doc["gate"] == {"passed": True, "reasons": []}
    assert ("Inconclusive (what could not be established), counted by no gate, --fail-on info "
            "included: 1 of these findings") in out
    case = junit_case(junit, "audit.inconclusive")
    assert case.find("failure") is None
    assert case.find("skipped").get("message").startswith("inconclusive: TLS 1.2 support")
    assert junit.getroot().get("failures") == "0"
    run = sarif["runs"][0]
    (result,) = run["results"]
    assert (result["ruleId"], result["kind"], result["level"]) == \
        ("audit.inconclusive", "open", "none")
    assert run["tool"]["driver"]["rules"][0]["defaultConfiguration"]["level"] == "none"
    assert run["invocations"][0]["exitCode"] == 0
    assert "counted by no gate" in run["invocations"][0]["exitCodeDescription"]
    # the sheet: its own section, so a filter on `finding` gives what gates
    assert csv_sections(tmp_path, "audit.inconclusive") == ["inconclusive"]


def test_a_policy_naming_the_code_asks_for_the_gate(run_cli, tmp_path, flaky):
    """`"audit.inconclusive" = "medium"` holds the target to it (exit 1, a failing JUnit
    case, a SARIF warning); `"audit.*"` alone re-rates nothing that was not established."""
    strict = tmp_path / "strict.toml"
    strict.write_text('[severity]\n"audit.inconclusive" = "medium"\n')
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, flaky().port, "--checks",
                                             "versions", "--policy", strict,
                                             "--fail-on", "medium")
    assert code == 1, (out, err)
    (f,) = [f for f in doc["findings"] if f["code"] == "audit.inconclusive"]
    assert f["severity"] == "medium" and "inconclusive" not in f
    assert doc["gate"]["reasons"] == ["1 finding(s) at or above --fail-on medium: "
                                      "audit.inconclusive (medium)"]
    assert junit_case(junit, "audit.inconclusive").find("failure") is not None
    assert sarif["runs"][0]["results"][0]["level"] == "warning"
    assert csv_sections(tmp_path, "audit.inconclusive") == ["finding"]
    area = tmp_path / "area.toml"
    area.write_text('[severity]\n"audit.*" = "high"\n')
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, flaky().port, "--checks",
                                             "versions", "--policy", area, "--fail-on", "info")
    assert code == 0, (out, err)
    (f,) = [f for f in doc["findings"] if f["code"] == "audit.inconclusive"]
    assert (f["severity"], f["inconclusive"]) == ("info", True)


def test_trust_not_checked_fails_no_gate(run_cli, tmp_path, server_cache):
    """--no-verify: certificate.not_verified says the chain was not checked; neither it nor
    LUCKY13's inconclusive verdict (a CBC suite, no timing measured) fails --fail-on info."""
    srv = server_cache("openssl", **SERVER)
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, srv.port, "--checks",
                                             "cert,lucky13", "--no-policy", "--no-verify",
                                             "--fail-on", "info")
    found = {f["code"]: f for f in doc["findings"]}
    assert {"certificate.not_verified", "check.lucky13"} <= set(found), found
    assert found["certificate.not_verified"]["inconclusive"] is True
    assert found["check.lucky13"]["inconclusive"] is True
    assert [f for f in found.values() if not f.get("inconclusive")] == []
    assert code == 0, (out, err)
    assert junit.getroot().get("failures") == "0"
    assert {r["level"] for r in sarif["runs"][0]["results"]} == {"none"}


def test_a_policy_that_extends_a_built_in_one_shows_its_own_name(run_cli, tmp_path,
                                                                 server_cache):
    """A file extending modern was titled "Mozilla modern ..." with Mozilla's source; every
    report named it without saying what it extends."""
    ours = tmp_path / "ours.toml"
    ours.write_text('extends = "modern"\n[severity]\n"version.not_allowed" = "high"\n')
    code, out, err = run_cli("scan", "--list-policies", "--json", "--policy", ours)
    assert code == 0, err
    listed = {d["name"]: d for d in map(json.loads, out.splitlines())}
    assert listed["ours"] == {"name": "ours", "title": "ours.toml", "source": str(ours),
                              "extends": "mozilla-modern-6.0", "aliases": []}
    assert listed["mozilla-modern-6.0"]["extends"] is None
    code, out, err = run_cli("scan", "--list-policies", "--policy", ours)
    assert "\nours                         ours.toml (extends mozilla-modern-6.0)\n" in out
    srv = server_cache("openssl", **SERVER)
    html = tmp_path / "s.html"
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, srv.port, "--checks",
                                             "versions", "--policy", ours, "--html", html,
                                             "--fail-on", "high")
    assert code == 1, (out, err)    # TLS 1.2 is spoken: not allowed by modern, high here
    assert doc["policies"] == ["ours"]
    assert doc["policy_extends"] == {"ours": "mozilla-modern-6.0"}
    assert "Findings (ours extends mozilla-modern-6.0)" in out
    assert "Findings (ours extends mozilla-modern-6.0)" in html.read_text()
    (result,) = [x for x in sarif["runs"][0]["results"] if x["ruleId"] == "version.not_allowed"]
    assert result["properties"]["policy"] == "ours"
    assert result["properties"]["policy_extends"] == "mozilla-modern-6.0"


def test_two_policies_of_one_name_are_a_usage_error(run_cli, tmp_path):
    """Their findings and tables would mix (a policy's tables apply to the findings named
    after it); the same policy twice is checked once."""
    fake = tmp_path / "fake.toml"
    fake.write_text('name = "mozilla-modern-6.0"\nversions = ["TLS 1.2"]\n')
    code, out, err = run_cli("scan", "127.0.0.1:1", "--policy", "modern", "--policy", fake)
    assert (code, out) == (2, "")
    assert err == (f"tlsprobe: error: --policy {fake}: another policy is named "
                   "'mozilla-modern-6.0' too (give a policy file its own 'name')\n")


def test_an_unrated_target_says_why_it_fails_fail_under(run_cli, tmp_path, server_cache):
    """--checks groups rates nothing: below every gate, and the reason says "not rated
    (why)", not "rated not rated"."""
    srv = server_cache("openssl", **SERVER)
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, srv.port, "--checks",
                                             "groups", "--fail-under", "F")
    assert code == 1, (out, err)
    (reason,) = doc["gate"]["reasons"]
    assert reason.startswith("not rated (") and reason.endswith("), below --fail-under F")


@pytest.fixture
def weak_target(server_cache) -> str:
    """gnutls-serv accepting RC4 and 3DES suites (RC4 and SWEET32 vulnerable)."""
    from tests.helpers.servers import missing_reason, peer_unavailable
    if missing_reason("gnutls"):
        peer_unavailable(missing_reason("gnutls"))
    old = server_cache("gnutls", proto="all", ciphers="NORMAL:+3DES-CBC:+ARCFOUR-128:+RSA")
    return f"127.0.0.1:{old.port}"


def test_a_vulnerable_derived_check_alone_fails_the_gate(run_cli, tmp_path, weak_target):
    """`--checks sweet32` reads the suites phase without reporting its findings: the check
    said "vulnerable" and `--fail-on high` passed (no finding stated it). Its facts are
    reported as the suite.weak findings of its own suites (no RC4 suite: rc4 was not
    asked)."""
    out_json = tmp_path / "s.jsonl"
    code, out, err = run_cli("scan", weak_target, "--checks", "sweet32", "--no-progress",
                             "--fail-on", "high", "--json-out", out_json)
    doc = json.loads(out_json.read_text())
    assert [c["verdict"] for c in doc["check_results"]] == ["vulnerable"]
    assert code == 1, (out, err)
    weak = [f for f in doc["findings"] if f["code"] == "suite.weak"]
    items = {i for f in weak for i in f["items"]}
    assert weak and all(f["severity"] == "high" for f in weak)
    assert items and all("3DES" in i for i in items), items
    assert {f["code"] for f in doc["findings"]} == {"suite.weak"}, doc["findings"]


def test_a_waived_finding_passes_the_check_case_it_states(run_cli, tmp_path, weak_target):
    """suite.weak waived: the rc4 and sweet32 JUnit check cases failed all the same (those
    checks have no finding code of their own), while --fail-on high exited 0."""
    policy = tmp_path / "legacy.toml"
    policy.write_text('[waive]\n"suite.weak" = "legacy clients, ticket 7"\n')
    junit = tmp_path / "s.xml"
    code, out, err = run_cli("scan", weak_target, "--checks", "versions,suites,sweet32,rc4",
                             "--no-progress", "--policy", policy, "--fail-on", "high",
                             "--junit", junit)
    assert code == 0, (out, err)
    tree = ET.parse(junit)
    for name in ("rc4", "sweet32"):
        case = junit_case(tree, name)
        assert case.find("failure") is None, ET.tostring(case)
        assert "waived: [high] suite.weak" in case.find("system-out").text
    assert tree.getroot().get("failures") == "0"


def test_lucky13_named_by_a_policy_fails_its_junit_case(run_cli, tmp_path, server_cache):
    """`check.lucky13 = "medium"` asks to fail on LUCKY13's "potentially vulnerable": the
    exit code was 1 while its JUnit case was "skipped" (no case failed)."""
    strict = tmp_path / "strict.toml"
    strict.write_text('[severity]\n"check.lucky13" = "medium"\n')
    srv = server_cache("openssl", **SERVER)
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, srv.port, "--checks",
                                             "lucky13", "--policy", strict,
                                             "--fail-on", "medium")
    assert code == 1, (out, err)
    assert [(f["code"], f["severity"]) for f in doc["findings"]] == [("check.lucky13",
                                                                      "medium")]
    case = junit_case(junit, "lucky13")
    assert case.find("skipped") is None and case.find("failure") is not None
    assert junit.getroot().get("failures") == "1"


def test_a_re_rated_check_shows_the_policys_severity(run_cli, tmp_path, server_cache):
    """`check.lucky13 = "medium"`: the finding said medium, the HTML check row's badge and
    the JUnit failure type the check's own info."""
    strict = tmp_path / "strict.toml"
    strict.write_text('[severity]\n"check.lucky13" = "medium"\n')
    srv = server_cache("openssl", **SERVER)
    html = tmp_path / "s.html"
    code, out, err, doc, junit, sarif = scan(run_cli, tmp_path, srv.port, "--checks",
                                             "lucky13", "--policy", strict, "--html", html,
                                             "--fail-on", "medium")
    row = next(tr for tr in html.read_text().split("<tr>") if "LUCKY13" in tr)
    assert 'class="sev sev-medium"' in row and "sev-info" not in row, row
    assert junit_case(junit, "lucky13").find("failure").get("type") == "medium"


def test_extending_a_file_names_the_file_and_the_rule(run_cli, tmp_path):
    """`extends = "other.toml"` said "unknown policy 'other.toml' (...; or a .json/.toml
    file)": a file that cannot be extended offered, and the file at fault not named."""
    bad = tmp_path / "ours.toml"
    bad.write_text('extends = "base.toml"\n')
    code, out, err = run_cli("scan", "127.0.0.1:1", "--policy", bad)
    assert (code, out) == (2, "")
    assert err.startswith(f"tlsprobe: error: policy file {bad}: 'extends' names no built-in "
                          "policy: 'base.toml' (built in: mozilla-intermediate-5.7")
    assert err.endswith("; a file cannot be extended)\n") and err.count("\n") == 1
