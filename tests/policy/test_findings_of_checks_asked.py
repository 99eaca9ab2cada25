"""`--checks` limits the findings to the checks asked for (README, "Audit"): the audit
phases a check only reads (heartbleed and every active check read the versions phase, ROBOT
the suites phase, the certificate checks the versions and cert phases) run, but their own
findings are not reported, so that `scan --checks heartbleed --fail-on medium` cannot fail a
CI job on a protocol version the user did not ask about. They are the report's `read_only`
phases (JSON member only when there are some). A phase named as well keeps its findings."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest


@pytest.fixture(scope="module")
def target(server_cache: Callable[..., Any]) -> str:
    # TLS 1.2 only (not in Mozilla modern) with a static-RSA CBC suite (no forward secrecy)
    srv = server_cache("openssl", proto="tls1_2", groups="X25519",
                       ciphers="ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA")
    return f"127.0.0.1:{srv.port}"


def _scan(run_cli: Callable[..., Any], target: str, checks: str) -> dict[str, Any]:
    res = run_cli("scan", target, "--checks", checks, "--policy", "modern", "--json",
                  "--no-progress", "--no-verify")
    assert res.returncode in (0, 1), res.stderr
    assert res.stderr == "", res.stderr
    report: dict[str, Any] = json.loads(res.stdout)
    return report


def _areas(report: dict[str, Any]) -> set[str]:
    return {f["code"].partition(".")[0] for f in report["findings"]}


@pytest.mark.parametrize("checks,read_only,not_reported", [
    ("heartbleed", ["versions"], {"version", "suite"}),
    ("robot", ["versions", "suites"], {"version", "suite"}),
    ("chain", ["versions"], {"version", "suite"}),
])
def test_phases_a_check_only_reads_report_no_findings(
        run_cli: Callable[..., Any], target: str, checks: str, read_only: list[str],
        not_reported: set[str]) -> None:
    report = _scan(run_cli, target, checks)
    assert report["read_only"] == read_only, report.get("read_only")
    assert not _areas(report) & not_reported, report["findings"]
    # the phases ran: the versions table is there, with TLS 1.2 spoken
    spoken = [v["version"]["name"] for v in report["versions"] if v["status"] == "supported"]
    assert spoken == ["TLS 1.2"], report["versions"]


def test_a_phase_named_as_well_keeps_its_findings(run_cli: Callable[..., Any],
                                                   target: str) -> None:
    both = _scan(run_cli, target, "versions,suites,heartbleed")
    assert "read_only" not in both
    codes = {f["code"] for f in both["findings"]}
    assert "version.not_allowed" in codes, codes      # TLS 1.2 is not in modern
    assert any(c.startswith("suite.") for c in codes), codes
    alone = _scan(run_cli, target, "versions")
    assert {f["code"] for f in alone["findings"] if f["code"].startswith("version.")} == \
        {c for c in codes if c.startswith("version.")}
