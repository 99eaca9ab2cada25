"""Readers of the hello extension bodies the fast summaries take (offline.hello).

Each reads one whole extension body, checks its vectors as the wire codec does and raises
ValueError (or struct.error) when the body is malformed: the summary then leaves the field
empty and names the extension among its problems.
"""

from __future__ import annotations

import struct

_LISTS: dict[int, struct.Struct] = {}


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
            host = data[p + 3:p + 3 + size].decode("ascii", "backslashreplace")
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
