"""`-w FILE`: what a live capture saw, written as pcapng, one file or a ring of files.

`tlsprobe pcap -i IFACE -w FILE` writes every captured packet so that what was seen live
can be read again (`tlsprobe pcap FILE`, `tshark -r FILE`, Wireshark). With `--ring-size
MB` the output is a ring buffer, as tshark's `-b filesize:KB -b files:N`: a new file is
begun when the current one would pass the size (its statistics blocks included; a file
always holds at least one packet),
named as tshark names them (``out_00001_20261206113144.pcapng``: the file's number, then
the local time it was begun), and with `--ring-files N` only the newest N files are kept
(the older ones are deleted as the ring turns). Without `--ring-size` there is one file,
at the path given.

Every file is a whole capture on its own: a Section Header Block naming the writer, one
Interface Description Block per captured interface (its name and link type: Ethernet for
`lo`, Linux cooked for `any`), the packets as Enhanced Packet Blocks (microsecond
timestamps, the format's default resolution), and, when the file is closed, one Interface
Statistics Block per interface with the counts since the capture began, as known then: packets the kernel or capture
library received (isb_ifrecv) and dropped (isb_ifdrop, which Wireshark shows as the
capture's drops) and packets written (isb_usrdeliv), as dumpcap writes them.

The capture calls `RingWriter.write` once per packet (cheap: one block packed and handed
to a buffered file; no syscall per packet), `RingWriter.counts` whenever it learns the
drop counters, and `close` at the end. The buffer goes to disk at least every
`FLUSH_EVERY` seconds of packet time and on `flush` (a capture that goes idle may call it),
so another program can read the file while the capture runs. A write that fails (disk
full, file removed from under us) raises `CaptureError` naming the file, once.
"""

from __future__ import annotations

import os
import stat
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, NoReturn, Self

from tlsprobe._version import __version__
from tlsprobe.capture.events import CaptureError
from tlsprobe.errors import os_error_text

__all__ = ["FLUSH_EVERY", "MAX_RING_FILES", "InterfaceInfo", "RingSpec", "RingWriter",
           "ring_name"]

_SHB, _IDB, _ISB, _EPB = 0x0A0D0D0A, 0x1, 0x5, 0x6
_OPT_END, _SHB_USERAPPL, _IF_NAME = 0, 4, 2
_ISB_STARTTIME, _ISB_ENDTIME, _ISB_IFRECV, _ISB_IFDROP, _ISB_USRDELIV = 2, 3, 4, 5, 8
DEFAULT_SNAPLEN = 262144
#: seconds of packet time between two flushes of the write buffer
FLUSH_EVERY = 0.5
#: the most files a ring may keep (tshark's own limit is 100,000)
MAX_RING_FILES = 100_000
#: the largest --ring-size in MB (10^6 bytes): 1 TB (infinity overflowed the byte count)
MAX_RING_MB = 1_000_000.0
_BUFFER = 1 << 16
#: the longest statistics block: header, interface, time, 5 options and their end
_ISB_MAX = 12 + 12 + 2 * 12 + 3 * 12 + 4
_EPB_HEAD = struct.Struct("<IIIIIII")   # type, length, interface, ts high, ts low, cap, orig


@dataclass(frozen=True)
class RingSpec:
    """Where and how to write: `path`; `size_bytes`: begin a new file past this size
    (None: one file); `files`: keep only the newest N files (None: all)."""

    path: str
    size_bytes: int | None = None
    files: int | None = None

    @classmethod
    def parse(cls, path: str, ring_size_mb: float | None, ring_files: int | None
              ) -> RingSpec:
        """The spec from `-w`, `--ring-size MB` (10^6 bytes, fractions allowed) and
        `--ring-files N`; ValueError saying what is wrong (the command's usage error)."""
        if not path:
            raise ValueError("-w needs a file name")
        if path == "-":
            raise ValueError("-w - (stdout) is not supported: stdout holds the report; "
                             "give a file name")
        if os.path.isdir(path):
            raise ValueError(f"-w {path}: is a directory")
        size = None
        if ring_size_mb is not None:
            if not 0 < ring_size_mb <= MAX_RING_MB:
                raise ValueError(f"--ring-size must be a number of MB above 0 and at most "
                                 f"{MAX_RING_MB:.0f}, not {ring_size_mb:.15g}")
            size = max(1, round(ring_size_mb * 1_000_000))
        if ring_files is not None:
            if size is None:
                raise ValueError("--ring-files needs --ring-size (when to begin the next "
                                 "file)")
            if not 1 <= ring_files <= MAX_RING_FILES:
                raise ValueError(f"--ring-files must be between 1 and {MAX_RING_FILES}, not "
                                 f"{ring_files}")
        return cls(path, size, ring_files)


@dataclass(frozen=True)
class InterfaceInfo:
    """One captured interface: its name (as given to -i), pcap link type and snaplen."""

    name: str
    link_type: int
    snaplen: int = DEFAULT_SNAPLEN


def ring_name(path: str, number: int, begun: float) -> str:
    """The name of the ring's file `number` (1-based) begun at `begun` (epoch seconds):
    tshark's ``stem_NNNNN_YYYYmmddHHMMSS.ext``."""
    stem, ext = os.path.splitext(path)
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(begun))
    return f"{stem}_{number:05d}_{stamp}{ext}"


def _pad(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % 4)


def _block(kind: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack("<II", kind, length) + body + struct.pack("<I", length)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + _pad(value)


def _options(*options: bytes) -> bytes:
    return b"".join(options) + struct.pack("<HH", _OPT_END, 0) if options else b""


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def _stamp(seconds: float) -> bytes:
    """A timestamp as the two 32-bit halves of microseconds, the high half first."""
    micros = max(0, round(seconds * 1e6))
    return struct.pack("<II", micros >> 32, micros & 0xFFFFFFFF)


class _Counts:
    """What one interface's statistics block says: received and dropped as the capture
    last told them (None: not known), packets written, the first and last packet time."""

    __slots__ = ("dropped", "first", "last", "received", "written")

    def __init__(self) -> None:
        self.received: int | None = None
        self.dropped: int | None = None
        self.written = 0
        self.first = 0.0
        self.last = 0.0


class RingWriter:
    """Writes packets to `spec.path` (or its ring of files) as pcapng; see the module."""

    def __init__(self, spec: RingSpec, interfaces: Sequence[InterfaceInfo], *,
                 clock: Callable[[], float] = time.time) -> None:
        if not interfaces:
            raise ValueError("a capture file needs at least one interface")
        self.spec = spec
        self.interfaces = tuple(interfaces)
        self._clock = clock
        self._counts = [_Counts() for _ in self.interfaces]
        self._header = self._headers()
        #: the most the statistics blocks at a file's end take (kept free under the size)
        self._stats_room = _ISB_MAX * len(self.interfaces)
        self._out: BinaryIO | None = None
        self._size = 0           # bytes in the current file
        self._whole = 0          # of them, those known to be in the file (flushed)
        self._in_file = 0        # packets in the current file
        self._number = 0         # the current file's number in the ring
        self._next_flush = 0.0
        self.packets = 0
        self.bytes = 0
        #: the files written that still exist, oldest first
        self.files: list[str] = []
        self._closed = False
        self._open_next()

    # -- per packet --------------------------------------------------------------------
    def write(self, interface: int, ts: float, data: bytes | memoryview,
              orig_len: int = 0) -> None:
        """One packet captured on interface number `interface` (its index in
        `interfaces`) at `ts` (epoch seconds); `orig_len`: its length on the wire when
        the capture cut it (0: as long as `data`)."""
        caplen = len(data)
        length = 32 + caplen + (-caplen & 3)
        limit = self.spec.size_bytes
        if limit is not None and self._in_file and \
                self._size + length + self._stats_room > limit:
            self._rotate()
        out = self._out
        if out is None:
            raise CaptureError(f"-w {self.spec.path}: written to after it was closed")
        micros = round(ts * 1e6) if ts > 0 else 0
        try:
            out.write(_EPB_HEAD.pack(_EPB, length, interface, micros >> 32,
                                     micros & 0xFFFFFFFF, caplen, orig_len or caplen))
            out.write(data)
            out.write(b"\x00" * (-caplen & 3) + struct.pack("<I", length))
        except OSError as exc:
            self._failed(exc)
        counts = self._counts[interface]
        if not counts.written:
            counts.first = ts
        counts.written += 1
        counts.last = ts
        self._size += length
        self._in_file += 1
        self.packets += 1
        self.bytes += caplen
        if ts >= self._next_flush:
            self._next_flush = ts + FLUSH_EVERY
            self.flush()

    def counts(self, interface: int, received: int | None = None,
               dropped: int | None = None) -> None:
        """The capture's counters for `interface` (cumulative, as the kernel or library
        gives them): written in each file's statistics block when the file is closed."""
        counts = self._counts[interface]
        if received is not None:
            counts.received = received
        if dropped is not None:
            counts.dropped = dropped

    def flush(self) -> None:
        """Hand what is buffered to the file (readers of the growing file see it)."""
        if self._out is not None:
            try:
                self._out.flush()
            except OSError as exc:
                self._failed(exc)
            self._whole = self._size

    def close(self) -> None:
        """End the current file with its statistics blocks. Runs once."""
        if self._closed:
            return
        self._closed = True
        self._close_current()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- files -------------------------------------------------------------------------
    def _headers(self) -> bytes:
        """The Section Header Block and the Interface Description Blocks every file
        begins with."""
        app = _option(_SHB_USERAPPL, f"tlsprobe {__version__}".encode())
        shb = _block(_SHB, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + _options(app))
        idbs = [_block(_IDB, struct.pack("<HHI", iface.link_type & 0xFFFF, 0, iface.snaplen)
                       + _options(_option(_IF_NAME, iface.name.encode("utf-8", "replace"))))
                for iface in self.interfaces]
        return shb + b"".join(idbs)

    def _path(self) -> str:
        if self.spec.size_bytes is None:
            return self.spec.path
        return ring_name(self.spec.path, self._number, self._clock())

    def _open_next(self) -> None:
        self._number += 1
        path = self._path()
        try:
            self._out = open(path, "wb", buffering=_BUFFER)  # noqa: SIM115 - closed in _close_current
            self._out.write(self._header)
        except OSError as exc:
            self._out = None
            raise CaptureError(f"-w {path}: {os_error_text(exc)}") from None
        self.files.append(path)
        self._size = len(self._header)
        self._whole = 0
        self._in_file = 0
        keep = self.spec.files
        while keep is not None and len(self.files) > keep:
            old = self.files.pop(0)
            try:
                os.unlink(old)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise CaptureError(f"-w: cannot delete the ring's old file {old}: "
                                   f"{os_error_text(exc)}") from None

    def _rotate(self) -> None:
        self._close_current()
        self._open_next()

    def _close_current(self) -> None:
        out, self._out = self._out, None
        if out is None:
            return
        try:
            if out.tell() != self._size:    # a packet's write interrupted (a second Ctrl-C)
                out.seek(self._size)
                out.truncate()
            out.write(self._statistics())
            out.close()
        except OSError as exc:
            self._out = out
            self._failed(exc)

    def _statistics(self) -> bytes:
        """One Interface Statistics Block per interface: the counts known now."""
        now = self._clock()
        blocks = []
        for number, counts in enumerate(self._counts):
            opts = []
            if counts.written:
                opts += [_option(_ISB_STARTTIME, _stamp(counts.first)),
                         _option(_ISB_ENDTIME, _stamp(counts.last))]
            if counts.received is not None:
                opts.append(_option(_ISB_IFRECV, _u64(counts.received)))
            if counts.dropped is not None:
                opts.append(_option(_ISB_IFDROP, _u64(counts.dropped)))
            opts.append(_option(_ISB_USRDELIV, _u64(counts.written)))
            blocks.append(_block(_ISB, struct.pack("<I", number) + _stamp(now)
                                 + _options(*opts)))
        return b"".join(blocks)

    def _failed(self, exc: OSError) -> NoReturn:
        """A write that failed (disk full, file gone): the file is cut after its last whole
        block, so that it still reads to its end (tshark: no "cut short in the middle of a
        packet"), and nothing more is written."""
        path = self.files[-1] if self.files else self.spec.path
        out, self._out = self._out, None
        self._closed = True
        if out is not None:
            try:
                out.close()     # (its descriptor is closed even when the flush fails)
            except OSError:
                pass
            _cut_to_whole_blocks(path, self._whole)
        raise CaptureError(f"-w {path}: {os_error_text(exc)}") from None


def _cut_to_whole_blocks(path: str, start: int) -> None:
    """Truncate `path` after its last whole pcapng block, looked for from `start` (the end
    of a block: what was flushed before). Best effort: an error leaves the file as it is,
    and so is anything but a regular file (/dev/full reads forever)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return
        with open(path, "r+b") as f:
            f.seek(start)
            data = f.read()
            end = 0
            while end + 12 <= len(data):
                (length,) = struct.unpack_from("<I", data, end + 4)
                if length < 12 or length % 4 or end + length > len(data):
                    break
                end += length
            f.truncate(start + end)
    except OSError:
        pass
