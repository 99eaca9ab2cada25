"""A handshake's facts -> a ProbeResult: what was offered, what was chosen.

`probe_result` reads `model.facts.HandshakeFacts` only (the engine builds them:
engine.facts.facts_of); the describing rules (offer, key exchange wording, certificates,
message names, alerts) are model.describe's, shared with the pcap report."""

from __future__ import annotations

from typing import NamedTuple

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake
from tlsprobe.engine.facts import negotiated_alpn as _negotiated_alpn
from tlsprobe.errors import FailureKind
from tlsprobe.model import describe
from tlsprobe.model.describe import certificate_info
from tlsprobe.model.facts import SERVER, HandshakeFacts, HandshakeTimings
from tlsprobe.model.probe import Cipher, Codepoint, ProbeResult, Timings
from tlsprobe.net.tcp import Target
from tlsprobe.registry import HandshakeType

#: certificate_info is model.describe's, still importable from here
__all__ = ["STAPLING_NOT_REACHED", "SessionFeatures", "certificate_info", "negotiated_alpn", "probe_result",
           "result_from", "session_features_of"]

EMS, RENEGOTIATION_INFO, STATUS_REQUEST = 23, 0xFF01, 5
#: `SessionFeatures.ocsp_stapling` when the ServerHello announced a CertificateStatus and the
#: handshake ended before its place: whether the server staples is not known
STAPLING_NOT_REACHED = "announced (status_request); the handshake ended before its " \
    "CertificateStatus"


class SessionFeatures(NamedTuple):
    """What s_client prints below the chain, as ProbeResult's fields (None: does not
    apply)."""

    extended_master_secret: bool | None = None
    secure_renegotiation: bool | None = None
    ocsp_stapling: str | None = None
    ocsp_response_bytes: int | None = None


def negotiated_alpn(hs: ClientHandshake) -> str | None:
    """The protocol in the ServerHello (TLS 1.2) or EncryptedExtensions (TLS 1.3)."""
    return _negotiated_alpn(hs)


def session_features_of(facts: HandshakeFacts) -> SessionFeatures:
    """What s_client prints below the chain: extended master secret and secure
    renegotiation (TLS 1.0-1.2 ServerHello extensions 23 and 0xff01) and OCSP stapling
    (TLS 1.2 CertificateStatus; TLS 1.3 status_request in the leaf's CertificateEntry;
    only when the ClientHello asked for it and a Certificate or a response came)."""
    if facts.version is None:
        return SessionFeatures()
    tls13 = facts.version >= 0x0304
    server_ext = facts.extensions_of(SERVER, HandshakeType.server_hello) or ()
    ems = None if tls13 else EMS in server_ext
    renegotiation = None if tls13 else RENEGOTIATION_INFO in server_ext
    hello = facts.client_hellos[-1] if facts.client_hellos else None
    response = facts.ocsp_response_bytes
    cert = any(m.sender == SERVER and m.msg_type == HandshakeType.certificate
               for m in facts.messages)
    stapling: str | None
    if hello is None or STATUS_REQUEST not in hello.extensions or (not cert
                                                                   and response is None):
        stapling = None
    elif response is not None:
        stapling = "stapled"
    elif not tls13 and STATUS_REQUEST in server_ext:
        stapling = "announced (status_request), no CertificateStatus" \
            if _past_certificate_status(facts) else STAPLING_NOT_REACHED
    else:
        stapling = "none"
    return SessionFeatures(ems, renegotiation, stapling,
                           response if stapling == "stapled" else None)


def _past_certificate_status(facts: HandshakeFacts) -> bool:
    """Whether the server's TLS 1.0-1.2 flight went past the place of its CertificateStatus
    (a ServerKeyExchange, CertificateRequest or ServerHelloDone came): only then is the
    absence of one a fact."""
    after = (HandshakeType.server_key_exchange, HandshakeType.certificate_request,
             HandshakeType.server_hello_done)
    return any(m.sender == SERVER and m.msg_type in after for m in facts.messages)


def result_from(hs: ClientHandshake, target: Target, address: str | None, *,
                error: tuple[str, FailureKind] | None = None,
                timings: tuple[float | None, float, float] | None = None,
                http_status: str | None = None) -> ProbeResult:
    """`probe_result` of the handshake's facts; `timings`: seconds to connect, to the
    handshake's end and in all."""
    ms = None
    if timings:
        connect, handshake, total = (round(x * 1000, 3) if x is not None else None
                                     for x in timings)
        ms = HandshakeTimings(connect_ms=connect, handshake_ms=handshake, total_ms=total)
    return probe_result(hs.facts(ms), target, address, error=error,
                        http_status=http_status)


def probe_result(facts: HandshakeFacts, target: Target, address: str | None, *,
                 error: tuple[str, FailureKind] | None = None,
                 http_status: str | None = None) -> ProbeResult:
    """The probe's result: the facts described (model.describe) for `target`."""
    version, suite = facts.version, facts.cipher_suite
    hello = facts.client_hello
    if hello is None:
        raise ValueError("a probe's facts name the ClientHello it offered")
    info = registry.cipher_suite(suite) if suite is not None else None
    t = facts.timings
    features = session_features_of(facts)
    return ProbeResult(
        host=target.host, port=target.port, address=address,
        offer=describe.hello_offer(hello),
        version=Codepoint.version(version) if version is not None else None,
        cipher=Cipher.of(suite) if suite is not None else None,
        key_exchange=describe.key_exchange(facts.key_exchange),
        hello_retry_request=Codepoint.group(facts.hrr_group)
        if facts.hrr and facts.hrr_group is not None else None,
        signature_scheme=Codepoint.sigscheme(facts.signature_scheme)
        if facts.signature_scheme is not None else None,
        alpn=facts.alpn, session_ticket_lifetime=facts.ticket_lifetime,
        certificates=tuple(certificate_info(der) for der in facts.certificates),
        handshake_complete=facts.handshake_complete,
        finished_verified=facts.finished_verified, http_status=http_status,
        signature_verified=facts.signature_verified, signature_detail=facts.signature_detail,
        incomplete_reason=facts.incomplete_reason,
        client_certificate_requested=facts.certificate_requested,
        client_certificate_types=tuple(Codepoint.certificate_type(t)
                                       for t in facts.certificate_types),
        anonymous=info is not None and info.auth == "anon",
        extended_master_secret=features.extended_master_secret,
        secure_renegotiation=features.secure_renegotiation,
        ocsp_stapling=features.ocsp_stapling, ocsp_response_bytes=features.ocsp_response_bytes,
        alerts=tuple(describe.alert_info(a, live=True) for a in facts.alerts),
        messages=tuple(describe.message_label(m.sender, m.msg_type, m.hrr)
                       for m in facts.messages),
        timings=Timings(t.connect_ms, t.handshake_ms, t.total_ms),
        error=error[0] if error else None, error_kind=error[1] if error else None)
