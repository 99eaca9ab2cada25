"""Microsoft Network Monitor 2.x captures (.cap, magic "GMBU").

Frames are found through the frame table at the end of the file (one 32-bit offset per
frame), so the file must be seekable: the table is read first (4 bytes per frame), then the
frames are read front to back in chunks like the other formats.  Version 2.1 and later put
a per-frame trailer after the data whose first field is the frame's network type;
0xE000 + n means pcap link type n.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Generator
from datetime import UTC, datetime

from tlsprobe.capture.events import CaptureError, CaptureStats, Secrets
from tlsprobe.capture.pcap import MAX_STANDARD_PACKET, PacketRecord
from tlsprobe.capture.source import ChunkedInput, OpenedSource

MAGIC = b"GMBU"
HEADER_SIZE = 64
_TRAILER = {0: 0, 1: 2, 2: 6}  # minor version -> trailer bytes after each frame (3+: 15)
NETWORK_ETHERNET = 1
NETWORK_PCAP_BASE = 0xE000
UNKNOWN_NETWORK_BASE = 0x10000  # reported as link_type_<0x10000 + network type>


def is_netmon_magic(head: bytes) -> bool:
    return head[:4] == MAGIC


def link_type(network: int) -> int:
    """pcap link type of a Network Monitor network type."""
    if network == NETWORK_ETHERNET:
        return 1
    if NETWORK_PCAP_BASE <= network < 0xFFE0:
        return network - NETWORK_PCAP_BASE
    return UNKNOWN_NETWORK_BASE + network


class NetmonReader:
    """Streams the frames of a Network Monitor 2.x file in frame-table order."""

    format_name = "netmon"

    def __init__(self, opened: OpenedSource, stats: CaptureStats) -> None:
        if not is_netmon_magic(opened.head):
            raise CaptureError(f"{opened.name}: not a Network Monitor capture")
        self._opened = opened
        self._stats = stats
        self._in = ChunkedInput(opened.stream, opened.head)
        self.secrets: list[Secrets] = []
        self.link_types: dict[int, int] = {}
        self._offsets: array[int] = array("I")
        self._minor = self._trailer = self._network = 0
        self._start = 0.0
        if not self._in.fill(HEADER_SIZE):
            stats.warn(len(self._in.buf), "truncated Network Monitor file header")
            return
        buf = self._in.buf
        minor, major, network = struct.unpack_from("<BBH", buf, 4)
        if major != 2:
            raise CaptureError(f"{opened.name}: Network Monitor {major}.{minor} captures are "
                               "not supported (convert with editcap -F pcapng)")
        self._minor = minor
        self._trailer = _TRAILER.get(minor, 15)
        self._network = network
        year, month, _, day, hour, minute, sec, msec = struct.unpack_from("<8H", buf, 8)
        try:
            self._start = datetime(year, month, day, hour, minute, sec, msec * 1000,
                                   tzinfo=UTC).timestamp()
        except ValueError:
            self._start = 0.0
        table_offset, table_length = struct.unpack_from("<II", buf, 24)
        table = opened.read_at(table_offset, table_length)
        if table is None:
            raise CaptureError(f"{opened.name}: a Network Monitor capture must be read from a "
                               "seekable file (not a pipe or a compressed file)")
        if len(table) < table_length:
            stats.warn(table_offset + len(table), "truncated Network Monitor frame table")
        self._offsets.frombytes(table[:len(table) // 4 * 4])
        if array("I", [1]).tobytes() != b"\x01\x00\x00\x00":
            self._offsets.byteswap()
        self._in.pos = HEADER_SIZE

    def packets(self) -> Generator[PacketRecord, None, None]:
        stats = self._stats
        inp = self._in
        trailer = self._trailer
        header_network = self._network
        per_frame_network = self._minor >= 1
        start = self._start
        unpack = struct.Struct("<QII").unpack_from
        frame = 0
        try:
            for offset in self._offsets:
                if offset < inp.offset or not inp.skip(offset - inp.offset):
                    what = "out of file order" if offset < inp.offset else "beyond the end"
                    stats.warn(offset, f"Network Monitor frame {frame + 1} offset {what}")
                    break
                if not inp.fill(16):
                    stats.warn(inp.offset, "truncated Network Monitor frame header")
                    break
                delta, orig, incl = unpack(inp.buf, inp.pos)
                if incl > max(MAX_STANDARD_PACKET, orig):
                    stats.warn(inp.offset, f"impossible Network Monitor frame length {incl}")
                    break
                if not inp.fill(16 + incl + trailer):
                    stats.warn(inp.offset, "truncated Network Monitor frame")
                    break
                buf, pos = inp.buf, inp.pos
                network = header_network
                if per_frame_network:
                    network = struct.unpack_from("<H", buf, pos + 16 + incl)[0]
                lt = link_type(network)
                self.link_types[lt] = self.link_types.get(lt, 0) + 1
                frame += 1
                yield frame, start + delta * 1e-6, lt, buf, pos + 16, pos + 16 + incl, orig
                inp.pos = pos + 16 + incl + trailer
        finally:
            stats.packets = frame
