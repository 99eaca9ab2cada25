"""Client authentication: does the server ask for a client certificate, does it require
one, and which certificate authorities does it accept?

A server asks with a CertificateRequest: in TLS 1.0-1.2 in its first flight, with the CA
names it accepts in the message's certificate_authorities list; in TLS 1.3 in the encrypted
flight, the names in its certificate_authorities extension (RFC 8446 4.2.4). A client that
has no certificate answers with an empty Certificate (RFC 5246 7.4.6, RFC 8446 4.4.2), as
robot.py's probes do; the server then goes on (the certificate is optional) or refuses
with an alert (required: OpenSSL's -Verify sends certificate_required in TLS 1.3,
handshake_failure in TLS 1.2). One connection with the versions hello of the highest
version spoken, carried to the end of the handshake with that empty Certificate; in TLS
1.3 the server judges the client's flight after the client's Finished: the client reads
the server's first answer for three handshake times (at least 0.3 s; a refusing server
closes after its alert, and a close_notify sent at once would be reset and lose it), then
sends close_notify and reads the answer: an alert refuses; a NewSessionTicket,
close_notify or silence until the read timeout accepts. Verdicts:
  - no CertificateRequest in a complete handshake: not supported;
  - asked, and the handshake goes on without a certificate: supported (optional);
  - asked, and refused with an alert: supported, info (required: clients without a
    certificate from one of the CAs named cannot connect);
  - asked, and the connection reset or cut: supported, whether it is required
    inconclusive (the reason says so); no answer at all: inconclusive.
The CA names are shown as RFC 4514 strings (the report escapes them); a name that does
not parse is shown as its hex.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import TLS13
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.model.check_details import ClientAuthDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.model.probe import Codepoint
from tlsprobe.model.pubkey import distinguished_name
from tlsprobe.net.driver import adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.audit.scheduler import check_limits
from tlsprobe.probes.checks._tolerance import top_versions
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.wire.certificate import CertificateRequest

__all__ = ["CHECK", "ca_names"]

CERTIFICATE_AUTHORITIES = 47
#: CA names in the reason (all of them in the evidence and the details)
SHOWN = 3
#: the least wait for a TLS 1.3 server's first answer after the client's Finished (s)
MIN_WAIT = 0.3


@dataclass
class Asked:
    """What one connection established: the server's CertificateRequest (None: none seen),
    whether the handshake completed and was not refused after, the failure that ended it,
    and whether the failure was the server's alert (a refusal) or the network's."""

    request: CertificateRequest | None = None
    accepted: bool = False
    failure: str | None = None
    refused: bool = False
    version: int | None = None


def ca_names(request: CertificateRequest) -> tuple[str, ...] | str:
    """The CA names of a CertificateRequest, either form; a str when the TLS 1.3
    extension's list is malformed."""
    if request.certificate_request_context is None:
        return tuple(distinguished_name(n) for n in request.certificate_authorities)
    ext = next((e for e in request.extensions if e.type == CERTIFICATE_AUTHORITIES), None)
    if ext is None:
        return ()
    data, names = bytes(ext.data), []
    if len(data) < 2 or int.from_bytes(data[:2], "big") != len(data) - 2:
        return "a certificate_authorities extension whose length is wrong"
    at = 2
    while at < len(data):
        size = int.from_bytes(data[at:at + 2], "big")
        if size == 0 or at + 2 + size > len(data):
            return "a certificate_authorities extension with a cut or empty name"
        names.append(distinguished_name(data[at + 2:at + 2 + size]))
        at += 2 + size
    return tuple(names)


async def _tls13_verdict(engine: ClientHandshake, transport: AsyncTransport,
                         deadline: float, took: float) -> str | None:
    """TLS 1.3: the server judges the client's (empty) Certificate after the client's
    Finished, and says so first thing: an alert (HandshakeFailure), else a ticket or its
    data. Read that first answer for a short while (3 handshake times, at least MIN_WAIT:
    a server that refuses, then closes, would reset a close_notify sent at once and lose
    its alert); nothing yet: send close_notify and read the answer to it. None when the
    server went on (accepted), else why it is not known."""
    short = min(deadline, time.monotonic() + max(MIN_WAIT, 3 * took))
    try:
        data = await transport.receive(short)
    except NetworkError as exc:
        if exc.cause not in ("timeout", "deadline"):
            return exc.reason
        data = None
    if data is not None:
        if not data:
            return "the server closed the connection without an alert"
        engine.receive(data)   # an alert: HandshakeFailure
        return None
    await transport.send(engine.close())
    while engine.handshake_complete and not engine.peer_closed:
        try:
            data = await transport.receive(deadline)
        except NetworkError as exc:
            return None if exc.cause == "timeout" else exc.reason   # silence: not refused
        if not data:
            return None
        engine.receive(data)
    return None


async def _ask(engine: ClientHandshake, transport: AsyncTransport, deadline: float) -> Asked:
    out = Asked()
    try:
        started = time.monotonic()
        await adrive(engine, transport, deadline)
        sh = engine.messages.server_hello
        out.version = sh.selected_version if sh is not None else None
        unknown = None
        if engine.handshake_complete and out.version == TLS13 and \
                engine.verification.certificate_requested:
            unknown = await _tls13_verdict(engine, transport, deadline,
                                           time.monotonic() - started)
        out.accepted = engine.handshake_complete and unknown is None
        if not out.accepted:
            out.failure = unknown or engine.incomplete_reason or \
                "the server closed the connection"
    except HandshakeFailure as exc:
        out.failure, out.refused = str(exc), exc.kind == FailureKind.ALERT
    except NetworkError as exc:
        out.failure = exc.reason
    out.request = engine.messages.flight.certificate_request
    if out.version is None and engine.messages.server_hello is not None:
        out.version = engine.messages.server_hello.selected_version
    return out


def _result(ctx: CheckContext, asked: Asked, sent: str) -> CheckResult:
    version = registry.version_name(asked.version) if asked.version else "?"
    evidence = [f"sent: {sent}, an empty Certificate if asked"]
    if asked.request is None:
        if asked.accepted:
            return ctx.result(Verdict.not_supported, f"{sent}: the handshake completes "
                              "without a CertificateRequest", tuple(evidence),
                              details=ClientAuthDetails(False, False, version, ()))
        return ctx.inconclusive(f"{sent}: no CertificateRequest seen before the handshake "
                                f"ended ({asked.failure or 'incomplete'})", tuple(evidence))
    types = tuple(Codepoint.certificate_type(t).id_label()
                  for t in asked.request.certificate_types)
    if types:
        evidence.append(f"certificate types: {', '.join(types)}")
    names = ca_names(asked.request)
    if isinstance(names, str):
        evidence.append(f"CA names: {names}")
        names = ()
    else:
        evidence.append(f"CA names: {'; '.join(names) if names else 'none listed'}")
    accepts = "naming no CA (any issuer)" if not names else "accepting " + \
        "; ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN
                                    else "")
    if asked.accepted:
        return ctx.result(Verdict.supported, f"{version}: the server requests a client "
                          f"certificate ({accepts}) and completes the handshake without one: "
                          "optional", tuple(evidence),
                          details=ClientAuthDetails(True, False, version, names, types))
    evidence.append(f"received: {asked.failure}")
    if asked.refused:
        return ctx.result(Verdict.supported, f"{version}: the server requires a client "
                          f"certificate ({accepts}): without one it refuses the handshake "
                          f"({asked.failure})", tuple(evidence), severity=Severity.info,
                          details=ClientAuthDetails(True, True, version, names, types))
    return ctx.result(Verdict.supported, f"{version}: the server requests a client "
                      f"certificate ({accepts}); whether it requires one is not established: "
                      f"without one the connection ended without an alert ({asked.failure})",
                      tuple(evidence),
                      details=ClientAuthDetails(True, None, version, names, types))


async def run(ctx: CheckContext) -> CheckResult:
    versions = top_versions(ctx)
    if not versions:
        return ctx.inconclusive("no TLS version is known to be spoken (the versions phase "
                                "established none)")
    config, _ = ctx.version_hello(versions[0])
    sent = f"a {registry.version_name(versions[0])} hello carried to the end of the handshake"

    async def talk(transport: AsyncTransport, deadline: float) -> Asked:
        engine = ClientHandshake(config, annotate=False, stop_after_first_flight=False,
                                 limits=check_limits())
        return await _ask(engine, transport, deadline)

    asked = await ctx.converse(talk)
    if isinstance(asked, Outcome):
        return ctx.inconclusive(f"{sent}: {asked.describe()}")
    return _result(ctx, asked, sent)


CHECK = ActiveCheck("client_auth", "client authentication (CertificateRequest)", run,
                    ClientAuthDetails)
