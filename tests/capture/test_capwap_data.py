"""CAPWAP data (RFC 5415 4.3, UDP 5247 on either side): the wireless clients' frames inside
it are decoded, 802.11 (native, with the frame control byte-swapped as Cisco controllers
send it, or in RFC order) and 802.3; a CAPWAP fragment is counted in a note (exit 7). The
TLS bytes are a real loopback handshake (captures/); tshark's SNI is checked beside ours
(it decodes CAPWAP data on port 5247)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.capbuild import TSHARK, ether, ipv4, pcap_bytes, pcap_jsonl, real_chunks, tcp, \
    tshark_fields, udp
AP, WLC = ("172.16.0.2", 41264), ("172.16.0.1", 5247)
STA, WEB = ("10.1.3.68", 47025), ("74.125.130.188", 443)


def capwap(inner: bytes, *, wlan: bool, fragment: bool = False) -> bytes:
    """A CAPWAP data header (HLEN 2 words, WBID 1, T set for 802.11) and the frame."""
    bits = (2 << 19) | (1 << 9) | (0x100 if wlan else 0) | (0x80 if fragment else 0)
    return b"\x00" + bits.to_bytes(3, "big") + b"\x00\x00\x00\x00" + inner


def dot11(ip_packet: bytes, *, swap: bool) -> bytes:
    """An 802.11 data frame to the DS with LLC/SNAP, frame control swapped or not."""
    fc = b"\x01\x08" if swap else b"\x08\x01"
    return fc + b"\x2c\x00" + bytes(range(18)) + b"\x10\x00" + \
        b"\xaa\xaa\x03\x00\x00\x00\x08\x00" + ip_packet


def tunnelled(frame: bytes, up: bool) -> bytes:
    (sip, sp), (dip, dp) = (AP, WLC) if up else (WLC, AP)
    return ether(ipv4(sip, dip, 17, udp(sp, dp, frame)))


def session(swap: bool) -> list[bytes]:
    """The STA's TCP connection: its packets go up in 802.11 frames, the server's come
    down in 802.3 frames."""
    seq = [1000, 5000]
    out = []

    def seg(side: int, flags: str, payload: bytes = b"") -> None:
        (sip, sp), (dip, dp) = (STA, WEB) if side == 0 else (WEB, STA)
        ip = ipv4(sip, dip, 6, tcp(sp, dp, seq[side], seq[1 - side], flags, payload,
                                   src=sip, dst=dip))
        seq[side] += len(payload) + (1 if "S" in flags else 0)
        inner = dot11(ip, swap=swap) if side == 0 else ether(ip)
        out.append(tunnelled(capwap(inner, wlan=side == 0), up=side == 0))

    seg(0, "S")
    seg(1, "SA")
    for side, data in real_chunks()[:2]:
        seg(side, "PA", data)
    return out


@pytest.mark.parametrize("swap", [True, False], ids=["swapped", "rfc-order"])
def test_client_frames_in_capwap_data_are_read(run_cli, tmp_path: Path, swap: bool) -> None:
    path = tmp_path / "capwap.pcap"
    path.write_bytes(pcap_bytes(session(swap)))
    code, [conn], _, err = pcap_jsonl(run_cli, path)
    assert code == 0, err
    assert (conn["client"], conn["server"]) == ("10.1.3.68:47025", "74.125.130.188:443")
    assert conn["sni"] == "localhost" and conn["version"]["name"] == "TLS 1.2"
    assert conn["cipher"]["iana_name"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    if TSHARK and swap:  # tshark reads CAPWAP's 802.11 swapped by default
        assert tshark_fields(path, "tls.handshake.type == 1",
                             "tls.handshake.extensions_server_name") == ["localhost"]


def test_capwap_fragments_are_said_skipped(run_cli, tmp_path: Path) -> None:
    frames = session(True)
    frames.insert(2, tunnelled(capwap(b"\x00" * 60, wlan=True, fragment=True), up=True))
    path = tmp_path / "frag.pcap"
    path.write_bytes(pcap_bytes(frames))
    code, out, err = run_cli("pcap", str(path), "--no-progress")
    assert code == 7 and "localhost" in out
    assert f"tlsprobe: note: {path}: 1 CAPWAP data fragment (frames CAPWAP split, not " \
        "reassembled; skipped)" in err
