"""pcapng files: sections of either byte order, interfaces with their own link type and
timestamp resolution, Enhanced/Simple/obsolete Packet Blocks, Decryption Secrets Blocks.

Unknown block types are skipped by their length (the format is built for that). A block
whose length is impossible, or whose trailing length disagrees with its leading one, is
garbage: reading stops there with a warning naming the offset.  Decryption Secrets Blocks
(type 0x0000000A) are kept in `secrets` and announced to the caller through a record with
link type `SECRETS_RECORD`, so key-log decryption can use keys embedded in the capture.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator, Iterator
from typing import Final

from tlsprobe.capture.events import CaptureError, CaptureStats, Secrets
from tlsprobe.capture.pcap import PacketRecord, final_accounting
from tlsprobe.capture.source import ChunkedInput, OpenedSource

SHB: Final = 0x0A0D0D0A
IDB: Final = 0x1
PB: Final = 0x2
SPB: Final = 0x3
NRB: Final = 0x4
ISB: Final = 0x5
EPB: Final = 0x6
DSB: Final = 0xA
BYTE_ORDER_MAGIC = 0x1A2B3C4D
MAX_BLOCK: Final = 1 << 25
SECRETS_RECORD: Final = -1  # link type of the record that announces a new entry in `secrets`
OPT_IF_TSRESOL: Final = 9
OPT_IF_TSOFFSET: Final = 14
OPT_ISB_IFDROP: Final = 5


#: what `PcapngReader.block` returns: buffer, position, block type (STOP: reading stops
#: there), block length, frame count after it, the record it makes
Block = tuple[bytes, int, int, int, int, PacketRecord | None]
STOP: Final = -1
UNKNOWN_INTERFACE: Final = -2  # `block`'s type for an EPB of no interface: counted, skipped
EpbHead = tuple[int, int, int, int, int, int, int]
#: the fused loop's `EpbHead` where fewer than 28 bytes are left in the buffer: no EPB
NO_HEAD: Final[EpbHead] = (0, 0, 0, 0, 0, 0, 0)


def is_pcapng_magic(head: bytes) -> bool:
    return head[:4] == b"\x0a\x0d\x0d\x0a"


class Interface:
    """One IDB: link type, snaplen and how to turn raw timestamps into seconds: the units
    divided by `rate` (units per second: 10**6, or its if_tsresol), plus `offset`. Divided,
    not multiplied by 1e-6: the quotient is the float nearest the exact time, the value a
    classic pcap's `sec + usec * 1e-6` and a live capture's give too, where the product
    differed from them in the last digit for about a third of the times (a connection's
    `timings.start` live and from its -w file)."""

    __slots__ = ("link_type", "offset", "packets", "rate", "snaplen")

    def __init__(self, link_type: int, snaplen: int, rate: float, offset: float) -> None:
        self.link_type = link_type
        self.snaplen = snaplen
        self.rate = rate
        self.offset = offset
        self.packets = 0


def _options(block: bytes, start: int, stop: int, order: str,
             overflow: list[tuple[int, int]] | None = None) -> Iterator[tuple[int, bytes]]:
    """(code, value) pairs of a block's options; stops at a malformed option, whose (code,
    length) goes to `overflow` when given (an option running past its block: damage)."""
    hdr = struct.Struct(order + "HH").unpack_from
    pos = start
    while pos + 4 <= stop:
        code, length = hdr(block, pos)
        if code == 0:
            return
        value_end = pos + 4 + length
        if value_end > stop:
            if overflow is not None:
                overflow.append((code, length))
            return
        yield code, block[pos + 4:value_end]
        pos = value_end + (-length & 3)


def _interface(block: bytes, order: str, overflow: list[tuple[int, int]]) -> Interface:
    """An Interface Description Block's interface; an option running past the block (which
    may have been its if_tsresol or if_tsoffset) goes to `overflow`."""
    link_type, _, snaplen = struct.unpack_from(order + "HHI", block, 8)
    rate, offset = 1e6, 0
    for code, value in _options(block, 16, len(block) - 4, order, overflow):
        if code == OPT_IF_TSRESOL and len(value) >= 1:
            r = value[0]
            exp = r & 0x7F
            if r & 0x80:
                rate = 2.0 ** min(exp, 64)
            else:
                rate = 10.0 ** min(exp, 30)
        elif code == OPT_IF_TSOFFSET and len(value) >= 8:
            offset = struct.unpack_from(order + "q", value)[0]
    return Interface(link_type, snaplen, rate, offset)


class PcapngReader:
    """Streams the packets of a pcapng file; damage stops it with a warning in `stats`."""

    format_name = "pcapng"

    def __init__(self, opened: OpenedSource, stats: CaptureStats) -> None:
        if not is_pcapng_magic(opened.head):
            raise CaptureError(f"{opened.name}: not a pcapng file")
        self._opened = opened
        self._in = ChunkedInput(opened.stream, opened.head)
        self._stats = stats
        self.secrets: list[Secrets] = []
        self.interfaces: list[Interface] = []  # of the current section
        self.sections = 0
        self._all_interfaces: list[Interface] = []
        #: isb_ifdrop by (section, interface): the latest statistics block's
        self._dropped: dict[tuple[int, int], int] = {}
        self._done = False
        self._byte_order("<")  # replaced by the first section header's byte order

    @property
    def link_types(self) -> dict[int, int]:
        """Packets per link type over all sections."""
        counts: dict[int, int] = {}
        for iface in self._all_interfaces:
            counts[iface.link_type] = counts.get(iface.link_type, 0) + iface.packets
        return counts

    def _byte_order(self, order: str) -> None:
        """The byte order ("<" or ">") of the section from here on, and its unpackers
        (typed as returning ints: compiled, the loops use them unboxed)."""
        self._order = order
        # block type and length (and other pairs of words)
        self.hdr: Callable[[bytes, int], tuple[int, int]] = \
            struct.Struct(order + "II").unpack_from
        # an EPB's type, length, interface id, timestamp (high, low), captured and
        # original length
        self.epb: Callable[[bytes, int], EpbHead] = struct.Struct(order + "7I").unpack_from
        self.trailer: Callable[[bytes, int], tuple[int]] = struct.Struct(order + "I").unpack_from

    # -- block access shared by packets() and the capture loop's fused pcapng path (ngloop.py)
    def window(self) -> tuple[bytes, int]:
        """The buffer and the offset of the next block in it."""
        return self._in.buf, self._in.pos

    def block(self, buf: bytes, pos: int, frame: int) -> Block:
        """The block at `pos` of `buf`, when it is not a whole Enhanced Packet Block of a
        sound length in the buffer (the loops read those themselves): the buffer is
        refilled, a section header read, damage warned about, any other block handed to
        `_other`. Returns (buffer, position, type, length, frame count, record): for an
        EPB (now whole and sound) the record is None and the caller reads it; for another
        block, the record it makes, if any; type STOP: reading stops at that position."""
        # (an EPB of an unknown interface is read here: type UNKNOWN_INTERFACE, no record;
        # a stop is at the block's position in the buffer as it is then, refilled or not)
        if len(buf) - pos < 12:
            inp = self._in
            inp.pos = pos
            if not inp.fill(12):
                if len(inp.buf) > inp.pos and not inp.stopped:
                    self._stats.warn(inp.offset, "truncated pcapng block header")
                return buf, pos, STOP, 0, frame, None
            buf, pos = inp.buf, 0
        if buf[pos:pos + 4] == b"\x0a\x0d\x0d\x0a" and not self._section(buf, pos):
            return buf, pos, STOP, 0, frame, None
        btype, blen = self.hdr(buf, pos)
        if blen < 12 or blen & 3 or blen > MAX_BLOCK or len(buf) - pos < blen:
            if not self._load(btype, blen, pos):
                return buf, pos, STOP, 0, frame, None
            buf, pos = self._in.buf, self._in.pos
        bad = ""
        if self.trailer(buf, pos + blen - 4)[0] != blen:
            bad = f"pcapng block of type 0x{btype:x}: trailing length differs from {blen}"
        elif btype == EPB:
            if blen < 32:
                bad = "enhanced packet block too short"
            else:
                _, _, ifid, _, _, caplen, _ = self.epb(buf, pos)
                if caplen > blen - 32:
                    bad = f"packet length {caplen} exceeds its block"
                elif ifid >= len(self.interfaces):
                    self._stats.skip("bad_interface_id")
                    return buf, pos, UNKNOWN_INTERFACE, blen, frame + 1, None
                else:
                    return buf, pos, btype, blen, frame, None
        else:
            got = self._other(btype, buf, pos, blen, frame)
            if got is not None:
                return buf, pos, btype, blen, got[0], got[1]
        if bad:
            self.warn_at(pos, bad)
        return buf, pos, STOP, 0, frame, None

    def warn_at(self, pos: int, text: str) -> None:
        """Damage in the block at `pos` of the buffer: reading stops there."""
        self._stats.warn(self._in.base + pos, text)

    def done(self, pos: int, frames: int) -> None:
        """Reading stopped at `pos` after `frames` packet blocks: the final accounting
        (once: later calls do nothing)."""
        if self._done:
            return
        self._done = True
        final_accounting(self._in, self._opened, self._stats, pos, frames)

    def _section(self, buf: bytes, pos: int) -> bool:
        """At an SHB: take its byte order; False (warned about) when its magic is wrong."""
        bom = buf[pos + 8:pos + 12]
        if bom == b"\x4d\x3c\x2b\x1a":
            self._byte_order("<")
        elif bom == b"\x1a\x2b\x3c\x4d":
            self._byte_order(">")
        else:
            self._stats.warn(self._in.base + pos,
                             "pcapng section header with a bad byte-order magic")
            return False
        return True

    def _load(self, btype: int, blen: int, pos: int) -> bool:
        """The block at `pos` has an impossible length, or is not all in the buffer: make
        it so (`_in` at it, maybe refilled), or say why not (warned about)."""
        inp = self._in
        if blen < 12 or blen & 3 or blen > MAX_BLOCK:
            self._stats.warn(inp.base + pos, f"pcapng block of type 0x{btype:x} with "
                                             f"impossible length {blen}")
            return False
        inp.pos = pos
        if not inp.fill(blen):
            if inp.stopped:     # the deadline of a capture still written: no damage
                return False
            self._stats.warn(inp.offset, f"truncated pcapng block of type 0x{btype:x}: "
                                         f"{blen} bytes announced, "
                                         f"{len(inp.buf) - inp.pos} present")
            return False
        return True

    def packets(self) -> Generator[PacketRecord, None, None]:
        """Yield one record per packet block; the buffer is only valid until the next one.

        Every block goes through `block`, the one reading of a block's soundness (this
        loop serves `read_packets` and the capture loop's general path); ngloop.py's
        `_run_pcapng` reads sound Enhanced Packet Blocks in place itself, with the capture
        loop's fast path inside, and tests/capture/test_fast_paths.py compares the two."""
        buf, pos = self.window()
        frame = 0
        try:
            while True:
                buf, pos, btype, blen, frame, record = self.block(buf, pos, frame)
                if btype == STOP:
                    break
                if btype == EPB:
                    _, _, ifid, hi, lo, caplen, orig = self.epb(buf, pos)
                    frame += 1
                    iface = self.interfaces[ifid]
                    iface.packets += 1
                    record = (frame, ((hi << 32) | lo) / iface.rate + iface.offset,
                              iface.link_type, buf, pos + 28, pos + 28 + caplen, orig)
                if record is not None:
                    yield record
                pos += blen
        finally:
            self.done(pos, frame)

    def _interface_statistics(self, buf: bytes, pos: int, blen: int) -> None:
        """An Interface Statistics Block: the packets the capturing system dropped on that
        interface (isb_ifdrop, counted from the capture's start: each interface's last
        block counts) go to `stats.recorded_dropped`, so that the loss is said."""
        ifid = struct.unpack_from(self._order + "I", buf, pos + 8)[0]
        for code, value in _options(buf, pos + 20, pos + blen - 4, self._order):
            if code == OPT_ISB_IFDROP and len(value) == 8:
                self._dropped[(self.sections, ifid)] = \
                    struct.unpack(self._order + "Q", value)[0]
                self._stats.recorded_dropped = sum(self._dropped.values())

    def _other(self, btype: int, buf: bytes, pos: int, blen: int, frame: int
               ) -> tuple[int, PacketRecord | None] | None:
        """A block other than an EPB: the frame count after it and the record it makes
        (a packet, a secrets announcement, or None); None (warned about) to stop."""
        stats, ifaces = self._stats, self.interfaces
        if btype == SPB:
            frame += 1
            if blen < 16 or not ifaces:
                stats.skip("bad_interface_id" if blen >= 16 else "truncated")
                return frame, None
            orig = self.hdr(buf, pos + 8)[0]
            caplen = min(orig, blen - 16, ifaces[0].snaplen or orig)
            ifaces[0].packets += 1
            return frame, (frame, 0.0, ifaces[0].link_type, buf, pos + 12, pos + 12 + caplen,
                           orig)
        if btype == PB:
            if blen < 32:
                stats.warn(self._in.base + pos, "packet block too short")
                return None
            frame += 1
            ifid = struct.unpack_from(self._order + "H", buf, pos + 8)[0]
            hi, lo, caplen, orig = struct.unpack_from(self._order + "IIII", buf, pos + 12)
            if caplen > blen - 32:
                stats.warn(self._in.base + pos, f"packet length {caplen} exceeds its block")
                return None
            if ifid >= len(ifaces):
                stats.skip("bad_interface_id")
                return frame, None
            iface = ifaces[ifid]
            iface.packets += 1
            return frame, (frame, ((hi << 32) | lo) / iface.rate + iface.offset,
                           iface.link_type, buf, pos + 28, pos + 28 + caplen, orig)
        if btype == SHB:
            major, minor = struct.unpack_from(self._order + "HH", buf, pos + 12) \
                if blen >= 28 else (-1, -1)
            if major != 1:
                stats.warn(self._in.base + pos, "pcapng section header too short" if
                           major < 0 else f"pcapng section of format version {major}.{minor}, "
                           "not 1.x (the only one defined): not read")
                return None
            self.sections += 1
            self.interfaces = []
        elif btype == IDB:
            if blen < 20:
                stats.warn(self._in.base + pos, "interface description block too short")
                return None
            overflow: list[tuple[int, int]] = []
            iface = _interface(buf[pos:pos + blen], self._order, overflow)
            for code, length in overflow:   # (tshark: damaged; the packets still read)
                stats.warn(self._in.base + pos, f"Interface Description Block: option {code} "
                           f"of length {length} runs past the block (the interface's timestamp "
                           "resolution and offset may be lost: times may be wrong)")
            ifaces.append(iface)
            self._all_interfaces.append(iface)
        elif btype == ISB and blen >= 24:
            self._interface_statistics(buf, pos, blen)
        elif btype == DSB:
            return self._secrets(buf, pos, blen, frame)
        return frame, None

    def _secrets(self, buf: bytes, pos: int, blen: int, frame: int
                 ) -> tuple[int, PacketRecord | None]:
        """A Decryption Secrets Block: its secrets announced; one whose secrets length
        runs past the block (tshark: damaged) is said, and its bytes are not used."""
        slen = self.hdr(buf, pos + 8)[1] if blen >= 16 else None
        if slen is None or slen > blen - 20:
            told = "too short" if slen is None else f"secrets length {slen} exceeds the block"
            self._stats.warn(self._in.base + pos, f"Decryption Secrets Block: {told} (its "
                                                  "keys are not used)")
            return frame, None
        stype = self.hdr(buf, pos + 8)[0]
        self.secrets.append(Secrets(stype, bytes(buf[pos + 16:pos + 16 + slen]),
                                    self._in.base + pos))
        self._stats.secrets_blocks += 1
        return frame, (frame, 0.0, SECRETS_RECORD, buf, pos + 16, pos + 16 + slen, stype)
