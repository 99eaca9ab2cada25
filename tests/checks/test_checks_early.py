"""The heartbleed, ccs and ticketbleed checks (records sent between the server's first flight
and the key exchange; a session ticket with a short session ID), both sides each:
  - vulnerable: tests/checks/vulnerable_openssl101.py, which writes what OpenSSL 1.0.1f
    (Heartbleed) and 1.0.1g (CCS injection) wrote, and tests/checks/vulnerable_ticketbleed.py
    --f5, a tlslite-ng server padding the echoed session ID to 32 bytes as F5 BIG-IP did;
  - patched: openssl s_server (no heartbeat, refuses an early CCS, resumes from tickets),
    gnutls-serv --heartbeat (acknowledges heartbeat, refuses a heartbeat before the
    handshake ends), the same scripts without their flag (OpenSSL 1.0.1g/h: discards the
    over-long heartbeat, answers the well-formed one; tlslite-ng echoes the session ID);
  - not applicable: a TLS 1.3-only server, a server without tickets.
Also the engine's two ClientConfig fields these checks need (extra_extensions, session_id), and
the answers that establish nothing (judged without a server)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.servers import Server
from tlsprobe.engine.config import ClientConfig, build_client_hello
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.checks import ccs, heartbleed
from tlsprobe.probes.checks._early import Reply
from tlsprobe.probes.checks.base import CheckContext
from tlsprobe.probes.audit.scheduler import Scheduler, TargetRunner
from tlsprobe.wire.record import Record

ServerFactory = Callable[..., Server]
EARLY = ("heartbleed", "ccs", "ticketbleed")


def audit(port: int, *checks: str) -> tuple[AuditReport, dict[str, CheckResult]]:
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=("versions", *checks)),
                  Scheduler(retries=1, timeout=5.0))[0]
    assert r.error is None, r.error
    found = {c.name: c for c in r.check_results}
    assert list(found) == [n for n in EARLY if n in checks]
    for c in r.check_results:
        assert c.method == "active" and c.category == "vulnerability"
        phase = f"check {c.name}"
        assert c.connections == sum(n for k, n in r.connections.items()
                                    if k == phase or k.startswith(phase + " ")), r.connections
    return r, found


def test_config_sends_extra_extensions_and_session_id() -> None:
    config = ClientConfig(versions=(0x0303,), session_ticket=False, session_id=b"\x07",
                          extra_extensions=((15, b"\x01"), (35, b"ticket")))
    hello = build_client_hello(config).hello
    assert hello.legacy_session_id == b"\x07"
    exts = [(e.type, e.data) for e in hello.extensions]
    assert (15, b"\x01") in exts and (35, b"ticket") in exts
    assert [t for t, _ in exts].count(35) == 1 and exts[-1][0] == 21   # padding stays last
    plain = build_client_hello(ClientConfig(versions=(0x0303,))).hello
    assert plain.legacy_session_id == b"" and 15 not in [e.type for e in plain.extensions]


@pytest.mark.needs_impl("tlslite")
def test_openssl_101f_is_vulnerable_to_heartbleed_and_ccs(
        script_server: Callable[..., int], run_cli: Callable[..., Any]) -> None:
    port = script_server("vulnerable_openssl101.py", "--heartbleed", "--ccs")
    res = run_cli("scan", f"127.0.0.1:{port}", "--no-progress", "--no-verify", "--json",
                  "--checks", "heartbleed,ccs", "--timeout", "5")
    d = json.loads(res.stdout.splitlines()[0])
    found = {c["name"]: c for c in d["check_results"]}
    hb, ccs = found["heartbleed"], found["ccs"]
    assert hb["verdict"] == "vulnerable", hb
    assert "HeartbeatResponse of 16384 payload bytes (16403 bytes in all)" in hb["reason"]
    assert "heartbeat extension acknowledged in the ServerHello" in hb["evidence"]
    assert "received: 16403 bytes of heartbeat answer to the first request (2 records)" in \
        hb["evidence"]
    assert "1 connection and one read of at most 64 KiB" in hb["evidence"]
    assert hb["connections"] == 1 and d["connections"]["check heartbleed"] == 1
    assert ccs["verdict"] == "vulnerable", ccs
    assert "decryption_failed (21)" in ccs["reason"] and ccs["connections"] == 1
    assert "two ChangeCipherSpec records" in ccs["evidence"][0]
    codes = {f["code"]: f["severity"] for f in d["findings"]}
    assert codes["check.heartbleed"] == "critical" and codes["check.ccs"] == "high"


@pytest.mark.needs_impl("tlslite")
def test_ccs_bad_record_mac_with_an_aead_suite(script_server: Callable[..., int]) -> None:
    port = script_server("vulnerable_openssl101.py", "--ccs", "--suite", "aes128-gcm")
    _, found = audit(port, "ccs")
    assert found["ccs"].verdict is Verdict.vulnerable, found["ccs"]
    assert "bad_record_mac (20)" in found["ccs"].reason


@pytest.mark.needs_impl("tlslite")
def test_openssl_101h_discards_the_heartbeat_and_refuses_the_ccs(
        script_server: Callable[..., int]) -> None:
    port = script_server("vulnerable_openssl101.py")
    _, found = audit(port, "heartbleed", "ccs")
    hb, ccs = found["heartbleed"], found["ccs"]
    assert hb.verdict is Verdict.not_vulnerable, hb
    assert "answers the well-formed HeartbeatRequest and discards the over-long one" in \
        hb.reason and "heartbeat extension acknowledged" in hb.reason
    assert ccs.verdict is Verdict.not_vulnerable, ccs
    assert ccs.reason == "the server refuses an early ChangeCipherSpec with fatal alert " \
        "unexpected_message (10)"
    assert hb.code is ccs.code is None


@pytest.mark.needs_impl("openssl")
def test_openssl_is_not_vulnerable(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="both")
    _, found = audit(srv.port, *EARLY)
    hb, ccs, tb = found["heartbleed"], found["ccs"], found["ticketbleed"]
    assert hb.verdict is Verdict.not_vulnerable, hb
    assert "unexpected_message" in hb.reason and "heartbeat extension not acknowledged" in \
        hb.reason
    assert ccs.verdict is Verdict.not_vulnerable and "unexpected_message" in ccs.reason, ccs
    assert tb.verdict is Verdict.not_vulnerable, tb
    assert "echoes the 1-byte session ID as sent" in tb.reason and tb.connections == 2


@pytest.mark.needs_impl("gnutls")
def test_gnutls_with_heartbeat_is_not_vulnerable(server_cache: ServerFactory) -> None:
    srv = server_cache("gnutls", proto="tls1_2", extra=("--heartbeat",))
    _, found = audit(srv.port, *EARLY)
    hb, ccs, tb = found["heartbleed"], found["ccs"], found["ticketbleed"]
    assert hb.verdict is Verdict.not_vulnerable, hb
    assert "heartbeat extension acknowledged" in hb.reason and "unexpected_message" in \
        hb.reason
    assert ccs.verdict is Verdict.not_vulnerable, ccs
    # the lab's gnutls-serv runs with --noticket
    assert tb.verdict is Verdict.not_applicable and "issues no session ticket" in tb.reason
    assert tb.connections == 1


@pytest.mark.needs_impl("tlslite")
def test_tlslite_answers_heartbeats_and_is_not_vulnerable(server_cache: ServerFactory) -> None:
    srv = server_cache("tlslite")
    _, found = audit(srv.port, "heartbleed", "ccs")
    hb, ccs = found["heartbleed"], found["ccs"]
    assert hb.verdict is Verdict.not_vulnerable, hb
    assert hb.reason.startswith("it answers the well-formed HeartbeatRequest and discards "
                                "the over-long one"), hb
    assert "received: 1 heartbeat record" in hb.evidence
    assert ccs.verdict is Verdict.not_vulnerable, ccs


@pytest.mark.needs_impl("tlslite")
def test_ticketbleed_f5_and_tlslite(script_server: Callable[..., int]) -> None:
    port = script_server("vulnerable_ticketbleed.py", "--f5")
    r, found = audit(port, "ticketbleed")
    tb = found["ticketbleed"]
    assert tb.verdict is Verdict.vulnerable, tb
    assert tb.code == "check.ticketbleed" and tb.severity == "high"
    assert tb.connections == 3 and r.connections["check ticketbleed confirm"] == 1
    assert "32-byte session ID beginning with our byte" in tb.evidence[-1]
    assert "bytes after it were different" in tb.evidence[-1]
    port = script_server("vulnerable_ticketbleed.py")
    _, found = audit(port, "ticketbleed")
    assert found["ticketbleed"].verdict is Verdict.not_vulnerable, found["ticketbleed"]


@pytest.mark.needs_impl("openssl")
def test_not_applicable_without_tls12(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", proto="tls1_3")
    r, found = audit(srv.port, *EARLY)
    for c in found.values():
        assert c.verdict is Verdict.not_applicable, c
        assert "speaks none of TLS 1.0, 1.1 and 1.2" in c.reason and c.connections == 0


def _ctx(name: str) -> CheckContext:
    runner = TargetRunner(Target("127.0.0.1", 1), Scheduler(retries=0, timeout=1.0))
    return CheckContext(runner, None, name, "vulnerability")  # type: ignore[arg-type]


def _reply(*records: tuple[int, bytes], closed: bool = False, silent: bool = False) -> Reply:
    return Reply([Record(t, 0x0303, f) for t, f in records], closed=closed, silent=silent)


def test_ccs_answers_that_establish_nothing_are_inconclusive() -> None:
    ctx = _ctx("ccs")
    judge = ccs.judge
    assert judge(ctx, 0x0303, _reply(silent=True), True).verdict is Verdict.inconclusive
    other = judge(ctx, 0x0303, _reply((21, b"\x02\x2f")), True)        # illegal_parameter
    assert other.verdict is Verdict.inconclusive and "illegal_parameter" in other.reason
    closed = judge(ctx, 0x0303, _reply(closed=True), False)
    assert closed.verdict is Verdict.not_vulnerable and "closes the connection" in \
        closed.reason
    # bad_record_mac to a first ChangeCipherSpec alone is a refusal, not the vulnerability
    assert judge(ctx, 0x0303, _reply((21, b"\x02\x14")), False).verdict is \
        Verdict.not_vulnerable


def test_heartbeat_answers_that_are_no_over_read() -> None:
    ctx, nonce = _ctx("heartbleed"), b"n" * 16
    echo = bytes([2, 0, 1]) + b"\x00" + bytes(16)            # only the byte that was sent
    out = heartbleed.judge(ctx, 0x0303, True, _reply((24, echo), silent=True), nonce)
    assert out.verdict is Verdict.not_vulnerable and "with the 1 byte it carried" in out.reason
    short = bytes([2, 0x40, 0]) + bytes(100)                 # claims 16384, sends 100
    out = heartbleed.judge(ctx, 0x0303, True, _reply((24, short), closed=True), nonce)
    assert out.verdict is Verdict.inconclusive, out
    silent = heartbleed.judge(ctx, 0x0303, False, _reply(silent=True), nonce)
    assert silent.verdict is Verdict.not_vulnerable and "not acknowledged" in silent.reason
    # acknowledged, yet not even the well-formed request answered: nothing shown read
    silent = heartbleed.judge(ctx, 0x0303, True, _reply(silent=True), nonce)
    assert silent.verdict is Verdict.inconclusive, silent
    assert "answered neither HeartbeatRequest" in silent.reason


@pytest.mark.parametrize("after", ["alert-text", "alert-pause-text"])
def test_an_alert_then_plain_text_is_the_alert_however_the_bytes_arrive(
        script_server: Callable[..., int], run_cli: Callable[..., Any], after: str) -> None:
    """vsftpd and MariaDB answer the HeartbeatRequest (or any record their TLS library
    refuses) with a fatal alert, then a plain error line of their protocol. The reading ends
    at the alert whether the line came in the same segment or later: the verdict quotes the
    alert either way (it said "it leaves TLS ... non-TLS data" when both came together, and
    "refuses ... with fatal alert" when they did not, so the verdict followed the timing)."""
    port = script_server("scripted_tls_server.py", "--mode", "plain", "--after", after)
    res = run_cli("scan", f"127.0.0.1:{port}", "--no-progress", "--no-verify", "--json",
                  "--checks", "heartbleed,ccs", "--timeout", "5")
    assert res.returncode in (0, 1) and res.stderr == "", (res.returncode, res.stderr)
    found = {c["name"]: c for c in json.loads(res.stdout.splitlines()[0])["check_results"]}
    beat = found["heartbleed"]
    assert beat["verdict"] == "not vulnerable", beat
    assert beat["reason"] == ("it refuses the HeartbeatRequest with fatal alert "
                              "unexpected_message (10); heartbeat extension not "
                              "acknowledged"), beat
    assert "non-TLS" not in found["ccs"]["reason"], found["ccs"]
    assert "unexpected_message" in found["ccs"]["reason"], found["ccs"]


HAND_DRIVEN = ("heartbleed", "ccs", "robot", "client_renegotiation", "ticketbleed",
               "resumption")


@pytest.mark.parametrize("after,named,engine", [
    ("http", "an HTTP response ('HTTP/1.1 400 Bad Request\\r\\n')",
     "unknown content type 72"),
    ("overlong", "record length 18433 over 18432", "record length 18433 over 18432")])
def test_odd_bytes_after_the_flight_are_the_checks_evidence(
        script_server: Callable[..., int], run_cli: Callable[..., Any], after: str,
        named: str, engine: str) -> None:
    """A server that answers what a check sends after its first flight with a plaintext
    HTTP reply or a record over the length limit (tests/checks/scripted_tls_server.py
    --after): every hand-driven check gives its own result naming those bytes (the checks
    that read the records themselves: heartbleed, ccs, robot; the others through the
    engine's record layer); the scan is no internal error (exit 70 and "internal error:
    DecodeError" for heartbleed and ccs before), and nothing reaches stderr."""
    port = script_server("scripted_tls_server.py", "--mode", "plain", "--after", after)
    res = run_cli("scan", f"127.0.0.1:{port}", "--no-progress", "--no-verify", "--json",
                  "--checks", ",".join(HAND_DRIVEN), "--timeout", "5")
    assert res.returncode != 70 and res.stderr == "", (res.returncode, res.stderr)
    d = json.loads(res.stdout.splitlines()[0])
    assert d.get("error") is None, d.get("error")
    found = {c["name"]: c for c in d["check_results"]}
    assert set(found) == set(HAND_DRIVEN)
    # heartbleed: plain bytes instead of any record are the server leaving TLS, no
    # HeartbeatResponse (as a close is): not vulnerable, quoting them; a record over the
    # length limit is TLS that makes no sense: inconclusive
    left = after == "http"
    for name, c in found.items():
        assert "internal error" not in c["reason"], c
        assert c["verdict"] == ("not vulnerable" if left and name == "heartbleed" else
                                "inconclusive"), c
        assert (named if name in ("heartbleed", "ccs", "robot") else engine) in c["reason"], c
    assert found["heartbleed"]["reason"].startswith(
        "it leaves TLS on the HeartbeatRequest (server sent " if left else
        "after the HeartbeatRequests: ")
    assert found["ccs"]["reason"].startswith("after the ChangeCipherSpec: ")
    assert found["robot"]["reason"].startswith("the valid probe got no TLS answer: ")
