"""Byte input for capture readers: a path, ``-`` (stdin) or a binary file object, gzip or not.

Everything is read front to back in chunks, never seeked, so pipes and stdin work and memory
stays flat whatever the file size.  gzip is recognised by its magic (1f 8b), not by the name,
and decompressed incrementally with a bounded output per call (a small bomb stays small).
`ChunkedInput` is the buffer the format readers share: a window ``buf[pos:]`` over the
stream plus the absolute offset of ``buf[0]``, refilled in large chunks from a file and
with what is there from a pipe (`read1`: a capture still being written, e.g. `tcpdump -w -
| tlsprobe pcap -`, is read as it comes, not a chunk at a time; streaming.py).
"""

from __future__ import annotations

import io
import os
import sys
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO, Final, Protocol, Union, runtime_checkable

from tlsprobe.capture.events import CaptureError
from tlsprobe.errors import os_error_text

#: bytes read from the underlying stream at a time. Each read is a new bytes object: at
#: 1 MiB the allocator maps fresh pages for every one (41,000 page faults on a 350 MB
#: capture); at 256 KiB the freed chunks are reused (10,000)
CHUNK = 1 << 18

class Readable(Protocol):
    """What a capture is read from: ``read(n)``, fewer bytes only at its end."""

    def read(self, n: int = -1, /) -> bytes: ...


@runtime_checkable
class Counted(Protocol):
    """A capture source that counts the bytes read from it (the progress bar's: pipe.py
    passes the count from the reader process on)."""

    count: int

    def read(self, n: int = -1, /) -> bytes: ...


@runtime_checkable
class ReadsAvailable(Protocol):
    """A stream that can give what it has now: ``read1(n)`` returns at least one byte
    (waiting only when it has none) and fewer than `n` without waiting for more; b"" at
    its end. Files opened "rb", stdin's buffer and streaming.py's sources have it."""

    def read1(self, n: int = -1, /) -> bytes: ...


#: seconds a reader of a live input waits for bytes before it ticks the capture's time on
QUIET_WAKE: Final = 0.2


def quiet_of(stream: object) -> Callable[[float], float | None] | None:
    """The stream's `quiet(timeout)` when it is a live input (streaming.py's stdin and
    --follow sources, behind the bytes put back in front too), else None: it waits up to
    `timeout` seconds for bytes and returns the seconds since the last ones came when none
    did, None when something can be read (bytes, its end, a stop). A reader between
    records ticks the capture's time on with it. (As `_stopped`, by attribute: a
    runtime-checkable Protocol's isinstance costs a capture's start-up 1 ms.)"""
    if isinstance(stream, _Prefixed):
        return stream.quiet if stream.raw_quiet is not None else None
    quiet: Callable[[float], float | None] | None = getattr(stream, "quiet", None)
    return quiet


def reader_of(stream: Readable) -> Callable[[int], bytes]:
    """The stream's `read1` where it has one (what is there now), else its `read`."""
    return stream.read1 if isinstance(stream, ReadsAvailable) else stream.read


def _stopped(stream: object) -> bool:
    """Whether a stream ended at a deadline (streaming.py's sources; others never do)."""
    return bool(getattr(stream, "stopped", False))


CaptureSource = Union[str, "os.PathLike[str]", BinaryIO, Readable]
_Readable = Readable


def read_fully(read: Callable[[int], bytes | None], n: int) -> bytes:
    """Up to n bytes from `read` (a stream's read, or read1), looping over short reads
    (pipes); fewer only at end of stream."""
    data = read(n)
    if data is None:  # non-blocking stream with nothing ready: treat as end
        return b""
    if len(data) >= n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = read(n - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class _Prefixed:
    """A stream with some already-read bytes put back in front."""

    def __init__(self, prefix: bytes, raw: _Readable) -> None:
        self._prefix = prefix
        self._raw = raw
        self._raw_read = reader_of(raw)
        self.raw_quiet = quiet_of(raw)

    def quiet(self, timeout: float, /) -> float | None:
        """As the stream's (`WaitsQuietly`); None while bytes put back are left."""
        if self._prefix or self.raw_quiet is None:
            return None
        return self.raw_quiet(timeout)

    def read(self, n: int = -1, /) -> bytes:
        if self._prefix:
            head, self._prefix = self._prefix[:n], self._prefix[n:]
            if len(head) == n:
                return head
            return head + read_fully(self._raw.read, n - len(head))
        return read_fully(self._raw.read, n)

    def read1(self, n: int = -1, /) -> bytes:
        """What is there now: the bytes put back first, then one read of the stream."""
        if self._prefix:
            head, self._prefix = self._prefix[:n], self._prefix[n:]
            return head
        return self._raw_read(n)

    @property
    def stopped(self) -> bool:
        return _stopped(self._raw)


class GunzipStream:
    """Incremental gzip decompression (several members allowed).

    A damaged or truncated compressed stream ends the data early and sets `error`."""

    def __init__(self, raw: _Readable) -> None:
        self._raw = raw
        self._raw_read = reader_of(raw)   # what the stream has now (a pipe) or a chunk
        self._d = zlib.decompressobj(wbits=31)
        self._pending = b""  # compressed bytes not yet given to the decompressor
        self._eof = False
        self.error: str | None = None

    def read(self, n: int = -1, /) -> bytes:
        return self._inflate(n, False)

    def read1(self, n: int = -1, /) -> bytes:
        """What the compressed bytes there now give (at least one byte, b"" at the end)."""
        return self._inflate(n, True)

    @property
    def stopped(self) -> bool:
        return _stopped(self._raw)

    def _inflate(self, n: int, some: bool) -> bytes:
        """Up to `n` bytes (all with n < 0); with `some`, as soon as there are any."""
        out: list[bytes] = []
        want = n if n >= 0 else 1 << 62
        while want > 0 and not self._eof and not (some and out):
            src = self._d.unconsumed_tail or self._pending
            self._pending = b""
            if not src:
                src = self._raw_read(CHUNK)
                if not src:
                    if not self._d.eof:
                        self.error = "gzip stream truncated"
                    self._eof = True
                    break
            before = self._d.copy()
            try:
                chunk = self._d.decompress(src, min(want, CHUNK))
            except zlib.error as exc:
                out.append(_before_damage(before, src))
                self.error = f"gzip data damaged ({exc})"
                self._eof = True
                break
            if chunk:
                out.append(chunk)
            want -= len(chunk)
            if self._d.eof:  # member done: another member may follow
                rest = self._d.unused_data
                if not rest:
                    rest = self._raw_read(CHUNK)
                if not rest:
                    self._eof = True
                    break
                self._d = zlib.decompressobj(wbits=31)
                self._pending = rest
        return b"".join(out)


def _before_damage(d: zlib._Decompress, src: bytes) -> bytes:
    """What `d` gives from `src` up to the damage zlib stopped at (a changed byte, a
    wrong CRC): zlib loses the output of the call that raises, up to a whole chunk of
    intact data, so the same bytes are fed again, in pieces to find the one that fails,
    then that one a byte at a time from a copy taken before it. (The output stays below
    the failed call's limit: a call that reaches its limit stops before the damage.)"""
    out: list[bytes] = []
    for i in range(0, len(src), 4096):
        piece, before = src[i:i + 4096], d.copy()
        try:
            out.append(d.decompress(piece))
        except zlib.error:
            d = before
            for j in range(len(piece)):
                try:
                    out.append(d.decompress(piece[j:j + 1]))
                except zlib.error:
                    break
            break
    return b"".join(out)


class OpenedSource:
    """The (maybe decompressed) byte stream, its first bytes and what to close afterwards."""

    def __init__(self, stream: _Readable, head: bytes, name: str, gzip: bool,
                 owned: BinaryIO | None, raw: _Readable) -> None:
        self.stream = stream
        self.head = head
        self.name = name
        self.gzip = gzip
        self.raw = raw  # the file under any decompression, for formats that must seek
        self._owned = owned

    def read_at(self, offset: int, size: int) -> bytes | None:
        """Bytes of the raw file at an absolute offset, leaving the stream position as it
        was; None when the input cannot seek (pipe, stdin, gzip)."""
        raw: Any = self.raw
        if self.gzip:
            return None
        try:
            if not raw.seekable():
                return None
            here = raw.tell()
            raw.seek(offset)
            data = read_fully(raw.read, size)
            raw.seek(here)
        except (AttributeError, OSError, ValueError):
            return None
        return data

    @property
    def error(self) -> str | None:
        """A decompression problem met so far, or why a followed file could not be read
        further (None for plain files)."""
        return getattr(self.stream, "error", None) or getattr(self.raw, "error", None)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None


def open_source(source: CaptureSource, head_size: int = 4) -> OpenedSource:
    """Open a path, ``-`` or a binary file object and read its first `head_size` bytes.

    Raises CaptureError (one line) when the input cannot be opened or is a text stream."""
    owned: BinaryIO | None = None
    if isinstance(source, (str, os.PathLike)):
        name = os.fsdecode(source)
        if name == "-":
            if sys.stdin is None:   # started with stdin closed (`<&-`)
                raise CaptureError("cannot read stdin: it is closed")
            raw: _Readable = sys.stdin.buffer
            name = "<stdin>"
        else:
            try:
                owned = open(name, "rb")  # noqa: SIM115 - closed by OpenedSource.close
            except OSError as exc:
                raise CaptureError(f"cannot open {name}: {os_error_text(exc)}") from None
            raw = owned
    else:
        if isinstance(source, io.TextIOBase):
            buffer = getattr(source, "buffer", None)
            if buffer is None:
                raise CaptureError("capture input must be a binary stream")
            source = buffer
        raw = source
        name = getattr(source, "name", None) or "<stream>"
        if not isinstance(name, str):
            name = "<stream>"
    try:
        first = read_fully(raw.read, 2)
        is_gzip = first == b"\x1f\x8b"
        stream: _Readable = _Prefixed(first, raw)
        if is_gzip:
            stream = GunzipStream(stream)
        head = read_fully(stream.read, head_size)
    except OSError as exc:
        if owned is not None:
            owned.close()
        raise CaptureError(f"cannot read {name}: {os_error_text(exc)}") from None
    problem = _unreadable(first, head, head_size, getattr(stream, "error", None))
    if problem is not None:
        if owned is not None:
            owned.close()
        raise CaptureError(f"{name}: {problem}")
    return OpenedSource(stream, head, name, is_gzip, owned, raw)


def _unreadable(first: bytes, head: bytes, head_size: int, gzip_error: str | None) -> str | None:
    """Why nothing at all can be read from an input, judged from its first bytes: empty,
    or gzip data that breaks before a whole capture header came out (a stream damaged
    later is read as far as it goes and warned about by the reader)."""
    if not first:
        return "empty file"
    if gzip_error is not None and len(head) < head_size:
        detail = gzip_error.partition("(")[2].rstrip(")") or gzip_error.removeprefix("gzip ")
        return f"corrupt gzip data: {detail}"
    if first == b"\x1f\x8b" and not head:
        return "empty file (gzip-compressed, nothing inside)"
    return None


class ChunkedInput:
    """A refillable window over a stream: readers parse ``buf`` from ``pos`` in place.

    `base` is the absolute stream offset of ``buf[0]``, for warnings that name where the
    damage is. `ended_at`: the absolute offset of what the last failed `fill` could not
    complete (a record cut by the end of the stream), None before one: where the reading
    ended, whatever position in the buffer (moved by that fill) a reader still holds."""

    __slots__ = ("_read", "_stream", "base", "buf", "ended_at", "eof", "pos", "quiet")

    def __init__(self, stream: _Readable, head: bytes) -> None:
        self._stream = stream
        self._read = reader_of(stream)
        #: a live input's `quiet` (stdin, --follow: `WaitsQuietly`), else None
        self.quiet = quiet_of(stream)
        self.buf = head
        self.pos = 0
        self.base = 0
        self.eof = False
        self.ended_at: int | None = None

    @property
    def offset(self) -> int:
        """Absolute offset of ``buf[pos]``."""
        return self.base + self.pos

    @property
    def stopped(self) -> bool:
        """Whether the stream ended because it was told to stop (a deadline: streaming.py)
        rather than at its end: a record it cut short is no damage."""
        return _stopped(self._stream)

    def fill(self, need: int) -> bool:
        """Make at least `need` bytes available at ``buf[pos:]``; False at end of stream.

        Takes what the stream has (a chunk from a file, what is there from a pipe), as
        many reads as `need` takes: a packet may come in several short reads."""
        have = len(self.buf) - self.pos
        if have >= need:
            return True
        if self.eof:
            self.ended_at = self.base + self.pos
            return False
        read = self._read
        parts: list[bytes] = []
        while have < need:
            more = read(max(CHUNK, need - have))
            if not more:
                self.eof = True
                break
            parts.append(more)
            have += len(more)
        more = parts[0] if len(parts) == 1 else b"".join(parts)
        self.buf = self.buf[self.pos:] + more
        self.base += self.pos
        self.pos = 0
        if len(self.buf) >= need:
            return True
        self.ended_at = self.base
        return False

    def skip(self, n: int) -> bool:
        """Move `n` bytes forward (reading through them); False at end of stream."""
        while n > 0:
            avail = len(self.buf) - self.pos
            if avail >= n:
                self.pos += n
                return True
            n -= avail
            self.pos = len(self.buf)
            if not self.fill(min(n, CHUNK)):
                self.pos = len(self.buf)
                return False
        return True
