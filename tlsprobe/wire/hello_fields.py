"""The hello summaries' types and the readers of the extension bodies they take.

`ClientHelloInfo` / `ServerHelloInfo` are what a capture report and the fingerprints need of
a hello, built by the fast readers (wire.hello_summary), from a cut hello
(wire.hello_partial) or from the codec's typed messages (wire.hello_info). Each body reader
reads one whole extension body, checks its vectors as the wire codec does and raises
ValueError (or struct.error) when the body is malformed: the summary then leaves the field
empty and names the extension among its problems.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from tlsprobe.wire._util import wire_text
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM

SERVER_NAME, SUPPORTED_GROUPS, EC_POINT_FORMATS, SIGNATURE_ALGORITHMS = 0, 10, 11, 13
ALPN: Final = 16
ETM: Final = 22
EMS: Final = 23
SESSION_TICKET: Final = 35
KEY_SHARE_DRAFT: Final = 40
PRE_SHARED_KEY: Final = 41
EARLY_DATA: Final = 42
SUPPORTED_VERSIONS: Final = 43
KEY_SHARE: Final = 51


class ClientHelloInfo(NamedTuple):
    """What a ClientHello offered, raw ints in wire order (GREASE kept).

    `extensions` are the extension types as sent; `key_shares` are (group, key length);
    `session_ticket` is the ticket length (None when the extension is absent);
    `problems` names extensions whose content was malformed (their fields stay empty)."""

    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suites: tuple[int, ...]
    compression_methods: bytes
    extensions: tuple[int, ...]
    sni: str | None = None
    alpn: tuple[bytes, ...] = ()
    supported_groups: tuple[int, ...] = ()
    ec_point_formats: tuple[int, ...] = ()
    signature_algorithms: tuple[int, ...] = ()
    supported_versions: tuple[int, ...] = ()
    key_shares: tuple[tuple[int, int], ...] = ()
    session_ticket: int | None = None
    psk_identities: int = 0
    early_data: bool = False
    size: int = 0
    sslv2: bool = False
    problems: tuple[str, ...] = ()
    sslv2_cipher_specs: tuple[int, ...] = ()  # an SSLv2-format hello's 3-byte specs, all
    partial: bool = False  # cut short or malformed: only the fields before that are here


class ServerHelloInfo(NamedTuple):
    """What a ServerHello (or HelloRetryRequest) chose."""

    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suite: int
    compression_method: int
    extensions: tuple[int, ...]
    selected_version: int
    key_share: tuple[int, int] | None = None     # (group, key length); not in an HRR
    hrr_group: int | None = None                 # HelloRetryRequest selected_group
    alpn: bytes | None = None
    psk_identity: int | None = None
    extended_master_secret: bool = False
    encrypt_then_mac: bool = False
    session_ticket: bool = False
    size: int = 0
    problems: tuple[str, ...] = ()

    @property
    def is_hello_retry_request(self) -> bool:
        return self.random == HELLO_RETRY_REQUEST_RANDOM

_LISTS: Final[dict[int, struct.Struct]] = {}


def uint16s(data: bytes, start: int, count: int) -> tuple[int, ...]:
    unpack = _LISTS.get(count)
    if unpack is None:
        unpack = _LISTS[count] = struct.Struct(f"!{count}H")
    return unpack.unpack_from(data, start)


def u16_list(data: bytes, len_size: int, minimum: int, maximum: int = 0xFFFF) -> tuple[int, ...]:
    """A whole extension body that is one vector of uint16 (`len_size`-byte length)."""
    if len(data) < len_size:
        raise ValueError("short")
    n = data[0] if len_size == 1 else (data[0] << 8) | data[1]
    if n != len(data) - len_size or n % 2 or n < minimum or n > maximum:
        raise ValueError("bad list length")
    return uint16s(data, len_size, n // 2)


def u8_list(data: bytes, minimum: int) -> tuple[int, ...]:
    if not data or data[0] != len(data) - 1 or data[0] < minimum:
        raise ValueError("bad list length")
    return tuple(data[1:])


def server_name(data: bytes) -> str | None:
    if len(data) < 3 or (data[0] << 8) | data[1] != len(data) - 2:
        raise ValueError("bad server_name_list")
    p, host = 2, None
    while p < len(data):
        if p + 3 > len(data):
            raise ValueError("truncated name")
        size = (data[p + 1] << 8) | data[p + 2]
        if size < 1 or p + 3 + size > len(data):
            raise ValueError("bad name length")
        if data[p] == 0 and host is None:
            host = wire_text(data[p + 3:p + 3 + size])
        p += 3 + size
    return host


def alpn(data: bytes) -> tuple[bytes, ...]:
    if len(data) < 4 or (data[0] << 8) | data[1] != len(data) - 2:
        raise ValueError("bad protocol_name_list")
    p, out = 2, []
    while p < len(data):
        size = data[p]
        if size < 1 or p + 1 + size > len(data):
            raise ValueError("bad protocol name")
        out.append(bytes(data[p + 1:p + 1 + size]))
        p += 1 + size
    return tuple(out)


def client_shares(data: bytes) -> tuple[tuple[int, int], ...]:
    if len(data) < 2 or (data[0] << 8) | data[1] != len(data) - 2:
        raise ValueError("bad client_shares")
    p, out = 2, []
    while p < len(data):
        if p + 4 > len(data):
            raise ValueError("truncated share")
        size = (data[p + 2] << 8) | data[p + 3]
        if size < 1 or p + 4 + size > len(data):
            raise ValueError("bad key_exchange length")
        out.append(((data[p] << 8) | data[p + 1], size))
        p += 4 + size
    return tuple(out)


def psk_identities(data: bytes) -> int:
    if len(data) < 2:
        raise ValueError("short")
    end = 2 + ((data[0] << 8) | data[1])
    p, count = 2, 0
    if end > len(data):
        raise ValueError("bad identities length")
    while p < end:
        if p + 2 > end:
            raise ValueError("truncated identity")
        p += 2 + ((data[p] << 8) | data[p + 1]) + 4
        count += 1
    if p != end:
        raise ValueError("identities do not add up")
    return count


#: extension type -> (ClientHelloInfo field, reader of the extension body), in the order
#: the codec-based summary checks them (problems are listed in this order)
CLIENT_FIELDS: Final[dict[int, tuple[str, Callable[[bytes], Any]]]] = {
    SERVER_NAME: ("sni", server_name),
    SUPPORTED_GROUPS: ("supported_groups", lambda d: u16_list(d, 2, 2)),
    EC_POINT_FORMATS: ("ec_point_formats", lambda d: u8_list(d, 1)),
    SIGNATURE_ALGORITHMS: ("signature_algorithms", lambda d: u16_list(d, 2, 2)),
    ALPN: ("alpn", alpn),
    SUPPORTED_VERSIONS: ("supported_versions", lambda d: u16_list(d, 1, 2, 254)),
    KEY_SHARE: ("key_shares", client_shares),
    KEY_SHARE_DRAFT: ("key_shares", client_shares),
    SESSION_TICKET: ("session_ticket", len),
    PRE_SHARED_KEY: ("psk_identities", psk_identities),
    EARLY_DATA: ("early_data", lambda d: True),
}
