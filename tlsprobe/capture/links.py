"""The rarer link layers of `decode`: FDDI, Frame Relay, Apple PKTAP, PPI, Linux NFLOG, Linux
ARCNET, IP over InfiniBand and Juniper's Ethernet; and the
rarer encapsulations: Teredo and AYIYA (IPv6 over UDP), the subframe of an 802.11 A-MSDU.

Each reader finds where the packet inside starts and what it is, and says so as a `Step`
for decode.py to go on with (this module imports nothing of it): ``(kind, offset, end,
value)`` with kind "ipv4", "ipv6" or "ip" (value 0), "ethertype" (value: the EtherType) or
"link" (value: the link type PKTAP and PPI wrap, never their own), or the reason the packet
is skipped.
"""

from __future__ import annotations

from typing import Final

LINKTYPE_FDDI: Final = 10
LINKTYPE_FRELAY: Final = 107
LINKTYPE_PKTAP: Final = 258
LINKTYPE_PKTAP_DARWIN: Final = 149
LINKTYPE_PPI: Final = 192
LINKTYPE_NFLOG: Final = 239
LINKTYPE_ARCNET_LINUX: Final = 129
LINKTYPE_IPOIB: Final = 242
LINKTYPE_JUNIPER_ETHER: Final = 178
OTHER_LINKS: Final = frozenset((LINKTYPE_FRELAY, LINKTYPE_PKTAP, LINKTYPE_PKTAP_DARWIN, LINKTYPE_PPI,
                                LINKTYPE_NFLOG, LINKTYPE_FDDI, LINKTYPE_ARCNET_LINUX,
                                LINKTYPE_IPOIB, LINKTYPE_JUNIPER_ETHER))
_WRAPPERS: Final = frozenset((LINKTYPE_PKTAP, LINKTYPE_PKTAP_DARWIN, LINKTYPE_PPI))

Step = tuple[str, int, int, int] | str

UDP_TEREDO: Final = 3544
UDP_AYIYA: Final = 5072
UDP_GRE: Final = 4754  # GRE in UDP (RFC 8086)


def gre_aruba(ptype: int) -> bool:
    """GRE protocol types of Aruba access points' tunnels: an 802.11 frame follows (as
    Wireshark and Zeek read 0x8200-0x8370 in steps of 0x10)."""
    return 0x8200 <= ptype <= 0x8370 and not ptype & 0xF


def teredo(buf: bytes, off: int, end: int) -> Step | None:
    """Teredo (RFC 4380 5.1.1): an IPv6 packet, maybe after an authentication indicator
    (0x0001, identifier and value lengths, then those, a nonce and a confirmation byte)
    and an origin indication (0x0000, port, address). None when no IPv6 packet fills the
    datagram exactly (plain UDP on the port)."""
    p = off
    if end - p >= 4 and buf[p] == 0 and buf[p + 1] == 1:
        p += 13 + buf[p + 2] + buf[p + 3]
    if end - p >= 8 and buf[p] == 0 and buf[p + 1] == 0:
        p += 8
    if end - p < 40 or buf[p] >> 4 != 6 or 40 + ((buf[p + 4] << 8) | buf[p + 5]) != end - p:
        return None
    return "ipv6", p, end, 0


def ayiya(buf: bytes, off: int, end: int) -> Step | None:
    """AYIYA ("Anything In Anything", SixXS's tunnels): identity length (a power of 2) and
    type, signature length (4-byte words) and hash, authentication method and operation,
    next header, epoch; then the identity, the signature, and the packet when the operation
    is 1 (forward). None when that does not fit (plain UDP on the port)."""
    if end - off < 8 or buf[off + 2] & 0xF != 1 or buf[off + 3] not in (4, 41):
        return None
    p = off + 8 + (1 << (buf[off] >> 4)) + ((buf[off + 1] >> 4) << 2)
    if p >= end:
        return None
    return ("ipv4" if buf[off + 3] == 4 else "ipv6"), p, end, 0


def amsdu(buf: bytes, off: int, end: int) -> Step:
    """An 802.11 A-MSDU: subframes of destination, source, length, then LLC/SNAP and the
    packet, each padded to 4 bytes. A frame of one subframe is read here; one of several
    is "wlan_amsdu", for decode.py to hand over whole (`amsdu_subframes` splits it)."""
    if end - off < 22:
        return "truncated"
    stop = off + 14 + ((buf[off + 12] << 8) | buf[off + 13])
    if stop > end:
        return "truncated"
    if end - (stop + (-(stop - off) % 4)) >= 14:
        return "wlan_amsdu"
    return _subframe(buf, off, stop)


def _subframe(buf: bytes, off: int, stop: int) -> Step:
    if stop - off < 22:
        return "truncated"
    if buf[off + 14] != 0xAA or buf[off + 15] != 0xAA or buf[off + 16] != 0x03:
        return "non_ip"
    return "ethertype", off + 22, stop, (buf[off + 20] << 8) | buf[off + 21]


def amsdu_subframes(buf: bytes, off: int, end: int) -> list[Step]:
    """Where each packet of an A-MSDU of several subframes goes on, as tshark reads every
    subframe; a subframe the capture cut short ends at the frame's end (its IP header
    then tells how much is missing)."""
    out: list[Step] = []
    while end - off >= 14:
        stop = min(end, off + 14 + ((buf[off + 12] << 8) | buf[off + 13]))
        out.append(_subframe(buf, off, stop))
        off = stop + (-(stop - off) % 4)
    return out


def step(link_type: int, buf: bytes, start: int, end: int) -> Step:
    """Where the packet of one of `OTHER_LINKS` goes on."""
    if link_type == LINKTYPE_FRELAY:
        return frame_relay(buf, start, end)
    if link_type == LINKTYPE_NFLOG:
        return nflog(buf, start, end)
    if link_type == LINKTYPE_FDDI:  # frame control, destination, source, then 802.2 LLC/SNAP
        p = start + 13
        if end - p < 8:
            return "truncated"
        if buf[p] != 0xAA or buf[p + 1] != 0xAA or buf[p + 2] != 0x03:
            return "non_ip"
        return "ethertype", p + 8, end, (buf[p + 6] << 8) | buf[p + 7]
    if link_type == LINKTYPE_ARCNET_LINUX:
        return arcnet_linux(buf, start, end)
    if link_type == LINKTYPE_IPOIB:  # 40 bytes of addresses, an EtherType, 2 reserved bytes
        if end - start < 44:
            return "truncated"
        return "ethertype", start + 44, end, (buf[start + 40] << 8) | buf[start + 41]
    if link_type == LINKTYPE_JUNIPER_ETHER:
        return juniper_ether(buf, start, end)
    if link_type == LINKTYPE_PPI:  # version, flags, length and the packet's link type (LE)
        if end - start < 8:
            return "truncated"
        hlen = buf[start + 2] | (buf[start + 3] << 8)
        inner = int.from_bytes(buf[start + 4:start + 8], "little")
        if hlen < 8 or hlen > end - start or inner in _WRAPPERS:
            return "non_ip"
        return "link", start + hlen, end, inner
    return pktap(buf, start, end)


def arcnet_linux(buf: bytes, start: int, end: int) -> Step:
    """Linux ARCNET: source, destination, a 2-byte offset and the protocol id; RFC 1201's
    protocols (IPv4 212, IPv6 0xC4) then have a split flag and a sequence number, RFC
    1051's (IPv4 240) and diagnostics none (as tcpdump and Wireshark read it)."""
    if end - start < 5:
        return "truncated"
    kind = buf[start + 4]
    hlen = 5 if kind in (240, 241, 0x80) else 8
    if end - start < hlen:
        return "truncated"
    if kind == 240 or kind == 212:
        return "ipv4", start + hlen, end, 0
    if kind == 0xC4:
        return "ipv6", start + hlen, end, 0
    return "non_ip"


def juniper_ether(buf: bytes, start: int, end: int) -> Step:
    """Juniper's Ethernet: "MGC", flags, the extensions' length and TLVs when flag 0x80 says
    so, then an Ethernet frame, or (flag 0x02: the layer 2 header stripped) 4 bytes and an
    IP packet (as tcpdump reads it)."""
    if end - start < 4 or buf[start:start + 3] != b"MGC":
        return "non_ip"
    flags, p = buf[start + 3], start + 4
    if flags & 0x80:
        if end - p < 2:
            return "truncated"
        p += 2 + ((buf[p] << 8) | buf[p + 1])
    if flags & 0x02:
        return ("ip", p + 4, end, 0) if end - p > 4 else "truncated"
    return ("link", p, end, 1) if end - p >= 14 else "truncated"


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
