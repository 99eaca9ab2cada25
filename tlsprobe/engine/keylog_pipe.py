"""A key log that is a pipe still being written: `--keylog <(tail -f keys.log)` or a FIFO
a program writes (``mkfifo k; ... --keylog k``) in a capture that is itself still being
written (`pcap -i`, `pcap -`, `--follow`).

Such a log has no end while its writer keeps it open: read whole before the capture, it
kept the capture from ever starting. `KeyLogPipeFollower` opens it without waiting for a
writer, and a thread of its own reads the pipe as it grows (never more than what is there,
never blocking the capture): read only when a lookup missed, as before, a pipe full of
keys the capture does not look up (64 KiB, some 200 connections') made its writer wait.
What the thread reads waits, parsed, in a log of its own (bounded as a growing log is: the
newest `DEFAULT_MAX_SESSIONS`), added to the capture's log at its next miss; a miss also
reads what the pipe holds at that moment, so a key written just before is found."""

from __future__ import annotations

import os
import select
import stat
import threading
import time
import weakref

from tlsprobe.engine.keylog import (
    FOLLOW_WINDOW,
    MAX_LINE,
    KeyLog,
    load_keylog,
    parse_keylog,
)

#: bytes read from the pipe at most per lookup (the rest waits for the next miss), so a
#: writer faster than the parsing cannot keep one lookup going
PIPE_READ_LIMIT = 16 * FOLLOW_WINDOW
#: seconds the reading thread waits at a time (to see that the log was closed)
WAIT = 0.25


def load_growing_keylog(path: str) -> KeyLog:
    """A key log still being written: a pipe or FIFO followed by `KeyLogPipeFollower`
    (what it holds now is read, nothing waited for), any other file by
    `load_keylog(path, grows=True)`. OSError propagates."""
    if not stat.S_ISFIFO(os.stat(path).st_mode):
        return load_keylog(path, grows=True)
    log = KeyLog(source=path)
    log.follower = KeyLogPipeFollower(path)
    log.follower.read_more(log)
    return log


class KeyLogPipeFollower:
    """Reads the whole lines a pipe holds, without blocking: a daemon thread as they come
    (see the module), and `read_more` at a miss. A line split over writes is kept until
    its end comes; one longer than `MAX_LINE` is skipped as bad. An empty pipe or one
    with no writer answers at once (a later writer of a FIFO is still read)."""

    def __init__(self, path: str) -> None:
        self.path = path
        # O_NONBLOCK: the open does not wait for a FIFO's writer, nor a read for data
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self._reader = _PipeReader(fd, path)
        # held open while the log is in use (a FIFO's writer must keep a reader); closed
        # with it, so that the API's reads of many captures leave no descriptor behind
        self._close = weakref.finalize(self, self._reader.shut)
        threading.Thread(target=self._reader.run, name="tlsprobe-keylog-pipe",
                         daemon=True).start()

    @property
    def reads(self) -> int:
        """Times new lines were read (for tests and --stats)."""
        return self._reader.reads

    def read_more(self, log: KeyLog, force: bool = False) -> bool:
        """Add the pipe's new whole lines (read by the thread, and what it holds now) to
        `log`; True when there were any. `force` is accepted for `KeyLogFollower`'s
        interface (a pipe is always looked at)."""
        return self._reader.take(log)

    def close(self) -> None:
        self._close()


class _PipeReader:
    """The pipe's reading, shared by the follower (at a miss) and its thread (as the pipe
    grows), one at a time (`lock`). Holds no reference to the follower, whose collection
    ends it: `shut` tells the thread, which closes the descriptor as it leaves."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.pending = KeyLog(source=path)        # read, not yet given to the caller's log
        self.pending.follower = self._Forgets()   # (bounded as a growing log: `_room`)
        self.fresh = False        # `pending` has lines the caller's log has not
        self.partial = b""
        self.skipping = False     # inside a line longer than MAX_LINE
        self.reads = 0
        self.shut_down = False

    class _Forgets:
        """Marks `pending` as a growing log (its oldest sessions forgotten past the bound);
        never asked to read."""

        def read_more(self, log: KeyLog, force: bool = False) -> bool:
            return False

    def shut(self) -> None:
        self.shut_down = True

    def run(self) -> None:
        """The thread: wait for the pipe (WAIT seconds at a time, to see `shut`), read
        what it holds; after its writer left, look again every WAIT seconds."""
        try:
            while not self.shut_down:
                ready, _, _ = select.select([self.fd], [], [], WAIT)
                if ready:
                    with self.lock:
                        ended = self._drain()
                    if ended:
                        time.sleep(WAIT)   # no writer: a FIFO's next one is read later
        except (OSError, ValueError):
            pass
        finally:
            with self.lock:
                os.close(self.fd)
                self.fd = -1

    def take(self, log: KeyLog) -> bool:
        """What the pipe holds now, and all that was read since the last call, into
        `log`; True when there were new lines."""
        with self.lock:
            if self.fd >= 0:
                self._drain()
            if not self.fresh:
                return False
            log.merge(self.pending)
            self.pending.sessions.clear()
            self.pending.session_ids.clear()
            self.pending.bad_lines = self.pending.skipped_lines = self.pending.dropped = 0
            self.fresh = False
            return True

    def _drain(self) -> bool:
        """Read the pipe until it is empty (at most PIPE_READ_LIMIT bytes), the lock held;
        True when it has no writer (end of file)."""
        total = 0
        while total < PIPE_READ_LIMIT:
            try:
                data = os.read(self.fd, FOLLOW_WINDOW)
            except OSError:      # EAGAIN: empty for now (or the pipe is broken)
                return False
            if not data:
                return True
            total += len(data)
            if self._take(data):
                self.reads += 1
                self.fresh = True
        return False

    def _take(self, data: bytes) -> bool:
        """Parse the whole lines of what was kept plus `data`; keep the rest."""
        data = self.partial + data
        end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if not end:
            self._keep(data)
            return False
        lines, self.partial = data[:end], b""
        if self.skipping:       # the end of the overlong line: not parsed
            lines = lines[min(i for i in (lines.find(b"\n"), lines.find(b"\r")) if i >= 0)
                          + 1:]
            self.skipping = False
        self.pending.merge(parse_keylog(lines.decode("ascii", errors="replace")))
        self._keep(data[end:])
        return True

    def _keep(self, rest: bytes) -> None:
        """Keep the start of a line still being written (bounded: past `MAX_LINE` it
        is a bad line, skipped to its end)."""
        if self.skipping:
            return
        if len(rest) > MAX_LINE:
            self.pending.bad_lines += 1
            self.fresh = True
            self.skipping, rest = True, b""
        self.partial = rest
