"""Link layers, IPv4/IPv6 and tunnels, down to a TCP or UDP header.

`decode(link_type, buf, start, end)` reads a packet in place and returns either a tuple
``(proto, addr_off, addr_len, l4_off, l4_end, cut)`` or a short reason string (why the
packet is skipped; the caller counts reasons).  ``proto`` is 6 (TCP) or 17 (UDP); the source
address is ``buf[addr_off:addr_off+addr_len]`` and the destination follows it; the transport
header and payload are ``buf[l4_off:l4_end]``; ``cut`` is how many bytes of the IP packet the
capture did not keep (snaplen, or a length field claiming more than the frame holds).  An IP
fragment comes back as ``(FRAGMENT_V4 or FRAGMENT_V6, ip_off, ip_end, depth, at, cut)``
(``at``: the IPv4 payload or the IPv6 fragment header) for fragments.py to reassemble; the
packet it completes is decoded again with `ip_any`. An 802.11 A-MSDU of several packets
comes back as ``(AMSDU, off, end, depth, 0, 0)``: `amsdu_packets` decodes each.
Nothing is copied: these functions sit on the per-packet path.

Link types: Ethernet (1) with 802.1Q/QinQ tags, 802.3 SNAP, PPPoE and MPLS; BSD null (0,
AF in the capturing host's byte order, so either), OpenBSD loop (108, AF big-endian) and
OpenBSD enc (109, a 12-byte header: AF, SPI, flags); raw IP (101, 12, 14, 228, 229);
Linux cooked SLL (113) and SLL2 (276); PPP (9, 50); FDDI (10); Cisco HDLC (104); Frame
Relay (107); Apple PKTAP (258, and 149 as macOS writes it) and PPI (192) over any of these;
Linux NFLOG (239); 802.11 data frames (105, radiotap 127, Centrino EtherType 0x2452) when they are not
encrypted (every subframe of an A-MSDU).  Tunnels: IP-in-IP,
6in4, 802.1ah provider backbone bridging (EtherType 0x88E7), GRE (with transparent Ethernet
bridging, ERSPAN types I-III, PPTP's PPP, Aruba's 802.11 frames, WCCP redirects, raw Frame
Relay, NSH), VXLAN (UDP 4789), GENEVE
(6081), GTP-U (2152), GRE in UDP (4754), CAPWAP data (5247, either side: 802.3 or 802.11
frames of the wireless clients; its DTLS is the UDP layer's), Teredo (3544, either side)
and AYIYA (5072, either side).
"""

from __future__ import annotations

from typing import Final

from tlsprobe.capture.events import AMSDU, FRAGMENT_V4, FRAGMENT_V6, MAX_TUNNEL_DEPTH
from tlsprobe.capture.links import (
    OTHER_LINKS,
    UDP_AYIYA,
    UDP_GRE,
    UDP_TEREDO,
    Step,
    amsdu,
    amsdu_subframes,
    ayiya,
    frame_relay,
    gre_aruba,
    step,
    teredo,
)

Decoded = tuple[int, int, int, int, int, int] | str

LINKTYPE_NULL: Final = 0
LINKTYPE_ETHERNET: Final = 1
LINKTYPE_PPP: Final = 9
LINKTYPE_RAW: Final = 101
LINKTYPE_PPP_HDLC: Final = 50
LINKTYPE_SLL: Final = 113
LINKTYPE_SLL2: Final = 276
LINKTYPE_LOOP: Final = 108
LINKTYPE_ENC: Final = 109
LINKTYPE_IPV4: Final = 228
LINKTYPE_IPV6: Final = 229
LINKTYPE_IEEE802_11: Final = 105
LINKTYPE_RADIOTAP: Final = 127
LINKTYPE_C_HDLC: Final = 104  # Cisco HDLC (Frame Relay, PKTAP, PPI, NFLOG: links.py)
LINK_TYPE_NAMES = {0: "null", 1: "ethernet", 9: "ppp", 10: "fddi", 12: "raw", 14: "raw",
                   50: "ppp_hdlc", 101: "raw", 104: "c_hdlc", 105: "ieee802_11", 107: "frelay", 108: "loop",
                   109: "enc", 113: "linux_sll", 127: "radiotap", 149: "pktap", 192: "ppi",
                   228: "ipv4", 229: "ipv6", 239: "nflog", 258: "pktap", 276: "linux_sll2"}

_VLAN_TYPES: Final = frozenset((0x8100, 0x88A8, 0x9100, 0x9200, 0x9300))
_AF_INET6: Final = frozenset((10, 24, 28, 30))
_IPV6_EXT: Final = frozenset((0, 43, 60, 135, 139, 140))  # hop-by-hop, routing, dest opts, ...
UDP_VXLAN: Final = 4789
UDP_GENEVE: Final = 6081
UDP_GTPU: Final = 2152
UDP_CAPWAP_DATA: Final = 5247
_UDP_TUNNELS: Final = frozenset((UDP_VXLAN, UDP_GENEVE, UDP_GTPU, UDP_GRE))
_EITHER_PORT: Final = frozenset((UDP_CAPWAP_DATA, UDP_TEREDO, UDP_AYIYA))
#: GRE payloads that carry no IP (ARP, CDP, NHRP, OSI, IPX, GRE tunnel bonding control)
_GRE_NOT_IP: Final = frozenset((0x0806, 0x2000, 0x2001, 0x00FE, 0x8137, 0x0101, 0xB7EA))
MAX_DEPTH: Final = MAX_TUNNEL_DEPTH  # nested encapsulations followed


def decode(link_type: int, buf: bytes, start: int, end: int) -> Decoded:
    """Decode one captured packet of the given link type (see the module docstring)."""
    if link_type == LINKTYPE_ETHERNET:
        return ether(buf, start, end, 0)
    if link_type in (LINKTYPE_RAW, 12, 14, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return ip_any(buf, start, end, 0)
    if link_type == LINKTYPE_NULL or link_type == LINKTYPE_LOOP or link_type == LINKTYPE_ENC:
        hlen = 12 if link_type == LINKTYPE_ENC else 4
        if end - start < hlen:
            return "truncated"
        if link_type == LINKTYPE_LOOP:
            af = int.from_bytes(buf[start:start + 4], "big")
        else:  # host byte order of the capturing machine: an AF value is small
            af = int.from_bytes(buf[start:start + 4], "little")
            if af > 0xFFFF:
                af = int.from_bytes(buf[start:start + 4], "big")
        if af == 2:
            return ipv4(buf, start + hlen, end, 0)
        if af in _AF_INET6:
            return ipv6(buf, start + hlen, end, 0)
        return "non_ip"
    if link_type == LINKTYPE_SLL:
        if end - start < 16:
            return "truncated"
        return ethertype((buf[start + 14] << 8) | buf[start + 15], buf, start + 16, end, 0)
    if link_type == LINKTYPE_SLL2:
        if end - start < 20:
            return "truncated"
        return ethertype((buf[start] << 8) | buf[start + 1], buf, start + 20, end, 0)
    if link_type == LINKTYPE_PPP or link_type == LINKTYPE_PPP_HDLC:
        return ppp(buf, start, end, 0)
    if link_type == LINKTYPE_IEEE802_11:
        return wlan(buf, start, end, 0)
    if link_type == LINKTYPE_RADIOTAP:
        if end - start < 8:
            return "truncated"
        return wlan(buf, start + (buf[start + 2] | (buf[start + 3] << 8)), end, 0)
    if link_type == LINKTYPE_C_HDLC:  # address, control, then an EtherType
        if end - start < 4:
            return "truncated"
        return ethertype((buf[start + 2] << 8) | buf[start + 3], buf, start + 4, end, 0)
    if link_type in OTHER_LINKS:  # the rarer link layers (links.py): where the packet goes on
        where = step(link_type, buf, start, end)
        if isinstance(where, str):
            return where
        if where[0] == "link":  # (links.py never wraps its own kind)
            return decode(where[3], buf, where[1], where[2])
        return _follow(where, buf, 0)
    return f"link_type_{link_type}"


def _follow(where: Step, buf: bytes, depth: int) -> Decoded:
    """Go on where links.py's reader says the packet inside starts (never "link")."""
    if isinstance(where, str):
        return where
    kind, off, stop, value = where
    if kind == "ethertype":
        return ethertype(value, buf, off, stop, depth)
    return ipv4(buf, off, stop, depth) if kind == "ipv4" else ipv6(buf, off, stop, depth) \
        if kind == "ipv6" else ip_any(buf, off, stop, depth)


def ether(buf: bytes, off: int, end: int, depth: int) -> Decoded:
    if end - off < 14:
        return "truncated"
    etype = (buf[off + 12] << 8) | buf[off + 13]
    if etype == 0x0800:
        return ipv4(buf, off + 14, end, depth)
    if etype == 0x86DD:
        return ipv6(buf, off + 14, end, depth)
    return ethertype(etype, buf, off + 14, end, depth)


def ethertype(etype: int, buf: bytes, off: int, end: int, depth: int) -> Decoded:
    """Dispatch on an EtherType, peeling VLAN tags, 802.3 SNAP, PPPoE and MPLS first."""
    while etype in _VLAN_TYPES:
        if end - off < 4:
            return "truncated"
        etype = (buf[off + 2] << 8) | buf[off + 3]
        off += 4
    if etype <= 1500:  # 802.3 length: only LLC/SNAP carries IP
        if end - off < 8:
            return "truncated"
        if buf[off] != 0xAA or buf[off + 1] != 0xAA or buf[off + 2] != 0x03:
            return "non_ip"
        etype = (buf[off + 6] << 8) | buf[off + 7]
        off += 8
        while etype in _VLAN_TYPES:
            if end - off < 4:
                return "truncated"
            etype = (buf[off + 2] << 8) | buf[off + 3]
            off += 4
    if etype == 0x0800:
        return ipv4(buf, off, end, depth)
    if etype == 0x86DD:
        return ipv6(buf, off, end, depth)
    if etype == 0x8864:  # PPPoE session: ver/type, code, session id, length, then PPP
        if end - off < 6:
            return "truncated"
        length = (buf[off + 4] << 8) | buf[off + 5]
        return ppp(buf, off + 6, min(end, off + 6 + length), depth)
    if etype == 0x8847 or etype == 0x8848:
        return mpls(buf, off, end, depth)
    if etype == 0x88E7:  # 802.1ah provider backbone: I-TAG, then the customer's frame
        return ether(buf, off + 4, end, depth + 1) if depth < MAX_DEPTH else "tunnel_too_deep"
    if etype == 0x2452:  # Intel Centrino: an 802.11 frame follows
        return wlan(buf, off, end, depth + 1) if depth < MAX_DEPTH else "tunnel_too_deep"
    return "non_ip"


def wlan(buf: bytes, off: int, end: int, depth: int, swap: bool = False) -> Decoded:
    """802.11 data frame with an LLC/SNAP payload (plaintext or already decrypted);
    `swap`: its two frame control bytes come in the other order (CAPWAP from Cisco)."""
    if end - off < 24:
        return "truncated"
    fc0, fc1 = (buf[off + 1], buf[off]) if swap else (buf[off], buf[off + 1])
    if (fc0 >> 2) & 3 != 2:
        return "non_ip"  # management/control frame
    if fc0 & 0x40:
        return "non_ip"  # null function: no payload
    hlen = 24
    if fc1 & 3 == 3:  # to-DS and from-DS: fourth address
        hlen += 6
    aggregate = False
    if fc0 & 0x80:  # QoS data: QoS control, then HT control when the order bit is set
        if end - off < hlen + 2:
            return "truncated"
        aggregate = bool(buf[off + hlen] & 0x80)  # A-MSDU present
        hlen += 6 if fc1 & 0x80 else 2
    off += hlen
    if fc1 & 0x40:  # protected: skip the IV; the payload is only usable if decrypted
        if end - off < 4:
            return "truncated"
        off += 8 if buf[off + 3] & 0x20 else 4
    if aggregate and not fc1 & 0x40:
        where = amsdu(buf, off, end)
        return (AMSDU, off, end, depth, 0, 0) if where == "wlan_amsdu" else \
            _follow(where, buf, depth)
    if end - off < 8:
        return "truncated"
    if buf[off] != 0xAA or buf[off + 1] != 0xAA or buf[off + 2] != 0x03:
        return "wlan_encrypted_or_non_ip"
    return ethertype((buf[off + 6] << 8) | buf[off + 7], buf, off + 8, end, depth)


def amsdu_packets(buf: bytes, off: int, end: int, depth: int) -> list[Decoded]:
    """Each packet of the A-MSDU `wlan` handed over as ``(AMSDU, off, end, depth, 0, 0)``,
    decoded as `decode` would (a subframe may be an A-MSDU again: then handed over too)."""
    return [_follow(where, buf, depth) for where in amsdu_subframes(buf, off, end)]


def ppp(buf: bytes, off: int, end: int, depth: int) -> Decoded:
    """PPP frame, with or without HDLC address/control and protocol-field compression."""
    if end - off >= 2 and buf[off] == 0xFF and buf[off + 1] == 0x03:
        off += 2
    if end - off < 1:
        return "truncated"
    if buf[off] & 1:  # compressed one-byte protocol
        proto = buf[off]
        off += 1
    else:
        if end - off < 2:
            return "truncated"
        proto = (buf[off] << 8) | buf[off + 1]
        off += 2
    if proto == 0x21:
        return ipv4(buf, off, end, depth)
    if proto == 0x57:
        return ipv6(buf, off, end, depth)
    return "non_ip"


def mpls(buf: bytes, off: int, end: int, depth: int) -> Decoded:
    """MPLS label stack, then IPv4/IPv6 by version nibble or an Ethernet pseudowire."""
    for _ in range(16):
        if end - off < 4:
            return "truncated"
        bottom = buf[off + 2] & 1
        off += 4
        if bottom:
            break
    else:
        return "non_ip"
    if end - off < 1:
        return "truncated"
    nibble = buf[off] >> 4
    if nibble == 4 or nibble == 6:
        return ip_any(buf, off, end, depth)
    if nibble == 0:  # pseudowire control word, then Ethernet
        return ether(buf, off + 4, end, depth + 1) if depth < MAX_DEPTH else "tunnel_too_deep"
    return "non_ip"


def ip_any(buf: bytes, off: int, end: int, depth: int) -> Decoded:
    if end - off < 1:
        return "truncated"
    version = buf[off] >> 4
    if version == 4:
        return ipv4(buf, off, end, depth)
    if version == 6:
        return ipv6(buf, off, end, depth)
    return "non_ip"


def ipv4(buf: bytes, off: int, end: int, depth: int) -> Decoded:
    if end - off < 20:
        return "truncated"
    vihl = buf[off]
    ihl = (vihl & 15) << 2
    if vihl >> 4 != 4 or ihl < 20:
        return "bad_ip_header"
    total = (buf[off + 2] << 8) | buf[off + 3]
    frag = ((buf[off + 6] << 8) | buf[off + 7]) & 0x3FFF
    if total == 0:  # segmentation offload: length left unset by the capturing host
        total = end - off
    elif total < ihl:
        return "bad_ip_header"
    ip_end = off + total
    cut = 0
    if ip_end > end:
        cut = ip_end - end
        ip_end = end
    l4 = off + ihl
    if l4 > ip_end:
        return "truncated"
    if frag:  # a fragment: reassembled by the caller (fragments.py), then decoded again
        return FRAGMENT_V4, off, ip_end, depth, l4, cut
    proto = buf[off + 9]
    if proto == 6 or proto == 17:
        if proto == 17 and ip_end - l4 >= 8:
            port = _tunnel_port(buf, l4)
            if port:
                if depth >= MAX_DEPTH:
                    return "tunnel_too_deep"
                inner = udp_tunnel(port, buf, l4 + 8, ip_end, depth + 1)
                if inner is not None:
                    return inner
        return proto, off + 12, 4, l4, ip_end, cut
    return ip_payload(proto, buf, l4, ip_end, depth)


def ipv6(buf: bytes, off: int, end: int, depth: int) -> Decoded:
    if end - off < 40:
        return "truncated"
    if buf[off] >> 4 != 6:
        return "bad_ip_header"
    plen = (buf[off + 4] << 8) | buf[off + 5]
    nh = buf[off + 6]
    ip_end = off + 40 + plen if plen else end  # 0: jumbogram or offload
    cut = 0
    if ip_end > end:
        cut = ip_end - end
        ip_end = end
    l4 = off + 40
    for _ in range(16):
        if nh == 6 or nh == 17:
            break
        if nh in _IPV6_EXT:
            if ip_end - l4 < 2:
                return "truncated"
            nh, l4 = buf[l4], l4 + ((buf[l4 + 1] + 1) << 3)
        elif nh == 44:  # fragment header
            if ip_end - l4 < 8:
                return "truncated"
            if ((buf[l4 + 2] << 8) | buf[l4 + 3]) & 0xFFF9:  # offset or M: a real fragment
                return FRAGMENT_V6, off, ip_end, depth, l4, cut
            nh, l4 = buf[l4], l4 + 8  # an atomic fragment (RFC 6946): the whole packet
        elif nh == 51:  # authentication header
            if ip_end - l4 < 2:
                return "truncated"
            nh, l4 = buf[l4], l4 + ((buf[l4 + 1] + 2) << 2)
        else:
            return ip_payload(nh, buf, l4, ip_end, depth)
        if l4 > ip_end:
            return "truncated"
    else:
        return "bad_ip_header"
    if nh == 17 and ip_end - l4 >= 8:
        port = _tunnel_port(buf, l4)
        if port:
            if depth >= MAX_DEPTH:
                return "tunnel_too_deep"
            inner = udp_tunnel(port, buf, l4 + 8, ip_end, depth + 1)
            if inner is not None:
                return inner
    return nh, off + 8, 16, l4, ip_end, cut


def ip_payload(proto: int, buf: bytes, off: int, end: int, depth: int) -> Decoded:
    """IP protocols other than TCP/UDP: tunnels are followed, the rest is skipped."""
    if depth >= MAX_DEPTH and proto in (4, 41, 47):
        return "tunnel_too_deep"
    if proto == 4:
        return ipv4(buf, off, end, depth + 1)
    if proto == 41:
        return ipv6(buf, off, end, depth + 1)
    if proto == 47:
        return gre(buf, off, end, depth + 1)
    if proto == 50:
        return "ipsec_esp"
    if proto == 59:
        return "no_next_header"
    if proto == 1 or proto == 58:
        return "icmp"
    return f"ip_proto_{proto}"


def gre(buf: bytes, off: int, end: int, depth: int) -> Decoded:
    if end - off < 4:
        return "truncated"
    flags = (buf[off] << 8) | buf[off + 1]
    ptype = (buf[off + 2] << 8) | buf[off + 3]
    if flags & 0x4000 and flags & 7 == 0:  # source routing entries: obsolete, not followed
        return "gre_routing"
    hlen = 4
    if flags & 0xC000:
        hlen += 4
    if flags & 0x2000:
        hlen += 4
    if flags & 0x1000:
        hlen += 4
    if flags & 7 == 1 and flags & 0x0080:  # enhanced GRE (PPTP) acknowledgment number
        hlen += 4
    off += hlen
    if off > end:
        return "truncated"
    if ptype == 0x0800:
        return ipv4(buf, off, end, depth)
    if ptype == 0x86DD:
        return ipv6(buf, off, end, depth)
    if ptype == 0x6558 or ptype == 0x6400:  # transparent Ethernet bridging (and 0x6400)
        return ether(buf, off, end, depth)
    if ptype == 0x883E:  # WCCP redirect: a 4-byte header (v2: not an IPv4 first byte), IPv4
        if end - off >= 1 and buf[off] >> 4 != 4:
            off += 4
        return ipv4(buf, off, end, depth)
    if ptype == 0x88BE:  # ERSPAN type II has a sequence number and an 8-byte header; type I none
        return ether(buf, off + 8 if flags & 0x1000 else off, end, depth)
    if ptype == 0x22EB:  # ERSPAN type III: 12 bytes, + 8 with the platform sub-header (O bit)
        if end - off < 12:
            return "truncated"
        return ether(buf, off + (20 if buf[off + 11] & 1 else 12), end, depth)
    if ptype == 0x880B:
        return ppp(buf, off, end, depth)
    if gre_aruba(ptype):
        return wlan(buf, off, end, depth)
    if ptype == 0x8847 or ptype == 0x8848:
        return mpls(buf, off, end, depth)
    return _gre_rarer(ptype, buf, off, end, depth)


def _gre_rarer(ptype: int, buf: bytes, off: int, end: int, depth: int) -> Decoded:
    """The rarer GRE payloads tshark follows: raw Frame Relay, NSH (RFC 8300: its length
    in 4-byte words, then IPv4, IPv6, Ethernet or MPLS). Protocols that carry no IP are
    "gre_non_ip"; any other type (CDMA2000 A10's byte-stuffed PPP, Cisco MetaData...)
    "gre_other", a loss said in a note: TCP or UDP may be inside."""
    if ptype == 0x6559:
        return _follow(frame_relay(buf, off, end), buf, depth)
    if ptype == 0x894F:
        if end - off < 8:
            return "truncated"
        nxt, inner = buf[off + 3], off + ((buf[off + 1] & 0x3F) << 2)
        if nxt == 1:
            return ipv4(buf, inner, end, depth)
        if nxt == 2:
            return ipv6(buf, inner, end, depth)
        if nxt == 3:
            return ether(buf, inner, end, depth)
        return mpls(buf, inner, end, depth) if nxt == 5 else "gre_other"
    if ptype in _GRE_NOT_IP:
        return "gre_non_ip"
    return "gre_other"


def _tunnel_port(buf: bytes, l4: int) -> int:
    """The tunnel a UDP header names (VXLAN, GENEVE, GTP-U, GRE by destination port; CAPWAP
    data, Teredo, AYIYA by either port), 0 for none."""
    dport = (buf[l4 + 2] << 8) | buf[l4 + 3]
    if dport in _UDP_TUNNELS or dport in _EITHER_PORT:
        return dport
    sport = (buf[l4] << 8) | buf[l4 + 1]
    return sport if sport in _EITHER_PORT else 0


def capwap_data(buf: bytes, off: int, end: int, depth: int) -> Decoded | None:
    """A CAPWAP data packet (RFC 5415 4.3): its header (preamble 0: not DTLS), then the
    client's frame, 802.3 or (T flag, wireless binding 1) a native 802.11 frame, whose frame
    control Cisco controllers send byte-swapped (Wireshark's default reading: tried first,
    then the order of RFC 5416). None when the header does not fit (plain UDP)."""
    if end - off < 8 or buf[off] != 0:
        return None
    bits = (buf[off + 1] << 16) | (buf[off + 2] << 8) | buf[off + 3]
    inner = off + ((bits >> 19) << 2)  # HLEN: 4-byte words, optional fields included
    if inner - off < 8 or inner > end or (bits >> 9) & 0x1F != 1:  # binding: IEEE 802.11
        return None
    if bits & 0x80:  # F: a fragment of a frame (not reassembled)
        return "capwap_fragment"
    if bits & 0x08 or inner == end:  # K: keep-alive, no frame
        return "non_ip"
    if not bits & 0x100:
        return ether(buf, inner, end, depth)
    swapped = wlan(buf, inner, end, depth, swap=True)
    return swapped if not isinstance(swapped, str) else wlan(buf, inner, end, depth)


def udp_tunnel(port: int, buf: bytes, off: int, end: int, depth: int) -> Decoded | None:
    """Inner packet of VXLAN/GENEVE/GTP-U/CAPWAP data/GRE/Teredo/AYIYA; None when the
    header does not fit (plain UDP)."""
    if port == UDP_CAPWAP_DATA:
        return capwap_data(buf, off, end, depth)
    if port == UDP_TEREDO or port == UDP_AYIYA:
        where = teredo(buf, off, end) if port == UDP_TEREDO else ayiya(buf, off, end)
        return None if where is None else _follow(where, buf, depth)
    if port == UDP_GRE:
        carried = gre(buf, off, end, depth) if end - off >= 4 and not buf[off + 1] & 7 else None
        return None if carried == "gre_other" or carried == "gre_non_ip" else carried
    if port == UDP_VXLAN:
        if end - off < 8 or not buf[off] & 0x08:
            return None
        return ether(buf, off + 8, end, depth)
    if port == UDP_GENEVE:
        if end - off < 8 or buf[off] >> 6 != 0:
            return None
        inner = off + 8 + ((buf[off] & 0x3F) << 2)
        ptype = (buf[off + 2] << 8) | buf[off + 3]
        if ptype == 0x6558:
            return ether(buf, inner, end, depth)
        if ptype == 0x0800 or ptype == 0x86DD:
            return ip_any(buf, inner, end, depth)
        return None
    if end - off < 8 or buf[off] >> 5 != 1 or buf[off + 1] != 0xFF:  # GTPv1-U G-PDU only
        return None
    flags = buf[off]
    inner = off + 8
    if flags & 0x07:
        inner += 4
        if flags & 0x04:  # extension headers: length in 4-byte units, next type last
            for _ in range(8):
                if inner > end or buf[inner - 1] == 0:
                    break
                if inner >= end or buf[inner] == 0:
                    return "truncated"
                inner += buf[inner] << 2
    if inner >= end:
        return "truncated"
    return ip_any(buf, inner, end, depth)
