"""Policies do what they say (issue 30, item 4): one registry of every finding code
(tlsprobe/policy/codes.py); a policy's `severity` and `waive` tables may name any of them and
nothing else (a typo is exit 2 with the closest codes); built-in and check findings can be
re-rated and waived with a reason; waived findings are listed in every report format;
`--checks all,-NAME` leaves a check out."""
from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path

import pytest

from tlsprobe.probes.checks.catalog import ACTIVE

REPO = Path(__file__).resolve().parents[2]
#: a string that has the shape of a finding code
CODE_SHAPE = re.compile(r"(version|suite|group|dh|pq|certificate|target|audit|order|check)"
                        r"\.[a-z0-9_]+")


def all_codes() -> tuple[str, ...]:
    from tlsprobe.policy.codes import all_codes as codes
    return codes()


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def test_every_code_literal_of_the_finding_makers_is_registered() -> None:
    """The modules that make findings name no code the registry lacks (so a policy can
    re-rate or waive each); an active check's code is check.NAME (probes/checks/base.py)."""
    files = [*sorted((REPO / "tlsprobe" / "policy").glob("*.py")),
             *sorted((REPO / "tlsprobe" / "probes" / "checks").glob("*.py"))]
    found = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    CODE_SHAPE.fullmatch(node.value):
                found.add(node.value)
    assert len(found) > 30
    assert sorted(found - set(all_codes())) == []
    assert {f"check.{name}" for name in ACTIVE} <= set(all_codes())
    assert {"check.sct", "check.cert_lifetime", "certificate.self_signed", "check.poodle",
            "group.missing", "version.not_allowed", "audit.inconclusive"} <= set(all_codes())


def test_an_active_checks_finding_code_is_check_and_its_name() -> None:
    """What makes `check.NAME` for every active check true: probes/checks/base.py gives
    that code to a result with a severity, and refuses another (a bug, caught by the test
    suite's scans as an internal error rather than an unregistered code)."""
    from tlsprobe.model.audit import AuditReport
    from tlsprobe.model.checks import Verdict
    from tlsprobe.probes.checks.base import CheckContext

    class Runner:       # what result() reads for the connection count
        class target:
            display = "x:1"

        class scheduler:
            connections: dict = {}
    ctx = CheckContext(Runner(), AuditReport(host="x", port=1), "sct", "certificate")
    assert ctx.result(Verdict.not_supported, "no SCT", severity="low").code == "check.sct"
    assert ctx.result(Verdict.supported, "SCT").code is None
    with pytest.raises(ValueError, match="check.sct"):
        ctx.result(Verdict.not_supported, "no SCT", code="sct.missing", severity="low")


def test_docs_name_every_code() -> None:
    doc = (REPO / "docs" / "POLICY.md").read_text("utf-8")
    named = set(re.findall(r"`([a-z]+\.[a-z0-9_]+)`", doc))
    missing = [c for c in all_codes() if c not in named and
               not (c.startswith("check.") and "`check.NAME`" in doc)]
    assert missing == []


@pytest.mark.parametrize(("table", "key", "wanted"), [
    ("severity", "group.missng", "group.missing"),
    ("severity", "check.cert_lifetim", "check.cert_lifetime"),
    ("waive", "check.sctt", "check.sct"),
    ("waive", "certificate.self_sign", "certificate.self_signed"),
])
def test_an_unknown_code_is_a_usage_error_naming_the_closest(run_cli, tmp_path, table, key,
                                                             wanted) -> None:
    value = '"high"' if table == "severity" else '"accepted"'
    policy = tmp_path / "ours.toml"
    policy.write_text(f'extends = "intermediate"\n[{table}]\n"{key}" = {value}\n')
    code, out, err = run_cli("scan", "127.0.0.1:1", "--policy", policy, "--no-progress")
    line = _one_line(err)
    assert code == 2 and out == ""
    assert "ours.toml" in line and f"[{table}]" in line and repr(key) in line
    assert f"did you mean {wanted}" in line


@pytest.mark.parametrize(("text", "words"), [
    ('[waive]\n"check.sct" = ""\n', "[waive] 'check.sct': give the reason"),
    ('[waive]\n"check.sct" = 3\n', "[waive] 'check.sct': give the reason"),
    ('[severity]\n"check.sct" = "urgent"\n', "[severity] 'check.sct': 'urgent' is no severity"),
    ('severty = {}\n', "unknown key 'severty' (did you mean severity?)"),
    ('certificate_types = ["ecdas"]\n', "unknown certificate type 'ecdas' in "
     "'certificate_types' (did you mean ecdsa?)"),
])
def test_a_bad_table_entry_is_a_usage_error_naming_it(run_cli, tmp_path, text, words) -> None:
    policy = tmp_path / "ours.toml"
    policy.write_text(text)
    code, _, err = run_cli("scan", "127.0.0.1:1", "--policy", policy, "--no-progress")
    line = _one_line(err)
    assert code == 2 and "ours.toml" in line and words in line


@pytest.fixture
def three_servers(server_cache) -> list:
    return [server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True),
            server_cache("openssl", proto="tls1_2", groups="X25519",
                         ciphers="AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-SHA"),
            server_cache("openssl", proto="tls1_3", groups="P-256", cert="ecdsa")]


@pytest.mark.needs_impl("openssl")
def test_every_emitted_code_can_be_rerated_and_waived_in_every_format(three_servers, run_cli,
                                                                        tmp_path) -> None:
    targets = [f"127.0.0.1:{s.port}" for s in three_servers]
    code, out, err = run_cli("scan", *targets, "--json", "--no-progress", timeout=120)
    reports = _lines(out)
    assert len(reports) == 3 and all(r["error"] is None for r in reports), err
    emitted = {f["code"] for r in reports for f in r["findings"]}
    # built-in (certificate, suite, pq), policy and check findings among them
    assert {"suite.no_forward_secrecy", "check.sct"} <= emitted
    assert any(c.startswith("certificate.") for c in emitted)
    assert any(c.startswith("group.") for c in emitted)
    assert sorted(emitted - set(all_codes())) == []

    # every emitted code re-rated to critical, check.sct waived
    waived_code, reason = "check.sct", "our CA logs nothing; see ticket SEC-12"
    rated = {c: "critical" for c in emitted if c != waived_code}
    policy = tmp_path / "ours.toml"
    policy.write_text('extends = "intermediate"\nname = "ours"\n[severity]\n' +
                      "".join(f'"{c}" = "{s}"\n' for c, s in sorted(rated.items())) +
                      f'[waive]\n"{waived_code}" = "{reason}"\n')
    html, csv_path = tmp_path / "a.html", tmp_path / "a.csv"
    code, out, err = run_cli("scan", *targets, "--json", "--no-progress", "--policy", policy,
                             "--html", html, "--csv", csv_path, timeout=120)
    reports = _lines(out)
    assert len(reports) == 3 and all(r["error"] is None for r in reports), err
    findings = [f for r in reports for f in r["findings"]]
    assert findings and {f["severity"] for f in findings} == {"critical"}
    assert waived_code not in {f["code"] for f in findings}
    waived = [w for r in reports for w in r["waived"]]
    assert waived and {(w["code"], w["waiver"], w["waived_by"]) for w in waived} == \
        {(waived_code, reason, "ours")}
    assert all("waiver" not in f for f in findings)     # only on waived findings
    page = html.read_text("utf-8")
    assert "Waived findings" in page and reason in page
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert {(r["section"], r["code"], r["status"], r["detail"]) for r in rows
            if r["section"] == "waived"} == {("waived", waived_code, "ours", reason)}

    # text, and a waived finding never fails the gate (the sct check reads the chain, whose
    # trust findings of the test CA are waived by area here)
    gate = tmp_path / "gate.toml"
    gate.write_text('extends = "intermediate"\nname = "ours"\n[waive]\n'
                    f'"{waived_code}" = "{reason}"\n"certificate.*" = "the test CA"\n')
    only = ("--checks", "sct", "--no-progress", "--policy", gate)
    code, out, err = run_cli("scan", targets[0], *only, "--fail-on", "info")
    assert code == 0, err
    # the reason column wraps at its words (the table folds whole tokens only)
    assert "Waived findings" in out and "check.sct" in out
    assert all(word in out.split() for word in reason.split()), out


@pytest.mark.needs_impl("openssl")
def test_checks_minus_name_leaves_a_check_out(three_servers, run_cli) -> None:
    target = f"127.0.0.1:{three_servers[0].port}"
    code, out, err = run_cli("scan", target, "--checks", "certs,-sct", "--json",
                             "--no-progress")
    assert code == 0, err
    names = [c["name"] for c in _lines(out)[0]["check_results"]]
    assert "sct" not in names and "cert_lifetime" in names and "key_usage" in names
    # an exclusion alone leaves the default run without it; spelt as its own word too
    code, out, err = run_cli("scan", target, "--checks", "-sct,-robot,-tolerance,-http,-vulns",
                             "--json", "--no-progress")
    assert code == 0, err
    names = {c["name"] for c in _lines(out)[0]["check_results"]}
    assert "sct" not in names and "robot" not in names and "grease" not in names
    assert {"cert_lifetime", "resumption"} <= names


@pytest.mark.parametrize(("value", "words"), [
    ("all,-sctt", "did you mean sct"), ("all,-hearbleed", "did you mean heartbleed"),
    ("grups,pq", "did you mean groups"), ("vulns,-versions", "-versions cannot be left out"),
    ("sct,-sct", "leaves no check"),
])
def test_checks_typos_and_impossible_exclusions_are_usage_errors(run_cli, value,
                                                                 words) -> None:
    code, out, err = run_cli("scan", "127.0.0.1:1", "--checks", value)
    assert code == 2 and out == "" and words in _one_line(err)
