"""The complete fields of a ClientHello that is cut short or malformed.

tshark shows every field of a ClientHello up to the point where it breaks (a snaplen cut,
a capture gap, a length that overruns): so do we. `partial_client_hello` reads the fields
in wire order and stops at the first one that is not whole; each extension is read only
when its body is whole. The result is marked `partial`, so that nothing is derived from
what is missing (no JA3/JA4 over a cut extension list).
"""

from __future__ import annotations

import struct
from typing import Final

from tlsprobe.wire.hello_fields import (
    CLIENT_FIELDS,
    KEY_SHARE,
    KEY_SHARE_DRAFT,
    ClientHelloInfo,
)

_INDEX: Final = {name: ClientHelloInfo._fields.index(name) for name, _ in CLIENT_FIELDS.values()}


def partial_client_hello(msg: bytes) -> ClientHelloInfo | None:
    """Fields of a ClientHello message (4-byte header on) as far as they are whole; None
    when not even the version and random are there."""
    n = len(msg)
    if n < 38 or msg[0] != 1:
        return None
    declared = 4 + int.from_bytes(msg[1:4], "big")
    end = min(n, declared)
    values = list(ClientHelloInfo(0, b"", b"", (), b"", ()))
    values[0], values[1] = (msg[4] << 8) | msg[5], bytes(msg[6:38])
    values[ClientHelloInfo._fields.index("size")] = declared
    values[ClientHelloInfo._fields.index("partial")] = True
    info = ClientHelloInfo._make(values)
    p = 38
    if p >= end or msg[p] > 32 or p + 1 + msg[p] > end:
        return info
    info = info._replace(session_id=bytes(msg[p + 1:p + 1 + msg[p]]))
    p += 1 + msg[p]
    if p + 2 > end:
        return info
    cs_len = (msg[p] << 8) | msg[p + 1]
    if p + 2 + cs_len > end or cs_len % 2:
        return info
    info = info._replace(cipher_suites=struct.unpack_from(f"!{cs_len // 2}H", msg, p + 2))
    p += 2 + cs_len
    if p >= end or p + 1 + msg[p] > end:
        return info
    info = info._replace(compression_methods=bytes(msg[p + 1:p + 1 + msg[p]]))
    p += 1 + msg[p]
    if p + 2 > end:
        return info
    stop = min(end, p + 2 + ((msg[p] << 8) | msg[p + 1]))
    p += 2
    types: list[int] = []
    bodies: dict[int, bytes] = {}
    while p + 4 <= stop:
        ext_type, size = struct.unpack_from("!HH", msg, p)
        if p + 4 + size > stop:
            break  # this extension is not whole: the cut (or the damage) is here
        types.append(ext_type)
        bodies.setdefault(ext_type, bytes(msg[p + 4:p + 4 + size]))
        p += 4 + size
    if KEY_SHARE in bodies:
        bodies.pop(KEY_SHARE_DRAFT, None)
    values = list(info)
    values[5] = tuple(types)
    problems = []
    for ext_type, (name, read) in CLIENT_FIELDS.items():
        body = bodies.get(ext_type)
        if body is not None:
            try:
                values[_INDEX[name]] = read(body)
            except (ValueError, struct.error):
                problems.append(name)
    values[ClientHelloInfo._fields.index("problems")] = tuple(problems)
    return ClientHelloInfo._make(values)
