"""A client handshake's state -> `model.facts.HandshakeFacts`: what it established.

The one reader of `Handshake`'s state for the layers above (`facts_of`); the
capture analyzer builds the same record from a capture (offline.handshake), with the same
hello reader (`model.facts.hello_facts`) and the same ClientKeyExchange reader
(`wire.summary.client_key_exchange_length`), so both say the same of one handshake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlsprobe import registry
from tlsprobe.model.facts import (
    CLIENT,
    SERVER,
    AlertFact,
    ExtensionsSeen,
    HandshakeFacts,
    HandshakeTimings,
    HelloFacts,
    KeyExchangeFacts,
    MessageFact,
    Resumption,
    certificate_requested_of,
    hello_facts,
    wire_text,
)
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import AlertEvent, MessageEvent
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.certificate import (
    Certificate,
    CertificateRequest,
    CertificateStatus,
    CertificateVerify,
)
from tlsprobe.wire.context import ParseContext
from tlsprobe.wire.ext_decoders import WHERE_SERVER_HELLO, decode_extension
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM, ClientHello, ServerHello
from tlsprobe.wire.hello_info import client_hello_info
from tlsprobe.wire.keyexchange import ServerKeyExchange
from tlsprobe.wire.messages import EncryptedExtensions, NewSessionTicket
from tlsprobe.wire.summary import client_key_exchange_length

if TYPE_CHECKING:
    from tlsprobe.engine.interface import Handshake

ALPN, STATUS_REQUEST = 16, 5

__all__ = ["facts_of", "negotiated_alpn"]


def _hello(hello: ClientHello) -> HelloFacts:
    return hello_facts(client_hello_info(hello, len(hello.serialize()) + 4))


def facts_of(hs: Handshake, timings: HandshakeTimings | None = None) -> HandshakeFacts:
    """What `hs` established so far (`timings`: as the caller measured them). Before any
    ClientHello was sent, `client_hellos` holds the one the configuration makes, and
    `unknown` says so."""
    unknown: list[tuple[str, str]] = []
    hellos = tuple(_hello(h) for h in hs.messages.hellos)
    if not hellos:
        from tlsprobe.engine.config import build_client_hello
        built = hs.messages.built or build_client_hello(hs.config)
        hellos = (_hello(built.hello),)
        unknown.append(("client_hellos", "no ClientHello was sent: the one configured"))
    sh, hrr = hs.messages.server_hello, hs.messages.hrr
    messages = hs.messages.flight
    if hs.incomplete_reason is not None:
        unknown.append(("handshake_complete", hs.incomplete_reason))
    if sh is not None and sh.selected_version >= 0x0304 and \
            not messages.has(HandshakeType.encrypted_extensions):
        why = hs.incomplete_reason or "the server's encrypted flight was not read"
        unknown += [(name, why) for name in ("certificates", "signature_scheme", "alpn")]
    return HandshakeFacts(
        client_hellos=hellos,
        version=sh.selected_version if sh is not None else None,
        cipher_suite=sh.cipher_suite if sh is not None else None,
        key_exchange=_key_exchange(hs, hellos[-1]),
        hrr=hrr is not None,
        hrr_group=hrr.hrr_selected_group if hrr is not None else None,
        signature_scheme=_signature_scheme(hs),
        certificates=_certificates(messages.certificate),
        alpn=negotiated_alpn(hs),
        ticket_lifetime=_ticket_lifetime(messages.new_session_ticket),
        ocsp_response_bytes=_ocsp_response_bytes(hs),
        certificate_requested=certificate_requested_of(messages.order),
        certificate_types=_certificate_types(messages.certificate_request),
        resumption=_resumption(hs, hellos[-1]),
        messages=_messages(hs),
        extensions=_extensions(hs, hellos),
        alerts=tuple(AlertFact(ev.direction, ev.alert.level, ev.alert.description)
                     for ev in hs.events if isinstance(ev, AlertEvent)),
        handshake_complete=hs.handshake_complete,
        finished_verified=hs.verification.finished_verified,
        signature_verified=hs.verification.signature_verified,
        signature_detail=hs.verification.signature_detail,
        incomplete_reason=hs.incomplete_reason,
        timings=timings or HandshakeTimings(),
        unknown=tuple(unknown))


# -- the key exchange -------------------------------------------------------------------
def key_exchange_of(hs: Handshake) -> KeyExchangeFacts | None:
    """`facts_of(hs).key_exchange` alone (None before a ServerHello): the one rule for
    what the server chose, for a reader that needs nothing else (the audit's outcomes)."""
    if hs.messages.server_hello is None or not hs.messages.hellos:
        return None
    return _key_exchange(hs, _hello(hs.messages.hellos[-1]))


def _key_exchange(hs: Handshake, hello: HelloFacts) -> KeyExchangeFacts | None:
    sh = hs.messages.server_hello
    if sh is None:
        return None
    if sh.selected_version >= 0x0304:
        share = sh.key_share
        if share is None:   # psk_ke: the PSK alone (or a server that broke the rules)
            return KeyExchangeFacts(source="none", kind="PSK" if _psk_chosen(sh) else None)
        group, key = share
        return KeyExchangeFacts(
            source="hello_retry_request" if hs.messages.hrr is not None else "key_share",
            kind="TLS13", group=group, server_share_bytes=len(key),
            client_share_bytes=hello.share_length(group),
            valid=hs.verification.share_problem is None and hs.verification.shared_secret_computed
            if group in hs.verification.share_groups else None, problem=hs.verification.share_problem)
    suite = registry.cipher_suite(sh.cipher_suite)
    kx = suite.kx if suite else None
    ske = hs.messages.flight.server_key_exchange
    client_len = _client_key_exchange_bytes(hs, kx)
    if kx in ("RSA", "PSK", "RSA_PSK") or not isinstance(ske, ServerKeyExchange):
        # its absence is a fact once the server's flight went past its place (or the
        # server resumed: its Finished came)
        reached = any(hs.messages.flight.has(t) for t in (
            HandshakeType.certificate_request, HandshakeType.server_hello_done,
            HandshakeType.finished))
        return KeyExchangeFacts(source="rsa" if kx == "RSA" else "none" if reached
                                else "not_reached", kind=kx, client_share_bytes=client_len)
    valid = False if hs.verification.share_problem is not None else \
        True if hs.verification.shared_secret_computed else None
    kind = ske.key_exchange or kx
    if ske.explicit_curve is not None:
        return KeyExchangeFacts(source="server_key_exchange", kind=kind, explicit_curve=True,
                                client_share_bytes=client_len)
    public = len(ske.public) if ske.public is not None else None
    p = int.from_bytes(ske.dh_p, "big") if ske.dh_p is not None and ske.named_curve is None \
        else None
    return KeyExchangeFacts(
        source="server_key_exchange", kind=kind, group=ske.named_curve,
        server_share_bytes=public if ske.named_curve is not None or p is not None else None,
        client_share_bytes=client_len, dh_prime=p,
        dh_generator=int.from_bytes(ske.dh_g or b"", "big") if p is not None else None,
        dh_group_name=_dh_name(p) if p is not None else None, valid=valid,
        problem=hs.verification.share_problem)


def _psk_chosen(sh: ServerHello) -> bool:
    return sh.extension(41) is not None   # pre_shared_key


def _dh_name(p: int) -> str:
    """The known group the prime is, else what the engine's check of it found (cached)."""
    from tlsprobe.kex.dhprime import check_dh_prime, dh_group_name
    name = dh_group_name(p)
    if name is not None:
        return name
    is_prime = check_dh_prime(p).is_prime
    return f"unknown {p.bit_length()}-bit" + (
        "" if is_prime else ", NOT PRIME" if is_prime is False else ", primality not checked")


def _client_key_exchange_bytes(hs: Handshake, kx: str | None) -> int | None:
    """The size of the exchange_keys of the ClientKeyExchange the client sent (the ECDH
    point, dh_Yc or the RSA-encrypted premaster secret), read as a capture reads it."""
    sh = hs.messages.server_hello
    raw = next((ev.raw for ev in hs.events if isinstance(ev, MessageEvent)
                and ev.direction == CLIENT and ev.msg_type == HandshakeType.client_key_exchange),
               None)
    if raw is None or sh is None:
        return hs.verification.client_share_bytes
    ske = hs.messages.flight.server_key_exchange
    group = ske.named_curve if isinstance(ske, ServerKeyExchange) else None
    ctx = ParseContext(version=sh.selected_version, cipher_suite=sh.cipher_suite,
                       key_exchange=kx, named_group=group)
    try:
        return client_key_exchange_length(raw, ctx)
    except DecodeError:
        return hs.verification.client_share_bytes


# -- the rest of the server's flight ----------------------------------------------------
def _signature_scheme(hs: Handshake) -> int | None:
    """The CertificateVerify's scheme, else the ServerKeyExchange's."""
    scheme = None
    for msg in (hs.messages.flight.server_key_exchange,
                hs.messages.flight.certificate_verify):
        if isinstance(msg, (ServerKeyExchange, CertificateVerify)) and msg.algorithm is not None:
            scheme = msg.algorithm
    return scheme


def _certificates(msg: object) -> tuple[bytes, ...]:
    return tuple(bytes(der) for der in msg.certificates) if isinstance(msg, Certificate) \
        else ()


def _ticket_lifetime(msg: object) -> int | None:
    return msg.ticket_lifetime if isinstance(msg, NewSessionTicket) else None


def negotiated_alpn(hs: Handshake) -> str | None:
    """The protocol in the ServerHello (TLS 1.2) or EncryptedExtensions (TLS 1.3)."""
    sh = hs.messages.server_hello
    sources = [sh.extension(ALPN) if sh is not None else None]
    ee = hs.messages.flight.encrypted_extensions
    if isinstance(ee, EncryptedExtensions):
        sources += [e for e in ee.extensions if e.type == ALPN]
    alpn = None
    for e in sources:
        if e is not None:
            try:
                protocols = decode_extension(ALPN, e.data, WHERE_SERVER_HELLO)
            except DecodeError:
                continue
            alpn = wire_text(protocols[0]) if protocols else None
    return alpn


def _certificate_types(request: CertificateRequest | None) -> tuple[int, ...]:
    """A TLS 1.0-1.2 CertificateRequest's certificate_types (none in TLS 1.3's form)."""
    return tuple(request.certificate_types) if request is not None else ()


def _ocsp_response_bytes(hs: Handshake) -> int | None:
    """The stapled OCSP response: a CertificateStatus (TLS 1.2), or the status_request
    extension of the leaf's CertificateEntry (TLS 1.3)."""
    sh = hs.messages.server_hello
    if sh is None:
        return None
    response: bytes | None = None
    status = hs.messages.flight.certificate_status
    if isinstance(status, CertificateStatus):
        response = status.response
    cert = hs.messages.flight.certificate
    if sh.selected_version >= 0x0304 and isinstance(cert, Certificate) and cert.certificate_list:
        ext5 = next((e for e in cert.certificate_list[0].extensions
                     if e.type == STATUS_REQUEST), None)
        if ext5 is not None:
            response = ext5.data[4:] if len(ext5.data) >= 4 else ext5.data
    return len(response) if response is not None else None


def _resumption(hs: Handshake, hello: HelloFacts) -> Resumption | None:
    sh = hs.messages.server_hello
    if sh is None or not hs.verification.resumed:
        return None
    if sh.selected_version >= 0x0304:
        return "psk"
    return "session_ticket" if hello.session_ticket else "session_id"


# -- messages, extensions ---------------------------------------------------------------
def _is_hrr(ev: MessageEvent) -> bool:
    if ev.msg_type != HandshakeType.server_hello:
        return False
    if ev.decoded is not None and isinstance(ev.decoded.message, ServerHello):
        return ev.decoded.message.is_hello_retry_request
    return ev.raw[6:38] == HELLO_RETRY_REQUEST_RANDOM


def _messages(hs: Handshake) -> tuple[MessageFact, ...]:
    return tuple(MessageFact(ev.direction, ev.msg_type, _is_hrr(ev), ev.protected)
                 for ev in hs.events if isinstance(ev, MessageEvent))


def _extensions(hs: Handshake, hellos: tuple[HelloFacts, ...]
                ) -> tuple[ExtensionsSeen, ...]:
    out = [ExtensionsSeen(CLIENT, HandshakeType.client_hello, h.extensions) for h in hellos]
    if hs.messages.hrr is not None:
        out.append(ExtensionsSeen(SERVER, HandshakeType.server_hello,
                                  tuple(e.type for e in hs.messages.hrr.extensions), hrr=True))
    if hs.messages.server_hello is not None:
        out.append(ExtensionsSeen(SERVER, HandshakeType.server_hello,
                                  tuple(e.type for e in hs.messages.server_hello.extensions)))
    ee = hs.messages.flight.encrypted_extensions
    if isinstance(ee, EncryptedExtensions):
        out.append(ExtensionsSeen(SERVER, HandshakeType.encrypted_extensions,
                                  tuple(e.type for e in ee.extensions)))
    return tuple(out)
