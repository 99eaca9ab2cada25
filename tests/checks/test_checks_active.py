"""The active-check framework (probes/checks/base.py) and the TLS_FALLBACK_SCSV check, against
real loopback servers: openssl s_server (which refuses a downgraded hello with
inappropriate_fallback), a tlslite-ng server that ignores the SCSV as servers before RFC 7507
did (tests/checks/ssl3_server.py --ignore-fallback-scsv), and a single-version server (not
applicable). Also: a check that raises is that check's internal error, not the audit's."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from tests.helpers.servers import Server
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.model.check_details import CheckDetails
from tlsprobe.probes.checks import active, base
from tlsprobe.probes.checks.catalog import ACTIVE, ALIASES, DERIVED
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.commands.scan import parse_checks

ServerFactory = Callable[..., Server]


def fallback(port: int) -> CheckResult:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks("fallback")),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    (result,) = r.check_results
    assert result.name == "fallback" and result.method == "active"
    assert r.connections.get("check fallback", 0) == result.connections
    assert result.connections >= 1 or result.verdict is Verdict.not_applicable
    return result


@pytest.mark.needs_impl("openssl")
def test_fallback_refused_by_openssl(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="tls1_2-tls1_3")
    result = fallback(srv.port)
    assert result.verdict is Verdict.not_vulnerable, result
    assert "inappropriate_fallback" in result.reason and "TLS 1.2 hello" in result.reason
    assert result.code is None and result.connections == 1


@pytest.mark.needs_impl("tlslite")
def test_fallback_ignored_by_pre_rfc7507_server(script_server: Callable[..., int]) -> None:
    port = script_server("ssl3_server.py", "--max-version", "tls1_2", "--ignore-fallback-scsv",
                         "--ciphers", "aes128")
    result = fallback(port)
    assert result.verdict is Verdict.vulnerable, result
    assert "TLS 1.1 hello with TLS_FALLBACK_SCSV" in result.reason
    assert result.code == "check.fallback" and result.severity == "low"
    # the same server with its check in place (tlslite implements RFC 7507) refuses it
    port = script_server("ssl3_server.py", "--max-version", "tls1_2", "--ciphers", "aes128")
    assert fallback(port).verdict is Verdict.not_vulnerable


@pytest.mark.needs_impl("openssl")
def test_fallback_not_applicable_to_one_version(server_cache: ServerFactory,
                                                run_cli: Callable[..., object]) -> None:
    srv = server_cache("openssl", proto="tls1_3")
    assert fallback(srv.port).verdict is Verdict.not_applicable
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "fallback", "--json")
    d = json.loads(res.stdout)   # type: ignore[attr-defined]
    (c,) = d["check_results"]
    assert c["verdict"] == "not applicable" and c["category"] == "vulnerability"
    text = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "fallback")
    assert "Vulnerability checks" in text.stdout and "TLS_FALLBACK_SCSV" in text.stdout  # type: ignore[attr-defined]


def test_checks_option_knows_every_active_check_and_alias() -> None:
    assert parse_checks("fallback") == ("versions", "fallback")
    assert set(ALIASES["all"]) == set(DERIVED) | set(ACTIVE)
    assert "fallback" in ALIASES["vulns"] and set(DERIVED) <= set(ALIASES["vulns"])
    for name in ACTIVE:
        assert active.CHECKS[name].name == name


@pytest.mark.needs_impl("openssl")
def test_converse_counts_its_connection_and_a_failing_check_stays_its_own(
        server_cache: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = server_cache("openssl", proto="both")

    async def first_bytes(transport, deadline: float) -> bytes:   # type: ignore[no-untyped-def]
        from tlsprobe.engine.client import ClientHandshake
        from tlsprobe.engine.config import ClientConfig
        await transport.send(ClientHandshake(ClientConfig()).start())
        data: bytes = await transport.receive(deadline)
        return data

    async def broken(ctx: base.CheckContext) -> CheckResult:
        got = await ctx.converse(first_bytes)
        assert isinstance(got, bytes) and got[:1] == b"\x16"   # a handshake record back
        raise RuntimeError("bug in a check")

    # the static catalog first (it is made on first use from ACTIVE's names, each the name of
    # a check module), then the planted check in both
    monkeypatch.setitem(active.CHECKS, "broken",
                        base.ActiveCheck("broken", "a broken check", broken, CheckDetails))
    monkeypatch.setitem(ACTIVE, "broken", ACTIVE["fallback"])
    scheduler = Scheduler(retries=0, timeout=5.0)
    r = run_audit([Target("127.0.0.1", srv.port)],
                  AuditOptions(checks=("versions", "broken")), scheduler)[0]
    (result,) = r.check_results
    assert result.verdict is Verdict.inconclusive and "RuntimeError: bug in a check" in \
        result.reason
    assert r.connections["check broken"] == 1 == result.connections
    assert r.versions and all(v.status != "inconclusive" for v in r.versions)

    async def refused() -> object:
        runner = base.TargetRunner(Target("127.0.0.1", 1), Scheduler(retries=0, timeout=2.0))
        return await runner.scheduler.converse(runner.target, "check x", first_bytes)
    out = asyncio.run(refused())
    assert isinstance(out, Outcome) and out.status == "inconclusive"


@pytest.mark.needs_impl("openssl")
def test_scan_records_the_connections_checks_drive_themselves(
        server_cache: ServerFactory, run_cli: Callable[..., object], tmp_path) -> None:  # type: ignore[no-untyped-def]
    """scan --pcap-out/--msg record an active check's own connections (Scheduler.converse)
    like the audit's: one labelled TCP stream each, and in --msg the bytes read back as a
    trace (the check's ClientHello, the server's answer, the HeartbeatRequest's alert)."""
    srv = server_cache("openssl", proto="both")
    pcap, msg = tmp_path / "scan.pcapng", tmp_path / "scan.msg"
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "heartbleed", "--no-verify",
                  "--json", "--pcap-out", pcap, "--msg", msg)
    assert res.returncode == 0, res.stderr   # type: ignore[attr-defined]
    report = json.loads(res.stdout)   # type: ignore[attr-defined]
    assert report["connections"]["check heartbleed"] == 1
    back = run_cli("pcap", pcap, "--jsonl")
    rows = [json.loads(line) for line in back.stdout.splitlines()]   # type: ignore[attr-defined]
    assert len([r for r in rows if "client" in r]) == report["total_connections"], rows[-1]
    text = msg.read_text()
    section = text.split("check heartbleed, connection 1 ===", 1)[1].split("\n---\n", 1)[0]
    assert ">>> TLS 1.2, Handshake" in section and "ClientHello" in section
    assert "<<< TLS 1.2, Handshake" in section and "ServerHelloDone" in section
    assert "<<< TLS 1.2, Alert" in section
