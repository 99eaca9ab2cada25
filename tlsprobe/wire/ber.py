"""BER and DER elements, as OpenSSL's ASN1_get_object reads them: a tag, its length (DER's
shortest form, or BER's longer and indefinite forms) and where its contents end.

The one reader of ASN.1 element headers for the certificate outline (wire/spki.py), the
DER twin of a certificate `cryptography` refuses (wire/dertwin.py) and the engine's readers
of extension bytes. Every length is checked against its container before it is used;
ValueError is the only error. Reading BER is bounded in CPU: the end of a long
indefinite-length element is found once per buffer (`_ends`), nesting at most 30 deep
(OpenSSL's ASN1_MAX_CONSTRUCTED_NEST).
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["ber_element", "der_children", "der_element", "der_length", "oid_text"]


def der_element(der: bytes, at: int, end: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at `at`; ValueError
    when it does not fit before `end` or its length is not DER."""
    if at + 2 > end:
        raise ValueError("truncated DER element")
    tag, first = der[at], der[at + 1]
    at += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if not 1 <= count <= 4 or at + count > end:
            raise ValueError("bad DER length")
        length = int.from_bytes(der[at:at + count], "big")
        at += count
    if at + length > end:
        raise ValueError("DER element longer than its container")
    return tag, at, at + length


def der_children(der: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """(tag, start, end of the contents) of each DER element from `start` to `end`
    (ValueError as `der_element`)."""
    out = []
    while start < end:
        tag, body, start = der_element(der, start, end)
        out.append((tag, body, start))
    return out


def oid_text(value: bytes) -> str:
    """Dotted form of an OBJECT IDENTIFIER's contents (X.690 8.19)."""
    if not value or value[-1] & 0x80:
        raise ValueError("bad OID")
    arcs: list[int] = []
    n = 0
    for byte in value:
        n = (n << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(n)
            n = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


#: how deep indefinite lengths may nest (OpenSSL's ASN1_MAX_CONSTRUCTED_NEST is 30)
_MAX_NEST = 30


@lru_cache(maxsize=8)
def _ends(der: bytes) -> dict[int, tuple[int, int]]:
    """The indefinite-length elements of `der` already read: their position -> (end of
    their contents, how deep indefinite lengths nest inside them, themselves included).
    Each is read once per buffer, however many readers walk it and from whatever depth: a
    reading of a hostile certificate is linear in its size, not in its size times its
    depth (a 500 kB certificate of 24 nested indefinite lengths took 1.6 s)."""
    return {}


def ber_element(der: bytes, at: int, end: int, depth: int = 0) -> tuple[int, int, int, int]:
    """(tag, start of the contents, end of the contents, end of the element) of the BER
    element at `at`, as OpenSSL's ASN1_get_object reads one: a length in the short form,
    a long form of any count of bytes whose value (leading zeros skipped) fits 8 bytes, or
    indefinite (0x80: a constructed element whose contents end at an end-of-contents
    00 00, nested at most 30 deep below `depth`). ValueError when it does not fit before
    `end`."""
    if at + 2 > end:
        raise ValueError("truncated BER element")
    tag, first = der[at], der[at + 1]
    if first == 0x80:
        if not tag & 0x20:
            raise ValueError("an indefinite length on a primitive element")
        stop, height = _indefinite(der, at, end)
        if depth + height > _MAX_NEST:
            raise ValueError("indefinite lengths nested too deep")
        if stop + 2 > end:
            raise ValueError("an indefinite length without its end-of-contents")
        return tag, at + 2, stop, stop + 2
    at += 2
    length = first
    if first > 0x80:
        count = first & 0x7F
        if at + count > end:
            raise ValueError("bad BER length")
        raw = der[at:at + count].lstrip(b"\x00")
        if len(raw) > 8 or first == 0xFF:
            raise ValueError("bad BER length")
        length = int.from_bytes(raw, "big")
        at += count
    if at + length > end:
        raise ValueError("BER element longer than its container")
    return tag, at, at + length, at + length


#: an indefinite-length element is remembered once its contents are this long (a short
#: one is read again at little cost; a hostile run of them fills no memory)
_REMEMBERED = 256


def _indefinite(der: bytes, at: int, end: int, depth: int = 0) -> tuple[int, int]:
    """(end of the contents, nesting height) of the indefinite-length element at `at`
    (`depth` below the reading's first), a long one read once per buffer (`_ends`);
    ValueError when its end-of-contents is not before `end` or it nests too deep."""
    ends = _ends(der)
    known = ends.get(at)
    if known is None:
        if depth >= _MAX_NEST:
            raise ValueError("indefinite lengths nested too deep")
        pos, height = at + 2, 1
        while True:
            if pos + 2 > len(der):
                raise ValueError("an indefinite length without its end-of-contents")
            if der[pos] == der[pos + 1] == 0:
                break
            if der[pos + 1] == 0x80 and der[pos] & 0x20:
                stop, inner = _indefinite(der, pos, len(der), depth + 1)
                height = max(height, inner + 1)
                pos = stop + 2
            else:
                pos = ber_element(der, pos, len(der))[3]
        known = (pos, height)
        if pos - at > _REMEMBERED:
            ends[at] = known
    if known[0] + 2 > end:
        raise ValueError("an indefinite length without its end-of-contents")
    return known


def der_length(n: int) -> bytes:
    """The DER encoding of a length `n` (X.690 8.1.3: short form below 128, else the
    shortest long form)."""
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw
