"""One capture read by two processes: the capture layer in a forked reader process, the
caller (the analysis) in this one, the events between them through a pipe.

`PipedStream` has `CaptureStream`'s surface and hands out exactly the events and stats a
`CaptureStream` of the same capture would, whatever its caller does between events. The
reader process runs ahead of the caller, so the caller's two requests are carried out on
this side, the way the capture layer would have carried them out:

- `swap_direction(conn)`: the connection's later events (also those the reader had
  already queued) come with the key turned round and the directions flipped. The capture
  layer closes a connection in the same order whichever way it was turned (tcp.py).
- `ignore(conn)`: the connection's bytes and gaps are counted here instead of handed out,
  and come as one `StreamSkipped` per direction just before its `StreamClose`. Events of
  the packet being handed out still come (the reader marks how many of them are left).
  The reader is told too, with each batch this side reads, and from then on counts the
  connection's bytes itself on its fast path (a long download is not carried through the
  pipe); this side adds the reader's counts to its own. The reader learns late, never
  early, so what it flags is a part of what one process would have flagged by then. The one
  choice of the capture layer that depends on all of it (which connections to evict from
  a full table) waits for this side: the reader asks, this side answers with the
  connections ignored and not told yet, and the reader chooses with exactly the flags one
  process would have had.

Messages: a 5-byte header (length, kind) then the body; reader -> caller: events in
batches, the eviction's question, the end (the stats) or the reader's exception; caller ->
reader: connection ids to ignore, as a note or as the answer to the question. A batch is
marshalled plain tuples, not pickled events: pickling a NamedTuple calls Python code for
each one, which cost the reader as much as a third of the capture layer's own work. An
event is ``(code, *fields)`` with a connection's key as its id; ``(_KEY, *key)`` comes
once before the first event of a key (and again if the key changes); an int says how many
events of the same packet follow the next one. Other bodies are pickles.
The reader's exception, if any, is raised here where its events end. Memory stays flat: the
pipe holds at most a megabyte, and the reader waits while it is full.
"""

from __future__ import annotations

import marshal
import os
import pickle
import select
import signal
import struct
from collections.abc import Callable, Generator
from typing import Any, BinaryIO

from tlsprobe.capture.events import (
    CaptureStats,
    ConnKey,
    Datagram,
    Event,
    Secrets,
    StreamClose,
    StreamData,
    StreamGap,
    StreamOpen,
    StreamSkipped,
)
from tlsprobe.capture.stream import CaptureStream, EventIterator, keylog_text
from tlsprobe.errors import EXIT_INTERNAL, TlsprobeError

_HEADER = struct.Struct("<IB")
_EVENTS, _SYNC, _END, _ERROR, _NOTE = range(5)
#: a batch's event codes: the index in this tuple; the first five carry a connection key
_KINDS = (StreamData, StreamOpen, StreamGap, StreamSkipped, StreamClose, Datagram, Secrets)
_CODES = {kind: code for code, kind in enumerate(_KINDS)}
_KEYED = 5
_KEY = len(_KINDS)  # a connection's key, before the first event that refers to it
_new: Callable[..., Any] = tuple.__new__  # a NamedTuple from its fields, no call
_BATCH = 256  # events a message (about 100 KB of a typical capture)
_PIPE_SIZE = 1 << 20


class ReaderProcessError(TlsprobeError):
    """The reader process ended without finishing the capture (killed, out of memory):
    exit 70, as for an internal error; the message says to rerun with --jobs 1."""

    exit_code = EXIT_INTERNAL


def can_pipe() -> bool:
    """Whether this system can run the reader in a second process (fork, two CPUs)."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return False
    return len(os.sched_getaffinity(0)) >= 2


class PipedStream(EventIterator):
    """`CaptureStream`'s surface over a reader process (see the module docstring). Made
    from a `CaptureStream` not iterated yet; it takes that stream over. OSError when no
    process can be started (the stream is then still the caller's, untouched)."""

    def __init__(self, inner: CaptureStream) -> None:
        self.stats: CaptureStats = inner.stats
        self.name = inner.name
        self._inner = inner
        self._secrets: list[Secrets] = []
        self._skip: dict[int, list[Any]] = {}  # ignored id -> counts by original direction
        self._untold: list[int] = []  # ignored ids not told to the reader yet
        self._swapped: set[int] = set()  # ids turned round (an odd number of times)
        self._deferred: list[int] = []  # ignored while events of the packet are left
        self._left = 0  # events of the current packet still to hand out, this one included
        self._pid = 0
        #: StreamSkipped the reader made itself (told in time), added to this side's counts
        self.reader_counted = 0
        data_r, data_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        try:
            import fcntl
            fcntl.fcntl(data_w, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
            # notes never fill a pipe this size: the reader reads them before each batch it
            # writes, and between two such reads this side can read no more than the data
            # pipe holds, a tenth of which (an id per event at most) it can tell back
            fcntl.fcntl(ctl_w, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
            self._notes = True
        except (OSError, AttributeError):  # F_SETPIPE_SZ is Linux's; the default sizes
            # only cost speed, and the ids then go with the answers only
            self._notes = False
        try:
            pid = os.fork()
        except OSError:  # no process to be had: the caller reads in one process
            for fd in (data_r, data_w, ctl_r, ctl_w):
                os.close(fd)
            raise
        if pid == 0:  # the reader: never returns
            os.close(data_r)
            os.close(ctl_w)
            _reader_main(inner, data_w, ctl_r)
        self._pid = pid
        os.close(data_w)
        os.close(ctl_r)
        self._in: BinaryIO = os.fdopen(data_r, "rb", buffering=_PIPE_SIZE)
        self._ctl = ctl_w
        self._gen = self._run()

    # -- CaptureStream's surface ----------------------------------------------------------
    @property
    def secrets(self) -> list[Secrets]:
        return self._secrets

    def tls_keylog(self) -> bytes:
        return keylog_text(self._secrets)

    def swap_direction(self, conn: ConnKey | int) -> ConnKey | None:
        cid = conn if isinstance(conn, int) else conn.id
        if cid in self._swapped:
            self._swapped.discard(cid)
        else:
            self._swapped.add(cid)
        # the key turned round; None when given only the id (this side keeps no keys)
        return None if isinstance(conn, int) else conn.swapped()

    def ignore(self, conn: ConnKey | int) -> bool:
        cid = conn if isinstance(conn, int) else conn.id
        if self._left > 1:
            self._deferred.append(cid)  # the rest of this packet's events were made already
        else:
            self._flag(cid)
        return True

    def _flag(self, cid: int) -> None:
        if cid not in self._skip:
            self._skip[cid] = [0, 0, 0.0, 0, 0, 0, 0.0, 0]
            self._untold.append(cid)

    def close(self) -> None:
        """Stop the reader (if still running), release the pipes and the input. Runs once."""
        self._gen.close()
        if self._pid:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._finished()
        if self._ctl >= 0:
            self._in.close()
            os.close(self._ctl)
            self._ctl = -1
            self._inner.close()

    def _finished(self) -> int:
        """Reap the reader; its wait status (0 when already reaped)."""
        pid, self._pid = self._pid, 0
        return os.waitpid(pid, 0)[1] if pid else 0

    # -- this side ------------------------------------------------------------------------
    def _message(self) -> tuple[int, Any]:
        head = self._in.read(_HEADER.size)
        if len(head) == _HEADER.size:
            size, kind = _HEADER.unpack(head)
            body = self._in.read(size)
            if len(body) == size:
                return kind, marshal.loads(body) if kind == _EVENTS else pickle.loads(body)
        status = self._finished()
        how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exited with status {os.WEXITSTATUS(status)}")
        raise ReaderProcessError(f"the capture reader process {how} before the end of the "
                                 "capture (rerun with --jobs 1 to read it in one process)")

    def _run(self) -> Generator[Event, None, None]:
        skip, swapped = self._skip, self._swapped
        skip_get = skip.get
        keys: dict[int, ConnKey] = {}  # open connection id -> its key
        kinds = _KINDS
        source: Any = self._inner.source
        while True:
            if self._untold and self._notes:
                self._tell(_NOTE)
            kind, body = self._message()
            if kind == _EVENTS:
                self.stats.packets, count, events = body
                if count is not None:
                    source.count = count  # the progress bar's reader, mirrored
                tagged = False  # inside a packet's events (an int said how many)
                for ev in events:
                    if type(ev) is int:
                        self._left = ev + 1
                        tagged = True
                        continue
                    code = ev[0]
                    if not code:  # StreamData: most events, read in place
                        cid = ev[1]
                        counts = skip_get(cid)
                        if counts is None:
                            ev = _new(StreamData, (keys[cid], ev[2], ev[3], ev[4], ev[5]))
                            yield _turned(ev) if swapped and cid in swapped else ev
                        else:
                            d = ev[2] << 2
                            counts[d] += len(ev[3])
                            counts[d + 2], counts[d + 3] = ev[4], ev[5]
                    elif code == _KEY:  # not an event: the key of those that follow
                        keys[ev[1]] = _new(ConnKey, ev[1:])
                        continue
                    elif code >= _KEYED:  # Datagram, Secrets
                        t = kinds[code]
                        ev = _new(t, ev[1:])
                        if t is Secrets:
                            self._secrets.append(ev)
                        yield ev
                    else:
                        t = kinds[code]
                        cid = ev[1]
                        ev = _new(t, (keys.pop(cid) if t is StreamClose else keys[cid],
                                      *ev[2:]))
                        if t is StreamGap:
                            counts = skip_get(cid)
                            if counts is None:
                                yield _turned(ev) if cid in swapped else ev
                            else:
                                counts[(ev[1] << 2) + 1] += ev[2]
                        elif t is StreamClose:
                            if cid in skip:
                                yield from self._closing(ev[0])
                            if cid in swapped:
                                swapped.discard(cid)
                                ev = _turned(ev)
                            yield ev
                        elif t is StreamSkipped:  # the reader's own count, once told
                            counts = skip_get(cid)
                            if counts is not None:
                                self.reader_counted += 1
                                d = ev[1] << 2
                                counts[d] += ev[2]
                                counts[d + 1] += ev[3]
                                if ev[2]:
                                    counts[d + 2], counts[d + 3] = ev[4], ev[5]
                            else:
                                yield _turned(ev) if cid in swapped else ev
                        else:  # StreamOpen
                            yield ev
                    if tagged:
                        self._left -= 1
                        if not self._left:
                            tagged = False
                            if self._deferred:
                                self._apply_deferred()
            elif kind == _SYNC:
                self._apply_deferred()
                self._tell(_SYNC)
            elif kind == _END:
                stats, = body
                self.stats.__dict__.update(stats.__dict__)
                self._finished()
                return
            else:  # _ERROR: the reader's exception, where its events end
                self._finished()
                raise body

    def _closing(self, key: ConnKey) -> Generator[Event, None, None]:
        """The StreamSkipped of an ignored connection, just before its StreamClose: one
        per direction that counted something, in the capture layer's order."""
        cid = key[0]
        counts = self._skip.pop(cid, None)
        if counts is None:
            return
        turned = cid in self._swapped
        for d in (0, 1):  # the reader's directions: the first guess (tcp.py's close order)
            size, gaps, ts, frame = counts[d << 2:(d << 2) + 4]
            if size or gaps:
                ev = _new(StreamSkipped, (key, d, size, gaps, ts, frame))
                yield _turned(ev) if turned else ev

    def _apply_deferred(self) -> None:
        for cid in self._deferred:
            self._flag(cid)
        self._deferred.clear()

    def _tell(self, kind: int) -> None:
        """Send the reader the ignored ids it does not know of yet (still open here: a
        closed one is of no use to it), as a note or as the answer to its question."""
        skip = self._skip
        ids = [cid for cid in self._untold if cid in skip]
        self._untold.clear()
        if not ids and kind == _NOTE:
            return
        body = pickle.dumps(ids, pickle.HIGHEST_PROTOCOL)
        try:
            _write_all(self._ctl, _HEADER.pack(len(body), kind) + body)
        except BrokenPipeError:  # the reader is done (its last messages are still to read)
            self._notes = False  # or gone: the next message says so


def _turned(ev: Any) -> Any:
    """An event of a connection turned round: the swapped key, the other direction."""
    key = ev[0].swapped()
    if type(ev) in (StreamData, StreamGap, StreamSkipped):
        return ev._replace(conn=key, direction=1 - ev[1])
    return ev._replace(conn=key)


def _read_exactly(fd: int, n: int) -> bytes:
    parts = []
    while n:
        part = os.read(fd, n)
        if not part:
            raise EOFError("the caller went away")
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _reader_main(inner: CaptureStream, out_fd: int, ctl_fd: int) -> None:
    """The reader process: iterate the capture, send the events; exit without running the
    parent's exit handlers or flushing its buffers."""
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides; it kills us
        batch: list[Any] = []
        dumps, highest = pickle.dumps, pickle.HIGHEST_PROTOCOL

        def send(kind: int, body: Any) -> None:
            blob = marshal.dumps(body) if kind == _EVENTS else dumps(body, highest)
            _write_all(out_fd, _HEADER.pack(len(blob), kind) + blob)

        # a source that counts the bytes read (the progress bar's): the count goes along
        source: Any = inner.source if isinstance(getattr(inner.source, "count", None), int) \
            else None

        def told() -> int:  # one message from the caller: ignore these connections
            size, kind = _HEADER.unpack(_read_exactly(ctl_fd, _HEADER.size))
            for cid in pickle.loads(_read_exactly(ctl_fd, size)):
                inner.ignore(cid)
            return int(kind)

        def flush() -> None:
            while select.select([ctl_fd], [], [], 0)[0]:  # the notes come first
                told()
            send(_EVENTS, (inner.stats.packets, source.count if source else None, batch))
            batch.clear()

        def sync() -> None:  # the eviction's question: which connections are ignored?
            flush()
            send(_SYNC, None)
            while told() != _SYNC:
                pass

        inner.on_sync(sync)
        queued = inner.queued
        append = batch.append
        sent: dict[int, ConnKey] = {}  # open connection id -> the key sent for it
        sent_get = sent.get
        codes = _CODES
        try:
            for event in inner:
                ev: Any = event
                t = type(ev)
                if t is StreamData:  # most events
                    key = ev[0]
                    cid = key[0]
                    if sent_get(cid) is not key:
                        sent[cid] = key
                        append((_KEY, *key))
                    ev = (0, cid, ev[1], ev[2], ev[3], ev[4])
                else:
                    code = codes[t]
                    if code < _KEYED:
                        key = ev[0]
                        cid = key[0]
                        if sent_get(cid) is not key:
                            sent[cid] = key
                            append((_KEY, *key))
                        if t is StreamClose:
                            del sent[cid]  # the key goes with the connection
                        ev = (code, cid, *ev[1:])
                    else:
                        ev = (code, *ev)
                left = len(queued)
                if left:
                    append(left)
                append(ev)
                if len(batch) >= _BATCH:
                    flush()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            if batch:
                flush()
            try:
                pickle.dumps(exc)
            except Exception:  # noqa: BLE001 - an exception pickle cannot carry
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
            send(_ERROR, exc)
        else:
            flush()
            send(_END, (inner.stats,))
    except BaseException:  # noqa: BLE001 - the caller went away (broken pipe) or killed us
        status = 1
    finally:
        os._exit(status)
