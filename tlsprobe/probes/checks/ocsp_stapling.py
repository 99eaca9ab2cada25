"""OCSP stapling (RFC 6066 8, RFC 8446 4.4.2.1): does the server send its certificate's status?

A client that asks (status_request) gets the OCSP response the server fetched for its own
certificate, and need not ask the CA itself (privacy, latency, and a revocation check that
works when the responder is unreachable). The check sends one hello of the highest version
the server speaks, with status_request, and reads the server's flight: in TLS 1.3 the
status_request extension of the leaf's Certificate entry (the flight is decrypted and
checked up to the server's Finished), in TLS 1.0-1.2 the CertificateStatus message. A
response there: supported (its status and dates are shown; the ocsp_response check verifies
its signature, responder, validity window and CertID);
a Certificate without one: not supported (a finding of severity info). One connection.
A server with several certificates (an RSA and an ECDSA one) may staple for one and not the
other: every other chain's stapling is judged too, from the connection that selects it,
shared with the other certificate checks (_every_chain.py).
"""

from __future__ import annotations

from datetime import datetime

from tlsprobe import registry
from tlsprobe.engine.config import TLS13
from tlsprobe.model.check_details import StaplingDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.audit.certs import leaf_type
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._cert_chain import Served
from tlsprobe.probes.checks._every_chain import with_other_chains
from tlsprobe.probes.checks._handshake import Handshake, handshake
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.probes.facts import STAPLING_NOT_REACHED, session_features_of
from tlsprobe.registry import HandshakeType

STATUS_REQUEST = 5


def stapled(hs: Handshake) -> bytes | None:
    """The OCSP response the server stapled (b"" for an empty one), or None."""
    flight = hs.engine.messages.flight
    status = flight.certificate_status
    if status is not None:
        return status.response
    cert = flight.certificate
    if cert is not None and cert.tls13 and cert.certificate_list:
        for e in cert.certificate_list[0].extensions:
            if e.type == STATUS_REQUEST:
                return e.data[4:]   # status_type (1), uint24 length, OCSPResponse
    return None


def describe_response(der: bytes) -> str:
    """What an OCSP response says, for the evidence (verified by ocsp_response.py)."""
    from cryptography.x509 import ocsp
    try:
        response = ocsp.load_der_ocsp_response(der)
        if response.response_status != ocsp.OCSPResponseStatus.SUCCESSFUL:
            return f"OCSP response status {response.response_status.name.lower()}"
        text = f"certificate status {response.certificate_status.name.lower()}"
        for label, when in (("produced", response.produced_at_utc),
                            ("next update", response.next_update_utc)):
            if isinstance(when, datetime):
                text += f", {label} {when:%Y-%m-%d %H:%M} UTC"
        return text
    except ValueError as exc:
        return f"not a readable OCSP response ({str(exc)[:80]!r})"


async def run(ctx: CheckContext) -> CheckResult:
    first, kind = await _default(ctx)
    return await with_other_chains(ctx, first, kind, judge, stapling=True)


async def judge(ctx: CheckContext, got: Served) -> CheckResult:
    """Another chain's stapling, from the connection that selected it (with status_request)."""
    sent = f"a {registry.version_name(got.version)} hello with status_request, selecting " \
        f"the {got.key_type} certificate"
    if got.response is not None:
        what = describe_response(got.response)
        return ctx.result(Verdict.supported, f"{sent} is answered with a stapled OCSP "
                          f"response: {what}", (f"sent: {sent}",
                                                f"stapled: {len(got.response)} bytes, {what}"),
                          details=StaplingDetails(True, len(got.response), what))
    if got.stapled is None:
        return ctx.inconclusive(f"{sent}: {got.stapling}", (f"sent: {sent}",))
    return ctx.result(Verdict.not_supported, f"{sent} is answered with a Certificate and "
                      "no OCSP response", (f"sent: {sent}",), severity=Severity.info,
                      details=StaplingDetails(False, 0, None))


def _kind(hs: Handshake) -> str | None:
    """The key type of the leaf the handshake got (None: no Certificate read)."""
    cert = hs.engine.messages.flight.certificate
    chain = tuple(cert.certificates) if cert is not None else ()
    return leaf_type(chain) if chain else None


async def _default(ctx: CheckContext) -> tuple[CheckResult, str | None]:
    """The verdict on the default chain's stapling, and its leaf's key type."""
    if not ctx.spoken:
        return ctx.inconclusive("the server speaks no version the audit could establish"), None
    top = max(ctx.spoken)
    sent = f"a {registry.version_name(top)} hello with status_request"
    hs = await handshake(ctx, ctx.config((top,), status_request=True),
                         read_flight=top == TLS13)
    if isinstance(hs, Outcome):
        return ctx.inconclusive(f"{sent}: {hs.reason}"), None
    response = stapled(hs)
    if response is not None:
        what = describe_response(response)
        return ctx.result(Verdict.supported, f"{sent} is answered with a stapled OCSP "
                          f"response: {what} (the ocsp_response check verifies it)",
                          (f"sent: {sent}", f"received: {hs.describe()}",
                           f"stapled: {len(response)} bytes, {what}"),
                          details=StaplingDetails(True, len(response), what)), _kind(hs)
    if not hs.engine.messages.flight.has(HandshakeType.certificate):
        return ctx.inconclusive(f"{sent}: no Certificate read ({hs.describe()})"), None
    if session_features_of(hs.engine.facts()).ocsp_stapling == STAPLING_NOT_REACHED:
        return ctx.inconclusive(f"{sent}: {STAPLING_NOT_REACHED} ({hs.describe()})"), None
    return ctx.result(Verdict.not_supported, f"{sent} is answered with a Certificate and "
                      "no OCSP response", (f"sent: {sent}", (f"received: {hs.describe()}, "
                                            "no stapled OCSP response")),
                      severity=Severity.info, details=StaplingDetails(False, 0, None)), \
        _kind(hs)


CHECK = ActiveCheck("ocsp_stapling", "OCSP stapling (RFC 6066 status_request)", run,
                    StaplingDetails)
