"""Classic libpcap files: both byte orders, microsecond and nanosecond magic, and the
"modified" (Kuznetsov) variant with its longer record header.

A record header of zeros (no timestamp, no length) is no packet: it is what zeros after the
header read as (a file preallocated and never filled, a copy that went wrong), and reading
stops there with a warning, as at a captured length beyond the limit (what junk reads as),
instead of walking megabytes of empty records. An empty record with a timestamp is read.

The reader parses records in place from large chunks (`ChunkedInput`) with one
``struct.unpack_from`` per record and hands out (buffer, start, end) positions instead of
copying each packet: the decoders read the headers straight from the chunk.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator
from typing import Final

from tlsprobe.capture.events import CaptureError, CaptureStats, Secrets
from tlsprobe.capture.source import QUIET_WAKE, ChunkedInput, OpenedSource

# magic as read little-endian -> (byte order, seconds per timestamp unit, record header size)
_MAGICS: Final = {
    0xA1B2C3D4: ("<", 1e-6, 16), 0xD4C3B2A1: (">", 1e-6, 16),
    0xA1B23C4D: ("<", 1e-9, 16), 0x4D3CB2A1: (">", 1e-9, 16),
    0xA1B2CD34: ("<", 1e-6, 24), 0x34CDB2A1: (">", 1e-6, 24),
}
MAX_STANDARD_PACKET: Final = 262144  # Wireshark's WTAP_MAX_PACKET_SIZE_STANDARD
MAX_PACKET: Final = 1 << 26

# (frame number, timestamp, link type, buffer, start, end, original length)
PacketRecord = tuple[int, float, int, bytes, int, int, int]


def final_accounting(inp: ChunkedInput, opened: OpenedSource, stats: CaptureStats, pos: int,
                     frames: int) -> None:
    """A reader stopped at `pos` after `frames` packets: the input left there, the packet
    count, and the source's own read error (a gzip stream cut short, say) as a warning.
    A reader whose last record the stream cut short holds `pos` in the buffer as it was
    before the fill that moved it: the input knows where that record began (`ended_at`)."""
    ended = inp.ended_at
    inp.pos = pos if ended is None else ended - inp.base
    stats.packets = frames
    err = opened.error
    if err:
        stats.warn(inp.offset, err)


#: link type of a record for "no packet, time passed" (its time the last packet's, its
#: `orig` now's in microseconds): a live capture's idle loop yields it, and a reader of a
#: live input (stdin, --follow) that gives nothing, so that what waits on capture time (a
#: reset connection's linger) ends on an idle link too
TICK_RECORD: Final = -2


def quiet_ticks(quiet: Callable[[float], float | None], ts: float, frame: int
                ) -> Generator[PacketRecord, None, None]:
    """While a live input gives nothing: a TICK_RECORD every `QUIET_WAKE` seconds, the
    capture's time `ts` (the last packet's) and the seconds idle since."""
    while (idle := quiet(QUIET_WAKE)) is not None:
        yield frame, ts, TICK_RECORD, b"", 0, 0, round((ts + idle) * 1e6)


def is_pcap_magic(head: bytes) -> bool:
    return len(head) >= 4 and int.from_bytes(head[:4], "little") in _MAGICS


class PcapReader:
    """Streams the records of one pcap file; damage stops it with a warning in `stats`."""

    format_name = "pcap"

    def __init__(self, opened: OpenedSource, stats: CaptureStats) -> None:
        magic = int.from_bytes(opened.head[:4], "little")
        if magic not in _MAGICS:
            raise CaptureError(f"{opened.name}: not a pcap file")
        self._order, self.scale, self.rec_len = _MAGICS[magic]
        # sec, frac, incl, orig (typed as ints: compiled, the loops use them unboxed)
        self.unpack: Callable[[bytes, int], tuple[int, int, int, int]] = \
            struct.Struct(self._order + "IIII").unpack_from
        self._opened = opened
        self._in = ChunkedInput(opened.stream, opened.head)
        self._stats = stats
        #: a live input's `quiet` (stdin, --follow) when the caller takes TICK_RECORDs
        #: between records (the capture loop sets it), else None
        self.quiet: Callable[[float], float | None] | None = None
        self.secrets: list[Secrets] = []  # pcap has no secrets blocks; same surface as pcapng
        self.link_type = -1
        self.snaplen = 0
        if self._in.fill(24):
            major, minor, _, _, snaplen, network = struct.unpack_from(self._order + "HHiIII",
                                                                      self._in.buf, 4)
            self.snaplen = snaplen
            self._in.pos = 24
            if major == 2:
                self.link_type = network & 0xFFFF
            else:   # (link_type stays -1: no packets read)
                stats.warn(4, f"pcap file format version {major}.{minor}, not 2.x (the "
                              "only one defined): its records are not read")
        else:
            stats.warn(len(self._in.buf), "truncated pcap file header")
        self.limit = max(MAX_STANDARD_PACKET, min(self.snaplen, MAX_PACKET))

    @property
    def input_quiet(self) -> Callable[[float], float | None] | None:
        """The input's `quiet` when it is a live one (stdin, --follow), else None."""
        return self._in.quiet

    # -- record access shared by packets() and the capture loop's fused pcap path (stream.py)
    def window(self) -> tuple[bytes, int, int]:
        """The buffer, the offset of the next record header in it and its length."""
        return self._in.buf, self._in.pos, len(self._in.buf)

    def header_at(self, pos: int) -> tuple[bytes, int, int] | None:
        """Make a whole record header available at `pos` (the buffer may be replaced):
        the (buffer, position, buffer length), or None at the end (a partial header is
        warned about)."""
        inp = self._in
        inp.pos = pos
        if not inp.fill(self.rec_len):
            if len(inp.buf) > inp.pos and not inp.stopped:   # not cut by a deadline
                self._stats.warn(inp.offset, "truncated pcap record header")
            return None
        return inp.buf, inp.pos, len(inp.buf)

    def record_at(self, pos: int, incl: int) -> tuple[bytes, int, int] | None:
        """Make the whole record at `pos` (header and `incl` bytes) available: the (buffer,
        position, buffer length), or None when the file ends inside it (warned about)."""
        inp = self._in
        inp.pos = pos
        if not inp.fill(self.rec_len + incl):
            if inp.stopped:     # the deadline of a capture still written: no damage
                return None
            self._stats.warn(inp.offset, f"truncated pcap record: {incl} bytes announced, "
                                         f"{len(inp.buf) - inp.pos - self.rec_len} present")
            return None
        return inp.buf, inp.pos, len(inp.buf)

    def too_long(self, pos: int, incl: int) -> None:
        self._stats.warn(self._in.base + pos,
                         f"impossible pcap record length {incl} (limit {self.limit})")

    def zeros(self, pos: int) -> None:
        """The record header at `pos` is all zeros: the file holds no packets from here."""
        self._stats.warn(self._in.base + pos, "pcap record header of zeros (the file holds "
                                              "zeros instead of packets from here)")

    def done(self, pos: int, frames: int) -> None:
        """Reading stopped at `pos` after `frames` records: the final accounting."""
        final_accounting(self._in, self._opened, self._stats, pos, frames)

    def packets(self) -> Generator[PacketRecord, None, None]:
        """Yield one record per packet; the buffer is only valid until the next one."""
        if self.link_type < 0:
            return
        rec_len, unpack, scale = self.rec_len, self.unpack, self.scale
        limit, link_type, quiet = self.limit, self.link_type, self.quiet
        buf, pos, end = self.window()
        frame = sec = frac = 0
        try:
            while True:
                if end - pos < rec_len:
                    if quiet is not None and frame:   # between records: maybe idle
                        yield from quiet_ticks(quiet, sec + frac * scale, frame)
                    got = self.header_at(pos)
                    if got is None:
                        break
                    buf, pos, end = got
                sec, frac, incl, orig = unpack(buf, pos)
                if incl > limit:
                    self.too_long(pos, incl)
                    break
                if not orig and not (sec or frac or incl):
                    self.zeros(pos)
                    break
                start = pos + rec_len
                stop = start + incl
                if stop > end:
                    got = self.record_at(pos, incl)
                    if got is None:
                        break
                    buf, pos, end = got
                    start = pos + rec_len
                    stop = start + incl
                frame += 1
                yield frame, sec + frac * scale, link_type, buf, start, stop, orig
                pos = stop
        finally:
            self.done(pos, frame)
