"""Heartbleed (CVE-2014-0160) and the heartbeat extension (RFC 6520).

OpenSSL 1.0.1 to 1.0.1f answered a HeartbeatRequest with as many payload bytes as its
payload_length field claimed, copied from its own memory past the request (up to 64 KiB a
request). The check asks it as the published tools do (testssl.sh run_heartbleed, filippo's
Heartbleed test), in the highest of TLS 1.2, 1.1 and 1.0 the server speaks, on one
connection:
  - a ClientHello offering the heartbeat extension (type 15, mode peer_allowed_to_send);
    whether the ServerHello acknowledges it is evidence;
  - after the ServerHelloDone (before the key exchange, where heartbeats are unencrypted),
    one HeartbeatRequest claiming 16384 bytes of payload while carrying 1 (plus the 16 bytes
    of padding RFC 6520 asks for), then a well-formed one (16 random bytes) whose answer
    shows that the server processes heartbeats at all;
  - one read of at most 64 KiB of what comes back.
A HeartbeatResponse to the first request with a payload_length over the 1 byte sent, and
those bytes, is the over-read: vulnerable (the evidence is the byte count; the leaked
content is never kept nor shown). The well-formed request answered and the other not (RFC
6520 section 4: discarded silently), an alert, a close, or no answer from a server that did
not acknowledge the extension: not vulnerable, with whether the extension was acknowledged.
No answer to either request from a server that acknowledged it is inconclusive (it should
have answered the well-formed one); bytes that are not TLS records too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from tlsprobe import registry
from tlsprobe.engine.config import ClientConfig
from tlsprobe.model.check_details import HeartbleedDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.checks import _early
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.wire.record import Record

HEARTBEAT_EXT = 15
PEER_ALLOWED_TO_SEND = 1
REQUEST, RESPONSE = 1, 2
CLAIMED = 16384           # the payload_length the first request claims
SENT = 1                  # payload bytes it carries
PADDING = 16              # RFC 6520 4: at least 16 bytes


def requests(version: int, nonce: bytes) -> bytes:
    """The two HeartbeatRequest records: the over-long claim, then a well-formed one."""
    bad = bytes([REQUEST]) + CLAIMED.to_bytes(2, "big") + b"\x00" * SENT + b"\x00" * PADDING
    good = bytes([REQUEST]) + len(nonce).to_bytes(2, "big") + nonce + b"\x00" * PADDING
    return Record(_early.HEARTBEAT, version, bad).to_bytes() + \
        Record(_early.HEARTBEAT, version, good).to_bytes()


def _answers_good(nonce: bytes) -> Callable[[Record], bool]:
    """Whether a record is the answer to the well-formed request."""
    head = bytes([RESPONSE]) + len(nonce).to_bytes(2, "big") + nonce
    return lambda r: r.content_type == _early.HEARTBEAT and r.fragment.startswith(head)


async def talk(transport: AsyncTransport, deadline: float, config: ClientConfig
               ) -> tuple[bool, _early.Reply, bytes] | str:
    """The conversation: (extension acknowledged, the reply, the nonce) or why the flight
    was not reached."""
    hs, why = await _early.drive(transport, deadline, config)
    if why or hs.messages.server_hello is None:
        return why or "no ServerHello"
    acked = any(e.type == HEARTBEAT_EXT for e in hs.messages.server_hello.extensions)
    nonce = os.urandom(16)
    record_version = hs.messages.server_hello.selected_version
    # a send that fails (the server closed) still leaves its answer to be read
    await _early.send(transport, requests(record_version, nonce))
    good = _answers_good(nonce)
    reply = await _early.read_reply(transport, deadline,
                                    lambda r: any(good(rec) for rec in r.records))
    return acked, reply, nonce


def judge(ctx: CheckContext, version: int, acked: bool, reply: _early.Reply,
          nonce: bytes) -> CheckResult:
    """The verdict on what came back (see the module docstring)."""
    name = registry.version_name(version)
    ext = "acknowledged" if acked else "not acknowledged"
    evidence = [f"sent: a {name} ClientHello offering the heartbeat extension",
                f"heartbeat extension {ext} in the ServerHello",
                (f"sent after ServerHelloDone: a HeartbeatRequest claiming {CLAIMED} bytes "
                 f"of payload with {SENT} sent and a well-formed one of {len(nonce)} bytes"),
                "1 connection and one read of at most 64 KiB"]
    records = reply.of_type(_early.HEARTBEAT)
    good = _answers_good(nonce)
    at = next((i for i, r in enumerate(records) if good(r)), len(records))
    stream = b"".join(r.fragment for r in records[:at])
    evidence.append(f"received: {len(stream)} bytes of heartbeat answer to the first "
                    f"request ({len(records[:at])} records)" if stream else
                    f"received: {reply.describe()}")
    if stream:
        claimed = int.from_bytes(stream[1:3], "big") if len(stream) >= 3 else 0
        if stream[0] == RESPONSE and claimed > SENT and len(stream) >= 3 + claimed:
            return ctx.result(Verdict.vulnerable, f"the server answers a HeartbeatRequest "
                              f"carrying {SENT} byte of payload with a HeartbeatResponse of "
                              f"{claimed} payload bytes ({len(stream)} bytes in all): it "
                              "sends memory it was never sent", tuple(evidence),
                              severity=Severity.critical,
                              details=HeartbleedDetails(acked, claimed - SENT))
        if stream[0] == RESPONSE and claimed == SENT:
            return ctx.result(Verdict.not_vulnerable, "the server answers the over-long "
                              f"HeartbeatRequest with the {SENT} byte it carried only",
                              tuple(evidence), details=HeartbleedDetails(acked, 0))
        return ctx.inconclusive("the server answered the over-long HeartbeatRequest with "
                                "heartbeat records that are no HeartbeatResponse to it",
                                tuple(evidence))
    if reply.error and not reply.plain:
        return ctx.inconclusive(f"after the HeartbeatRequests: {reply.error}",
                                tuple(evidence))
    if reply.plain:   # no HeartbeatResponse: it ended TLS, as a close or an alert would
        why = f"it leaves TLS on the HeartbeatRequest ({reply.error.removeprefix('the ')})"
    elif at < len(records):
        why = "it answers the well-formed HeartbeatRequest and discards the over-long one " \
            "(RFC 6520 section 4)"
    elif reply.alert() is not None:
        why = f"it refuses the HeartbeatRequest with {reply.describe()}"
    elif reply.closed:
        why = "it closes the connection on the HeartbeatRequest"
    elif acked:
        # it says it takes heartbeats, yet the well-formed one went unanswered too: the
        # requests are not shown to have been read at all (a stalled server, a slow path)
        return ctx.inconclusive("the server acknowledged the heartbeat extension but "
                                "answered neither HeartbeatRequest before the time limit, "
                                "not even the well-formed one", tuple(evidence))
    else:
        why = "it sends no HeartbeatResponse (no answer before the time limit)"
    return ctx.result(Verdict.not_vulnerable, f"{why}; heartbeat extension {ext}",
                      tuple(evidence), details=HeartbleedDetails(acked, 0))


async def run(ctx: CheckContext) -> CheckResult:
    version = _early.ask_version(ctx, "Heartbleed")
    if isinstance(version, CheckResult):
        return version
    config, _ = ctx.version_hello(version)
    config = replace(config, extra_extensions=((HEARTBEAT_EXT, bytes([PEER_ALLOWED_TO_SEND])),))

    async def conversation(transport: AsyncTransport, deadline: float
                           ) -> tuple[bool, _early.Reply, bytes] | str:
        return await talk(transport, deadline, config)

    got = await _early.converse(ctx, conversation, f"the {registry.version_name(version)} "
                                "hello with the heartbeat extension")
    if isinstance(got, CheckResult):
        return got
    return judge(ctx, version, *got)


CHECK = ActiveCheck("heartbleed", "Heartbleed (CVE-2014-0160) and the heartbeat extension",
                    run, HeartbleedDetails)
