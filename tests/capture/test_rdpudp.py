"""RDP over UDP: the TLS of the reliable channel is read, in MS-RDPEUDP2 (the version
Windows speaks since 2019) and MS-RDPEUDP version 1, and a lossy session's DTLS; a session
without readable TLS is listed with the reason. The TLS bytes are a real loopback handshake
(captures/), the framing is built here as the protocol sends it: chunks out of order and
retransmitted, padding and ack-only packets, every optional header; tshark's view is checked
where it has one (it reads RDPUDP on UDP 3389)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.capbuild import TSHARK, RdpUdp, dtls_client_hello, ether, ipv4, pcap_bytes, pcap_jsonl, \
    real_chunks, tshark_fields, udp

from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.rdpudp import MAX_PENDING, _Channel, v1_chunk, v2_chunk
CLIENT, SERVER = ("10.0.0.5", 50123), ("10.0.0.6", 3389)
ALL = [">>> ClientHello", "<<< ServerHello", "<<< Certificate", "<<< ServerKeyExchange",
       "<<< ServerHelloDone", ">>> ClientKeyExchange", "<<< NewSessionTicket"]
# optional RDPEUDP2 headers, in turn on the data packets
V2_FIELDS = [{}, {"ack": 0}, {"ack": 3, "overhead": True}, {"delay_ack": True, "aoa": True},
             {"ackvec": 2}, {"ackvec": 1, "ackvec_ts": True, "ack": 1, "aoa": True},
             {"overhead": True, "delay_ack": True, "ackvec": 0}]


def frame(side: int, payload: bytes) -> bytes:
    (sip, sp), (dip, dp) = (CLIENT, SERVER) if side == 0 else (SERVER, CLIENT)
    return ether(ipv4(sip, dip, 17, udp(sp, dp, payload)))


def pieces(size: int = 700) -> list[tuple[int, list[bytes]]]:
    """The real handshake's flights, each cut into chunks of at most `size` bytes."""
    return [(d, [data[o:o + size] for o in range(0, len(data), size)])
            for d, data in real_chunks()]


def rdpudp2_session() -> list[bytes]:
    """Each flight's chunks sent last first, then the first one again (a retransmission);
    a padding packet and an ack-only packet between flights."""
    rdp = RdpUdp()
    frames = [frame(0, rdp.syn()), frame(1, rdp.synack())]
    seq, n = [1, 1], 0
    for side, chunks in pieces():
        packets = []
        for chunk in chunks:
            packets.append(rdp.v2(seq[side], chunk, **V2_FIELDS[n % len(V2_FIELDS)]))
            seq[side] += 1
            n += 1
        for p in [*reversed(packets), packets[0]]:
            frames.append(frame(side, p))
        frames.append(frame(side, rdp.v2(0, None, aoa=True, dummy=True)))
        frames.append(frame(1 - side, rdp.v2(0, None, ack=0, ackvec=1)))
    return frames


def rdpudp1_session(lossy: bool = False, payloads: list[tuple[int, bytes]] | None = None
                    ) -> list[bytes]:
    rdp = RdpUdp(version=0x0002, lossy=lossy)
    frames = [frame(0, rdp.syn()), frame(1, rdp.synack())]
    seq = [rdp.isn[0] + 1, rdp.isn[1] + 1]
    items = payloads if payloads is not None else \
        [(side, chunk) for side, chunks in pieces() for chunk in chunks]
    for n, (side, chunk) in enumerate(items):
        frames.append(frame(side, rdp.v1_data(side, seq[side], chunk, acks=n % 3,
                                              fec=n % 2 == 1, aoa=n % 4 == 2)))
        seq[side] += 1
    return frames


def tshark_snis(path: Path) -> list[str]:
    return tshark_fields(path, "tls.handshake.type == 1", "tls.handshake.extensions_server_name")


@pytest.mark.parametrize("version", [2, 1])
def test_reliable_channel_tls_is_read(run_cli, tmp_path: Path, version: int) -> None:
    path = tmp_path / "rdp.pcap"
    path.write_bytes(pcap_bytes(rdpudp2_session() if version == 2 else rdpudp1_session()))
    code, conns, _, err = pcap_jsonl(run_cli, path)
    assert code == 0, err
    [conn] = conns
    assert (conn["transport"], conn["protocol"], conn["framing"]) == ("udp", "tls", "rdp-udp")
    assert (conn["client"], conn["server"]) == ("10.0.0.5:50123", "10.0.0.6:3389")
    assert conn["sni"] == "localhost" and conn["messages"] == ALL
    assert conn["cipher"]["iana_name"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    assert conn["key_exchange"]["group"]["name"] == "x25519" and conn["problems"] == []
    assert conn["fingerprints"]["ja4"].startswith("t12d")  # TLS, not DTLS: JA4 "t"
    if TSHARK:  # tshark reads RDPUDP on UDP 3389: the same ClientHello
        assert set(tshark_snis(path)) == {"localhost"}


def test_the_table_names_the_framing(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "rdp.pcap"
    path.write_bytes(pcap_bytes(rdpudp2_session()))
    code, out, err = run_cli("pcap", str(path), "--no-progress", "--details")
    assert code == 0, err
    assert "RDP over UDP (reliable channel)" in out


def test_lossy_session_dtls_is_read(run_cli, tmp_path: Path) -> None:
    """SYNLOSSY: the payloads are DTLS (made from the real ClientHello, DTLS 1.2 headers)."""
    record = dtls_client_hello()
    path = tmp_path / "lossy.pcap"
    path.write_bytes(pcap_bytes(rdpudp1_session(lossy=True, payloads=[(0, record)])))
    code, conns, [summary], err = pcap_jsonl(run_cli, path)
    assert code == 0, err
    [conn] = conns
    assert (conn["protocol"], conn["framing"], conn["sni"]) == ("dtls", "rdp-udp", "localhost")
    # one session: counted once (by the DTLS tracker that reads it), not also as RDP-UDP
    assert summary["connections"] == summary["tls_connections"] == 1


def test_lossy_session_without_dtls_hello_is_listed(run_cli, tmp_path: Path) -> None:
    """A lossy session whose data holds no DTLS ClientHello (here: application data of
    epoch 1 only) is listed with the reason, not left silent."""
    record = bytes([23, 0xFE, 0xFD, 0, 1]) + bytes(6) + (40).to_bytes(2, "big") + bytes(40)
    path = tmp_path / "lossy.pcap"
    path.write_bytes(pcap_bytes(rdpudp1_session(lossy=True, payloads=[(0, record)])))
    code, conns, [summary], err = pcap_jsonl(run_cli, path)
    assert code == 7 and conns == []
    line = ("1 RDP-over-UDP session (MS-RDPEUDP) without TLS read: 10.0.0.5:50123 -> "
            "10.0.0.6:3389 (no DTLS ClientHello in its lossy channel)")
    assert summary["losses"] == [line] and summary["connections"] == 1


@pytest.mark.parametrize("what", ["syn only", "no tls", "lossy syn only"])
def test_session_without_tls_is_listed_with_the_reason(run_cli, tmp_path: Path,
                                                       what: str) -> None:
    rdp = RdpUdp(lossy=what.startswith("lossy"))
    frames = [frame(0, rdp.syn())]
    if what == "no tls":
        frames += [frame(1, rdp.synack()), frame(0, rdp.v2(1, b"GET / HTTP/1.1\r\n" * 4)),
                   frame(1, rdp.v2(1, b"\x00" * 80))]
    path = tmp_path / "rdp.pcap"
    path.write_bytes(pcap_bytes(frames))
    code, conns, [summary], err = pcap_jsonl(run_cli, path)
    assert code == 7 and conns == []
    why = "no data packet captured" if what.endswith("syn only") else \
        "no TLS record found in its reliable channel"
    line = ("1 RDP-over-UDP session (MS-RDPEUDP) without TLS read: 10.0.0.5:50123 -> "
            f"10.0.0.6:3389 ({why})")
    assert f"tlsprobe: note: {path}: {line}" in err
    assert summary["losses"] == [line]


def test_v2_header_fields_are_skipped_exactly() -> None:
    """Every combination of optional headers: the payload and channel number come back."""
    rdp = RdpUdp()
    for fields in V2_FIELDS + [{"ack": 15, "ackvec": 127, "ackvec_ts": True, "aoa": True,
                                "overhead": True, "delay_ack": True}]:
        for payload in (b"\x16\x03\x03" + bytes(range(40)), b"x"):
            assert v2_chunk(rdp.v2(0xFFFF, payload, **fields)) == (0xFFFF, payload), fields
    assert v2_chunk(rdp.v2(5, None, ack=2)) is None  # ack only
    assert v2_chunk(rdp.v2(5, None, dummy=True)) is None  # padding
    assert v2_chunk(rdp.v2(5, b"abc", ack=3)[:9]) is None  # cut inside its headers


def test_v1_header_fields_are_skipped_exactly() -> None:
    """The ack vector header is padded to a 4-byte boundary (MS-RDPEUDP 2.2.2.7; Windows
    sends it so, a capture of which tshark 4.0 cannot read); FEC and ack-of-acks headers."""
    rdp = RdpUdp(version=0x0002)
    for acks in range(6):
        for fec in (False, True):
            for aoa in (False, True):
                packet = rdp.v1_data(0, 0x12345678, b"\x16\x03\x03payload", acks=acks,
                                     fec=fec, aoa=aoa)
                assert v1_chunk(packet) == (0x12345678, b"\x16\x03\x03payload")
    assert v1_chunk(rdp.syn()) is None and v1_chunk(rdp.synack()) is None
    assert v1_chunk(rdp.v1_data(0, 1, b"x", acks=3)[:14]) is None  # cut in its headers


def test_channel_orders_chunks_across_the_wrap_and_bounds_what_it_holds() -> None:
    ch = _Channel(1 << 16, AnalysisCaches())
    assert ch.add(0xFFFE, b"a") == b"a"
    assert ch.add(0x0000, b"c") == b""  # early: held
    assert ch.add(0xFFFE, b"a") == b""  # a copy
    assert ch.add(0xFFFF, b"b") == b"bc"
    assert ch.add(0x0001, b"d") == b"d" and ch.gaps == 0
    # a chunk that never comes: past MAX_PENDING held ones, it is given up as a gap
    held = [ch.add(0x0003 + i, bytes([i])) for i in range(MAX_PENDING)]
    assert held == [b""] * MAX_PENDING and ch.gaps == 0
    assert ch.caches.held == MAX_PENDING  # held bytes count against the analysis budget
    assert ch.add(0x0003 + MAX_PENDING, b"!") == bytes(range(MAX_PENDING)) + b"!"
    assert ch.gaps == 1 and not ch.pending and ch.caches.held == 0


def test_many_sessions_stay_bounded_and_are_all_counted(run_cli, tmp_path: Path) -> None:
    from tlsprobe.offline.rdpudp import MAX_SESSIONS
    rdp = RdpUdp()
    syn = rdp.syn()[:80]
    n = MAX_SESSIONS + 50
    frames = [ether(ipv4("10.0.%d.%d" % (i >> 8, i & 255), SERVER[0], 17,
                         udp(40000, 3389, syn))) for i in range(n)]
    path = tmp_path / "syns.pcap"
    path.write_bytes(pcap_bytes(frames))
    code, conns, [summary], err = pcap_jsonl(run_cli, path)
    assert code == 7 and conns == []
    [line] = summary["losses"]
    assert line.startswith(f"{n} RDP-over-UDP sessions (MS-RDPEUDP) without TLS read: ")
    assert line.endswith(f"(+{n - 8} more)")
    assert "(dropped: over 1024 sessions at once)" in line  # the oldest were dropped first
