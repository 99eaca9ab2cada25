"""The --pcap-out writer (capture/writer.py): headers packed with struct must carry valid
IPv4 and TCP checksums (checked against scapy's own computation), consistent sequence
numbers, and write the most a probe keeps (16 MiB) in a fraction of a second of CPU
(scapy-built packets took about 2 ms each: over 20 s for 16 MiB)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.utils import rdpcap

from tlsprobe.capture.writer import Segment, write_connection_pcap


@pytest.mark.parametrize("server", [("127.0.0.1", 443), ("::1", 4433)])
def test_checksums_and_sequence_numbers(tmp_path: Path, server: tuple[str, int]) -> None:
    t0 = time.time()
    segments = [Segment(i % 2 == 0, os.urandom(100 + 997 * i), t0 + i / 100) for i in range(8)]
    path = tmp_path / "conn.pcap"
    count = write_connection_pcap(path, (server[0], 50000), server, segments)
    packets = rdpcap(str(path))
    assert len(packets) == count
    layer = IPv6 if ":" in server[0] else IP
    sent = {True: b"", False: b""}
    for pkt in packets:
        rebuilt = pkt.copy()
        del rebuilt[TCP].chksum
        if layer is IP:
            del rebuilt[IP].chksum
        rebuilt = rebuilt.__class__(bytes(rebuilt))
        assert rebuilt[TCP].chksum == pkt[TCP].chksum
        if layer is IP:
            assert rebuilt[IP].chksum == pkt[IP].chksum
        payload = bytes(pkt[TCP].payload)
        if payload:
            sent[pkt[TCP].sport == 50000] += payload
    assert sent[True] == b"".join(s.data for s in segments if s.from_client)
    assert sent[False] == b"".join(s.data for s in segments if not s.from_client)
    # sequence numbers: each data packet starts where the previous one of its side ended
    nxt: dict[int, int] = {}
    for pkt in packets:
        tcp = pkt[TCP]
        if tcp.sport in nxt:
            assert tcp.seq == nxt[tcp.sport]
        nxt[tcp.sport] = (tcp.seq + len(bytes(tcp.payload)) +
                          (1 if tcp.flags.S or tcp.flags.F else 0)) % 2**32


def test_sixteen_mebibytes_take_a_fraction_of_a_second(tmp_path: Path) -> None:
    t0 = time.time()
    segments = [Segment(False, bytes(65536), t0 + i / 1000) for i in range(256)]
    cpu = time.process_time()
    count = write_connection_pcap(tmp_path / "big.pcap", ("127.0.0.1", 50000),
                                  ("127.0.0.1", 443), segments)
    assert time.process_time() - cpu < 3.0
    assert count > 11000 and (tmp_path / "big.pcap").stat().st_size > 16 * 2**20
