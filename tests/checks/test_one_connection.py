"""Checks against a server that serves one connection at a time (issue 35, live side).

`openssl s_server -www` accepts one connection and serves it until it closes; the others
wait in the listen backlog. A check that holds its connection longer than its evidence
needs, or leaves the server busy after it, makes every connection queued behind it wait:
  - client_renegotiation: once s_server refused the renegotiation (the warning alert
    no_renegotiation, the check's answer) its HTTP loop sleeps 1 s, because SSL_read asked
    to retry. The check has its answer at once; the audit runs it after every other
    connection (probes/checks/active.py LAST), so that no connection waits for that
    sleep (sslv2, renegotiation and downgrade_sentinel, queued behind it, each waited 1 s
    for their first byte);
  - split_segment: the two halves of its hello went 0.2 s apart; the second now goes once
    the server's TCP acknowledged the first, at least GAP (50 ms) after it (grease and
    unknown_version, queued behind it, waited those 0.2 s);
  - ccs: a server that takes the first early ChangeCipherSpec silently (the vulnerable
    OpenSSL) was given 1 s to refuse it; now three times the hello's round trip on the same
    connection, at least 0.25 s.
Every connection is recorded (net/recording.py, as scan --pcap-out does) with its times, so
the tests bound each one by a deadline and check each verdict. The `_Shaped` tests pin the
gap rule without a network; tests/net/test_delivered.py tests the acknowledgement itself.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest

from tests.helpers.servers import Server
from tlsprobe.commands.scan import parse_checks
from tlsprobe.model.check_catalog import ACTIVE
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.recording import Recording, RecordingConnector, Tape
from tlsprobe.net.tcp import Target
from tlsprobe.net.tcp_async import TcpConnector
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.probes.checks import _tolerance, ccs
from tlsprobe.probes.checks._tolerance import GAP, PAUSE, _Shaped

ServerFactory = Callable[..., Server]
ScriptServer = Callable[..., int]
CHECKS = {"client_renegotiation": Verdict.not_vulnerable, "sslv2": Verdict.not_vulnerable,
          "renegotiation": Verdict.supported, "downgrade_sentinel": Verdict.supported,
          "split_segment": Verdict.tolerated, "grease": Verdict.tolerated,
          "unknown_version": Verdict.tolerated}
#: how long a connection may wait for the server's first byte after its first send, and a
#: check's connection may last from connect to close: a handshake of s_server on loopback
#: takes milliseconds, the waits fixed here 1 s
FIRST_BYTE = HOLD = 0.5


def audit(port: int, checks: tuple[str, ...] = tuple(CHECKS)
          ) -> tuple[dict[str, CheckResult], list[Tape]]:
    """The results of `checks` for the server on `port` (the default --per-host 3, a read
    timeout of 5 s) and every connection the audit made, recorded."""
    tapes: list[Tape] = []
    recording = Recording(tapes.append)
    scheduler = Scheduler(retries=1, timeout=5.0, recording=recording,
                          connector=RecordingConnector(TcpConnector(5.0), recording))
    report = run_audit([Target("127.0.0.1", port)],
                       AuditOptions(checks=parse_checks(",".join(checks))), scheduler)[0]
    assert report.error is None, report.error
    return {c.name: c for c in report.check_results}, tapes


def first_answer(tape: Tape) -> float:
    """Seconds from the client's first send to the server's first byte."""
    sent = next(s.time for s in tape.segments if s.from_client)
    got = next((s.time for s in tape.segments if not s.from_client), None)
    assert got is not None, (tape.label, tape.segments)
    return got - sent


@pytest.mark.needs_impl("openssl")
def test_no_check_keeps_a_one_connection_server_waiting(tls_server: ServerFactory) -> None:
    """The default scan (the audit and every check) of s_server -www."""
    srv = tls_server("openssl", proto="both")     # s_server -www: one connection at a time
    results, tapes = audit(srv.port, ("audit", "all"))
    assert {n: results[n].verdict for n in CHECKS} == CHECKS, results
    # the shorter waits left no active check's answer open
    assert not [c for c in results.values() if c.name in ACTIVE and
                c.verdict is Verdict.inconclusive], results
    # each check's connections, each from connect to close (queued ones included)
    held = [(t.label, round(t.ended - t.started, 3)) for t in tapes
            if t.phase.startswith("check ") and t.ended - t.started >= HOLD]
    assert not held, held
    # client_renegotiation, after which s_server sleeps 1 s, is the audit's last connection
    late = [t for t in tapes if t.phase.split()[1:2] == ["client_renegotiation"]]
    others = [t for t in tapes if t not in late]
    assert len(late) == 1 and others, [t.label for t in tapes]
    assert max(t.ended for t in others) <= late[0].started, \
        [(t.label, t.started, t.ended) for t in tapes]
    # so no connection waited for that sleep, nor for split_segment's pause
    slow = [(t.label, round(first_answer(t), 3)) for t in tapes
            if first_answer(t) >= FIRST_BYTE]
    assert not slow, slow
    # the split hello went as two sends: at least GAP apart, less than the old PAUSE
    split = next(t for t in tapes if t.phase == "check split_segment")
    sends = [s for s in split.segments if s.from_client][:2]
    gap = sends[1].time - sends[0].time
    assert GAP * 0.9 <= gap < PAUSE, gap


class _Acked(AsyncTransport):
    """A transport whose sends are acknowledged as `acked` says (None: cannot tell)."""

    def __init__(self, acked: bool | None) -> None:
        self.acked = acked
        self.sent: list[bytes] = []
        self.asked: list[float] = []

    @property
    def peer(self) -> tuple[str, int]:
        return ("127.0.0.1", 443)

    async def send(self, data: bytes) -> None:
        self.sent.append(data)

    async def receive(self, deadline: float) -> bytes:
        return b""

    async def close(self) -> None:
        return None

    async def delivered(self, limit: float) -> bool | None:
        self.asked.append(limit)
        return self.acked


@pytest.mark.parametrize(("acked", "wait"), [(True, GAP), (False, PAUSE), (None, PAUSE)])
def test_the_second_half_waits_for_the_first_to_be_acknowledged(
        monkeypatch: pytest.MonkeyPatch, acked: bool | None, wait: float) -> None:
    """Acknowledged: GAP after the first send; not acknowledged within PAUSE, or a channel
    that cannot tell: PAUSE, as before."""
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
    monkeypatch.setattr(_tolerance.asyncio, "sleep", sleep)
    inner = _Acked(acked)
    shaped = _Shaped(inner, lambda data: [data[:3], data[3:]])
    asyncio.run(shaped.send(b"abcdef"))
    asyncio.run(shaped.send(b"later"))      # only the first send is shaped
    assert inner.sent == [b"abc", b"def", b"later"]
    assert shaped.sends == [3, 3, 5]
    assert len(inner.asked) == 1 and 0 < inner.asked[0] <= PAUSE
    assert len(slept) == 1 and wait - 0.01 < slept[0] <= wait, slept


@pytest.mark.needs_impl("tlslite")
def test_ccs_takes_silence_after_as_long_as_the_hello_took(script_server: ScriptServer
                                                           ) -> None:
    port = script_server("vulnerable_openssl101.py", "--ccs")    # OpenSSL 1.0.1f's answers
    results, tapes = audit(port, ("ccs",))
    assert results["ccs"].verdict is Verdict.vulnerable, results["ccs"]
    (tape,) = [t for t in tapes if t.phase == "check ccs"]
    sent = [s for s in tape.segments if s.from_client]
    silence = sent[-1].time - sent[-2].time     # between the two ChangeCipherSpec records
    assert sent[-1].data == sent[-2].data == b"\x14\x03\x03\x00\x01\x01", sent
    said = re.search(r"no answer to the first for ([0-9.]+) s", results["ccs"].evidence[0])
    assert said is not None, results["ccs"].evidence
    waited = float(said.group(1))
    # three times the hello's round trip (milliseconds on loopback), not the old 1 s
    assert ccs.SILENCE_MIN <= waited < ccs.SILENCE, waited
    assert waited - 0.01 <= silence < ccs.SILENCE, (silence, waited)

def test_the_ccs_silence_follows_the_hello() -> None:
    assert ccs.silence(0.001) == ccs.SILENCE_MIN == 0.25
    assert ccs.silence(0.2) == pytest.approx(0.6)
    assert ccs.silence(0.5) == ccs.SILENCE == 1.0
