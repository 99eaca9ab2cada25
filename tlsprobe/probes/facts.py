"""Turn a client handshake's state into a ProbeResult: what was offered, what was chosen.

The describing rules (offer, key exchange wording, certificates, message names) are
model.describe's, shared with the pcap report."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake
from tlsprobe.kex.dhprime import check_dh_prime
from tlsprobe.model import describe
from tlsprobe.model.describe import certificate_info
from tlsprobe.net.tcp import Target
from tlsprobe.kex.dhprime import dh_group_name
from tlsprobe.model.probe import (
    AlertInfo,
    CertificateInfo,
    Cipher,
    Codepoint,
    KeyExchange,
    Offer,
    ProbeResult,
    Timings,
)
from tlsprobe.session.flow import CLIENT, AlertEvent, MessageEvent
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.ext_decoders import WHERE_SERVER_HELLO, decode_extension
from tlsprobe.wire.hello import ClientHello

#: certificate_info is model.describe's, still importable from here
__all__ = ["certificate_info", "certificates_of", "key_exchange_of", "negotiated_alpn",
           "offer_of", "result_from", "session_features"]


def _attr(obj: Any, *names: str) -> Any:
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


def offer_of(hello: ClientHello, sni: str | None, alpn: Iterable[str]) -> Offer:
    return describe.offer(
        tuple(hello.supported_versions or [hello.legacy_version]), tuple(hello.cipher_suites),
        tuple(hello.supported_groups), tuple(entry.group for entry in hello.key_shares),
        tuple(hello.signature_algorithms), tuple(alpn), sni, len(hello.serialize()) + 4)


def certificates_of(message: Any) -> list[bytes]:
    out = []
    for entry in _attr(message, "certificate_list", "certificates", "entries") or []:
        out.append(entry if isinstance(entry, (bytes, bytearray)) else
                   _attr(entry, "cert_data", "data", "certificate"))
    return [bytes(c) for c in out if c is not None]


def key_exchange_of(hs: ClientHandshake) -> KeyExchange | None:
    sh = hs.messages.server_hello
    if sh is None:
        return None
    version = sh.selected_version
    client_hello = hs.messages.hellos[-1]
    if version >= 0x0304:
        share = sh.key_share
        if share is None:
            return None
        group, key = share
        checked = hs.verification
        client_len = next((len(e.key_exchange) for e in client_hello.key_shares
                           if e.group == group), None)
        return describe.named_group_key_exchange(
            describe.key_share_kind(group),
            "hello_retry_request" if hs.messages.hrr is not None else "key_share", group, len(key),
            client_len, valid=checked.share_problem is None and checked.shared_secret_computed
            if group in checked.share_groups else None, problem=checked.share_problem)
    suite = registry.cipher_suite(sh.cipher_suite)
    kx = suite.kx if suite else None
    ske = hs.messages.flight.server_key_exchange
    if kx in ("RSA", "PSK", "RSA_PSK") or ske is None:
        return KeyExchange(kind=kx or "unknown", source="rsa" if kx == "RSA" else "none")
    valid = _tls12_share_valid(hs)
    named = _attr(ske, "named_curve")
    if named is not None:
        return describe.named_group_key_exchange(
            "ECDHE", "server_key_exchange", named,
            len(_attr(ske, "public", "public_key", "point") or b""),
            hs.verification.client_share_bytes,
            valid=valid, problem=hs.verification.share_problem)
    prime = _attr(ske, "dh_p")
    if prime is not None:
        p = int.from_bytes(prime, "big") if isinstance(prime, (bytes, bytearray)) else int(prime)
        name = dh_group_name(p)
        if name is None:    # the check DHShare made (cached), or made now within the deadline
            is_prime = check_dh_prime(p).is_prime
            name = f"unknown {p.bit_length()}-bit" + ("" if is_prime else ", NOT PRIME"
                                                      if is_prime is False else
                                                      ", primality not checked")
        ys = _attr(ske, "public") or b""
        return describe.dhe_key_exchange(
            p, name, len(ys) if isinstance(ys, (bytes, bytearray)) else None,
            hs.verification.client_share_bytes, valid=valid, problem=hs.verification.share_problem)
    return describe.explicit_curve_key_exchange()


def _tls12_share_valid(hs: ClientHandshake) -> bool | None:
    """True once the server's TLS 1.2 share gave a pre-master secret, False when it was
    refused, None when the client never got that far."""
    if hs.verification.share_problem is not None:
        return False
    return True if hs.verification.shared_secret_computed else None


def negotiated_alpn(hs: ClientHandshake) -> str | None:
    """The protocol in the ServerHello (TLS 1.2) or EncryptedExtensions (TLS 1.3)."""
    sh = hs.messages.server_hello
    sources = [sh.extension(16) if sh is not None else None]
    ee = hs.messages.flight.encrypted_extensions
    if ee is not None:
        sources += [e for e in (_attr(ee, "extensions") or []) if e.type == 16]
    alpn = None
    for e in sources:
        if e is not None:
            try:
                protocols = decode_extension(16, e.data, WHERE_SERVER_HELLO)
            except DecodeError:
                continue
            alpn = protocols[0].decode("latin-1") if protocols else None
    return alpn


def session_features(hs: ClientHandshake) -> dict[str, Any]:
    """What s_client prints below the chain: extended master secret and secure
    renegotiation (TLS 1.0-1.2 ServerHello extensions 23 and 0xff01) and OCSP stapling
    (TLS 1.2 CertificateStatus; TLS 1.3 status_request in the leaf's CertificateEntry)."""
    sh = hs.messages.server_hello
    if sh is None:
        return {}
    out: dict[str, Any] = {}
    tls13 = sh.selected_version >= 0x0304
    if not tls13:
        out["extended_master_secret"] = sh.extension(23) is not None
        out["secure_renegotiation"] = sh.extension(0xFF01) is not None
    response: bytes | None = None
    status = hs.messages.flight.certificate_status
    if status is not None:
        response = _attr(status, "response")
    cert = hs.messages.flight.certificate
    entries = _attr(cert, "certificate_list") if tls13 and cert is not None else None
    if entries:
        ext5 = next((e for e in (_attr(entries[0], "extensions") or []) if e.type == 5), None)
        if ext5 is not None:
            response = ext5.data[4:] if len(ext5.data) >= 4 else ext5.data
    if not hs.config.status_request or (cert is None and response is None):
        return out
    if response is not None:
        out.update(ocsp_stapling="stapled", ocsp_response_bytes=len(response))
    elif not tls13 and sh.extension(5) is not None:
        out["ocsp_stapling"] = "announced (status_request), no CertificateStatus"
    else:
        out["ocsp_stapling"] = "none"
    return out


def result_from(hs: ClientHandshake, target: Target, address: str | None, *,
                error: tuple[str, str] | None = None,
                timings: tuple[float | None, float, float] | None = None,
                http_status: str | None = None) -> ProbeResult:
    config = hs.config
    hello = hs.messages.hellos[0] if hs.messages.hellos else None
    if hello is None:
        from tlsprobe.engine.config import build_client_hello
        hello = build_client_hello(config).hello
    sh, hrr = hs.messages.server_hello, hs.messages.hrr
    alerts = tuple(AlertInfo("sent" if ev.direction == CLIENT else "received", ev.alert.level,
                             ev.alert.description, registry.alert_name(ev.alert.description))
                   for ev in hs.events if isinstance(ev, AlertEvent))
    messages = tuple(describe.message_label(
        ev.direction, ev.msg_type, ev.decoded is not None and
        getattr(ev.decoded.message, "is_hello_retry_request", False))
        for ev in hs.events if isinstance(ev, MessageEvent))
    sig = None
    ske = hs.messages.flight.server_key_exchange
    cv = hs.messages.flight.certificate_verify
    for m in (ske, cv):
        code = _attr(m, "signature_scheme", "algorithm") if m is not None else None
        if code is not None:
            sig = Codepoint.sigscheme(code)
    certs: tuple[CertificateInfo, ...] = ()
    cert_msg = hs.messages.flight.certificate
    if cert_msg is not None:
        certs = tuple(certificate_info(der) for der in certificates_of(cert_msg))
    alpn = negotiated_alpn(hs)
    nst = hs.messages.flight.new_session_ticket
    lifetime = _attr(nst, "ticket_lifetime", "ticket_lifetime_hint") if nst is not None else None
    t = Timings(*(round(x * 1000, 3) if x is not None else None for x in timings)) \
        if timings else Timings()
    return ProbeResult(
        host=target.host, port=target.port, address=address,
        offer=offer_of(hello, config.server_name, config.alpn),
        version=Codepoint.version(sh.selected_version) if sh else None,
        cipher=Cipher.of(sh.cipher_suite) if sh else None,
        key_exchange=key_exchange_of(hs),
        hello_retry_request=Codepoint.group(hrr.hrr_selected_group)
        if hrr is not None and hrr.hrr_selected_group is not None else None,
        signature_scheme=sig, alpn=alpn, session_ticket_lifetime=lifetime,
        certificates=certs, handshake_complete=hs.handshake_complete,
        finished_verified=hs.verification.finished_verified, http_status=http_status,
        signature_verified=hs.verification.signature_verified,
        signature_detail=hs.verification.signature_detail,
        incomplete_reason=hs.incomplete_reason,
        client_certificate_requested=hs.verification.certificate_requested,
        anonymous=bool(sh and (s := registry.cipher_suite(sh.cipher_suite)) and s.auth == "anon"),
        **session_features(hs),
        alerts=alerts, messages=messages, timings=t,
        error=error[0] if error else None, error_kind=error[1] if error else None)
