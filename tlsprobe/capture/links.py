"""The rarer link layers of `decode`: Frame Relay, Apple PKTAP, PPI and Linux NFLOG.

Each reader finds where the packet inside starts and what it is, and says so as a `Step`
for decode.py to go on with (this module imports nothing of it): ``(kind, offset, end,
value)`` with kind "ipv4", "ipv6" or "ip" (value 0), "ethertype" (value: the EtherType) or
"link" (value: the link type PKTAP and PPI wrap, never their own), or the reason the packet
is skipped.
"""

from __future__ import annotations

from typing import Final

LINKTYPE_FRELAY: Final = 107
LINKTYPE_PKTAP: Final = 258
LINKTYPE_PKTAP_DARWIN: Final = 149
LINKTYPE_PPI: Final = 192
LINKTYPE_NFLOG: Final = 239
OTHER_LINKS: Final = frozenset((LINKTYPE_FRELAY, LINKTYPE_PKTAP, LINKTYPE_PKTAP_DARWIN, LINKTYPE_PPI,
                                LINKTYPE_NFLOG))
_WRAPPERS: Final = frozenset((LINKTYPE_PKTAP, LINKTYPE_PKTAP_DARWIN, LINKTYPE_PPI))

Step = tuple[str, int, int, int] | str


def step(link_type: int, buf: bytes, start: int, end: int) -> Step:
    """Where the packet of one of `OTHER_LINKS` goes on."""
    if link_type == LINKTYPE_FRELAY:
        return frame_relay(buf, start, end)
    if link_type == LINKTYPE_NFLOG:
        return nflog(buf, start, end)
    if link_type == LINKTYPE_PPI:  # version, flags, length and the packet's link type (LE)
        if end - start < 8:
            return "truncated"
        hlen = buf[start + 2] | (buf[start + 3] << 8)
        inner = int.from_bytes(buf[start + 4:start + 8], "little")
        if hlen < 8 or hlen > end - start or inner in _WRAPPERS:
            return "non_ip"
        return "link", start + hlen, end, inner
    return pktap(buf, start, end)


def frame_relay(buf: bytes, start: int, end: int) -> Step:
    """Frame Relay: a 2-byte Q.922 address, then UI control (0x03) and an NLPID (RFC 2427:
    IPv4 0xCC, IPv6 0x8E, SNAP 0x80 with an OUI and EtherType), maybe after a padding byte,
    or Cisco's encapsulation: an EtherType right after the address."""
    p = start + 2
    if end - p < 2:
        return "truncated"
    if buf[p] != 0x03:
        return "ethertype", p + 2, end, (buf[p] << 8) | buf[p + 1]
    p += 1
    if buf[p] == 0x00 and end - p >= 2:  # padding before the NLPID
        p += 1
    nlpid = buf[p]
    if nlpid == 0xCC:
        return "ipv4", p + 1, end, 0
    if nlpid == 0x8E:
        return "ipv6", p + 1, end, 0
    if nlpid == 0x80 and end - p >= 6:
        return "ethertype", p + 6, end, (buf[p + 4] << 8) | buf[p + 5]
    return "non_ip"


def pktap(buf: bytes, start: int, end: int) -> Step:
    """Apple's PKTAP (macOS `tcpdump -i pktap`): a header in the capturing host's byte
    order (little-endian on every Mac) giving its own length, the record type (1: a
    packet) and the packet's link type, then the packet."""
    if end - start < 12:
        return "truncated"
    hlen = int.from_bytes(buf[start:start + 4], "little")
    record = int.from_bytes(buf[start + 4:start + 8], "little")
    inner = int.from_bytes(buf[start + 8:start + 12], "little")
    if record != 1 or not 12 <= hlen <= end - start or inner in _WRAPPERS:
        return "non_ip"
    return "link", start + hlen, end, inner


def nflog(buf: bytes, start: int, end: int) -> Step:
    """Linux NFLOG (`tcpdump -i nflog:N`): address family, version, resource id, then
    TLVs (length and type in the capturing host's byte order, padded to 4 bytes); the
    packet is the payload TLV (type 9), an IPv4 or IPv6 packet."""
    if end - start < 4:
        return "truncated"
    family = buf[start]
    p = start + 4
    # the first TLV's length (at least 4) tells the byte order
    little = p + 2 <= end and 4 <= buf[p] | (buf[p + 1] << 8) <= end - p
    while p + 4 <= end:
        if little:
            length, kind = buf[p] | (buf[p + 1] << 8), buf[p + 2] | (buf[p + 3] << 8)
        else:
            length, kind = (buf[p] << 8) | buf[p + 1], (buf[p + 2] << 8) | buf[p + 3]
        kind &= 0x7FFF  # (the nested-attribute flag)
        if length < 4 or p + length > end:
            return "truncated"
        if kind == 9:
            return ("ipv4" if family == 2 else "ipv6" if family == 10 else "ip"), p + 4, \
                p + length, 0
        p += (length + 3) & ~3
    return "non_ip"
