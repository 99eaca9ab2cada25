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
each one, which cost the reader as much as a third of the capture layer's own work. A
data event is ``(id, direction, data, ts, frame)``, StreamData's fields with the
connection's id in the key's place (handed to the analyzer as it is: `plain_data`); any
other event is ``(code, *fields)``, its code negative, with the id for the key;
``(KEY, *key)`` comes once before the first event of a key (and again if the key changes),
or comes with the connection's StreamOpen as ``(OPEN_KEY, ts, frame, *key)``; ``(LEFT, n)``
says how many events of the same packet follow the next one. Other bodies are pickles.
The reader's exception, if any, is raised here where its events end. The reader's side
(and the codes of the messages and events) is pipe_reader.py. Memory stays flat: the
pipe holds at most a megabyte, and the reader waits while it is full.
"""

from __future__ import annotations

import io
import marshal
import os
import pickle
import signal
from collections.abc import Generator
from typing import cast

from tlsprobe.capture.events import (
    CaptureStats,
    ConnKey,
    Datagram,
    Event,
    EventIterator,
    Secrets,
    StreamClose,
    StreamData,
    StreamGap,
    StreamOpen,
    StreamSkipped,
)
from tlsprobe.capture.pipe_reader import (
    CLOSE,
    DATAGRAM,
    END,
    EVENTS,
    GAP,
    HEADER,
    KEY,
    LEFT,
    NOTE,
    OPEN,
    OPEN_KEY,
    SECRETS,
    SYNC,
    Wire,
    write_all,
)
from tlsprobe.capture.pipe_reader import (
    reader_main as _reader_main,  # (tests replace it)
)
from tlsprobe.capture.source import Counted
from tlsprobe.capture.stream import CaptureStream, keylog_text
from tlsprobe.errors import EXIT_INTERNAL, TlsprobeError

# NamedTuples are made with ``tuple.__new__(Kind, fields)``: without the Python-level
# __new__ of ``Kind(*fields)`` (one per event handed out)
_new = tuple.__new__
_Keyed = StreamData | StreamGap | StreamSkipped
_PIPE_SIZE = 1 << 20


class ReaderProcessError(TlsprobeError):
    """The reader process ended without finishing the capture (killed, out of memory):
    exit 70, as for an internal error; the message says to rerun with --jobs 1."""

    def __init__(self, message: str) -> None:
        # the code given, not a class attribute: mypyc drops a class-body assignment in a
        # class whose base is a Python class (errors.py), and a compiled one exited 2
        super().__init__(message, EXIT_INTERNAL)


def can_pipe() -> bool:
    """Whether this system can run the reader in a second process (fork, two CPUs)."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return False
    return len(os.sched_getaffinity(0)) >= 2


class _Count:
    """What one direction of an ignored connection carried since: a `StreamSkipped`'s
    size, gaps, and the time and frame of the last segment counted."""

    __slots__ = ("frame", "gaps", "size", "ts")

    def __init__(self) -> None:
        self.size = self.gaps = self.frame = 0
        self.ts = 0.0


class PipedStream(EventIterator):
    """`CaptureStream`'s surface over a reader process (see the module docstring). Made
    from a `CaptureStream` not iterated yet; it takes that stream over. OSError when no
    process can be started (the stream is then still the caller's, untouched). It derives
    from events.py's EventIterator as CaptureStream does; both modules are in the compiled
    build's list together (a Python class cannot derive from a compiled one)."""

    def __init__(self, inner: CaptureStream) -> None:
        self.stats: CaptureStats = inner.stats
        self.name = inner.name
        self._inner = inner
        #: the progress bar's reader, if any (asked once: an isinstance against a runtime
        #: Protocol takes about 15 us, and a capture has thousands of batches)
        self._counted = inner.source if isinstance(inner.source, Counted) else None
        self._secrets: list[Secrets] = []
        #: ignored id -> counts by the reader's direction (its first guess of the client);
        #: `object` keys, as in `_run`'s table of keys: there the ids come untyped from the
        #: batches, and compiled, an `int` key was converted to a C integer and back to a
        #: new int object at every lookup
        self._skip: dict[object, tuple[_Count, _Count]] = {}
        self._untold: list[int] = []  # ignored ids not told to the reader yet
        self._swapped: set[int] = set()  # ids turned round (an odd number of times)
        self._deferred: list[int] = []  # ignored while events of the packet are left
        self._left = 0  # events of the current packet still to hand out, this one included
        self._pid = 0
        #: StreamSkipped the reader made itself (told in time), added to this side's counts
        self.reader_counted = 0
        #: set before iterating: a data event not turned round comes as the batch's own
        #: tuple, StreamData's fields with the connection's id in the key's place (the
        #: analyzer reads it by position and asks `key_of` in the rare case it needs the
        #: key; making a StreamData, or a tuple with the key, of each one was most of what
        #: this side adds per event)
        self.plain_data = False
        self._keys: dict[object, ConnKey] = {}  # open connection id -> its key
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
        # read unbuffered into this side's own buffer: a buffered reader copied every
        # message once more before marshal copied its payloads out
        self._in = io.FileIO(data_r, "rb")
        self._buf = bytearray(_PIPE_SIZE)
        self._start = self._end = 0  # what was read and not handed out yet: buf[start:end]
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
        if not isinstance(conn, int):
            return conn.swapped()
        key = self._keys.get(cid)  # the reader's orientation: turned while in `_swapped`
        return None if key is None else key.swapped() if cid in self._swapped else key

    def key_of(self, cid: int) -> ConnKey:
        """The key of an open connection, as its events come now (turned round if swapped):
        for a `plain_data` event, which holds only the id."""
        key = self._keys[cid]
        return key.swapped() if cid in self._swapped else key

    def ignore(self, conn: ConnKey | int) -> bool:
        cid = conn if isinstance(conn, int) else conn.id
        if self._left > 1:
            self._deferred.append(cid)  # the rest of this packet's events were made already
        else:
            self._flag(cid)
        return True

    def _flag(self, cid: int) -> None:
        if cid not in self._skip:
            self._skip[cid] = (_Count(), _Count())
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
    def _message(self) -> tuple[int, memoryview]:
        """The next message from the reader: its kind and body (a view of this side's
        buffer, valid until the next message is read)."""
        head = self._receive(HEADER.size)
        if head is not None:
            size, kind = HEADER.unpack(head)
            body = self._receive(size)
            if body is not None:
                return kind, body
        status = self._finished()
        how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exited with status {os.WEXITSTATUS(status)}")
        raise ReaderProcessError(f"the capture reader process {how} before the end of the "
                                 "capture (rerun with --jobs 1 to read it in one process)")

    def _receive(self, n: int) -> memoryview | None:
        """The next `n` bytes from the reader (None: the pipe ended first), a view of this
        side's buffer valid until the next call. The pipe is read in large parts straight
        into the buffer (a read per message cost more time than the copy it saves)."""
        buf, start, end = self._buf, self._start, self._end
        if end - start < n:
            if start + n > len(buf):  # no room behind: what is left goes to the front
                if n > len(buf):  # a message larger than the buffer (a batch of 64 KB
                    # segments is up to 16 MB) gets one of its own, not kept
                    buf = bytearray(n)
                buf[:end - start] = self._buf[start:end]
                start, end = 0, end - start
            with memoryview(buf) as whole:
                while end - start < n:
                    got = self._in.readinto(whole[end:])
                    if not got:
                        return None
                    end += got
        self._start, self._end = (start + n, end) if buf is self._buf else (0, 0)
        return memoryview(buf)[start:start + n]

    def _batches(self) -> list[Wire] | None:
        """The next batch of events from the reader (None at the end of the capture),
        answering the reader's questions and telling it what was ignored on the way."""
        counted = self._counted
        events: list[Wire]
        while True:
            if self._untold and self._notes:
                self._tell(NOTE)
            kind, body = self._message()
            if kind == EVENTS:
                self.stats.packets, count, events = marshal.loads(body)
                if count is not None and counted is not None:
                    counted.count = count  # the progress bar's reader, mirrored
                return events
            if kind == SYNC:
                self._apply_deferred()
                self._tell(SYNC)
            elif kind == END:
                stats, = pickle.loads(body)
                self.stats.update(stats)
                self._finished()
                return None
            else:  # ERROR: the reader's exception, where its events end
                self._finished()
                raise pickle.loads(body)

    def _run(self) -> Generator[Event, None, None]:
        """The events of the batches, as the capture layer in this process would have
        handed them out: turned round where swapped, counted instead where ignored. One
        generator (a generator per batch delegated to cost a second resumption per event)."""
        keys = self._keys
        skip_get, swapped = self._skip.get, self._swapped
        new, other, plain = tuple.__new__, self._other, self.plain_data
        # the classes as locals (compiled, a module's global is looked up in its dict at
        # every use: these are Python classes, not the compiled module's)
        data_t, open_t, close_t, key_t = StreamData, StreamOpen, StreamClose, ConnKey
        tagged = False  # inside a packet's events (a LEFT said how many)
        while (events := self._batches()) is not None:
            for ev in events:
                code: int = ev[0]  # (compiled: compared as a C integer, the rest as is)
                if code >= 0:  # a data event, most items: (id, direction, data, ts, frame)
                    counts = skip_get(code)
                    if counts is None:
                        if swapped and code in swapped:
                            _, direction, data, ts, frame = ev
                            yield _turned(new(data_t, (keys[code], direction, data, ts,
                                                       frame)))
                        elif plain:  # the batch's tuple as it is (typed as the event
                            yield cast(StreamData, ev)  # whose fields it holds)
                        else:
                            _, direction, data, ts, frame = ev
                            yield new(data_t, (keys[code], direction, data, ts, frame))
                    else:
                        count = counts[ev[1]]
                        count.size += len(ev[2])
                        count.ts, count.frame = ev[3], ev[4]
                elif code == KEY:  # not an event: the key of those that follow
                    keys[ev[1]] = new(key_t, ev[1:])
                    continue
                elif code == LEFT:
                    self._left = ev[1] + 1
                    tagged = True
                    continue
                elif code == OPEN_KEY:  # most opens: the key comes with it
                    key = keys[ev[3]] = new(key_t, ev[3:])
                    yield new(open_t, (key, ev[1], ev[2]))
                elif code == OPEN:
                    _, cid, ts, frame = ev
                    yield new(open_t, (keys[cid], ts, frame))
                elif code == CLOSE:
                    _, cid, reason, ts, frame = ev
                    close = new(close_t, (keys.pop(cid), reason, ts, frame))
                    if cid in self._skip:  # an ignored connection: its StreamSkipped first
                        yield from self._closing(close.conn)
                    if swapped and cid in swapped:
                        swapped.discard(cid)
                        close = close._replace(conn=close.conn.swapped())
                    yield close
                else:
                    made = other(ev, keys)
                    if made is not None:
                        yield made
                if tagged:
                    self._left -= 1
                    if not self._left:
                        tagged = False
                        if self._deferred:
                            self._apply_deferred()

    def _other(self, ev: Wire, keys: dict[object, ConnKey]) -> Event | None:
        """An event other than StreamData, StreamOpen and StreamClose; None when it is
        counted here instead (an ignored connection's gap or the reader's own count)."""
        code = ev[0]
        if code == DATAGRAM:
            return _new(Datagram, ev[1:])
        if code == SECRETS:
            secrets = _new(Secrets, ev[1:])
            self._secrets.append(secrets)
            return secrets
        counts = self._skip.get(ev[1])
        if code == GAP:
            _, cid, direction, size, ts, frame, seq = ev
            if counts is not None:
                counts[direction].gaps += size
                return None
            gap = _new(StreamGap, (keys[cid], direction, size, ts, frame, seq))
            return _turned(gap) if cid in self._swapped else gap
        _, cid, direction, size, gaps, ts, frame = ev  # StreamSkipped: the reader's count
        if counts is not None:  # told in time: added to this side's
            self.reader_counted += 1
            count = counts[direction]
            count.size += size
            count.gaps += gaps
            if size:
                count.ts, count.frame = ts, frame
            return None
        skipped = _new(StreamSkipped, (keys[cid], direction, size, gaps, ts, frame))
        return _turned(skipped) if cid in self._swapped else skipped

    def _closing(self, key: ConnKey) -> list[StreamSkipped]:
        """The StreamSkipped of an ignored connection, just before its StreamClose: one
        per direction that counted something, in the capture layer's order. (A list: most
        connections are ignored, and a generator per close cost more than its events.)"""
        counts = self._skip.pop(key.id, None)
        if counts is None:
            return []
        turned = key.id in self._swapped
        out: list[StreamSkipped] = []
        for direction in (0, 1):  # the reader's: the first guess (tcp.py's close order)
            count = counts[direction]
            if count.size or count.gaps:
                ev = _new(StreamSkipped, (key, direction, count.size, count.gaps, count.ts,
                                   count.frame))
                out.append(cast(StreamSkipped, _turned(ev)) if turned else ev)
        return out

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
        if not ids and kind == NOTE:
            return
        body = pickle.dumps(ids, pickle.HIGHEST_PROTOCOL)
        try:
            write_all(self._ctl, HEADER.pack(len(body), kind) + body)
        except BrokenPipeError:  # the reader is done (its last messages are still to read)
            self._notes = False  # or gone: the next message says so


def _turned(ev: _Keyed) -> _Keyed:
    """An event of a connection turned round: the swapped key, the other direction (no
    TypeVar: mypyc, the optional compiled path, does not narrow one by its values)."""
    return ev._replace(conn=ev.conn.swapped(), direction=1 - ev.direction)
