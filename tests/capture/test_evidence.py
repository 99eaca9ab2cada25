"""A connection is reported as TLS (or OpenVPN) only on evidence: bytes that merely look like
a record header or an OpenVPN reset at one place are another protocol's. Seen in Zeek's test
traces: DNP3 (`05 64 08 c4`: a length and a client hard reset), QUIC short headers (a reset
byte), DCE/RPC (`18 03 01 03 03`: two chained "heartbeat" records). Real OpenVPN and real
mid-stream TLS are still read (test_framing.py, test_pcap_captures.py)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from tests.helpers.capbuild import Conv, OpenVpn, ether, ipv4, pcap_bytes, real_chunks, tcp_framed, udp

from tlsprobe.offline.openvpn_channel import answers


def connections(run_cli, path: Path) -> list[dict]:
    code, out, err = run_cli("pcap", str(path), "--jsonl", "--no-progress")
    assert code in (0, 7), err
    return [d for d in map(json.loads, out.splitlines()) if d["kind"] == "connection"]


def dnp3(src: int, dst: int, n: int) -> bytes:
    """A DNP3 link-layer frame: 05 64, length, control, destination, source, CRC."""
    return b"\x05\x64\x08\xc4" + struct.pack("<HH", dst, src) + bytes([n, 0xb8]) + \
        b"\xc0\xd7\x00\x7a\xce"


def test_a_stream_that_only_looks_like_an_openvpn_reset_is_not_reported(run_cli,
                                                                        tmp_path: Path) -> None:
    c = Conv(("10.0.0.8", 2789), ("10.0.0.3", 20000))
    pkts = c.handshake()
    for n in range(6):
        pkts += [c.c(dnp3(3, 4, n)), c.s(b"\x05\x64\x0a\x44\x03\x00\x04\x00" + bytes([n]) * 9)]
    path = tmp_path / "dnp3.pcap"
    path.write_bytes(pcap_bytes([ether(p) for p in pkts]))
    assert connections(run_cli, path) == []


def test_quic_short_headers_are_not_an_openvpn_session(run_cli, tmp_path: Path) -> None:
    """1-RTT packets of a QUIC connection whose Initials were not captured: first bytes
    0x50 (client) and 0x40 (server) read as a client and a server hard reset."""
    client, server = ("192.0.2.1", 57538), ("198.51.100.7", 443)
    frames = []
    for n in range(8):
        frames.append(ether(ipv4(*[client[0], server[0]], 17,
                                 udp(client[1], server[1], b"\x50" + os.urandom(60)))))
        frames.append(ether(ipv4(server[0], client[0], 17,
                                 udp(server[1], client[1], b"\x40" + os.urandom(60)))))
    path = tmp_path / "quic.pcap"
    path.write_bytes(pcap_bytes(frames))
    assert connections(run_cli, path) == []


def dns(qid: int, response: bool) -> bytes:
    """A DNS query (or its answer) for example.com with an OPT record, as dig sends."""
    flags, counts = (0x8500, (1, 1, 0, 1)) if response else (0x0120, (1, 0, 0, 1))
    question = b"\x07example\x03com\x00\x00\x01\x00\x01"
    answer = b"\xc0\x0c\x00\x01\x00\x01\x00\x01\x51\x80\x00\x04\x5d\xb8\xd8\x22" if response else b""
    return struct.pack(">HH4H", qid, flags, *counts) + question + answer + \
        b"\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x00"


def test_dns_whose_ids_read_as_hard_resets_is_not_an_openvpn_session(run_cli,
                                                                   tmp_path: Path) -> None:
    """tcpdump's edns-opts.pcap: queries from one client port, a first id 0x3811 (a client
    hard reset) and a later answer 0x4002 (a server hard reset); bytes 9-16 of both read as
    a tls-crypt replay id and a time (the name's letters). A DNS answer echoes the query's
    id, so the server's first packet never reads as a server reset."""
    client, server = ("192.0.0.1", 46225), ("192.0.0.2", 53)
    frames = []
    for qid in (0x3811, 0x4272, 0x0F36, 0x4002, 0x18E5):
        frames.append(ether(ipv4(client[0], server[0], 17,
                                 udp(client[1], server[1], dns(qid, False)))))
        frames.append(ether(ipv4(server[0], client[0], 17,
                                 udp(server[1], client[1], dns(qid, True)))))
    path = tmp_path / "dns.pcap"
    path.write_bytes(pcap_bytes(frames))
    assert connections(run_cli, path) == []


@pytest.mark.parametrize("hmac", [0, 20])
def test_a_server_reset_answers_the_clients(hmac: int) -> None:
    ov = OpenVpn(hmac)
    client, server = ov.reset(0), ov.reset(1)
    assert answers(server, client)
    other = OpenVpn(hmac)
    other.sid = (b"\x33" * 8, b"\x44" * 8)
    stranger = other.reset(0)
    other.reset(1)
    if hmac == 0:  # the ack names another session: no answer
        assert not answers(server, stranger)
    assert not answers(client, server)  # roles the wrong way round


def test_two_chained_headers_inside_binary_data_are_not_tls(run_cli, tmp_path: Path) -> None:
    """Mid-stream bytes holding two plausible record headers in a row (a DCE/RPC body) are
    not taken for TLS; three records in a row are (real application data)."""
    fake = b"\x00\x11" * 40 + b"\x18\x03\x01\x00\x05" + b"\x03" * 5 + b"\x18\x03\x01\x00\x02" + \
        b"\x01\x02" + b"\x00\x11" * 40
    app = b"".join(b"\x17\x03\x03\x00\x20" + os.urandom(32) for _ in range(3))
    c = Conv(("10.0.0.1", 40000), ("10.0.0.2", 5000))
    d = Conv(("10.0.0.1", 40001), ("10.0.0.2", 5000))
    pkts = [c.c(b"\x00\x11" * 8, flags="PA", seq=1000), c.c(fake, seq=1016),
            d.c(b"\x00\x11" * 8, seq=1000), d.c(app, seq=1016)]
    path = tmp_path / "mid.pcap"
    path.write_bytes(pcap_bytes([ether(p) for p in pkts]))
    conns = connections(run_cli, path)
    assert [(r["client"], r["midstream"]) for r in conns] == [("10.0.0.1:40001", True)]


def test_real_openvpn_over_tcp_still_needs_only_its_resets(run_cli, tmp_path: Path) -> None:
    """Under tls-crypt nothing TLS is readable: the answered resets make it OpenVPN."""
    ov = OpenVpn(0)
    c = Conv(("127.0.0.1", 40000), ("127.0.0.1", 1194))
    pkts = c.handshake() + [c.c(tcp_framed(ov.reset(0))), c.s(tcp_framed(ov.reset(1)))]
    for direction, data in real_chunks():
        blob = b"".join(tcp_framed(p) for p in ov.control(direction, os.urandom(len(data))))
        pkts.append(c.c(blob) if direction == 0 else c.s(blob))
    path = tmp_path / "crypt.pcap"
    path.write_bytes(pcap_bytes([ether(p) for p in pkts]))
    [conn] = connections(run_cli, path)
    assert conn["framing"] == "openvpn" and conn["problems"][0].startswith("OpenVPN: ")
