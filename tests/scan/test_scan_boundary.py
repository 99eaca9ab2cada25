"""One target's failure never touches another target's result (issue 10, item 3).

A name IDNA refuses, a control character in a host name or a bug while auditing one target
is an error for that target alone (a line in text, an object with its index in JSON lines),
with the documented exit code and never a traceback. Real openssl s_server on loopback."""
from __future__ import annotations

import json

import pytest

from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit import run as audit_mod
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

LONG_LABEL = "x" * 64 + ".example"


@pytest.fixture
def openssl(server_cache):
    return server_cache("openssl", groups="X25519:P-384")


def _lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _targets_file(tmp_path, good: str) -> str:
    path = tmp_path / "targets.txt"
    path.write_bytes(f"a..b:443\n{good}\n{LONG_LABEL}:443\nbad\x00name:443\n..\n".encode())
    return path.name    # run_cli works in tmp_path: errors name "targets.txt:LINE"


@pytest.mark.needs_impl("openssl")
def test_bad_names_in_targets_file_are_errors_of_their_own_json(openssl, run_cli, tmp_path):
    good = f"127.0.0.1:{openssl.port}"
    code, out, err = run_cli("scan", "-f", _targets_file(tmp_path, good), "--groups-only",
                             "--json", "--no-progress")
    assert "Traceback" not in err and "asyncio" not in err
    reports = {r["index"]: r for r in _lines(out)}
    assert sorted(reports) == [1, 2, 3, 4, 5]
    ok = reports[2]
    assert ok["error"] is None and ok["port"] == openssl.port
    assert [g["name"] for g in ok["groups"][0]["supported"]] == ["x25519", "secp384r1"]
    for i in (1, 3, 4, 5):
        assert reports[i]["error_kind"] == "usage"
        assert reports[i]["error"].startswith(f"targets.txt:{i}: bad target")
    assert "not a valid host name: label empty or too long" in reports[1]["error"]
    assert "control characters" in reports[4]["error"]
    # no finding, bad lines: the usage code of the precedence (1 > 70 > 6 > ... > 2)
    assert code == 2
    assert len([line for line in err.splitlines() if line.startswith("tlsprobe: ")]) == 4


@pytest.mark.needs_impl("openssl")
def test_bad_names_in_targets_file_text_keeps_the_good_result(openssl, run_cli, tmp_path):
    good = f"127.0.0.1:{openssl.port}"
    code, out, err = run_cli("scan", "-f", _targets_file(tmp_path, good), "--groups-only",
                             "--no-progress")
    assert code == 2, err
    assert "Traceback" not in err
    assert f"Audit of {good}" in out and "x25519" in out
    assert out.count("Skipped ") == 4
    assert "targets.txt:1: bad target 'a..b:443': not a valid host name" in err


@pytest.mark.parametrize("name", ["a..b", LONG_LABEL, "ok.example..com"])
def test_probe_with_a_name_idna_refuses_is_one_usage_line(run_cli, name):
    code, out, err = run_cli("probe", f"{name}:443", timeout=30)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("tlsprobe: ") and "not a valid host name" in err
    assert "Traceback" not in err and out == ""


@pytest.mark.needs_impl("openssl")
def test_api_target_idna_refuses_is_a_network_error_for_it_alone(openssl):
    """Targets built through the API skip parse_target: the scheduler reports the name."""
    reports = run_audit([Target("a..b", 443), Target("127.0.0.1", openssl.port)],
                        AuditOptions(checks=("versions", "groups")),
                        Scheduler(retries=0, timeout=5))
    assert reports[0].error_kind == "network"
    assert "not a valid host name" in (reports[0].error or "")
    assert reports[1].error is None and reports[1].groups[0].supported
    assert reports[1].spoken_versions() == [0x0304, 0x0303]


@pytest.mark.needs_impl("openssl")
def test_a_bug_in_one_job_is_an_internal_error_of_that_target(openssl, monkeypatch):
    """Any unexpected exception in a connection job: that target is marked (exit 70), its
    other answers and every other target stay."""
    real = Scheduler._converse
    victim = Target("localhost", openssl.port)

    async def converse(self, transport, job, *more):   # a bug for one target only
        if job.config.server_name == "localhost":
            raise RuntimeError("simulated bug")
        return await real(self, transport, job, *more)

    monkeypatch.setattr(Scheduler, "_converse", converse)
    reports = run_audit([victim, Target("127.0.0.1", openssl.port)],
                        AuditOptions(checks=("groups",)), Scheduler(retries=0, timeout=5))
    assert reports[0].error_kind == "internal"
    assert "internal error: RuntimeError: simulated bug" in (reports[0].error or "")
    assert reports[1].error is None
    assert [c.name for c in reports[1].groups[0].supported] == ["x25519", "secp384r1"]


@pytest.mark.needs_impl("openssl")
def test_a_bug_in_one_targets_audit_is_its_error_alone(openssl, monkeypatch, run_cli):
    real = audit_mod._finish

    def finish(report, run, started, error=None):
        if run.runner.target.host == "localhost":
            raise KeyError("simulated")
        return real(report, run, started, error)

    monkeypatch.setattr(audit_mod, "_finish", finish)
    reports = run_audit([Target("localhost", openssl.port), Target("127.0.0.1", openssl.port)],
                        AuditOptions(checks=("groups",)), Scheduler(retries=0, timeout=5))
    assert reports[0].error_kind == "internal" and "KeyError" in (reports[0].error or "")
    assert reports[1].error is None and reports[1].groups


def test_exit_code_precedence_puts_internal_above_protocol():
    from tlsprobe.commands.scan import exit_code
    from tlsprobe.model.audit import AuditReport
    reports = [AuditReport("a", 1, error="x", error_kind="protocol"),
               AuditReport("b", 1, error="y", error_kind="internal"),
               AuditReport("c", 1, error="z", error_kind="usage")]
    assert exit_code(reports, None) == 70
    assert exit_code(reports[::2], None) == 6


def test_scan_sni_with_control_characters_is_a_usage_error(run_cli):
    code, out, err = run_cli("scan", "127.0.0.1:1", "--sni", "a\x1b[2Jb", "--no-progress")
    assert code == 2 and "control characters" in err and "\x1b" not in err
    assert out == ""
