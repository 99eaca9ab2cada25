"""TLS extensions: the raw `Extension`, the extensions block codec, builders and decoders.

Messages keep extensions raw and in wire order (unknown, GREASE and duplicate types
included), so serialize() gives back the exact bytes and fingerprints see what was sent.
Typed values come from `decode_extension` (see ext_decoders) or from the hello
convenience properties. Builders return `Extension`s for the client and server side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from ._util import extension_label, note_length
from .buffer import Buffer, DecodeError, Writer
from .ext_decoders import (
    WHERE_CLIENT_HELLO,
    annotation_prefix,
    decode_extension,
    is_grease,
    pull_extension_value,
)

# extension type code points used by the builders (names as in RFC 8446 / IANA)
SERVER_NAME: Final = 0
MAX_FRAGMENT_LENGTH: Final = 1
STATUS_REQUEST: Final = 5
SUPPORTED_GROUPS: Final = 10
EC_POINT_FORMATS: Final = 11
SIGNATURE_ALGORITHMS: Final = 13
ALPN: Final = 16
PADDING: Final = 21
ENCRYPT_THEN_MAC: Final = 22
EXTENDED_MASTER_SECRET: Final = 23
COMPRESS_CERTIFICATE: Final = 27
RECORD_SIZE_LIMIT: Final = 28
SESSION_TICKET: Final = 35
PRE_SHARED_KEY: Final = 41
EARLY_DATA: Final = 42
SUPPORTED_VERSIONS: Final = 43
COOKIE: Final = 44
PSK_KEY_EXCHANGE_MODES: Final = 45
POST_HANDSHAKE_AUTH: Final = 49
SIGNATURE_ALGORITHMS_CERT: Final = 50
KEY_SHARE: Final = 51
RENEGOTIATION_INFO: Final = 0xFF01
KEY_SHARE_DRAFT = 40  # key_share in TLS 1.3 drafts up to 22, "reserved" in the registry


@dataclass(frozen=True)
class Extension:
    """One extension as sent: raw type and extension_data."""

    type: int
    data: bytes = b""

    def decode(self, where: str = WHERE_CLIENT_HELLO) -> Any:
        """Typed value of the data (see `decode_extension`); raises DecodeError."""
        return decode_extension(self.type, self.data, where)

    @property
    def is_grease(self) -> bool:
        return is_grease(self.type)


def pull_extensions(buf: Buffer, where: str, *, minimum: int = 0,
                    label: str = "extensions") -> list[Extension]:
    """Read ``Extension extensions<minimum..2^16-1>``.

    When `buf` annotates, each extension gets an ``extensions[i]`` annotation (type name,
    offset of its type, length including its 4-byte header) followed by the decoded fields
    inside it, named ``<extension>.<field>``; an inner decoding failure is recorded as an
    annotation of kind "error" (the message itself keeps the raw extension). `label` names
    the block where a message holds several (``certificate_list[1].extensions``)."""
    extensions: list[Extension] = []
    start = buf.tell()
    with buf.field("extensions"), buf.block(2, minimum=minimum) as n:
        note_length(buf, label, start, 2, n)
        while not buf.eof():
            at = buf.tell()
            with buf.field(f"[{len(extensions)}]"):
                ext = Extension(buf.pull_uint16(), buf.pull_vector(2))
            if buf.annotations is not None:
                buf.note(f"{label}[{len(extensions)}]", at, 4 + len(ext.data),
                         extension_label(ext.type), "extension")
                buf.annotations.extend(annotate_extension(ext, where, at + 4))
            extensions.append(ext)
    return extensions


def annotate_extension(ext: Extension, where: str, offset: int) -> list[Any]:
    """Annotations of the fields inside `ext`, whose data starts at `offset`."""
    prefix = annotation_prefix(ext.type)
    if prefix is None:
        return []
    sub = Buffer(ext.data, base_offset=offset, annotate=True)
    try:
        pull_extension_value(sub, ext.type, where)
    except DecodeError as exc:
        sub.note("error", exc.offset, 0, exc.reason, "error")
    return [replace(a, name=f"{prefix}.{a.name}") for a in sub.annotations or []]


def push_extensions(w: Writer, extensions: Iterable[Extension]) -> None:
    with w.block(2):
        for ext in extensions:
            w.push_uint16(ext.type)
            w.push_vector(2, ext.data)


def find(extensions: Iterable[Extension], ext_type: int) -> Extension | None:
    """The first extension of `ext_type`, None when absent."""
    return next((e for e in extensions if e.type == ext_type), None)


# -- builders ---------------------------------------------------------------------------

def _u16_list(ext_type: int, values: Iterable[int], len_size: int = 2) -> Extension:
    w = Writer()
    with w.block(len_size):
        for v in values:
            w.push_uint16(v)
    return Extension(ext_type, w.data())


def _u8_list(ext_type: int, values: Iterable[int]) -> Extension:
    return Extension(ext_type, _vector(1, bytes(values)))


def _vector(len_size: int, data: bytes) -> bytes:
    w = Writer()
    w.push_vector(len_size, data)
    return w.data()


def server_name(host: str) -> Extension:
    """SNI with one host_name (IDNA-encoded when not ASCII)."""
    name = host.encode("ascii") if host.isascii() else host.encode("idna")
    w = Writer()
    with w.block(2):
        w.push_uint8(0)
        w.push_vector(2, name)
    return Extension(SERVER_NAME, w.data())


def supported_groups(groups: Iterable[int]) -> Extension:
    return _u16_list(SUPPORTED_GROUPS, groups)


def ec_point_formats(formats: Iterable[int] = (0,)) -> Extension:
    return _u8_list(EC_POINT_FORMATS, formats)


def signature_algorithms(schemes: Iterable[int]) -> Extension:
    return _u16_list(SIGNATURE_ALGORITHMS, schemes)


def signature_algorithms_cert(schemes: Iterable[int]) -> Extension:
    return _u16_list(SIGNATURE_ALGORITHMS_CERT, schemes)


def supported_versions_client(versions: Iterable[int]) -> Extension:
    return _u16_list(SUPPORTED_VERSIONS, versions, len_size=1)


def supported_versions_server(version: int) -> Extension:
    return Extension(SUPPORTED_VERSIONS, version.to_bytes(2, "big"))


def key_share_client(shares: Iterable[tuple[int, bytes]]) -> Extension:
    w = Writer()
    with w.block(2):
        for group, key in shares:
            w.push_uint16(group)
            w.push_vector(2, key)
    return Extension(KEY_SHARE, w.data())


def key_share_server(group: int, key_exchange: bytes) -> Extension:
    return Extension(KEY_SHARE, group.to_bytes(2, "big") + _vector(2, key_exchange))


def key_share_hrr(selected_group: int) -> Extension:
    return Extension(KEY_SHARE, selected_group.to_bytes(2, "big"))


def psk_key_exchange_modes(modes: Iterable[int] = (1,)) -> Extension:
    return _u8_list(PSK_KEY_EXCHANGE_MODES, modes)


def pre_shared_key_client(identities: Sequence[tuple[bytes, int]],
                          binders: Sequence[bytes]) -> Extension:
    """OfferedPsks: (identity, obfuscated_ticket_age) pairs and one binder per identity."""
    w = Writer()
    with w.block(2):
        for identity, age in identities:
            w.push_vector(2, identity)
            w.push_uint32(age)
    with w.block(2):
        for binder in binders:
            w.push_vector(1, binder)
    return Extension(PRE_SHARED_KEY, w.data())


def pre_shared_key_server(selected_identity: int) -> Extension:
    return Extension(PRE_SHARED_KEY, selected_identity.to_bytes(2, "big"))


def alpn(protocols: Iterable[str | bytes]) -> Extension:
    w = Writer()
    with w.block(2):
        for p in protocols:
            w.push_vector(1, p.encode("ascii") if isinstance(p, str) else p)
    return Extension(ALPN, w.data())


def status_request() -> Extension:
    """Client OCSP request with no responder ids and no request extensions."""
    return Extension(STATUS_REQUEST, b"\x01\x00\x00\x00\x00")


def empty(ext_type: int) -> Extension:
    """An extension with empty data (server status_request ack, SNI ack, flags)."""
    return Extension(ext_type)


def extended_master_secret() -> Extension:
    return Extension(EXTENDED_MASTER_SECRET)


def encrypt_then_mac() -> Extension:
    return Extension(ENCRYPT_THEN_MAC)


def post_handshake_auth() -> Extension:
    return Extension(POST_HANDSHAKE_AUTH)


def session_ticket(ticket: bytes = b"") -> Extension:
    return Extension(SESSION_TICKET, ticket)


def renegotiation_info(renegotiated_connection: bytes = b"") -> Extension:
    return Extension(RENEGOTIATION_INFO, _vector(1, renegotiated_connection))


def padding(length: int) -> Extension:
    return Extension(PADDING, bytes(length))


def padding_length(hello_length: int, target: int = 512) -> int | None:
    """Padding data length that brings a ClientHello of `hello_length` bytes (handshake
    header included, padding extension absent) up to `target`, as BoringSSL and browsers
    do; None when it is already long enough. An extension needs 4 header bytes, so when
    fewer than 5 are missing one byte of data is used (the hello slightly exceeds target)."""
    if hello_length >= target:
        return None
    missing = target - hello_length
    return missing - 4 if missing >= 5 else 1


def compress_certificate(algorithms: Iterable[int] = (2,)) -> Extension:
    return _u16_list(COMPRESS_CERTIFICATE, algorithms, len_size=1)


def record_size_limit(limit: int) -> Extension:
    return Extension(RECORD_SIZE_LIMIT, limit.to_bytes(2, "big"))


def max_fragment_length(code: int) -> Extension:
    return Extension(MAX_FRAGMENT_LENGTH, bytes([code]))


def early_data(max_early_data_size: int | None = None) -> Extension:
    """Empty in ClientHello/EncryptedExtensions; with a size in NewSessionTicket."""
    data = b"" if max_early_data_size is None else max_early_data_size.to_bytes(4, "big")
    return Extension(EARLY_DATA, data)


def cookie(data: bytes) -> Extension:
    return Extension(COOKIE, _vector(2, data))


def grease(ext_type: int = 0x0A0A, data: bytes = b"") -> Extension:
    """A GREASE extension (RFC 8701); `ext_type` must be one of the 0x?a?a values."""
    if not is_grease(ext_type):
        raise ValueError(f"0x{ext_type:04x} is not a GREASE value")
    return Extension(ext_type, data)
