"""Write one probe's TCP conversation as a pcap that tshark and Wireshark dissect.

The probe talks through an ordinary socket, so there are no packets to capture; this module
synthesises them around the bytes that were really sent and received: Ethernet, IPv4 or
IPv6, TCP with the real addresses and ports, a SYN / SYN-ACK / ACK opening, data segments
of at most `mss` bytes with consistent sequence and acknowledgement numbers (and an ACK
from the receiver after each burst), and a FIN exchange at the end. Checksums are computed
by scapy when the packets are built. scapy is imported only here, and only when called.
"""

from __future__ import annotations

import ipaddress
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

CLIENT_MAC = "02:00:00:00:00:01"
SERVER_MAC = "02:00:00:00:00:02"


class SegmentLike(Protocol):
    """Bytes that went one way at one time (`from_client` False: server to client)."""

    @property
    def from_client(self) -> bool: ...

    @property
    def data(self) -> bytes: ...

    @property
    def time(self) -> float: ...


@dataclass(frozen=True)
class Segment:
    """A plain SegmentLike."""

    from_client: bool
    data: bytes
    time: float


class _Side:
    def __init__(self, mac: str, ip: str, port: int) -> None:
        self.mac, self.ip, self.port = mac, ip, port
        self.seq = random.randrange(1 << 32)


def _strip_scope(address: str) -> str:
    return address.split("%", 1)[0]


def write_connection_pcap(path: str | os.PathLike[str], client: tuple[str, int],
                          server: tuple[str, int], segments: Sequence[SegmentLike], *,
                          start: float | None = None, end: float | None = None,
                          mss: int = 1460) -> int:
    """Write the connection to `path` (pcap, Ethernet); returns the number of packets.

    `client` and `server` are (address, port) as the socket reported them; `start` and
    `end` time the handshake packets (default: around the first and last segment)."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.utils import PcapWriter

    if mss < 1:
        raise ValueError("mss must be positive")
    v6 = ipaddress.ip_address(_strip_scope(server[0])).version == 6
    cli = _Side(CLIENT_MAC, _strip_scope(client[0]), client[1])
    srv = _Side(SERVER_MAC, _strip_scope(server[0]), server[1])
    times = [s.time for s in segments]
    t0 = start if start is not None else (min(times) if times else 0.0) - 0.0002
    t_end = end if end is not None else (max(times) if times else t0) + 0.0002
    packets: list[Any] = []

    def emit(src: _Side, dst: _Side, flags: str, payload: bytes, when: float) -> None:
        net = IPv6(src=src.ip, dst=dst.ip) if v6 else IP(src=src.ip, dst=dst.ip, flags="DF")
        tcp = TCP(sport=src.port, dport=dst.port, flags=flags, seq=src.seq,
                  ack=dst.seq if "A" in flags else 0, window=65535)
        pkt = Ether(src=src.mac, dst=dst.mac) / net / tcp
        if payload:
            pkt = pkt / Raw(load=payload)
        pkt.time = when
        packets.append(pkt)
        src.seq = (src.seq + len(payload) + (1 if ("S" in flags or "F" in flags) else 0)) \
            % (1 << 32)

    emit(cli, srv, "S", b"", t0)
    emit(srv, cli, "SA", b"", t0 + 0.00005)
    emit(cli, srv, "A", b"", t0 + 0.0001)
    for seg in segments:
        src, dst = (cli, srv) if seg.from_client else (srv, cli)
        for i in range(0, len(seg.data), mss):
            emit(src, dst, "PA", seg.data[i:i + mss], seg.time)
        emit(dst, src, "A", b"", seg.time + 0.00001)
    emit(cli, srv, "FA", b"", t_end)
    emit(srv, cli, "FA", b"", t_end + 0.00005)
    emit(cli, srv, "A", b"", t_end + 0.0001)
    writer = PcapWriter(os.fspath(path), linktype=1, sync=False)
    try:
        for pkt in packets:
            writer.write(pkt)
    finally:
        writer.close()
    return len(packets)
