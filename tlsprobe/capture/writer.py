"""Write one probe's TCP conversation (or a QUIC probe's UDP datagrams) as a pcap that
tshark and Wireshark dissect.

The probe talks through an ordinary socket, so there are no packets to capture; this module
synthesises them around the bytes that were really sent and received: Ethernet, IPv4 or
IPv6, TCP with the real addresses and ports, a SYN / SYN-ACK / ACK opening, data segments
of at most `mss` bytes with consistent sequence and acknowledgement numbers (and an ACK
from the receiver after each burst), and a FIN exchange at the end, with valid IP and TCP
checksums. The headers are packed here with `struct` (a few microseconds a packet): writing
the most a probe keeps (`--max-bytes`, 16 MiB) takes a fraction of a second, where building
packets with scapy took about 2 ms each, seconds past the probe's time limit.
"""

from __future__ import annotations

import ipaddress
import os
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

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
        self.mac = bytes.fromhex(mac.replace(":", ""))
        self.ip = ipaddress.ip_address(ip).packed
        self.port = port
        self.seq = random.randrange(1 << 32)
        self.ip_id = random.randrange(1 << 16)


_FLAGS = {"F": 0x01, "S": 0x02, "P": 0x08, "A": 0x10}
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)  # Ethernet


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of data whose 16-bit word sum is not zero: the
    ones'-complement sum of the words is their value as one big number modulo 0xFFFF."""
    if len(data) % 2:
        data += b"\x00"
    folded = int.from_bytes(data, "big") % 0xFFFF or 0xFFFF
    return 0xFFFF - folded


def _packet(src: _Side, dst: _Side, v6: bool, flags: str, payload: bytes) -> bytes:
    """Ethernet + IPv4/IPv6 + TCP (no options) + payload, checksums filled in."""
    bits = sum(_FLAGS[c] for c in flags)
    tcp = struct.pack("!HHIIBBHHH", src.port, dst.port, src.seq,
                      dst.seq if "A" in flags else 0, 5 << 4, bits, 65535, 0, 0)
    length = len(tcp) + len(payload)
    pseudo = src.ip + dst.ip + (struct.pack("!IxxxB", length, 6) if v6 else
                                struct.pack("!xBH", 6, length))
    tcp = tcp[:16] + struct.pack("!H", _checksum(pseudo + tcp + payload)) + tcp[18:]
    if v6:
        net = struct.pack("!IHBB", 6 << 28, length, 6, 64) + src.ip + dst.ip
        ethertype = 0x86DD
    else:
        header = struct.pack("!BBHHHBBH", 0x45, 0, 20 + length, src.ip_id, 0x4000, 64, 6,
                             0) + src.ip + dst.ip
        net = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
        src.ip_id = (src.ip_id + 1) & 0xFFFF
        ethertype = 0x0800
    return dst.mac + src.mac + struct.pack("!H", ethertype) + net + tcp + payload


def _record(frame: bytes, when: float) -> bytes:
    seconds = int(when)
    micros = min(999999, max(0, round((when - seconds) * 1e6)))
    return struct.pack("<IIII", max(0, seconds), micros, len(frame), len(frame)) + frame


def _strip_scope(address: str) -> str:
    return address.split("%", 1)[0]


def connection_frames(client: tuple[str, int], server: tuple[str, int],
                      segments: Sequence[SegmentLike], *, start: float | None = None,
                      end: float | None = None, mss: int = 1460) -> list[tuple[float, bytes]]:
    """The connection's Ethernet frames with their times (see `write_connection_pcap`;
    also the pcapng writer of `scan --pcap-out`, capture/pcapng_writer.py)."""
    if mss < 1:
        raise ValueError("mss must be positive")
    v6 = ipaddress.ip_address(_strip_scope(server[0])).version == 6
    cli = _Side(CLIENT_MAC, _strip_scope(client[0]), client[1])
    srv = _Side(SERVER_MAC, _strip_scope(server[0]), server[1])
    times = [s.time for s in segments]
    t0 = start if start is not None else (min(times) if times else 0.0) - 0.0002
    t_end = end if end is not None else (max(times) if times else t0) + 0.0002
    frames: list[tuple[float, bytes]] = []

    def emit(src: _Side, dst: _Side, flags: str, payload: bytes, when: float) -> None:
        frames.append((when, _packet(src, dst, v6, flags, payload)))
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
    return frames


def write_connection_pcap(path: str | os.PathLike[str], client: tuple[str, int],
                          server: tuple[str, int], segments: Sequence[SegmentLike], *,
                          start: float | None = None, end: float | None = None,
                          mss: int = 1460) -> int:
    """Write the connection to `path` (pcap, Ethernet); returns the number of packets.

    `client` and `server` are (address, port) as the socket reported them; `start` and
    `end` time the handshake packets (default: around the first and last segment)."""
    records = [_record(frame, when) for when, frame in
               connection_frames(client, server, segments, start=start, end=end, mss=mss)]
    with open(path, "wb") as out:
        out.write(PCAP_HEADER)
        out.writelines(records)
    return len(records)


def _udp_packet(src: _Side, dst: _Side, v6: bool, payload: bytes) -> bytes:
    """Ethernet + IPv4/IPv6 + UDP + payload, checksums filled in (issue 15: QUIC)."""
    length = 8 + len(payload)
    udp = struct.pack("!HHHH", src.port, dst.port, length, 0)
    pseudo = src.ip + dst.ip + (struct.pack("!IxxxB", length, 17) if v6 else
                                struct.pack("!xBH", 17, length))
    udp = udp[:6] + struct.pack("!H", _checksum(pseudo + udp + payload) or 0xFFFF)
    if v6:
        net = struct.pack("!IHBB", 6 << 28, length, 17, 64) + src.ip + dst.ip
        ethertype = 0x86DD
    else:
        header = struct.pack("!BBHHHBBH", 0x45, 0, 20 + length, src.ip_id, 0x4000, 64, 17,
                             0) + src.ip + dst.ip
        net = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
        src.ip_id = (src.ip_id + 1) & 0xFFFF
        ethertype = 0x0800
    return dst.mac + src.mac + struct.pack("!H", ethertype) + net + udp + payload


def write_datagram_pcap(path: str | os.PathLike[str], client: tuple[str, int],
                        server: tuple[str, int], datagrams: Sequence[SegmentLike]) -> int:
    """Write one UDP conversation (a QUIC probe's datagrams, each as it was sent or
    received) to `path` (pcap, Ethernet); returns the number of packets."""
    v6 = ipaddress.ip_address(_strip_scope(server[0])).version == 6
    cli = _Side(CLIENT_MAC, _strip_scope(client[0]), client[1])
    srv = _Side(SERVER_MAC, _strip_scope(server[0]), server[1])
    records = [_record(_udp_packet(*((cli, srv) if d.from_client else (srv, cli)), v6, d.data),
                       d.time) for d in datagrams]
    with open(path, "wb") as out:
        out.write(PCAP_HEADER)
        out.writelines(records)
    return len(records)
