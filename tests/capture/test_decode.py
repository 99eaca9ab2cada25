"""Link layers, IP options/extension headers/fragments and tunnels, down to TCP/UDP."""

from __future__ import annotations

import io
import shutil
import subprocess
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.helpers.capbuild import (
    Conv,
    collect,
    ether,
    ipv4,
    ipv6,
    null,
    pcap_bytes,
    sll,
    sll2,
    streams,
    tcp,
    udp,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tlsprobe.capture import Datagram

V4 = ("10.1.1.1", "10.2.2.2")
V6 = ("2001:db8::1", "2001:db8:ffff::2")
OUTER = ("192.0.2.1", "192.0.2.2")


def seg4(payload: bytes = b"tls-bytes", options: bytes = b"") -> bytes:
    return ipv4(*V4, 6, tcp(50000, 443, 1, 0, "PA", payload, src=V4[0], dst=V4[1]),
                options=options)


def seg6(payload: bytes = b"tls-bytes", ext: list = ()) -> bytes:  # type: ignore[assignment]
    return ipv6(*V6, 6, tcp(50000, 443, 1, 0, "PA", payload, src=V6[0], dst=V6[1]), ext=ext)


def gre(inner: bytes, ptype: int, *, key: int | None = None, seq: int | None = None,
        csum: bool = False) -> bytes:
    flags = (0x8000 if csum else 0) | (0x2000 if key is not None else 0) | \
        (0x1000 if seq is not None else 0)
    hdr = struct.pack("!HH", flags, ptype)
    if csum:
        hdr += b"\x00\x00\x00\x00"
    if key is not None:
        hdr += struct.pack("!I", key)
    if seq is not None:
        hdr += struct.pack("!I", seq)
    return ipv4(*OUTER, 47, hdr + inner)


def in_udp(port: int, header: bytes, inner: bytes) -> bytes:
    return ipv4(*OUTER, 17, udp(33333, port, header + inner))


def mpls_labels(*labels: int) -> bytes:
    out = b""
    for i, label in enumerate(labels):
        out += struct.pack("!I", label << 12 | (0x100 if i == len(labels) - 1 else 0) | 64)
    return out


def radiotap_wlan(ip_packet: bytes, qos: bool = False) -> bytes:
    fc = b"\x88\x01" if qos else b"\x08\x02"
    hdr = fc + b"\x00\x00" + b"\x02\x00\x00\x00\x00\x01" * 3 + b"\x10\x00"
    if qos:
        hdr += b"\x00\x00"
    etype = b"\x86\xdd" if ip_packet[0] >> 4 == 6 else b"\x08\x00"
    return hdr + b"\xaa\xaa\x03\x00\x00\x00" + etype + ip_packet


# name -> (link type, frame builder, expected client, expected server)
CASES: dict[str, tuple[int, Callable[[], bytes], str, str]] = {
    "ethernet_ipv4": (1, lambda: ether(seg4()), "10.1.1.1:50000", "10.2.2.2:443"),
    "ethernet_ipv6": (1, lambda: ether(seg6()), "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "vlan": (1, lambda: ether(seg4(), vlans=[(0x8100, 10)]), "10.1.1.1:50000", "10.2.2.2:443"),
    "qinq_88a8": (1, lambda: ether(seg6(), vlans=[(0x88A8, 100), (0x8100, 10)]),
                  "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "qinq_9100": (1, lambda: ether(seg4(), vlans=[(0x9100, 7), (0x8100, 8), (0x8100, 9)]),
                  "10.1.1.1:50000", "10.2.2.2:443"),
    "ieee8023_snap": (1, lambda: ether(b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + seg4(),
                                       etype=8 + len(seg4())), "10.1.1.1:50000", "10.2.2.2:443"),
    "pppoe": (1, lambda: ether(struct.pack("!BBHHH", 0x11, 0, 1, len(seg4()) + 2, 0x21)
                               + seg4(), etype=0x8864), "10.1.1.1:50000", "10.2.2.2:443"),
    "mpls": (1, lambda: ether(mpls_labels(16, 17) + seg6(), etype=0x8847),
             "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "sll": (113, lambda: sll(seg4()), "10.1.1.1:50000", "10.2.2.2:443"),
    "sll_vlan": (113, lambda: sll(struct.pack("!HH", 5, 0x0800) + seg4(), proto=0x8100),
                 "10.1.1.1:50000", "10.2.2.2:443"),
    "sll2": (276, lambda: sll2(seg6()), "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "raw_101": (101, lambda: seg4(), "10.1.1.1:50000", "10.2.2.2:443"),
    "raw_101_v6": (101, lambda: seg6(), "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "raw_12": (12, lambda: seg4(), "10.1.1.1:50000", "10.2.2.2:443"),
    "raw_14": (14, lambda: seg6(), "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "ipv4_228": (228, lambda: seg4(), "10.1.1.1:50000", "10.2.2.2:443"),
    "ipv6_229": (229, lambda: seg6(), "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "null_le_inet": (0, lambda: null(seg4(), 2), "10.1.1.1:50000", "10.2.2.2:443"),
    "null_be_inet": (0, lambda: null(seg4(), 2, True), "10.1.1.1:50000", "10.2.2.2:443"),
    "ppp": (9, lambda: b"\xff\x03\x00\x21" + seg4(), "10.1.1.1:50000", "10.2.2.2:443"),
    "ipv4_options": (1, lambda: ether(seg4(options=b"\x94\x04\x00\x00" + b"\x01" * 8)),
                     "10.1.1.1:50000", "10.2.2.2:443"),
    "ipv6_ext_headers": (1, lambda: ether(seg6(ext=[(0, b"\x01\x04\x00\x00\x00\x00"),
                                                    (43, b"\x00\x00" + b"\x00" * 4),
                                                    (60, b"\x01\x04\x00\x00\x00\x00"),
                                                    (44, b"\x00\x00\x00\x00\x00\x07")])),
                         "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "ipip": (1, lambda: ether(ipv4(*OUTER, 4, seg4())), "10.1.1.1:50000", "10.2.2.2:443"),
    "6in4": (1, lambda: ether(ipv4(*OUTER, 41, seg6())), "2001:db8::1:50000",
             "2001:db8:ffff::2:443"),
    "gre_ip": (1, lambda: ether(gre(seg4(), 0x0800)), "10.1.1.1:50000", "10.2.2.2:443"),
    "gre_key_seq_csum": (1, lambda: ether(gre(seg6(), 0x86DD, key=5, seq=9, csum=True)),
                         "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "gre_teb": (1, lambda: ether(gre(ether(seg4()), 0x6558, key=1)), "10.1.1.1:50000",
                "10.2.2.2:443"),
    "erspan_1": (1, lambda: ether(gre(ether(seg4()), 0x88BE)), "10.1.1.1:50000", "10.2.2.2:443"),
    "erspan_2": (1, lambda: ether(gre(b"\x10\x01\x00\x02\x00\x00\x00\x03" + ether(seg4()),
                                      0x88BE, seq=1)), "10.1.1.1:50000", "10.2.2.2:443"),
    "erspan_3": (1, lambda: ether(gre(b"\x20\x01\x00\x02" + b"\x00" * 7 + b"\x00"
                                      + ether(seg6()), 0x22EB, seq=1)),
                 "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "erspan_3_subheader": (1, lambda: ether(gre(b"\x20\x01\x00\x02" + b"\x00" * 7 + b"\x01"
                                                + b"\x00" * 8 + ether(seg4()), 0x22EB, seq=1)),
                           "10.1.1.1:50000", "10.2.2.2:443"),
    "vxlan": (1, lambda: ether(in_udp(4789, b"\x08\x00\x00\x00\x00\x00\x2a\x00", ether(seg4()))),
              "10.1.1.1:50000", "10.2.2.2:443"),
    "vxlan_vlan_inside": (1, lambda: ether(in_udp(4789, b"\x08\x00\x00\x00\x00\x00\x2a\x00",
                                                  ether(seg6(), vlans=[(0x8100, 3)]))),
                          "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "geneve": (1, lambda: ether(in_udp(6081, b"\x00\x00\x65\x58\x00\x00\x07\x00", ether(seg4()))),
               "10.1.1.1:50000", "10.2.2.2:443"),
    "gtpu": (1, lambda: ether(in_udp(2152, struct.pack("!BBHI", 0x30, 0xFF, len(seg4()), 1),
                                     seg4())), "10.1.1.1:50000", "10.2.2.2:443"),
    "radiotap_wlan": (127, lambda: b"\x00\x00\x08\x00\x00\x00\x00\x00" + radiotap_wlan(seg4()),
                      "10.1.1.1:50000", "10.2.2.2:443"),
    "wlan_qos": (105, lambda: radiotap_wlan(seg6(), qos=True), "2001:db8::1:50000",
                 "2001:db8:ffff::2:443"),
    "centrino": (1, lambda: ether(radiotap_wlan(seg4()), etype=0x2452), "10.1.1.1:50000",
                 "10.2.2.2:443"),
}
for _af in (10, 24, 28, 30):
    for _be in (False, True):
        CASES[f"null_inet6_{_af}_{'be' if _be else 'le'}"] = (
            0, lambda af=_af, be=_be: null(seg6(), af, be), "2001:db8::1:50000",
            "2001:db8:ffff::2:443")
CASES["loop_108_inet"] = (108, lambda: null(seg4(), 2, True), "10.1.1.1:50000", "10.2.2.2:443")
CASES["loop_108_inet6"] = (108, lambda: null(seg6(), 24, True), "2001:db8::1:50000",
                           "2001:db8:ffff::2:443")
CASES["enc_109_inet"] = (109, lambda: struct.pack("<III", 2, 0x1000, 0x400) + seg4(),
                         "10.1.1.1:50000", "10.2.2.2:443")
def nflog_frame(family: int, packet: bytes) -> bytes:
    """NFLOG: family, version, resource id; a packet-header TLV, a prefix TLV (padded to
    4 bytes), then the payload TLV (type 9), lengths little-endian."""
    def tlv(kind: int, value: bytes) -> bytes:
        body = struct.pack("<HH", 4 + len(value), kind) + value
        return body + bytes(-len(body) % 4)
    return bytes([family, 0]) + b"\x00\x01" + tlv(1, b"\x08\x00\x01\x00") + \
        tlv(10, b"log\x00\x00") + tlv(9, packet)


# Cisco HDLC; Frame Relay (RFC 2427 NLPIDs, SNAP after a pad byte, Cisco's EtherType form);
# Apple PKTAP (a 108-byte header, then Ethernet or BSD null) under 258 and macOS's 149; PPI;
# Linux NFLOG (TLVs); FDDI (LLC/SNAP after a 13-byte header); Linux ARCNET (RFC 1201's IPv4
# and IPv6 after an 8-byte header, RFC 1051's IPv4 after 5) and IP over InfiniBand (an
# EtherType after 40 bytes of addresses), as tcpdump's arcnet-*.pcap and ipoib.pcap hold
NEW_LINK_TYPES = {
    "c_hdlc_104": (104, lambda: b"\x0f\x00\x08\x00" + seg4(), "10.1.1.1:50000",
                   "10.2.2.2:443"),
    "frelay_nlpid_ipv4": (107, lambda: b"\x18\x41\x03\xcc" + seg4(), "10.1.1.1:50000",
                          "10.2.2.2:443"),
    "frelay_nlpid_ipv6": (107, lambda: b"\x18\x41\x03\x8e" + seg6(), "2001:db8::1:50000",
                          "2001:db8:ffff::2:443"),
    "frelay_snap": (107, lambda: b"\x18\x41\x03\x00\x80\x00\x00\x00\x08\x00" + seg4(),
                    "10.1.1.1:50000", "10.2.2.2:443"),
    "frelay_cisco": (107, lambda: b"\x48\xe1\x86\xdd" + seg6(), "2001:db8::1:50000",
                     "2001:db8:ffff::2:443"),
    "pktap_258_ether": (258, lambda: struct.pack("<III", 108, 1, 1) + bytes(96) + ether(seg4()),
                        "10.1.1.1:50000", "10.2.2.2:443"),
    "pktap_149_null": (149, lambda: struct.pack("<III", 108, 1, 0) + bytes(96)
                       + null(seg6(), 30), "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "ppi_192_ether": (192, lambda: struct.pack("<BBHI", 0, 0, 8, 1) + ether(seg4()),
                      "10.1.1.1:50000", "10.2.2.2:443"),
    "nflog_239_inet": (239, lambda: nflog_frame(2, seg4()), "10.1.1.1:50000", "10.2.2.2:443"),
    "nflog_239_inet6": (239, lambda: nflog_frame(10, seg6()), "2001:db8::1:50000",
                        "2001:db8:ffff::2:443"),
    "fddi_10": (10, lambda: b"\x50" + b"\x00\x04\x00\x83\xa7\xaa" * 2
                + b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + seg4(), "10.1.1.1:50000",
                "10.2.2.2:443"),
    "arcnet_129_rfc1201": (129, lambda: b"\xbe\x50\x00\x00\xd4\x00\x00\x01" + seg4(),
                           "10.1.1.1:50000", "10.2.2.2:443"),
    "arcnet_129_rfc1201_ipv6": (129, lambda: b"\xbe\x50\x00\x00\xc4\x00\x00\x02" + seg6(),
                                "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "arcnet_129_rfc1051": (129, lambda: b"\xbe\x50\x00\x00\xf0" + seg4(), "10.1.1.1:50000",
                           "10.2.2.2:443"),
    "ipoib_242": (242, lambda: bytes(range(40)) + b"\x08\x00\x00\x00" + seg4(),
                  "10.1.1.1:50000", "10.2.2.2:443"),
    "ipoib_242_ipv6": (242, lambda: bytes(range(40)) + b"\x86\xdd\x00\x00" + seg6(),
                       "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    # Juniper's Ethernet (tcpdump's bgp-aigp.pcap): "MGC", flags, extensions, Ethernet
    "juniper_178": (178, lambda: b"MGC\x00" + ether(seg4()), "10.1.1.1:50000",
                    "10.2.2.2:443"),
    "juniper_178_ext": (178, lambda: b"MGC\x81\x00\x06\x01\x04\x00\x00\x00\x05"
                        + ether(seg6()), "2001:db8::1:50000", "2001:db8:ffff::2:443"),
}
CASES.update(NEW_LINK_TYPES)


def amsdu(*packets: bytes) -> bytes:
    """802.11 QoS data (to-DS) whose QoS control says A-MSDU: one subframe per packet
    (destination, source, length, LLC/SNAP, the packet), each but the last padded to 4."""
    out = b""
    for i, packet in enumerate(packets):
        etype = b"\x86\xdd" if packet[0] >> 4 == 6 else b"\x08\x00"
        body = b"\xaa\xaa\x03\x00\x00\x00" + etype + packet
        sub = b"\x02\x00\x00\x00\x00\x01" * 2 + struct.pack("!H", len(body)) + body
        out += sub + (bytes(-len(sub) % 4) if i < len(packets) - 1 else b"")
    return b"\x88\x01\x00\x00" + b"\x02\x00\x00\x00\x00\x01" * 3 + b"\x10\x00\x80\x00" + out


AYIYA_HEADER = bytes([0x41, 0x52, 0x11, 41]) + b"\x4a\xf6\x4b\x2d" + bytes(16) + bytes(20)
# Encapsulations Zeek's test traces carry that tlsprobe did not follow (Wireshark does):
# 802.1ah provider backbone bridging, Aruba's GRE (802.11 frames, an A-MSDU of one subframe
# too), GRE in UDP (RFC 8086), Teredo (plain, with origin indication, with authentication),
# AYIYA
NEW_TUNNELS = {
    "pbb_88e7": (1, lambda: ether(b"\x00\x00\x01\x00" + ether(seg4()), etype=0x88E7),
                 "10.1.1.1:50000", "10.2.2.2:443"),
    "gre_aruba_8200": (1, lambda: ether(gre(radiotap_wlan(seg4(), qos=True), 0x8200)),
                       "10.1.1.1:50000", "10.2.2.2:443"),
    "gre_aruba_8240_amsdu": (1, lambda: ether(gre(amsdu(seg6()), 0x8240)),
                             "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "gre_in_udp_4754": (1, lambda: ether(in_udp(4754, b"\x00\x00\x08\x00", seg4())),
                        "10.1.1.1:50000", "10.2.2.2:443"),
    "teredo": (1, lambda: ether(in_udp(3544, b"", seg6())), "2001:db8::1:50000",
               "2001:db8:ffff::2:443"),
    "teredo_origin": (1, lambda: ether(ipv4(*OUTER, 17, udp(3544, 40000, b"\x00\x00\xf2\xc7"
                                                                  + bytes(4) + seg6()))),
                      "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "teredo_auth_origin": (1, lambda: ether(in_udp(3544, b"\x00\x01\x02\x00xy" + bytes(9)
                                                   + b"\x00\x00\xf2\xc7" + bytes(4), seg6())),
                           "2001:db8::1:50000", "2001:db8:ffff::2:443"),
    "ayiya": (1, lambda: ether(in_udp(5072, AYIYA_HEADER, seg6())), "2001:db8::1:50000",
              "2001:db8:ffff::2:443"),
    # GRE payloads tshark follows that tlsprobe once counted as "gre_other", unread
    "gre_wccp_redirect": (1, lambda: ether(gre(b"\x00\x01\x00\x00" + seg4(), 0x883E)),
                          "10.1.1.1:50000", "10.2.2.2:443"),
    "gre_wccp_v1": (1, lambda: ether(gre(seg4(), 0x883E)), "10.1.1.1:50000", "10.2.2.2:443"),
    "gre_frame_relay": (1, lambda: ether(gre(b"\x18\x41\x03\xcc" + seg4(), 0x6559)),
                        "10.1.1.1:50000", "10.2.2.2:443"),
    "gre_nsh": (1, lambda: ether(gre(b"\x0f\xc2\x02\x01" + bytes(4) + seg4(), 0x894F)),
                "10.1.1.1:50000", "10.2.2.2:443"),
    "gre_6400": (1, lambda: ether(gre(ether(seg4()), 0x6400)), "10.1.1.1:50000",
                 "10.2.2.2:443"),
}
CASES.update(NEW_TUNNELS)


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
@pytest.mark.parametrize("name", sorted(NEW_LINK_TYPES) + sorted(NEW_TUNNELS))
def test_new_link_types_as_tshark_reads_them(name: str, tmp_path: Path) -> None:
    """tshark finds the same TCP segment in each (the comparison that says the headers are
    the real ones, not only ours)."""
    linktype, build, client, server = {**NEW_LINK_TYPES, **NEW_TUNNELS}[name]
    path = tmp_path / "l.pcap"
    path.write_bytes(pcap_bytes([build()], linktype))
    out = subprocess.run([shutil.which("tshark") or "tshark", "-r", str(path), "-T", "fields",
                          "-e", "tcp.srcport", "-e", "tcp.dstport"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.split() == [client.rsplit(":", 1)[1], server.rsplit(":", 1)[1]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_encapsulation_reaches_tcp(name: str) -> None:
    linktype, build, client, server = CASES[name]
    events, stream = collect(io.BytesIO(pcap_bytes([build()], linktype)))
    st_ = streams(events)
    assert len(st_) == 1, stream.stats.skipped
    key = st_[0]["key"]
    assert (key.client, key.server) == (client, server)
    assert st_[0]["data"][0] == b"tls-bytes"
    assert stream.stats.skipped == {}


def test_ethernet_padding_is_not_payload() -> None:
    frame = ether(seg4(b"hi"), pad_to=60)
    events, _ = collect(io.BytesIO(pcap_bytes([frame + b"\xde\xad\xbe\xef"])))  # + an FCS
    assert streams(events)[0]["data"][0] == b"hi"


def _frag4(payload: bytes, cuts: list[int], ident: int = 7) -> list[bytes]:
    """An IPv4 datagram of `payload` (a TCP segment) split at the given offsets."""
    edges = [0, *cuts, len(payload)]
    return [ipv4(*V4, 6, payload[a:b], ident=ident, frag_offset=a,
                 more_fragments=b < len(payload)) for a, b in zip(edges, edges[1:])]


def _frag6(payload: bytes, cuts: list[int], ident: int = 7) -> list[bytes]:
    edges = [0, *cuts, len(payload)]
    return [ipv6(*V6, 6, payload[a:b], ext=[(44, struct.pack("!HI", a | (b < len(payload)),
                                                             ident))])
            for a, b in zip(edges, edges[1:])]


def test_ipv4_fragments_reassembled_in_any_order() -> None:
    payload = tcp(50000, 443, 1, 0, "PA", b"A" * 40 + b"B" * 40, src=V4[0], dst=V4[1])
    frags = _frag4(payload, [32, 64])
    events, stream = collect(io.BytesIO(pcap_bytes([ether(f) for f in
                                                    (frags[2], frags[0], frags[1])])))
    assert streams(events)[0]["data"][0] == b"A" * 40 + b"B" * 40
    assert stream.stats.skipped == {} and stream.stats.ip_first_fragments == 0
    assert (stream.stats.ip_fragments, stream.stats.ip_reassembled) == (3, 1)
    assert stream.stats.ip_fragments_incomplete == 0


def test_ipv6_fragments_reassembled() -> None:
    payload = tcp(50000, 443, 1, 0, "PA", b"C" * 100, src=V6[0], dst=V6[1])
    frags = _frag6(payload, [48])
    events, stream = collect(io.BytesIO(pcap_bytes([ether(f) for f in reversed(frags)])))
    assert streams(events)[0]["data"][0] == b"C" * 100
    assert stream.stats.ip_reassembled == 1 and stream.stats.skipped == {}


def test_udp_datagram_from_fragments() -> None:
    """A DTLS/QUIC-sized UDP datagram over two fragments is one Datagram."""
    payload = udp(5000, 443, b"Q" * 1300)
    first = ipv4(*V4, 17, payload[:800], ident=9, more_fragments=True)
    second = ipv4(*V4, 17, payload[800:], ident=9, frag_offset=800)
    events, _ = collect(io.BytesIO(pcap_bytes([ether(first), ether(second)])))
    assert [e.data for e in events if isinstance(e, Datagram)] == [b"Q" * 1300]


def test_incomplete_datagram_first_fragment_still_read_and_counted() -> None:
    payload = tcp(50000, 443, 1, 0, "PA", b"A" * 40, src=V4[0], dst=V4[1])
    first, _lost = _frag4(payload, [32])
    events, stream = collect(io.BytesIO(pcap_bytes([ether(first)])))
    assert streams(events)[0]["data"][0] == b"A" * 12
    assert stream.stats.ip_first_fragments == 1
    assert stream.stats.ip_fragments_incomplete == 1


def test_lone_later_fragment_is_counted_lost() -> None:
    frag = ipv6(*V6, 6, b"\x00" * 24, ext=[(44, b"\x00\x18\x00\x00\x00\x07")])
    events, stream = collect(io.BytesIO(pcap_bytes([ether(frag)])))
    assert events == []
    assert stream.stats.ip_fragments_incomplete == 1 and stream.stats.ip_fragment_bytes_lost == 24


def test_fragment_table_is_bounded_in_datagrams_bytes_and_time() -> None:
    from tlsprobe.capture.events import CaptureStats
    from tlsprobe.capture.fragments import FragmentTable
    from tlsprobe.capture.decode import ip_any

    stats = CaptureStats()
    table = FragmentTable(stats, max_datagrams=4, max_bytes=1000, timeout=5.0)
    lost: list[bytes] = []
    for ident in range(10):  # never completed: only the count bound holds them
        pkt = ipv4(*V4, 6, b"x" * 16, ident=ident, frag_offset=8, more_fragments=True)
        assert table.add(pkt, ip_any(pkt, 0, len(pkt), 0), 0.0, lost) is None
    assert len(table._table) == 4 and stats.ip_fragments_incomplete == 6
    big = ipv4(*V4, 6, b"y" * 1200, ident=99, frag_offset=8, more_fragments=True)
    table.add(big, ip_any(big, 0, len(big), 0), 1.0, lost)
    assert table.held <= 1000
    late = ipv4(*V4, 6, b"z" * 16, ident=100, frag_offset=8, more_fragments=True)
    table.add(late, ip_any(late, 0, len(late), 0), 100.0, lost)  # all others timed out
    assert len(table._table) == 1 and table.held == 16 and lost == []


def test_skip_reasons_are_counted() -> None:
    arp = ether(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20, etype=0x0806)
    icmp = ether(ipv4(*V4, 1, b"\x08\x00\x00\x00\x00\x01\x00\x01"))
    cut_header = ether(seg4())[:25]
    esp = ether(ipv4(*V4, 50, b"\x00" * 16))
    frames = [arp, icmp, cut_header, esp, arp]
    _, stream = collect(io.BytesIO(pcap_bytes(frames)))
    assert stream.stats.skipped == {"non_ip": 2, "icmp": 1, "truncated": 1, "ipsec_esp": 1}
    _, stream = collect(io.BytesIO(pcap_bytes([seg4()], 147)))
    assert stream.stats.skipped == {"link_type_147": 1}


def test_nested_tunnels_stop_at_depth_limit() -> None:
    pkt = seg4()
    for _ in range(12):
        pkt = gre(pkt, 0x0800)
    events, stream = collect(io.BytesIO(pcap_bytes([ether(pkt)])))
    assert events == [] and stream.stats.skipped == {"tunnel_too_deep": 1}


def test_nested_udp_tunnels_stop_at_depth_limit_and_say_so() -> None:
    """VXLAN in VXLAN ... deeper than the limit: counted as too deep (it was treated as
    plain UDP to port 4789, and its TLS silently missed)."""
    pkt = ether(seg4())
    for _ in range(8):
        pkt = ether(in_udp(4789, b"\x08\x00\x00\x00\x00\x00\x2a\x00", pkt))
    events, stream = collect(io.BytesIO(pcap_bytes([pkt])))
    assert events == [] and stream.stats.skipped == {"tunnel_too_deep": 1}


def test_udp_datagrams() -> None:
    d4 = ipv4(*V4, 17, udp(5353, 443, b"quic-initial"))
    d6 = ipv6(*V6, 17, udp(443, 5353, b"quic-answer"))
    not_vxlan = ipv4(*V4, 17, udp(1000, 4789, b"\x00" * 12))  # no I flag: plain UDP
    full = ether(ipv4(*V4, 17, udp(1, 2, b"x" * 100)))
    frames = [ether(d4), ether(d6), ether(not_vxlan), (5.0, full[:-30], len(full))]
    events, stream = collect(io.BytesIO(pcap_bytes(frames)))
    assert events[0] == Datagram("10.1.1.1", 5353, "10.2.2.2", 443, b"quic-initial", 1000.0, 1)
    assert events[1] == Datagram("2001:db8::1", 443, "2001:db8:ffff::2", 5353, b"quic-answer",
                                 1001.0, 2)
    assert events[2].dport == 4789 and events[2].data == b"\x00" * 12
    assert events[3].data == b"x" * 70 and events[3].truncated == 30
    assert stream.stats.udp_datagrams == 4 and stream.stats.snaplen_cut == 1


def test_plain_udp_on_a_tunnel_port_stays_udp() -> None:
    """Teredo, AYIYA and GRE-in-UDP ports carry other UDP too (a DTLS record to port 3544,
    a datagram that is no AYIYA header, GRE of a type not read): read as plain UDP."""
    dtls = b"\x16\xfe\xfd" + bytes(11) + b"\x00\x04abcd"
    frames = [ether(in_udp(3544, b"", dtls)), ether(in_udp(5072, b"", b"\x00" * 12)),
              ether(in_udp(4754, b"", b"\x00\x00\x12\x34abcd")),
              ether(in_udp(4754, b"", b"\x00\x00\x08\x06abcd"))]
    events, stream = collect(io.BytesIO(pcap_bytes(frames)))
    assert [(e.dport, e.data) for e in events] == [
        (3544, dtls), (5072, b"\x00" * 12), (4754, b"\x00\x00\x12\x34abcd"),
        (4754, b"\x00\x00\x08\x06abcd")]
    assert stream.stats.skipped == {}


def _amsdu_frames() -> list[bytes]:
    two = amsdu(seg4(b"first"), seg6(b"second"))
    three = amsdu(seg4(b"one"), ipv4(*V4, 17, udp(5353, 443, b"dgram")), seg6(b"three"))
    return [ether(gre(two, 0x8200)), radiotap(three)]


def radiotap(frame: bytes) -> bytes:
    return b"\x00\x00\x08\x00\x00\x00\x00\x00" + frame


def test_every_packet_of_an_amsdu_is_read(tmp_path: Path) -> None:
    """An A-MSDU of several packets (in Aruba's GRE, over radiotap) gives each of its
    subframes' packets, as tshark does; nothing is skipped or said."""
    frames = _amsdu_frames()
    events, stream = collect(io.BytesIO(pcap_bytes(frames[:1])))
    got = {(st_["key"].client, st_["data"][0]) for st_ in streams(events).values()}
    assert got == {("10.1.1.1:50000", b"first"), ("2001:db8::1:50000", b"second")}
    assert stream.stats.skipped == {} and stream.stats.losses() == []
    events, stream = collect(io.BytesIO(pcap_bytes(frames[1:], 127)))
    assert sorted(st_["data"][0] for st_ in streams(events).values()) == [b"one", b"three"]
    assert [e.data for e in events if isinstance(e, Datagram)] == [b"dgram"]
    if shutil.which("tshark"):
        path = tmp_path / "a.pcap"
        path.write_bytes(pcap_bytes(frames[:1]))
        out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "tcp.srcport"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert out.split() == ["50000,50000"]  # two TCP layers in the one frame


def test_gre_of_a_type_not_read_is_said() -> None:
    """GRE of a protocol type tlsprobe does not read may hide TCP: counted and said (a
    note, exit 7), as a link type not read is; ARP in GRE carries none: quiet."""
    frames = [ether(gre(seg4(), 0x1234)), ether(gre(b"\x00\x01\x08\x00" + bytes(24), 0x0806)),
              ether(gre(seg4(), 0x8909))]
    _, stream = collect(io.BytesIO(pcap_bytes(frames)))
    assert stream.stats.skipped == {"gre_other": 2, "gre_non_ip": 1}
    assert stream.stats.losses() == ["2 GRE packets carrying a protocol type tlsprobe does "
                                     "not read (skipped)"]


def test_udp_can_be_turned_off() -> None:
    d4 = ether(ipv4(*V4, 17, udp(5353, 443, b"q")))
    events, stream = collect(io.BytesIO(pcap_bytes([d4])), udp=False)
    assert events == [] and stream.stats.udp_datagrams == 0


def test_tcp_over_every_link_type_in_one_pcapng() -> None:
    """Same connection, each packet arriving through another encapsulation."""
    from tests.helpers.capbuild import Pcapng
    c = Conv(client=V4[0:1] + (50000,), server=(V4[1], 443))  # type: ignore[arg-type]
    pkts = c.handshake() + [c.c(b"one-"), c.c(b"two-"), c.c(b"three-"), c.c(b"four-"),
                            c.c(b"five")]
    ng = Pcapng().shb().idb(1).idb(113).idb(276).idb(101).idb(0).idb(108).idb(109).idb(0)
    wraps = [ether, sll, sll2, lambda p: p, lambda p: null(p, 2), lambda p: null(p, 2, True),
             lambda p: struct.pack("<III", 2, 0x1001, 0) + p,  # enc: AF, SPI, flags
             lambda p: null(p, 2, True)]  # a big-endian host's null header
    for i, p in enumerate(pkts):
        ng.epb(i, i, wraps[i](p))
    events, stream = collect(io.BytesIO(ng.bytes()))
    assert streams(events)[0]["data"][0] == b"one-two-three-four-five"
    assert stream.stats.link_types == {1: 1, 113: 1, 276: 1, 101: 1, 0: 2, 108: 1, 109: 1}


@pytest.mark.parametrize(("link_type", "header"), [
    (108, struct.pack(">I", 2)), (108, struct.pack(">I", 24)), (108, struct.pack(">I", 30)),
    (0, struct.pack("<I", 2)), (0, struct.pack(">I", 2)), (0, struct.pack("<I", 28)),
    (109, struct.pack("<III", 2, 0x1001, 0x400)), (109, struct.pack(">III", 2, 0x1001, 0)),
])
def test_bsd_loopback_and_enc_link_types(link_type: int, header: bytes) -> None:
    """LINKTYPE_LOOP (108) has a big-endian AF (it was read as 109 and skipped);
    LINKTYPE_NULL (0) the capturing host's byte order; LINKTYPE_ENC (109) a 12-byte
    header (AF, SPI, flags)."""
    af = int.from_bytes(header[:4], "big" if link_type == 108 else "little")
    if af > 0xFFFF:
        af = int.from_bytes(header[:4], "big")
    c = Conv(client=(V4[0], 50000), server=(V4[1], 443)) if af == 2 else \
        Conv(client=(V6[0], 50000), server=(V6[1], 443))
    pkts = c.handshake() + [c.c(b"hello over loop")]
    events, stream = collect(io.BytesIO(pcap_bytes([header + p for p in pkts], link_type)))
    assert streams(events)[0]["data"][0] == b"hello over loop"
    assert stream.stats.skipped == {}


LINK_TYPES = [0, 1, 9, 12, 14, 50, 101, 104, 105, 107, 108, 109, 113, 127, 149, 192, 228,
              229, 239, 258, 276, 999]


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(st.tuples(st.sampled_from(LINK_TYPES), st.binary(max_size=120)),
                       min_size=1, max_size=6))
def test_random_frames_never_raise(frames: list[tuple[int, bytes]]) -> None:
    from tests.helpers.capbuild import Pcapng
    ng = Pcapng().shb()
    for lt, _ in frames:
        ng.idb(lt)
    for i, (_, data) in enumerate(frames):
        ng.epb(i, i, data)
    _, stream = collect(io.BytesIO(ng.bytes()))
    assert stream.stats.packets == len(frames)
    assert not stream.stats.warnings


@settings(max_examples=200, deadline=None)
@given(prefix=st.sampled_from([b"", ether(seg4())[:14], ether(seg4())[:34]]),
       tail=st.binary(max_size=80), mutate=st.lists(st.tuples(st.integers(0, 200),
                                                              st.integers(0, 255)), max_size=6))
def test_mutated_packets_never_raise(prefix: bytes, tail: bytes,
                                     mutate: list[tuple[int, int]]) -> None:
    """Bit-flipped real headers (IPv4 in GRE/VXLAN/IPv6) through the decoders."""
    bases = [ether(seg4()), ether(gre(ether(seg6()), 0x6558)),
             ether(in_udp(4789, b"\x08\x00\x00\x00\x00\x00\x2a\x00", ether(seg4()))),
             prefix + tail]
    frames = []
    for base in bases:
        b = bytearray(base)
        for pos, val in mutate:
            if b:
                b[pos % len(b)] = val
        frames.append(bytes(b))
    _, stream = collect(io.BytesIO(pcap_bytes(frames)))
    assert stream.stats.packets == 4 and not stream.stats.warnings


@settings(max_examples=150, deadline=None)
@given(cuts=st.lists(st.integers(1, 19), min_size=1, max_size=6, unique=True),
       order=st.randoms(use_true_random=False), dup=st.booleans(), v6=st.booleans())
def test_fragments_in_any_order_with_duplicates_reassemble(cuts: list[int], order, dup: bool,
                                                           v6: bool) -> None:
    """Fragment offsets are multiples of 8: the datagram split at 8*cut, shuffled, one
    fragment maybe twice, gives the segment once, whole."""
    data = bytes(range(256))[:150]
    src, dst = V6 if v6 else V4
    payload = tcp(50000, 443, 1, 0, "PA", data, src=src, dst=dst)
    frags = (_frag6 if v6 else _frag4)(payload, sorted(8 * c for c in cuts
                                                      if 8 * c < len(payload)))
    if dup:
        frags.append(frags[0])
    order.shuffle(frags)
    events, stream = collect(io.BytesIO(pcap_bytes([ether(f) for f in frags])))
    assert streams(events)[0]["data"][0] == data
    assert stream.stats.ip_reassembled == 1 and stream.stats.ip_fragments_incomplete == 0
