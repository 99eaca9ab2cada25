"""The rules for the extensions a server sends, checked as each message arrives.

Two steps, in this order. `decode_extensions` decodes every extension of a server message
(ServerHello, HelloRetryRequest, EncryptedExtensions, TLS 1.3 Certificate entries,
CertificateRequest and NewSessionTicket) before the client uses any of it: a malformed body
raises the wire's DecodeError, with the extension (and entry) named in its path, and the
client's one error boundary (ClientHandshake.receive) turns that into a decode_error alert
and a protocol error. Nothing later (the engine, the probes' result builders) then decodes
a server extension that was not already read once here.

`check_extensions` then applies the rules OpenSSL's client applies to well-formed
extensions (ssl/statem/extensions.c, tls_collect_extensions, then the per-extension
parsers), each failure naming the rule broken:
- a recognised extension in a message it is not defined for: illegal_parameter
  (RFC 8446 4.2), e.g. key_share or supported_versions in EncryptedExtensions;
- the same type twice in one message: illegal_parameter (RFC 8446 4.2, RFC 5246 7.4.1.4);
- in ServerHello, HelloRetryRequest, EncryptedExtensions and Certificate: a type the
  ClientHello did not carry: unsupported_extension (RFC 8446 4.2 and 4.4.2, RFC 5246
  7.4.1.4); cookie (in a HelloRetryRequest), renegotiation_info and
  signed_certificate_timestamp are exempt, as in OpenSSL;
- ALPN: exactly one protocol (decode_error, RFC 7301 3.1), one the client offered
  (illegal_parameter, RFC 7301 3.2);
- renegotiation_info on an initial handshake: an empty renegotiated_connection
  (handshake_failure, RFC 5746 3.4).
A broken rule raises engine.verdict.Refusal; ClientHandshake sends its alert.
"""

from __future__ import annotations

from collections.abc import Iterable

from tlsprobe import registry
from tlsprobe.engine.common import (
    DECODE_ERROR,
    HANDSHAKE_FAILURE,
    ILLEGAL_PARAMETER,
    UNSUPPORTED_EXTENSION,
)
from tlsprobe.engine.verdict import Refusal
from tlsprobe.escaping import quoted_bytes
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.context import Message
from tlsprobe.wire.ext_decoders import (
    WHERE_CERTIFICATE,
    WHERE_CERTIFICATE_REQUEST,
    WHERE_ENCRYPTED_EXTENSIONS,
    WHERE_HRR,
    WHERE_NEW_SESSION_TICKET,
    WHERE_SERVER_HELLO,
    decode_extension,
)
from tlsprobe.wire.extensions import Extension
from tlsprobe.wire.hello import ClientHello, ServerHello

# The messages a server's extensions come in (contexts of RFC 8446 4.2's table)
SH12, SH13, HRR, EE, CT, CR, NST = ("TLS 1.2 ServerHello", "ServerHello", "HelloRetryRequest",
                                    "EncryptedExtensions", "Certificate",
                                    "CertificateRequest", "NewSessionTicket")
WHERE = {SH12: WHERE_SERVER_HELLO, SH13: WHERE_SERVER_HELLO, HRR: WHERE_HRR,
         EE: WHERE_ENCRYPTED_EXTENSIONS, CT: WHERE_CERTIFICATE,
         CR: WHERE_CERTIFICATE_REQUEST, NST: WHERE_NEW_SESSION_TICKET}
#: messages whose extensions answer the ClientHello's (the others are the server's own)
ANSWERS = (SH12, SH13, HRR, EE, CT)

#: The server messages each recognised extension may appear in: RFC 8446 4.2 for TLS 1.3,
#: the defining RFCs for TLS 1.2 ServerHellos. A type missing here is not recognised (only
#: the duplicate and solicitation rules apply to it).
ALLOWED: dict[int, frozenset[str]] = {t: frozenset(c) for t, c in {
    0: (SH12, EE),                  # server_name (RFC 6066 3, empty from a server)
    1: (SH12, EE),                  # max_fragment_length
    5: (SH12, CR, CT),              # status_request
    10: (SH12, EE),                 # supported_groups (some TLS 1.2 servers echo it;
                                    # OpenSSL accepts and ignores it there)
    11: (SH12,),                    # ec_point_formats (RFC 8422 5.2)
    13: (CR,),                      # signature_algorithms
    14: (SH12, EE),                 # use_srtp
    15: (SH12, EE),                 # heartbeat
    16: (SH12, EE),                 # ALPN
    18: (SH12, CR, CT),             # signed_certificate_timestamp
    19: (SH12, EE), 20: (SH12, EE),  # client/server_certificate_type
    21: (),                         # padding (ClientHello only)
    22: (SH12,), 23: (SH12,),       # encrypt_then_mac, extended_master_secret
    27: (CR,),                      # compress_certificate (RFC 8879)
    28: (SH12, EE),                 # record_size_limit (RFC 8449)
    35: (SH12,),                    # session_ticket (RFC 5077)
    40: (SH13, HRR),                # key_share of TLS 1.3 drafts <= 22
    41: (SH13,),                    # pre_shared_key
    42: (EE, NST),                  # early_data
    43: (SH13, HRR),                # supported_versions
    44: (HRR,),                     # cookie
    45: (),                         # psk_key_exchange_modes (ClientHello only)
    47: (CR,),                      # certificate_authorities
    48: (CR,),                      # oid_filters
    49: (),                         # post_handshake_auth (ClientHello only)
    50: (CR,),                      # signature_algorithms_cert
    51: (SH13, HRR),                # key_share
    0xFF01: (SH12,),                # renegotiation_info (RFC 5746)
}.items()}
#: empty in every server message, though the wire's decoder reads any body (RFC 5077 3.2)
MUST_BE_EMPTY = (35,)
#: sent by a server without a request in the ClientHello, and accepted as OpenSSL does
EXEMPT = (0xFF01, 18)
KEY_SHARE, KEY_SHARE_DRAFT, COOKIE, ALPN, RENEGOTIATION_INFO = 51, 40, 44, 16, 0xFF01


def _name(ext_type: int) -> str:
    name = registry.extension_name(ext_type)
    return "ALPN" if ext_type == ALPN else name


def decode_extensions(extensions: Iterable[Extension], context: str, prefix: str = "") -> None:
    """Decode each extension as `context` carries it; DecodeError names the extension."""
    where = WHERE[context]
    for e in extensions:
        try:
            decode_extension(e.type, e.data, where)
            if e.type in MUST_BE_EMPTY and e.data:
                raise DecodeError(f"{len(e.data)} bytes in an extension that must be empty "
                                  "(RFC 5077 3.2)", 0, _name(e.type))
        except DecodeError as exc:
            path = exc.path or _name(e.type)
            raise DecodeError(exc.reason, exc.offset, prefix + path) from None


def _offered(hello: ClientHello) -> set[int]:
    types = {e.type for e in hello.extensions}
    if KEY_SHARE in types:
        types.add(KEY_SHARE_DRAFT)  # a draft server answers key_share with type 40
    return types


def check_extensions(offered_hello: ClientHello, alpn: tuple[str, ...], context: str,
                     extensions: Iterable[Extension], label: str | None = None) -> None:
    """The structural rules (context, duplicates, solicitation), then the value rules.
    `offered_hello` is the ClientHello answered, `alpn` the protocols it offered."""
    label = label or context
    tls12 = context == SH12
    rfc = "RFC 5246 7.4.1.4" if tls12 else "RFC 8446 4.2"
    offered = _offered(offered_hello)
    seen: set[int] = set()
    for e in extensions:
        name = _name(e.type)
        allowed = ALLOWED.get(e.type)
        if allowed is not None and context not in allowed:
            raise Refusal(ILLEGAL_PARAMETER, f"server sent {name} in its {label}, where it "
                          f"is not allowed (RFC 8446 4.2)")
        if e.type in seen:
            raise Refusal(ILLEGAL_PARAMETER, f"server sent {name} twice in its {label} "
                          f"({rfc}: one extension of each type)")
        seen.add(e.type)
        if context in ANSWERS and e.type not in offered and e.type not in EXEMPT and \
                not (context == HRR and e.type == COOKIE):
            where = "RFC 8446 4.4.2" if context == CT else rfc
            raise Refusal(UNSUPPORTED_EXTENSION, f"server sent {name} in its {label}, which "
                          f"the client did not offer ({where})")
    for e in extensions:
        if e.type == ALPN:
            _alpn(alpn, e, label)
        elif e.type == RENEGOTIATION_INFO:
            _renegotiation_info(offered_hello, e, label)


def _renegotiation_info(hello: ClientHello, e: Extension, label: str) -> None:
    """RFC 5746: empty on an initial handshake (3.4); on a renegotiation (3.5) the client's
    verify_data the hello sent, then the server's (checked by the caller, who knows it)."""
    sent = hello.extension(RENEGOTIATION_INFO)
    client = sent.data[1:] if sent is not None else b""
    if not client and e.data != b"\x00":
        raise Refusal(HANDSHAKE_FAILURE, f"server sent a non-empty renegotiation_info in "
                      f"the {label} of an initial handshake (RFC 5746 3.4)")
    if client and (len(e.data) != 1 + 2 * len(client) or e.data[0] != 2 * len(client) or
                   e.data[1:1 + len(client)] != client):
        raise Refusal(HANDSHAKE_FAILURE, f"server's renegotiation_info in the {label} of a "
                      "renegotiation does not begin with the client's verify_data (RFC 5746 "
                      "3.5)")


def _alpn(alpn: tuple[str, ...], e: Extension, label: str) -> None:
    protocols: list[bytes] = decode_extension(ALPN, e.data, WHERE_SERVER_HELLO)
    if len(protocols) != 1:
        raise Refusal(DECODE_ERROR, f"server sent {len(protocols)} ALPN protocols in its "
                      f"{label} (RFC 7301 3.1: exactly one)")
    offered = [p.encode("latin-1") for p in alpn]
    if protocols[0] not in offered:
        raise Refusal(ILLEGAL_PARAMETER, f"server chose ALPN protocol "
                      f"{quoted_bytes(protocols[0], 40)}, which the client did not offer "
                      "(RFC 7301 3.2)")


def check_legacy_version(sh: ServerHello) -> None:
    """A TLS 1.3 ServerHello or HelloRetryRequest (version in supported_versions) carries
    legacy_version 0x0303 (RFC 8446 4.1.3, 4.1.4); drafts without the extension are not
    concerned."""
    if sh.extension(43) is not None and sh.legacy_version != 0x0303:
        label = HRR if sh.is_hello_retry_request else SH13
        raise Refusal(ILLEGAL_PARAMETER, f"TLS 1.3 {label} with legacy_version "
                      f"0x{sh.legacy_version:04x} (RFC 8446 4.1.3: it must be 0x0303)")


def check_message(offered_hello: ClientHello, alpn: tuple[str, ...], msg_type: int,
                  msg: Message, tls13: bool) -> None:
    """Decode and check the extensions of one server message after the ServerHello."""
    if not tls13:
        return  # TLS 1.0-1.2 flight messages carry no extensions
    context = {8: EE, 13: CR, 4: NST}.get(msg_type)
    if context is not None:
        exts = list(getattr(msg, "extensions", None) or [])
        decode_extensions(exts, context)
        check_extensions(offered_hello, alpn, context, exts)
        return
    if msg_type == 11:
        for i, entry in enumerate(getattr(msg, "certificate_list", None) or []):
            exts = list(getattr(entry, "extensions", None) or [])
            decode_extensions(exts, CT, f"certificate_list[{i}].extensions.")
            check_extensions(offered_hello, alpn, CT, exts, f"Certificate (entry {i})")
