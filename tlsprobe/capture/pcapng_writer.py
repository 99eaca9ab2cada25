"""Write several connections as one pcapng file, each labelled by a packet comment.

`scan --pcap-out` records every connection of an audit (issue 13 item 4); a user who doubts
a verdict must find "groups TLS 1.3, connection 3" among dozens of connections. pcapng
(unlike pcap) carries a comment per packet (the `opt_comment` option of an Enhanced Packet
Block), which Wireshark shows in the packet details and as `frame.comment` (a display
filter: `frame.comment contains "connection 3"`); the comment is on each connection's SYN.
The frames are the ones capture/writer.py synthesises for the probe's --pcap-out (real
addresses, ports and bytes); each connection is written as one run of packets when it ends
(so a long audit holds nothing but the connections in flight).

Blocks (pcapng, draft-ietf-opsawg-pcapng): one Section Header Block, one Interface
Description Block (Ethernet, microsecond timestamps: the default resolution), then an
Enhanced Packet Block per frame. Little-endian throughout.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO

from tlsprobe.capture.writer import SegmentLike, connection_frames

__all__ = ["LabelledConnection", "PcapngWriter"]

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


class PcapngWriter:
    """Writes connections to a binary stream as they end: the section and interface header
    first, then each connection's packets (in their time order) when `add`ed. The packets of
    different connections are not interleaved: each connection is one run of the file, its
    SYN first with the label."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.packets = 0
        out.write(_block(_SHB, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)))
        out.write(_block(_IDB, struct.pack("<HHI", _LINKTYPE_ETHERNET, 0, _SNAPLEN)))

    def add(self, conn: LabelledConnection) -> int:
        """Write one connection; returns its number of packets."""
        frames = connection_frames(conn.client, conn.server, conn.segments, start=conn.start,
                                   end=conn.end)
        order = sorted(range(len(frames)), key=lambda i: frames[i][0])   # stable
        self.out.writelines(_packet_block(frames[i][1], frames[i][0],
                                          conn.label if i == 0 else None) for i in order)
        self.packets += len(frames)
        return len(frames)
