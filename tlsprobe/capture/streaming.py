"""Captures that are still being written: stdin or a pipe (`tlsprobe pcap -`), and a file
another program is still writing (`tlsprobe pcap --follow FILE`, as `tail -f` follows).

`tcpdump -w - | tlsprobe pcap -` must print each connection as it passes, not when tcpdump
stops: the readers take what is available (`read1`, one read of what the pipe or file holds,
see source.ChunkedInput) instead of waiting for a whole chunk, and still parse a packet
across several short reads. Both sources honour a deadline, `stop_at` (a
`time.monotonic()` value, e.g. `--duration`'s): no read waits past it; at the deadline the
source ends as if the capture ended there (`stopped` is then True, and a packet cut short
by the stop is not warned about as damage).

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

from tlsprobe.capture.events import CaptureError
from tlsprobe.capture.source import read_fully
from tlsprobe.errors import os_error_text

__all__ = ["POLL", "FdStream", "FollowedFile", "open_stdin", "streaming_source"]

#: seconds between two looks at a followed file's size when nothing new was there
POLL = 0.05


def _left(stop_at: float | None) -> float | None:
    """Seconds until `stop_at` (never below 0); None: no deadline."""
    if stop_at is None:
        return None
    return max(0.0, stop_at - time.monotonic())


class FdStream:
    """A pipe, FIFO, stdin or file read from its descriptor: `read1` returns what is
    there (waiting, until `stop_at`, when nothing is), `read` loops to `n` bytes."""

    def __init__(self, fd: int, name: str, stop_at: float | None = None, *,
                 owned: bool = False) -> None:
        self.fd = fd
        self.name = name
        self.stop_at = stop_at
        self.stopped = False
        self.error: str | None = None
        self._owned = owned

    def read1(self, n: int = -1, /) -> bytes:
        """Up to `n` bytes: at least one, or b"" at the end of the input or the deadline."""
        n = n if n > 0 else 1 << 16
        while True:
            if self.stopped:
                return b""
            if self.stop_at is not None:
                left = _left(self.stop_at)
                try:
                    ready, _, _ = select.select([self.fd], [], [], left)
                except InterruptedError:   # a signal without a handler raising: look again
                    continue
                if not ready:
                    self.stopped = True
                    return b""
            try:
                return os.read(self.fd, n)
            except BlockingIOError:       # a non-blocking descriptor with nothing yet
                select.select([self.fd], [], [], _left(self.stop_at))

    def read(self, n: int = -1, /) -> bytes:
        """`n` bytes, fewer only at the end of the input or the deadline."""
        if n < 0:
            parts = []
            while chunk := self.read1(1 << 16):
                parts.append(chunk)
            return b"".join(parts)
        return read_fully(self.read1, n)

    def close(self) -> None:
        if self._owned:
            self._owned = False
            os.close(self.fd)


def streaming_source(source: str, follow: bool, stop_at: float | None) -> FdStream | None:
    """The source of a capture still being written that is to be followed (`follow`) or
    stopped at a deadline, or None: `source` ("-" or a path) is opened as it is (stdin
    without a deadline is read as it comes too, through its buffer)."""
    if follow:
        if source == "-":
            raise CaptureError("--follow reads a file: stdin is read as it comes without it")
        return FollowedFile(source, stop_at)
    if source == "-" and stop_at is not None:
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
            data = os.read(self.fd, n)
            if data:
                self.position += len(data)
                return data
            self.error = self._changed()
            if self.error is not None:
                break
            left = _left(self.stop_at)
            if left is not None and left <= 0:
                self.stopped = True
                break
            time.sleep(self.poll if left is None else min(self.poll, left))
        return b""

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
