"""The handshake-level checks of issue #14 (secure and client-initiated renegotiation,
compression, the TLS 1.3 downgrade sentinel, ROBOT, SSLv2), each against both sides:

- real servers for the patched side and every weak setting they still have: openssl
  s_server (RFC 5746, no compression in this build, the sentinel, refuses client
  renegotiation unless -client_renegotiation, no padding oracle with RSA key exchange),
  gnutls-serv (accepts client-initiated renegotiation; with %DISABLE_SAFE_RENEGOTIATION no
  RFC 5746 either), nginx (refuses it), an openssl TLS 1.3-only server (not applicable);
- scripted servers for the flaws no installable server has, each documented with the CVE
  and the bytes it reproduces: tests/checks/scripted_tls_server.py (DEFLATE chosen, no
  renegotiation_info, an SSLv2 SERVER-HELLO) and tests/checks/tlslite_quirks_server.py (no
  downgrade sentinel; strong and weak Bleichenbacher oracles).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.faultproxy import RESET, FaultProxy, nth_matching
from tests.helpers.servers import Server, accepting
from tlsprobe.commands.scan import parse_checks
from tlsprobe.engine import extcheck
from tlsprobe.engine.config import ClientConfig, build_client_hello
from tlsprobe.engine.verdict import Refusal
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.checks import client_renegotiation, robot, sslv2
from tlsprobe.probes.checks.client_renegotiation import MAX_RENEGOTIATIONS
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.hello import ServerHello

ServerFactory = Callable[..., Server]
ScriptServer = Callable[..., int]
LEGACY = ("renegotiation", "client_renegotiation", "compression", "downgrade_sentinel",
          "robot", "sslv2")


@pytest.fixture
def start(script_server: ScriptServer) -> ScriptServer:
    """`script_server`, then a TCP connection the server accepts (30 s at most): in runs on
    a machine shared with other suites a first connection right after the start was now
    and then refused although the fixture had seen the port listening."""
    def started(script: str, *args: str) -> int:
        return accepting(script_server(script, *args))
    return started


def run_checks(port: int, names: str) -> dict[str, CheckResult]:
    """The named checks' results for the server on `port` (one audit), by name; each
    result's connection count is the scan's count for its phase."""
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks(names)),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    for c in r.check_results:
        counted = sum(n for phase, n in r.connections.items()
                      if phase == f"check {c.name}" or phase.startswith(f"check {c.name} "))
        assert counted == c.connections, (c, r.connections)
        assert (c.code is not None) == (c.verdict in (Verdict.vulnerable,
                                                      Verdict.not_supported)), c
    return {c.name: c for c in r.check_results}


@pytest.mark.needs_impl("openssl")
def test_patched_openssl_server(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="all")
    got = run_checks(srv.port, ",".join(LEGACY))
    assert {n: c.verdict for n, c in got.items()} == {
        "renegotiation": Verdict.supported, "client_renegotiation": Verdict.not_vulnerable,
        "compression": Verdict.not_vulnerable, "downgrade_sentinel": Verdict.supported,
        "robot": Verdict.not_vulnerable, "sslv2": Verdict.not_vulnerable}, got
    assert "no_renegotiation (100)" in got["client_renegotiation"].reason
    assert got["client_renegotiation"].connections == 1
    assert "chose null compression" in got["compression"].reason
    assert "TLS 1.2, TLS 1.1" in got["downgrade_sentinel"].reason
    assert any("DOWNGRD\\x01" in e for e in got["downgrade_sentinel"].evidence)
    assert any("DOWNGRD\\x00" in e for e in got["downgrade_sentinel"].evidence)
    assert got["robot"].connections == 10 and "alike" in got["robot"].reason
    assert "it answered with a TLS alert" in got["sslv2"].reason
    assert any("TLS_RSA_WITH_AES_128_GCM_SHA256" in e for e in got["robot"].evidence)


@pytest.mark.needs_impl("openssl", "gnutls")
def test_client_renegotiation_accepted(server_cache: ServerFactory,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    srv = server_cache("gnutls", proto="both")
    got = run_checks(srv.port, "client_renegotiation,renegotiation,downgrade_sentinel")
    c = got["client_renegotiation"]
    assert c.verdict is Verdict.vulnerable, c
    assert f"accepted {MAX_RENEGOTIATIONS} client-initiated" in c.reason, c
    assert c.connections == 1 and c.severity == "medium"
    assert got["renegotiation"].verdict is got["downgrade_sentinel"].verdict is \
        Verdict.supported, got
    # s_server -www sleeps a second in its read loop per renegotiation: ask for 2 here
    monkeypatch.setattr(client_renegotiation, "MAX_RENEGOTIATIONS", 2)
    srv = server_cache("openssl", proto="tls1_2", extra=("-client_renegotiation",))
    got = run_checks(srv.port, "client_renegotiation,downgrade_sentinel")
    c = got["client_renegotiation"]
    assert c.verdict is Verdict.vulnerable and "accepted 2 client-initiated" in c.reason, c
    assert "then tlsprobe stopped after 2" in c.reason
    assert got["downgrade_sentinel"].verdict is Verdict.not_applicable   # no TLS 1.3


@pytest.mark.needs_impl("gnutls")
def test_gnutls_without_rfc5746(server_cache: ServerFactory,
                                run_cli: Callable[..., Any]) -> None:
    srv = server_cache("gnutls", proto="both", ciphers="NORMAL:%DISABLE_SAFE_RENEGOTIATION")
    got = run_checks(srv.port, "renegotiation,client_renegotiation")
    c = got["renegotiation"]
    assert c.verdict is Verdict.not_supported and c.code == "check.renegotiation", c
    assert c.connections == 2 and "CVE-2009-3555" in c.reason
    c = got["client_renegotiation"]           # renegotiated the legacy way, unbound
    assert c.verdict is Verdict.vulnerable, c
    assert f"accepted {MAX_RENEGOTIATIONS}" in c.reason and "legacy (no RFC 5746)" in \
        c.evidence[0]
    # the scan prints the hygiene section and the finding
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--no-progress", "--no-verify",
                  "--checks", "renegotiation", "--timeout", "5")
    assert "Hygiene checks (2 connections of their own)" in res.stdout, res.stdout
    line = next(x for x in res.stdout.splitlines() if x.startswith("secure renegotiation"))
    assert "not supported" in line
    assert "check.renegotiation" in res.stdout


@pytest.mark.needs_impl("openssl")
def test_a_server_that_wants_a_client_certificate_is_inconclusive(server_cache: ServerFactory
                                                                   ) -> None:
    srv = server_cache("openssl", proto="tls1_2", extra=("-Verify", "1"))
    got = run_checks(srv.port, "robot,client_renegotiation")
    assert got["robot"].verdict is got["client_renegotiation"].verdict is \
        Verdict.inconclusive, got
    assert "requests a client certificate and requires one" in got["robot"].reason
    assert "empty Certificate failed" in got["robot"].reason
    assert got["robot"].connections == 11           # ten probes, one complete handshake
    assert "requires a client certificate" in got["client_renegotiation"].reason


@pytest.mark.needs_impl("openssl")
def test_tls13_tickets_are_not_denied_when_the_server_requires_a_client_certificate(
        server_cache: ServerFactory) -> None:
    """TLS 1.3 with -Verify: the server refuses the client's empty Certificate with
    certificate_required after the client's Finished, so it never gets to send a ticket.
    resumption and early_data must say the handshake failed, not "none issued" / "no ticket
    allows early data"."""
    srv = server_cache("openssl", proto="tls1_3", extra=("-Verify", "1"))
    got = run_checks(srv.port, "resumption,early_data")
    for name in ("resumption", "early_data"):
        c = got[name]
        assert c.verdict is Verdict.inconclusive, c
        assert "certificate_required" in c.reason, c
    assert "none issued" not in got["resumption"].reason, got["resumption"]


@pytest.mark.needs_impl("gnutls")
def test_an_optional_client_certificate_request_is_answered(server_cache: ServerFactory
                                                            ) -> None:
    """gnutls-serv asks every client for a certificate (optional) by default: each check
    that drives its own connection answers the CertificateRequest with an empty Certificate
    and goes on to a verdict (ROBOT stopped there, inconclusive, before)."""
    srv = server_cache("gnutls", proto="tls1_2", ciphers="NORMAL:+RSA")
    got = run_checks(srv.port, "robot,client_renegotiation,heartbleed,ccs,resumption")
    c = got["robot"]
    assert c.verdict is Verdict.not_vulnerable, c
    assert "alike (alert bad_record_mac (20))" in c.reason
    assert "an empty Certificate (the server sent a CertificateRequest)" in c.evidence[0]
    assert "the client certificate is optional" in c.evidence[-1]
    assert c.connections == 11
    assert got["client_renegotiation"].verdict is Verdict.vulnerable
    assert got["heartbleed"].verdict is got["ccs"].verdict is Verdict.not_vulnerable, got
    assert got["resumption"].verdict is Verdict.supported


@pytest.mark.needs_impl("openssl")
def test_robot_not_applicable_without_rsa_key_exchange(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="tls1_2", ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    c = run_checks(srv.port, "robot")["robot"]
    assert c.verdict is Verdict.not_applicable and c.connections == 0, c
    assert "no RSA key exchange suite is accepted" in c.reason


@pytest.mark.needs_impl("nginx")
def test_nginx_refuses_client_renegotiation(server_cache: ServerFactory) -> None:
    srv = server_cache("nginx", proto="both")
    c = run_checks(srv.port, "client_renegotiation")["client_renegotiation"]
    assert c.verdict is Verdict.not_vulnerable, c


@pytest.mark.needs_impl("openssl")
def test_tls13_only_server_is_not_applicable(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="tls1_3")
    got = run_checks(srv.port, ",".join(LEGACY))
    assert {n: c.verdict for n, c in got.items() if n != "sslv2"} == \
        {n: Verdict.not_applicable for n in LEGACY if n != "sslv2"}, got
    assert got["sslv2"].verdict is Verdict.not_vulnerable
    assert all(c.connections == 0 for n, c in got.items() if n != "sslv2")


def test_scripted_pre_rfc5746_crime_and_drown_servers(start: ScriptServer) -> None:
    got = run_checks(start("scripted_tls_server.py", "--mode", "compression"),
                     "compression,renegotiation,sslv2")
    assert got["compression"].verdict is Verdict.vulnerable, got
    assert got["compression"].code == "check.compression"
    assert "compression method 1" in got["compression"].evidence[1]
    assert got["renegotiation"].verdict is Verdict.supported
    assert got["sslv2"].verdict is Verdict.not_vulnerable
    got = run_checks(start("scripted_tls_server.py", "--mode", "no-reneg-info"),
                     "renegotiation,compression")
    c = got["renegotiation"]
    assert c.verdict is Verdict.not_supported and c.code == "check.renegotiation", c
    assert c.connections == 2 and "CVE-2009-3555" in c.reason
    assert got["compression"].verdict is Verdict.not_vulnerable
    got = run_checks(start("scripted_tls_server.py", "--mode", "sslv2"), "sslv2")
    c = got["sslv2"]
    assert c.verdict is Verdict.vulnerable and c.severity == "high", c
    assert "SSL_CK_DES_192_EDE3_CBC_WITH_MD5, SSL_CK_RC4_128_WITH_MD5" in c.reason


@pytest.mark.needs_impl("tlslite")
def test_tlslite_without_downgrade_sentinel(start: ScriptServer) -> None:
    got = run_checks(start("tlslite_quirks_server.py", "--no-downgrade-sentinel"),
                     "downgrade_sentinel")
    c = got["downgrade_sentinel"]
    assert c.verdict is Verdict.not_supported and c.code == "check.downgrade_sentinel", c
    assert "TLS 1.2 (expected 'DOWNGRD\\x01')" in c.reason
    # a TLS 1.3 server breaks RFC 8446 4.1.3's MUST: low, where a TLS 1.2 server's SHOULD is info
    assert c.severity == "low" and "a TLS 1.3 server MUST set it" in c.reason


@pytest.mark.needs_impl("tlslite")
@pytest.mark.parametrize("oracle", ["strong", "weak"])
def test_robot_oracles(start: ScriptServer, oracle: str) -> None:
    c = run_checks(start("tlslite_quirks_server.py", "--robot", oracle),
                   "robot")["robot"]
    assert c.verdict is Verdict.vulnerable, c
    assert c.reason.startswith(f"{oracle} oracle"), c
    assert c.severity == ("high" if oracle == "strong" else "medium")
    assert c.connections == 10
    if oracle == "strong":
        assert "wrong first two bytes: alert illegal_parameter (47)" in c.reason
    else:
        assert "wrong version: alert decode_error (50)" in c.reason


def test_renegotiation_hello_and_its_echo() -> None:
    vd = bytes(range(12))
    hello = build_client_hello(ClientConfig(versions=(0x0303,), renegotiating=vd)).hello
    assert 0x00FF not in hello.cipher_suites
    sent = hello.extension(0xFF01)
    assert sent is not None and sent.data == bytes([12]) + vd
    initial = build_client_hello(ClientConfig(versions=(0x0303,))).hello
    assert 0x00FF in initial.cipher_suites

    def echo(data: bytes) -> None:
        sh = ServerHello(0x0303, bytes(32), b"", 0x002F, 0,
                         [ext.renegotiation_info(data)])
        extcheck.check_extensions(hello, (), extcheck.SH12, sh.extensions)
    echo(vd + bytes(12))                           # client's then the server's verify_data
    for wrong in (b"", bytes(12) + vd, vd):
        with pytest.raises(Refusal, match="RFC 5746 3.5"):
            echo(wrong)


@pytest.mark.needs_impl("openssl")
def test_robot_answers_that_change_between_rounds_are_noise(
        server_cache: ServerFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    async def flaky(kind: str, *args: object) -> robot.Answer:
        calls.append(kind)   # the seventh probe (round 2, its second kind) is answered apart
        return robot.Answer("connection closed" if len(calls) == 7 else "alert x")
    monkeypatch.setattr(robot, "_probe", flaky)
    srv = server_cache("openssl", proto="tls1_2")
    c = run_checks(srv.port, "robot")["robot"]
    assert c.verdict is Verdict.inconclusive and "changed between rounds" in c.reason, c
    assert len(calls) == c.connections == 10


def test_sslv2_server_hello_reader() -> None:
    cert, specs = b"C" * 5, (0x010080).to_bytes(3, "big") + (0x0700C0).to_bytes(3, "big")
    msg = bytes([4, 0, 1, 0, 2, 0, 5, 0, 6, 0, 2]) + cert + specs + b"id"
    assert sslv2.cipher_specs(msg) == [0x010080, 0x0700C0]
    for cut in range(len(msg)):          # a cut message is never read as a SERVER-HELLO
        assert sslv2.cipher_specs(msg[:cut]) is None
    assert sslv2.cipher_specs(bytes([4, 0, 1, 0, 2, 0, 0, 0, 4, 0, 0]) + b"\0" * 4) is None
    hello = sslv2.client_hello(bytes(16))
    assert hello[0] & 0x80 and ((hello[0] & 0x7F) << 8 | hello[1]) == len(hello) - 2
    assert hello[2] == 1 and len(hello) == 2 + 9 + 3 * 7 + 16


def test_robot_does_not_conclude_from_an_incomplete_suite_enumeration() -> None:
    """No RSA suite found in a TLS 1.2 enumeration that stopped early is no answer; found in
    a complete one it is "not applicable". Read off the audit alone: no connection."""
    from types import SimpleNamespace
    from tlsprobe.model.audit import AuditReport, SuiteAudit, VersionSupport
    from tlsprobe.model.probe import Cipher, Codepoint
    from tlsprobe.probes.checks.base import CheckContext

    def verdict(complete: bool) -> CheckResult:
        tls12 = Codepoint.version(0x0303)
        report = AuditReport("x", 443, versions=(VersionSupport(tls12, "supported"),),
                             suites=(SuiteAudit(tls12, (Cipher.of(0xC02F),),
                                                complete=complete),))
        runner = SimpleNamespace(target=SimpleNamespace(display="x:443"),
                                 scheduler=SimpleNamespace(connections={}))
        ctx = CheckContext(runner, report, "robot", "vulnerability")  # type: ignore[arg-type]
        return asyncio.run(robot.run(ctx))
    c = verdict(False)
    assert c.verdict is Verdict.inconclusive and "incomplete" in c.reason, c
    assert verdict(True).verdict is Verdict.not_applicable


@pytest.mark.needs_impl("openssl")
def test_an_unanswered_version_check_is_no_ground_for_not_applicable(
        server_cache: ServerFactory) -> None:
    """The TLS 1.2 version check reset (retries=0), its full offer and its minimal hello:
    that TLS 1.2 is not spoken was not established, so the checks that need TLS 1.0-1.2 say
    inconclusive, not "not applicable"."""
    srv = server_cache("openssl", proto="both")
    proxy = FaultProxy([(srv.host, srv.port)], nth_matching(
        lambda h: not h.supported_versions and h.legacy_version == 0x0303, RESET,
        which=(1, 2)))
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)],
                      AuditOptions(checks=parse_checks(",".join(LEGACY[:5]))),
                      Scheduler(retries=0, timeout=5.0))[0]
    finally:
        proxy.close()
    assert proxy.faults()
    got = {c.name: c for c in r.check_results}
    for name in LEGACY[:5]:
        assert got[name].verdict is Verdict.inconclusive, got[name]
        assert "could not establish whether TLS 1.2 is spoken" in got[name].reason


@pytest.mark.needs_impl("openssl", "gnutls")
def test_a_tls12_server_negotiating_tls11_is_asked_for_its_sentinel(
        server_cache: ServerFactory, start: ScriptServer) -> None:
    """RFC 8446 4.1.3: "If negotiating TLS 1.1 or below, TLS 1.3 servers MUST, and TLS 1.2
    servers SHOULD" end ServerHello.random with DOWNGRD\\x00. The check used to say "not
    applicable" on a TLS 1.2 server; it sends a TLS 1.1 hello and reads the random: OpenSSL 3
    sets the sentinel (supported), GnuTLS only when TLS 1.3 is enabled, and the scripted
    server never (not supported, at the SHOULD's severity: info)."""
    srv = server_cache("openssl", proto="tls1_1-tls1_2")
    c = run_checks(srv.port, "downgrade_sentinel")["downgrade_sentinel"]
    assert c.verdict is Verdict.supported, c
    assert "sentinel for TLS 1.1 (a TLS 1.2 server: SHOULD)" in c.reason
    assert c.evidence == ("sent: a TLS 1.1 hello (max TLS 1.1); received: ServerHello TLS 1.1, "
                          "random ends 'DOWNGRD\\x00'",) and c.connections == 1
    for port in (server_cache("gnutls", proto="tls1_1-tls1_2").port,
                 start("scripted_tls_server.py", "--mode", "plain")):
        c = run_checks(port, "downgrade_sentinel")["downgrade_sentinel"]
        assert c.verdict is Verdict.not_supported, c
        assert c.code == "check.downgrade_sentinel" and c.severity == "info", c
        assert "TLS 1.1 (expected 'DOWNGRD\\x00') (RFC 8446 4.1.3: a TLS 1.2 server SHOULD " \
            "set it)" in c.reason


def test_renegotiation_tunnel_names_bytes_that_are_not_records() -> None:
    """What the server sends in answer to a renegotiation hello goes through the Tunnel's
    record framing: an HTTP reply or a record over the length limit is named (escaped) as
    the series' end, so the check says inconclusive with it; it was taken as the start of
    a record, waited for, and dropped as "a cut record" at the close: a refusal ("not
    vulnerable") made of bytes that are not TLS."""
    from tlsprobe.wire.buffer import DecodeError
    with pytest.raises(DecodeError, match=r"an HTTP response \('HTTP/1.1 400 Bad"):
        client_renegotiation._records(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    with pytest.raises(DecodeError, match="not TLS records"):
        client_renegotiation._records(b"\x16\x03\x03\x48\x01" + bytes(10))
    whole = b"\x15\x03\x03\x00\x02\x01\x00"
    assert client_renegotiation._records(whole + b"\x16\x03") == \
        ([(21, 0x0303, b"\x01\x00")], b"\x16\x03")

