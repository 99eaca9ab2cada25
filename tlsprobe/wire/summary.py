"""Fast reads of the other handshake messages a capture report needs.

ServerKeyExchange (group, share size, DH prime, signature scheme), ClientKeyExchange (the
key length), Certificate (the DER list) and NewSessionTicket (lifetime, and a TLS 1.0-1.2
ticket), and the session a ClientHello offers to resume (its session id and ticket). The common forms
(named-curve ECDHE, DHE, RSA, TLS 1.0-1.2 certificates) are read with flat slicing; every
other form (PSK variants, explicit curves, RSA-export parameters, TLS 1.3 certificates) goes
through the wire codec, which also supplies the error text when a message is malformed.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final, NamedTuple

from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.context import ParseContext
from tlsprobe.wire.handshake import decode_handshake

SKE: Final = 12
CKE: Final = 16
CERTIFICATE: Final = 11
NEW_SESSION_TICKET: Final = 4


class ServerKeyExchangeInfo(NamedTuple):
    """What a TLS 1.0-1.2 ServerKeyExchange says about the key exchange (a NamedTuple:
    cheap to build and to hash, as a report's shape key does)."""

    kind: str | None                   # ECDHE, DHE, RSA, PSK... (the suite's key exchange)
    named_curve: int | None = None
    explicit_curve: bool = False
    public_length: int | None = None
    dh_p: bytes | None = None
    dh_g_length: int | None = None
    signature_scheme: int | None = None


#: ServerKeyExchangeInfo(...) from all its values in order (one is made per connection: the
#: keyword form costs three times as much)
_new_ske = partial(tuple.__new__, ServerKeyExchangeInfo)


def _body(msg: bytes, msg_type: int) -> bytes:
    if len(msg) < 4 or msg[0] != msg_type or (msg[1] << 16) | (msg[2] << 8) | msg[3] != \
            len(msg) - 4:
        raise DecodeError("bad handshake header", 0, "handshake")
    return msg[4:]


def _codec(msg: bytes, ctx: ParseContext) -> Any:
    return decode_handshake(msg, ctx).message


#: EC J-PAKE suites (draft-cragie-tls-ecjpake-01; mbedTLS, Thread commissioning over DTLS)
ECJPAKE_SUITES: Final = frozenset({0xC0FF})


def parse_server_key_exchange(msg: bytes, ctx: ParseContext) -> ServerKeyExchangeInfo:
    """Raises DecodeError when malformed (the codec's error for unusual forms)."""
    body = _body(msg, SKE)
    kx = ctx.key_exchange
    n = len(body)
    signed = ctx.version is not None and ctx.version >= 0x0303
    if kx == "ECDHE" and n >= 4 and body[0] == 3:
        length = body[3]
        p = 4 + length
        if length >= 1 and p <= n:
            return _new_ske(("ECDHE", (body[1] << 8) | body[2], False, length, None, None,
                             _scheme(body, p, signed)))
    elif kx == "DHE" and n >= 2:
        p_len = int.from_bytes(body[0:2], "big")
        q = 2 + p_len
        if p_len and q + 2 <= n:
            g_len = int.from_bytes(body[q:q + 2], "big")
            r = q + 2 + g_len
            if g_len and r + 2 <= n:
                y_len = int.from_bytes(body[r:r + 2], "big")
                s = r + 2 + y_len
                if y_len and s <= n:
                    return _new_ske(("DHE", None, False, y_len, bytes(body[2:q]), g_len,
                                     _scheme(body, s, signed)))
    if ctx.cipher_suite in ECJPAKE_SUITES and n >= 3 and body[0] == 3:
        # ServerECJPAKEParams: the named curve (ECParameters) first, then the key pairs
        # with their zero-knowledge proofs (no signature)
        return _new_ske(("ECJPAKE", (body[1] << 8) | body[2], False, None, None, None, None))
    ske = _codec(msg, ctx)
    return ServerKeyExchangeInfo(
        ske.key_exchange, ske.named_curve, ske.explicit_curve is not None,
        len(ske.public) if ske.public is not None else None, ske.dh_p,
        len(ske.dh_g) if ske.dh_g is not None else None, ske.algorithm)


def _scheme(body: bytes, p: int, signed: bool) -> int | None:
    """The TLS 1.2 SignatureScheme after the parameters; checks the signature vector."""
    if p == len(body):
        return None  # anonymous
    if signed:
        if p + 4 > len(body) or p + 4 + ((body[p + 2] << 8) | body[p + 3]) != len(body):
            raise DecodeError("signature does not fill the message", p, "ServerKeyExchange")
        return (body[p] << 8) | body[p + 1]
    if p + 2 > len(body) or p + 2 + int.from_bytes(body[p:p + 2], "big") != len(body):
        raise DecodeError("signature does not fill the message", p, "ServerKeyExchange")
    return None


def client_key_exchange_length(msg: bytes, ctx: ParseContext) -> int | None:
    """Length of ecdh_Yc / dh_Yc / the encrypted premaster secret; None for PSK-only or an
    implicit static key. Raises DecodeError when malformed."""
    body = _body(msg, CKE)
    kx, n = ctx.key_exchange, len(body)
    if kx == "ECDHE" and n >= 2 and body[0] == n - 1:
        return n - 1
    if kx in ("DHE", "RSA") and n >= 3 and int.from_bytes(body[:2], "big") == n - 2:
        return n - 2
    cke = _codec(msg, ctx)
    return len(cke.exchange_keys) or None


def certificate_list(msg: bytes, ctx: ParseContext) -> list[bytes]:
    """The DER certificates of a Certificate message (TLS 1.3 entries via the codec)."""
    if ctx.tls13:
        return [bytes(c) for c in _codec(msg, ctx).certificates]
    body = _body(msg, CERTIFICATE)
    n = len(body)
    if n < 3 or int.from_bytes(body[:3], "big") != n - 3:
        raise DecodeError("certificate_list length does not match", 4, "Certificate")
    out, p = [], 3
    while p < n:
        if p + 3 > n:
            raise DecodeError("truncated certificate length", 4 + p, "Certificate")
        size = int.from_bytes(body[p:p + 3], "big")
        if size < 1 or p + 3 + size > n:
            raise DecodeError(f"certificate of {size} bytes, {n - p - 3} left", 4 + p,
                              "Certificate")
        out.append(bytes(body[p + 3:p + 3 + size]))
        p += 3 + size
    return out


def ticket_lifetime(msg: bytes) -> int:
    """ticket_lifetime(_hint) of a NewSessionTicket (both versions start with it)."""
    body = _body(msg, NEW_SESSION_TICKET)
    if len(body) < 4:
        raise DecodeError("NewSessionTicket too short", 4, "NewSessionTicket")
    return int.from_bytes(body[:4], "big")


def tls12_session_ticket(msg: bytes) -> bytes:
    """The ticket of a TLS 1.0-1.2 NewSessionTicket (RFC 5077 3.3; b"": none)."""
    body = _body(msg, NEW_SESSION_TICKET)
    size = int.from_bytes(body[4:6], "big")
    if len(body) != 6 + size:
        raise DecodeError(f"ticket of {size} bytes in a body of {len(body)}", 8,
                          "NewSessionTicket.ticket")
    return body[6:]


def offered_session(hello: bytes) -> tuple[bytes, bytes]:
    """(legacy_session_id, session_ticket extension data) of a ClientHello message, or of
    the start of one (b"" for what is absent, malformed or not in `hello`): the session it
    may resume."""
    n = len(hello)
    if n < 39 or hello[0] != 1 or hello[38] > 32:
        return b"", b""
    p = 39 + hello[38]
    session_id = hello[39:p]
    if p + 2 > n:
        return session_id, b""
    p += 2 + ((hello[p] << 8) | hello[p + 1])
    if p >= n:
        return session_id, b""
    p += 1 + hello[p] + 2          # compression methods, then the extensions' length
    while p + 4 <= n:
        ext_type, size = (hello[p] << 8) | hello[p + 1], (hello[p + 2] << 8) | hello[p + 3]
        if ext_type == 35:
            ticket = hello[p + 4:p + 4 + size]
            return session_id, ticket if len(ticket) == size else b""
        p += 4 + size
    return session_id, b""


def certificate_request_summary(msg: bytes, ctx: ParseContext
                                ) -> tuple[tuple[int, ...], tuple[bytes, ...], tuple[int, ...]]:
    """The signature schemes a CertificateRequest asks for, the certificate authorities
    it names, each a DER distinguished name, and its certificate_types (TLS 1.3: its
    signature_algorithms and certificate_authorities extensions, and no types; before
    TLS 1.2 no schemes). Raises DecodeError when malformed."""
    from tlsprobe.wire.certificate import CertificateRequest
    from tlsprobe.wire.ext_decoders import WHERE_CERTIFICATE_REQUEST
    request = _codec(msg, ctx)
    if not isinstance(request, CertificateRequest):
        raise DecodeError("not a CertificateRequest", 0, "handshake")
    if request.certificate_request_context is None:
        return (tuple(request.supported_signature_algorithms or ()),
                tuple(request.certificate_authorities), tuple(request.certificate_types))
    schemes: tuple[int, ...] = ()
    authorities: tuple[bytes, ...] = ()
    for ext in request.extensions:
        if ext.type == 13:
            schemes = tuple(ext.decode(WHERE_CERTIFICATE_REQUEST))
        elif ext.type == 47:
            authorities = tuple(ext.decode(WHERE_CERTIFICATE_REQUEST))
    return schemes, authorities, ()
