"""Typed decoders for extension_data, by extension type and by the message carrying it.

The same extension type has different bodies in different messages (RFC 8446 4.2):
key_share is a list of shares in a ClientHello, one share in a ServerHello and just a group
in a HelloRetryRequest; supported_versions, pre_shared_key, early_data and status_request
differ likewise. `where` names the carrying message (one of the `WHERE_*` constants).
Every decoder reads through a Buffer and checks each vector length exactly, so malformed
data raises DecodeError; when the buffer annotates, each field is recorded at its offset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from ._util import (
    bytes_label,
    enum_label,
    group_label,
    note_length,
    pull_list,
    pull_opaque,
    pull_uint_noted,
    quoted_bytes,
    sigscheme_label,
    version_label,
    wire_text,
)
from .buffer import Buffer

WHERE_CLIENT_HELLO: Final = "client_hello"
WHERE_SERVER_HELLO = "server_hello"
WHERE_HRR: Final = "hello_retry_request"
WHERE_ENCRYPTED_EXTENSIONS = "encrypted_extensions"
WHERE_CERTIFICATE: Final = "certificate"
WHERE_CERTIFICATE_REQUEST: Final = "certificate_request"
WHERE_NEW_SESSION_TICKET: Final = "new_session_ticket"
_FROM_CLIENT: Final = (WHERE_CLIENT_HELLO, WHERE_CERTIFICATE_REQUEST)

PSK_MODES: Final = {0: "psk_ke", 1: "psk_dhe_ke"}
POINT_FORMATS: Final = {0: "uncompressed", 1: "ansiX962_compressed_prime", 2: "ansiX962_compressed_char2"}
CERT_COMPRESSION: Final = {1: "zlib", 2: "brotli", 3: "zstd"}
STATUS_TYPES: Final = {1: "ocsp", 2: "ocsp_multi"}
NAME_TYPES: Final = {0: "host_name"}


@dataclass(frozen=True)
class ServerName:
    """One ServerNameList entry (RFC 6066 3); name_type 0 is host_name."""

    name_type: int
    name: bytes

    @property
    def host_name(self) -> str:
        return wire_text(self.name)


@dataclass(frozen=True)
class KeyShareEntry:
    group: int
    key_exchange: bytes


@dataclass(frozen=True)
class PskIdentity:
    identity: bytes
    obfuscated_ticket_age: int


@dataclass(frozen=True)
class OfferedPsks:
    identities: list[PskIdentity]
    binders: list[bytes]


@dataclass(frozen=True)
class CertificateStatusRequest:
    """status_request in a ClientHello: for ocsp (1) the responder ids and DER extensions;
    other status types keep their request bytes in `request`."""

    status_type: int
    responder_id_list: list[bytes]
    request_extensions: bytes
    request: bytes = b""


@dataclass(frozen=True)
class OcspStatus:
    """status_request in a TLS 1.3 CertificateEntry: CertificateStatus (RFC 6066 8)."""

    status_type: int
    response: bytes


def _empty(buf: Buffer, where: str) -> None:
    if not buf.eof():
        raise buf.error(f"{buf.remaining} bytes in an extension that must be empty")


def _server_name(buf: Buffer, where: str) -> list[ServerName]:
    if where != WHERE_CLIENT_HELLO:
        _empty(buf, where)
        return []
    names: list[ServerName] = []
    start = buf.tell()
    with buf.field("server_name_list"), buf.block(2, minimum=1) as n:
        note_length(buf, "server_name_list", start, 2, n)
        while not buf.eof():
            i = len(names)
            name_type = pull_uint_noted(buf, 1, f"server_name_list[{i}].name_type",
                                        lambda v: enum_label(NAME_TYPES, v))
            name = pull_opaque(buf, 2, f"server_name_list[{i}].host_name", minimum=1)
            if buf.annotations:  # the trace shows the name itself, not just its size
                last = buf.annotations[-1]
                buf.annotations[-1] = replace(last, value=f"{quoted_bytes(name, 80)} "
                                              f"({bytes_label(len(name))})")
            names.append(ServerName(name_type, name))
    return names


def _uint(size: int, name: str, label: Callable[[int], str] | None = None
          ) -> Callable[[Buffer, str], int]:
    def decode(buf: Buffer, where: str) -> int:
        return pull_uint_noted(buf, size, name, label)
    return decode


def _list(len_size: int, item_size: int, name: str, label: Callable[[int], str] | None,
          minimum: int) -> Callable[[Buffer, str], list[int]]:
    def decode(buf: Buffer, where: str) -> list[int]:
        return pull_list(buf, len_size, item_size, name, label, minimum=minimum)
    return decode


def _alpn(buf: Buffer, where: str) -> list[bytes]:
    protocols: list[bytes] = []
    start = buf.tell()
    with buf.field("protocol_name_list"), buf.block(2, minimum=2) as n:
        note_length(buf, "protocol_name_list", start, 2, n)
        while not buf.eof():
            at = buf.tell()
            with buf.field(f"[{len(protocols)}]"):
                name = buf.pull_vector(1, minimum=1)
            buf.note(f"protocol_name_list[{len(protocols)}]", at, 1 + len(name),
                     quoted_bytes(name, 80), "bytes")
            protocols.append(name)
    return protocols


def _status_request(buf: Buffer, where: str) -> CertificateStatusRequest | OcspStatus | None:
    if where == WHERE_CERTIFICATE:
        status_type = pull_uint_noted(buf, 1, "status_type", lambda v: enum_label(STATUS_TYPES, v))
        return OcspStatus(status_type, pull_opaque(buf, 3, "response", minimum=1))
    if where not in _FROM_CLIENT or (where == WHERE_CERTIFICATE_REQUEST and buf.eof()):
        # a server's is empty; a TLS 1.3 CertificateRequest's too (RFC 8446 4.4.2.1)
        _empty(buf, where)
        return None
    status_type = pull_uint_noted(buf, 1, "status_type", lambda v: enum_label(STATUS_TYPES, v))
    if status_type != 1:
        return CertificateStatusRequest(status_type, [], b"", buf.pull_rest())
    ids: list[bytes] = []
    start = buf.tell()
    with buf.field("responder_id_list"), buf.block(2) as n:
        note_length(buf, "responder_id_list", start, 2, n)
        while not buf.eof():
            ids.append(pull_opaque(buf, 2, f"responder_id_list[{len(ids)}]", minimum=1))
    return CertificateStatusRequest(1, ids, pull_opaque(buf, 2, "request_extensions"))


def _supported_versions(buf: Buffer, where: str) -> list[int] | int:
    if where == WHERE_CLIENT_HELLO:
        return pull_list(buf, 1, 2, "versions", version_label, minimum=2, maximum=254)
    return pull_uint_noted(buf, 2, "selected_version", version_label)


def _key_share_entry(buf: Buffer, name: str) -> KeyShareEntry:
    group = pull_uint_noted(buf, 2, f"{name}.group", group_label)
    return KeyShareEntry(group, pull_opaque(buf, 2, f"{name}.key_exchange", minimum=1))


def _key_share(buf: Buffer, where: str) -> list[KeyShareEntry] | KeyShareEntry | int:
    if where == WHERE_HRR:
        return pull_uint_noted(buf, 2, "selected_group", group_label)
    if where != WHERE_CLIENT_HELLO:
        return _key_share_entry(buf, "server_share")
    shares: list[KeyShareEntry] = []
    start = buf.tell()
    with buf.field("client_shares"), buf.block(2) as n:
        note_length(buf, "client_shares", start, 2, n)
        while not buf.eof():
            shares.append(_key_share_entry(buf, f"client_shares[{len(shares)}]"))
    return shares


def _pre_shared_key(buf: Buffer, where: str) -> OfferedPsks | int:
    if where != WHERE_CLIENT_HELLO:
        return pull_uint_noted(buf, 2, "selected_identity")
    identities: list[PskIdentity] = []
    binders: list[bytes] = []
    start = buf.tell()
    with buf.field("identities"), buf.block(2, minimum=7) as n:
        note_length(buf, "identities", start, 2, n)
        while not buf.eof():
            name = f"identities[{len(identities)}]"
            identity = pull_opaque(buf, 2, f"{name}.identity", minimum=1)
            age = pull_uint_noted(buf, 4, f"{name}.obfuscated_ticket_age")
            identities.append(PskIdentity(identity, age))
    start = buf.tell()
    with buf.field("binders"), buf.block(2, minimum=33) as n:
        note_length(buf, "binders", start, 2, n)
        while not buf.eof():
            binders.append(pull_opaque(buf, 1, f"binders[{len(binders)}]", minimum=32))
    return OfferedPsks(identities, binders)


def _early_data(buf: Buffer, where: str) -> int | None:
    if where == WHERE_NEW_SESSION_TICKET:
        return pull_uint_noted(buf, 4, "max_early_data_size")
    _empty(buf, where)
    return None


def _opaque(len_size: int, name: str, minimum: int = 0) -> Callable[[Buffer, str], bytes]:
    def decode(buf: Buffer, where: str) -> bytes:
        return pull_opaque(buf, len_size, name, minimum=minimum)
    return decode


def _rest(name: str) -> Callable[[Buffer, str], bytes]:
    def decode(buf: Buffer, where: str) -> bytes:
        at = buf.tell()
        data = buf.pull_rest()
        buf.note(name, at, len(data), bytes_label(len(data)), "bytes")
        return data
    return decode


def _padding(buf: Buffer, where: str) -> int:
    at = buf.tell()
    n = len(buf.pull_rest())
    buf.note("padding", at, n, bytes_label(n), "bytes")
    return n


def _authorities(buf: Buffer, where: str) -> list[bytes]:
    names: list[bytes] = []
    start = buf.tell()
    with buf.field("authorities"), buf.block(2, minimum=3) as n:
        note_length(buf, "authorities", start, 2, n)
        while not buf.eof():
            names.append(pull_opaque(buf, 2, f"authorities[{len(names)}]", minimum=1))
    return names


_Decoder = Callable[[Buffer, str], Any]
#: extension type -> (RFC name used in annotation names, decoder)
DECODERS: Final[dict[int, tuple[str, _Decoder]]] = {
    0: ("server_name", _server_name),
    1: ("max_fragment_length", _uint(1, "max_fragment_length")),
    5: ("status_request", _status_request),
    10: ("supported_groups", _list(2, 2, "named_group_list", group_label, 2)),
    11: ("ec_point_formats",
         _list(1, 1, "ec_point_format_list", lambda v: enum_label(POINT_FORMATS, v), 1)),
    13: ("signature_algorithms",
         _list(2, 2, "supported_signature_algorithms", sigscheme_label, 2)),
    15: ("heartbeat", _uint(1, "mode")),
    16: ("application_layer_protocol_negotiation", _alpn),
    21: ("padding", _padding),
    22: ("encrypt_then_mac", _empty),
    23: ("extended_master_secret", _empty),
    27: ("compress_certificate",
         _list(1, 2, "algorithms", lambda v: enum_label(CERT_COMPRESSION, v), 2)),
    28: ("record_size_limit", _uint(2, "record_size_limit")),
    35: ("session_ticket", _rest("ticket")),
    40: ("key_share_draft", _key_share),  # TLS 1.3 drafts <= 22 (reserved since draft 23)
    41: ("pre_shared_key", _pre_shared_key),
    42: ("early_data", _early_data),
    43: ("supported_versions", _supported_versions),
    44: ("cookie", _opaque(2, "cookie", 1)),
    45: ("psk_key_exchange_modes",
         _list(1, 1, "ke_modes", lambda v: enum_label(PSK_MODES, v), 1)),
    47: ("certificate_authorities", _authorities),
    49: ("post_handshake_auth", _empty),
    50: ("signature_algorithms_cert",
         _list(2, 2, "supported_signature_algorithms", sigscheme_label, 2)),
    51: ("key_share", _key_share),
    0xFF01: ("renegotiation_info", _opaque(1, "renegotiated_connection")),
}


def is_grease(value: int) -> bool:
    """RFC 8701 GREASE code point (0x0a0a, 0x1a1a, ... 0xfafa)."""
    return value & 0x0F0F == 0x0A0A and value >> 8 == value & 0xFF


def pull_extension_value(buf: Buffer, ext_type: int, where: str) -> Any:
    """Decode extension_data already confined in `buf`; unknown and GREASE types give the
    raw bytes. The whole buffer must be consumed."""
    entry = DECODERS.get(ext_type)
    if entry is None:
        return buf.pull_rest()
    with buf.field(entry[0]):
        value = entry[1](buf, where)
        if not buf.eof():
            raise buf.error(f"{buf.remaining} trailing bytes")
    return value


def decode_extension(ext_type: int, data: bytes, where: str = WHERE_CLIENT_HELLO) -> Any:
    """The typed value of one extension's data, as carried in message `where`.

    Returns, by type: server_name list[ServerName]; supported_groups, signature_algorithms
    (_cert), ec_point_formats, psk_key_exchange_modes, compress_certificate list[int];
    supported_versions list[int] (ClientHello) or int; key_share list[KeyShareEntry]
    (ClientHello), KeyShareEntry (ServerHello) or int (HelloRetryRequest selected_group);
    pre_shared_key OfferedPsks or int; ALPN list[bytes]; status_request
    CertificateStatusRequest / OcspStatus / None; early_data None or int (NewSessionTicket);
    empty-bodied flags None; padding its length; session_ticket, cookie,
    renegotiation_info bytes; certificate_authorities list[bytes]; max_fragment_length,
    record_size_limit, heartbeat int; unknown and GREASE types the raw bytes."""
    return pull_extension_value(Buffer(data), ext_type, where)


def annotation_prefix(ext_type: int) -> str | None:
    entry = DECODERS.get(ext_type)
    return entry[0] if entry else None


__all__ = [
    "DECODERS",
    "CertificateStatusRequest",
    "KeyShareEntry",
    "OcspStatus",
    "OfferedPsks",
    "PskIdentity",
    "ServerName",
    "decode_extension",
    "is_grease",
    "pull_extension_value",
]
