"""A key log that is a pipe still being written: `--keylog <(tail -f keys.log)` or a FIFO
a program writes (``mkfifo k; ... --keylog k``) in a capture that is itself still being
written (`pcap -i`, `pcap -`, `--follow`).

Such a log has no end while its writer keeps it open: read whole before the capture, it
kept the capture from ever starting. `KeyLogPipeFollower` opens it without waiting for a
writer and reads only what is in the pipe when a lookup misses (never blocking), as
`KeyLogFollower` reads the lines added to a regular file."""

from __future__ import annotations

import os
import stat
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
    """Reads the whole lines a pipe holds now, without blocking: `read_more` is one
    `read` that says "nothing" when the pipe is empty or has no writer (a later writer
    of a FIFO is still read). A line split over writes is kept until its end comes; one
    longer than `MAX_LINE` is skipped as bad."""

    def __init__(self, path: str) -> None:
        self.path = path
        # O_NONBLOCK: the open does not wait for a FIFO's writer, nor a read for data
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        # held open while the log is in use (a FIFO's writer must keep a reader); closed
        # with it, so that the API's reads of many captures leave no descriptor behind
        self._close = weakref.finalize(self, os.close, self._fd)
        self._partial = b""
        self._skipping = False   # inside a line longer than MAX_LINE
        self.reads = 0           # times new lines were read (for tests and --stats)

    def read_more(self, log: KeyLog, force: bool = False) -> bool:
        """Add the pipe's new whole lines to `log`; True when there were any. `force`
        is accepted for `KeyLogFollower`'s interface (a pipe is always looked at)."""
        added, total = False, 0
        while total < PIPE_READ_LIMIT:
            try:
                data = os.read(self._fd, FOLLOW_WINDOW)
            except OSError:      # EAGAIN: empty for now (or the pipe is broken)
                break
            if not data:         # no writer now; a FIFO's next one is read later
                break
            total += len(data)
            added |= self._take(log, data)
        self.reads += added
        return added

    def _take(self, log: KeyLog, data: bytes) -> bool:
        """Parse the whole lines of what was kept plus `data`; keep the rest."""
        data = self._partial + data
        end = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if not end:
            self._keep(log, data)
            return False
        lines, self._partial = data[:end], b""
        if self._skipping:       # the end of the overlong line: not parsed
            lines = lines[min(i for i in (lines.find(b"\n"), lines.find(b"\r")) if i >= 0)
                          + 1:]
            self._skipping = False
        log.merge(parse_keylog(lines.decode("ascii", errors="replace")))
        self._keep(log, data[end:])
        return True

    def _keep(self, log: KeyLog, rest: bytes) -> None:
        """Keep the start of a line still being written (bounded: past `MAX_LINE` it
        is a bad line, skipped to its end)."""
        if self._skipping:
            return
        if len(rest) > MAX_LINE:
            log.bad_lines += 1
            self._skipping, rest = True, b""
        self._partial = rest

    def close(self) -> None:
        self._close()
