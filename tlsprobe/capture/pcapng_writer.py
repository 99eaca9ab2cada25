"""Write several connections as one pcapng file, each labelled by a packet comment.

`scan --pcap-out` records every connection of an audit (issue 13 item 4); a user who doubts
a verdict must find "groups TLS 1.3, connection 3" among dozens of connections. pcapng
(unlike pcap) carries a comment per packet (the `opt_comment` option of an Enhanced Packet
Block), which Wireshark shows in the packet details and as `frame.comment` (a display
filter: `frame.comment contains "connection 3"`); the comment is on each connection's SYN.
The frames are the ones capture/writer.py synthesises for the probe's --pcap-out (real
addresses, ports and bytes); the packets of all connections are written in time order, as
a capture on the loopback interface would have them.

Blocks (pcapng, draft-ietf-opsawg-pcapng): one Section Header Block, one Interface
Description Block (Ethernet, microsecond timestamps: the default resolution), then an
Enhanced Packet Block per frame. Little-endian throughout.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from tlsprobe.capture.writer import SegmentLike, connection_frames

__all__ = ["LabelledConnection", "write_connections_pcapng"]

_SHB, _IDB, _EPB = 0x0A0D0D0A, 0x00000001, 0x00000006
_OPT_END, _OPT_COMMENT = 0, 1
_LINKTYPE_ETHERNET = 1
_SNAPLEN = 262144


@dataclass(frozen=True)
class LabelledConnection:
    """One connection to write: its label (the comment on its SYN), addresses, bytes and
    the times of its opening and closing."""

    label: str
    client: tuple[str, int]
    server: tuple[str, int]
    segments: tuple[SegmentLike, ...]
    start: float
    end: float


def _pad(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % 4)


def _block(kind: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack("<II", kind, length) + body + struct.pack("<I", length)


def _options(comment: str | None) -> bytes:
    if comment is None:
        return b""
    text = comment.encode("utf-8")
    return struct.pack("<HH", _OPT_COMMENT, len(text)) + _pad(text) + \
        struct.pack("<HH", _OPT_END, 0)


def _packet_block(frame: bytes, when: float, comment: str | None) -> bytes:
    micros = max(0, round(when * 1e6))
    head = struct.pack("<IIIII", 0, micros >> 32, micros & 0xFFFFFFFF, len(frame), len(frame))
    return _block(_EPB, head + _pad(frame) + _options(comment))


def write_connections_pcapng(path: str | os.PathLike[str],
                             connections: Iterable[LabelledConnection]) -> int:
    """Write `connections` to `path` as pcapng; returns the number of packets written."""
    packets: list[tuple[float, int, bytes, str | None]] = []
    for number, conn in enumerate(connections):
        frames = connection_frames(conn.client, conn.server, conn.segments, start=conn.start,
                                   end=conn.end)
        for index, (when, frame) in enumerate(frames):
            packets.append((when, number, frame, conn.label if index == 0 else None))
    packets.sort(key=lambda p: (p[0], p[1]))    # stable within a connection
    header = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)
    interface = struct.pack("<HHI", _LINKTYPE_ETHERNET, 0, _SNAPLEN)
    with open(path, "wb") as out:
        out.write(_block(_SHB, header))
        out.write(_block(_IDB, interface))
        out.writelines(_packet_block(frame, when, comment)
                       for when, _, frame, comment in packets)
    return len(packets)
