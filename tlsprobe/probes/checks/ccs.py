"""CCS injection (CVE-2014-0224): does the server take a ChangeCipherSpec before the key
exchange?

OpenSSL before 0.9.8za, 1.0.0m and 1.0.1h accepted a ChangeCipherSpec right after its
ServerHelloDone and switched its read side to keys derived from an empty master secret, which
lets a man in the middle take over the connection. The check follows the published method
(testssl.sh run_ccs_injection and nmap ssl-ccs-injection, after Ramon de C Valle's
ccsinjection.c), in the highest of TLS 1.2, 1.1 and 1.0 the server speaks, on one
connection: the engine's hello up to the ServerHelloDone, then a ChangeCipherSpec record;
  - answered with an alert (unexpected_message as patched OpenSSL sends, or another) or a
    close: the early ChangeCipherSpec is refused: not vulnerable;
  - no answer within three times the hello's round trip on that connection (the time from
    the ClientHello to the ServerHelloDone, a server's slowest answer there; at least
    SILENCE_MIN, at most SILENCE seconds; a server that refuses answers at once, and 1 s
    held a server that serves one connection at a time): accepted silently, as the
    vulnerable versions do; a second ChangeCipherSpec follows, which such a server reads under its new keys and
    cannot decrypt: alert decryption_failed (CBC suites) or bad_record_mac: vulnerable;
    unexpected_message or handshake_failure, or a close: refused after all, not vulnerable;
    another alert or no answer at all: inconclusive (testssl.sh calls the first "likely
    vulnerable" and the second "not vulnerable"; neither is established).
Records after the first are read in order, so a late answer to the first ChangeCipherSpec
is still taken as its answer.
"""

from __future__ import annotations

import time

from tlsprobe import registry
from tlsprobe.model.check_details import CcsDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.checks import _early
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.wire.record import Record

SILENCE = 1.0             # seconds without an answer to the first ChangeCipherSpec, at most
SILENCE_MIN = 0.25        # ... at least
HELLO_ROUNDS = 3          # ... else this many times the hello's round trip
UNEXPECTED_MESSAGE, BAD_RECORD_MAC, DECRYPTION_FAILED, HANDSHAKE_FAILURE = 10, 20, 21, 40
REFUSALS = (UNEXPECTED_MESSAGE, HANDSHAKE_FAILURE)
KEYS_CHANGED = (DECRYPTION_FAILED, BAD_RECORD_MAC)


def silence(hello_s: float) -> float:
    """How long a silence after the first ChangeCipherSpec counts as taking it, for a
    hello answered in `hello_s` seconds on the same connection."""
    return min(SILENCE, max(SILENCE_MIN, HELLO_ROUNDS * hello_s))


async def talk(transport: AsyncTransport, deadline: float, ctx: CheckContext, version: int
               ) -> tuple[int, _early.Reply, bool, float] | str:
    """(the version spoken, the reply, whether a second ChangeCipherSpec was sent, the
    silence that would send it) or why the flight was not reached."""
    config, _ = ctx.version_hello(version)
    started = time.monotonic()
    hs, why = await _early.drive(transport, deadline, config)
    if why or hs.messages.server_hello is None:
        return why or "no ServerHello"
    wait = silence(time.monotonic() - started)
    spoken = hs.messages.server_hello.selected_version
    ccs = Record(_early.CCS, spoken, b"\x01").to_bytes()
    reply = _early.Reply()
    # a send that fails (the server closed) still leaves its answer to be read
    sent = await _early.send(transport, ccs)
    await _early.read_reply(transport, _early.wait_until(deadline, wait) if sent
                            else deadline, reply=reply)
    if not reply.silent:
        return spoken, reply, False, wait
    reply.silent = False
    await _early.send(transport, ccs)
    await _early.read_reply(transport, deadline, reply=reply)
    return spoken, reply, True, wait


def judge(ctx: CheckContext, version: int, reply: _early.Reply, second: bool,
          waited: float = SILENCE) -> CheckResult:
    """The verdict on `reply`; `second`: a second ChangeCipherSpec was sent, after
    `waited` seconds of silence after the first."""
    name = registry.version_name(version)
    sent = "two ChangeCipherSpec records, the second after no answer to the first for " \
        f"{waited:.2f} s" if second else "one ChangeCipherSpec record"
    evidence = (f"sent: a {name} ClientHello; after the ServerHelloDone, {sent}",
                f"received: {reply.describe()}", "1 connection")
    alert = reply.alert()
    what = reply.describe()
    details = CcsDetails(second, alert[1] if alert is not None else None, reply.closed)
    if alert is not None and alert[1] in KEYS_CHANGED and second:
        return ctx.result(Verdict.vulnerable, f"the server takes a ChangeCipherSpec before "
                          f"the key exchange without a word and cannot read the next record "
                          f"under the keys it switched to ({what})", evidence,
                          severity=Severity.high, details=details)
    if alert is not None and not second:
        return ctx.result(Verdict.not_vulnerable, f"the server refuses an early "
                          f"ChangeCipherSpec with {what}", evidence, details=details)
    if alert is not None and alert[1] in REFUSALS:
        return ctx.result(Verdict.not_vulnerable, f"the server refuses early "
                          f"ChangeCipherSpec records with {what} (none within {waited:.2f} s "
                          "of the first, so a second was sent)", evidence,
                          details=details)
    if alert is not None:
        return ctx.inconclusive(f"the server took the first early ChangeCipherSpec silently "
                                f"and answered the second with {what}, which does not say "
                                "whether it switched keys", evidence)
    if reply.error:
        return ctx.inconclusive(f"after the ChangeCipherSpec: {reply.error}", evidence)
    if reply.closed:
        return ctx.result(Verdict.not_vulnerable, "the server closes the connection on an "
                          "early ChangeCipherSpec, without an alert", evidence,
                          details=details)
    return ctx.inconclusive("the server answered neither of two early ChangeCipherSpec "
                            "records before the time limit", evidence)


async def run(ctx: CheckContext) -> CheckResult:
    version = _early.ask_version(ctx, "CCS injection")
    if isinstance(version, CheckResult):
        return version

    async def conversation(transport: AsyncTransport, deadline: float
                           ) -> tuple[int, _early.Reply, bool, float] | str:
        return await talk(transport, deadline, ctx, version)

    got = await _early.converse(ctx, conversation,
                                f"the {registry.version_name(version)} hello")
    if isinstance(got, CheckResult):
        return got
    return judge(ctx, *got)


CHECK = ActiveCheck("ccs", "CCS injection (CVE-2014-0224)", run, CcsDetails)
