"""Captures that are still being written: stdin or a pipe (`tlsprobe pcap -`), and a file
another program is still writing (`tlsprobe pcap --follow FILE`, as `tail -f` follows).

`tcpdump -w - | tlsprobe pcap -` must print each connection as it passes, not when tcpdump
stops: the readers take what is available (`read1`, one read of what the pipe or file holds,
see source.ChunkedInput) instead of waiting for a whole chunk, and still parse a packet
across several short reads. Both sources honour a deadline, `stop_at` (a
`time.monotonic()` value, e.g. `--duration`'s): no read waits past it; at the deadline the
source ends as if the capture ended there (`stopped` is then True, and a packet cut short
by the stop is not warned about as damage). `stop()` (Ctrl-C, SIGTERM: safe in a signal
handler) ends the reading the same way, at once: it wakes a read waiting on the input
through a pipe of the stream's own (a handler that raised instead, inside the reader, cut
the analysis off before the connections still open were reported). What the input holds
already when the stop comes (written before it) is still read, up to `DRAIN` bytes.

`FollowedFile` reads a growing file to its end, then waits (polling its size every
`POLL` seconds: cheap, one fstat) for more, until the deadline. A file that gets shorter
than what was read (truncated, rewritten) or whose name now points to another file
(replaced, rotated) cannot be followed further: its reading ends and `error` says why (one
warning line; `tlsprobe pcap` exits 7).
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time
from typing import BinaryIO

from tlsprobe.capture.events import CaptureError
from tlsprobe.capture.source import read_fully
from tlsprobe.errors import os_error_text

__all__ = ["DRAIN", "POLL", "FdStream", "FinishedFile", "FollowedFile", "open_finished",
           "open_stdin", "streaming_source"]

#: seconds between two looks at a followed file's size when nothing new was there
POLL = 0.05
#: bytes still read once stopped, of what the input held already (written before the stop)
DRAIN = 1 << 20


def _left(stop_at: float | None) -> float | None:
    """Seconds until `stop_at` (never below 0); None: no deadline."""
    if stop_at is None:
        return None
    return max(0.0, stop_at - time.monotonic())


class FdStream:
    """A pipe, FIFO, stdin or file read from its descriptor: `read1` returns what is
    there (waiting, until `stop_at` or `stop()`, when nothing is), `read` loops to `n`
    bytes."""

    def __init__(self, fd: int, name: str, stop_at: float | None = None, *,
                 owned: bool = False) -> None:
        self.fd = fd
        self.name = name
        self.stop_at = stop_at
        self.stopped = False
        self.error: str | None = None
        self._owned = owned
        self._asked = False      # stop() was called: what is there is drained, then the end
        self._drained = 0
        self.last_read = time.monotonic()   # when bytes last came (`quiet`)
        # stop()'s wake-up: a byte written there ends a wait on `fd` at once
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def stop(self) -> None:
        """End the reading now, as at the deadline (safe in a signal handler: a flag and a
        byte written to the wake-up pipe; a read waiting on the input returns)."""
        self._asked = True
        try:
            os.write(self._wake_w, b"\0")
        except OSError:    # full (stopped already) or closed (the reading is over)
            pass

    def read1(self, n: int = -1, /) -> bytes:
        """Up to `n` bytes: at least one, or b"" at the end of the input or the deadline."""
        n = n if n > 0 else 1 << 16
        while not self.stopped:
            if self._asked:
                return self._drain(n)
            try:
                ready, _, _ = select.select([self.fd, self._wake_r], [], [],
                                            _left(self.stop_at))
            except InterruptedError:   # a signal without a handler raising: look again
                continue
            if not ready:
                self.stopped = True
            elif self.fd in ready:
                try:
                    data = os.read(self.fd, n)
                except BlockingIOError:   # a non-blocking descriptor with nothing yet
                    continue
                self.last_read = time.monotonic()
                return data
        return b""

    def quiet(self, timeout: float, /) -> float | None:
        """Seconds since bytes last came when none come within `timeout` (the input idle:
        the reader ticks the capture's time on, as a live capture's idle loop does); None
        when something can be read now (bytes, the end, a stop, the deadline near:
        `read1` answers). Called only between records, never per packet of a file."""
        if self.stopped or self._asked:
            return None
        left = _left(self.stop_at)
        if left is not None and left <= timeout:
            return None
        try:
            ready, _, _ = select.select([self.fd, self._wake_r], [], [], timeout)
        except InterruptedError:
            return None
        return None if ready else time.monotonic() - self.last_read

    def _drain(self, n: int) -> bytes:
        """After stop(): what the input holds already (up to DRAIN bytes in all), without
        waiting; b"" (and `stopped`) once it has nothing more."""
        ready, _, _ = select.select([self.fd], [], [], 0)
        data = b""
        if ready and self._drained < DRAIN:
            try:
                data = os.read(self.fd, min(n, DRAIN - self._drained))
            except BlockingIOError:
                data = b""
        self._drained += len(data)
        if not data:
            self.stopped = True
        return data

    def read(self, n: int = -1, /) -> bytes:
        """`n` bytes, fewer only at the end of the input or the deadline."""
        if n < 0:
            parts = []
            while chunk := self.read1(1 << 16):
                parts.append(chunk)
            return b"".join(parts)
        return read_fully(self.read1, n)

    def close(self) -> None:
        if self._wake_r >= 0:
            wake = self._wake_r, self._wake_w
            self._wake_r = self._wake_w = -1   # (a stop() from now on writes nowhere)
            for fd in wake:
                os.close(fd)
        if self._owned:
            self._owned = False
            os.close(self.fd)


def streaming_source(source: str, follow: bool, stop_at: float | None) -> FdStream | None:
    """The source of a capture still being written that is to be followed (`follow`) or
    read as it comes (stdin, which a deadline or `stop()` may end), or None: `source`
    (a path) is opened as it is."""
    if follow:
        if source == "-":
            raise CaptureError("--follow reads a file: stdin is read as it comes without it")
        return FollowedFile(source, stop_at)
    if source == "-":
        return open_stdin(stop_at)
    return None


def open_stdin(stop_at: float | None = None) -> FdStream:
    """Standard input as a stream (its descriptor, read directly: nothing of it may have been
    read through `sys.stdin` before); CaptureError when the process has none (`<&-`)."""
    if sys.stdin is None:
        raise CaptureError("cannot read stdin: it is closed")
    return FdStream(sys.stdin.fileno(), "<stdin>", stop_at)


class FollowedFile(FdStream):
    """A file another program is still writing: read to its end, then wait for more until
    `stop_at` (None: until interrupted, as `tail -f`); see the module."""

    def __init__(self, path: str, stop_at: float | None = None, *, poll: float = POLL) -> None:
        """Opens `path` (OSError as `open` raises it; CaptureError: not a regular file)."""
        fd = os.open(path, os.O_RDONLY)
        super().__init__(fd, path, stop_at, owned=True)
        self.path = path
        self.poll = poll
        self.position = 0
        info = os.fstat(fd)
        self._identity = (info.st_dev, info.st_ino)
        if not stat.S_ISREG(info.st_mode):
            self.close()
            raise CaptureError(f"{path}: --follow reads a regular file (a pipe or FIFO is "
                               "read as it comes without it)")

    def read1(self, n: int = -1, /) -> bytes:
        n = n if n > 0 else 1 << 16
        while not self.stopped and self.error is None:
            if self._asked and self._drained >= DRAIN:
                self.stopped = True
                break
            data = os.read(self.fd, n if not self._asked else min(n, DRAIN - self._drained))
            if data:
                self.position += len(data)
                self._drained += len(data) if self._asked else 0
                self.last_read = time.monotonic()
                return data
            if self._asked:       # stop(): what the file held is read
                self.stopped = True
                break
            self.error = self._changed()
            if self.error is not None:
                break
            left = _left(self.stop_at)
            if left is not None and left <= 0:
                self.stopped = True
                break
            time.sleep(self.poll if left is None else min(self.poll, left))
        return b""

    def quiet(self, timeout: float, /) -> float | None:
        """As FdStream's: the file's size looked at every `poll` seconds."""
        if self.stopped or self._asked or self.error is not None:
            return None
        left = _left(self.stop_at)
        if left is not None and left <= timeout:
            return None
        ends = time.monotonic() + timeout
        while not self._asked:
            try:
                if os.fstat(self.fd).st_size != self.position:
                    return None
            except OSError:
                return None
            if self._changed() is not None:   # replaced, shrunk: `read1` says why
                return None
            now = time.monotonic()
            if now >= ends:
                return now - self.last_read
            time.sleep(min(self.poll, ends - now))
        return None

    def _changed(self) -> str | None:
        """Why the file cannot be followed further (shorter than what was read, or its
        name now another file), or None: it only has nothing new yet."""
        try:
            size = os.fstat(self.fd).st_size
        except OSError as exc:
            return f"cannot follow: {os_error_text(exc)}"
        if size < self.position:
            return (f"the file shrank from {self.position} to {size} bytes while followed "
                    "(truncated or rewritten): reading stopped there")
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return None     # removed: what is open still reads (and may still grow)
        except OSError:
            return None
        if (info.st_dev, info.st_ino) != self._identity:
            return ("the file was replaced by another while followed (rotated?): "
                    "reading stopped at the end of the old one")
        return None


def open_finished(path: str) -> FinishedFile | FdStream:
    """A capture FILE (not stdin, not --follow) opened so that `stop()` can end its
    reading: a regular file as a `FinishedFile`; a FIFO or device (`<(tcpdump -w -)`) as
    an `FdStream`, whose wait for input a stop wakes. CaptureError (one line, as
    source.open_source says it) when it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise CaptureError(f"cannot open {path}: {os_error_text(exc)}") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        return FdStream(fd, path, owned=True)
    return FinishedFile(os.fdopen(fd, "rb"), path)


class FinishedFile:
    """A regular capture file read in chunks, with the count of bytes read (the progress
    bar's, mirrored by pipe.py) and `stop()` (Ctrl-C, SIGTERM: safe in a signal handler):
    the next read then gives b"" and `stopped` is True, as at the deadline of a capture
    still coming, so the connections open then are reported as at the end of a cut
    capture. The stop is a byte in a pipe: a forked reader process (pipe.py), which holds
    its own copy of this object, sees it too (one zero-timeout `select` per chunk)."""

    def __init__(self, raw: BinaryIO, name: str) -> None:
        self._raw = raw
        self.name = name
        self.count = 0
        self.stopped = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def fileno(self) -> int:
        return self._raw.fileno()

    # a Network Monitor capture reads its frame table first (source.OpenedSource.read_at)
    def seekable(self) -> bool:
        return self._raw.seekable()

    def tell(self) -> int:
        return self._raw.tell()

    def seek(self, offset: int, whence: int = os.SEEK_SET, /) -> int:
        return self._raw.seek(offset, whence)

    def stop(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except OSError:    # full (stopped already) or closed (the reading is over)
            pass

    def read(self, n: int = -1, /) -> bytes:
        if not self.stopped and self._wake_r >= 0 and \
                select.select([self._wake_r], [], [], 0)[0]:
            self.stopped = True
        if self.stopped:
            return b""
        data = self._raw.read(n)
        self.count += len(data)
        return data

    def close(self) -> None:
        if self._wake_r >= 0:
            wake = self._wake_r, self._wake_w
            self._wake_r = self._wake_w = -1
            for fd in wake:
                os.close(fd)
        self._raw.close()
