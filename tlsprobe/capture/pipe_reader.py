"""The reader process's side of pipe.py: the capture's events into the pipe in batches, the
caller's notes (connections to ignore) and answers out of the other pipe. The messages and
the form of an event in a batch: pipe.py's docstring."""

from __future__ import annotations

import marshal
import os
import pickle
import select
import signal
import struct
from collections.abc import Iterator
from typing import Any, Final, NoReturn, cast

from tlsprobe.capture.events import (
    ConnKey,
    Datagram,
    Secrets,
    StreamClose,
    StreamData,
    StreamGap,
    StreamOpen,
    StreamSkipped,
)
from tlsprobe.capture.source import Counted
from tlsprobe.capture.stream import CaptureStream

HEADER: Final = struct.Struct("<IB")
# The codes are Final, one a line: the compiled fast path (build_backend/compiled_modules.txt)
# then takes each as a constant, where a name assigned by unpacking was looked up in the
# module's dict at every use.
#: message kinds
EVENTS: Final = 0
SYNC: Final = 1
END: Final = 2
ERROR: Final = 3
NOTE: Final = 4
#: a batch's item codes, negative: a data event, most items, is ``(id, direction, data,
#: ts, frame)`` with no code (a connection's id is never negative: this side tells it by
#: the sign of its first field, and the analyzer takes it as it is, `plain_data`); any
#: other item is ``(code, *fields)``, the code of an event its kind's in CODES
KINDS = (StreamData, StreamOpen, StreamGap, StreamSkipped, StreamClose, Datagram, Secrets)
CODES: Final = {kind: -index for index, kind in enumerate(KINDS)}
OPEN: Final = -1
GAP: Final = -2
SKIPPED: Final = -3
CLOSE: Final = -4
DATAGRAM: Final = -5
SECRETS: Final = -6
KEY: Final = -7  # a connection's key, before the first event that refers to it
#: ``(LEFT, n)``: n more events of the same packet follow the next one (a tuple like the
#: events, so that this side reads every item's code without first testing its type)
LEFT: Final = -8
#: ``(OPEN_KEY, ts, frame, *key)``: a StreamOpen whose key was not sent yet, with the key
OPEN_KEY: Final = -9
#: an event as a batch carries it: ``(code, *fields)``, the connection key replaced by its
#: id (``(KEY, *key)`` for a key); plain tuples as marshal gives them back
Wire = tuple[Any, ...]
BATCH: Final = 256  # events a message (about 100 KB of a typical capture)


def read_exactly(fd: int, n: int) -> bytes:
    parts = []
    while n:
        part = os.read(fd, n)
        if not part:
            raise EOFError("the caller went away")
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        # the count named first: mypyc evaluates a slice's bound twice on a memoryview
        # (once for a list/tuple/str/bytes fast path it then does not take), and compiled
        # `view[os.write(fd, view):]` wrote everything twice
        done = os.write(fd, view)
        view = view[done:]


class _Reader:
    """The reader process's side: the capture's events to the pipe in batches, the
    caller's notes (connections to ignore) and answers from the other pipe."""

    def __init__(self, inner: CaptureStream, out_fd: int, ctl_fd: int) -> None:
        self.inner = inner
        self.out_fd = out_fd
        self.ctl_fd = ctl_fd
        self.batch: list[Wire] = []
        # a source that counts the bytes read (the progress bar's): the count goes along
        source = inner.source
        self.counted = source if isinstance(source, Counted) else None

    def send(self, kind: int, body: object) -> None:
        """A message of this kind: `body` pickled."""
        self._write(kind, pickle.dumps(body, pickle.HIGHEST_PROTOCOL))

    def _write(self, kind: int, blob: bytes) -> None:
        """The header and the body in one call, the body not copied behind the header
        (a batch is about 100 KB)."""
        head = HEADER.pack(len(blob), kind)
        done = os.writev(self.out_fd, (head, blob))
        if done < len(head):
            write_all(self.out_fd, head[done:])
            done = len(head)
        write_all(self.out_fd, memoryview(blob)[done - len(head):])

    def told(self) -> int:
        """One message from the caller: ignore these connections. Its kind."""
        size, kind = HEADER.unpack(read_exactly(self.ctl_fd, HEADER.size))
        for cid in pickle.loads(read_exactly(self.ctl_fd, size)):
            self.inner.ignore(cid)
        return int(kind)

    def flush(self) -> None:
        while select.select([self.ctl_fd], [], [], 0)[0]:  # the notes come first
            self.told()
        count = self.counted.count if self.counted is not None else None
        self._write(EVENTS, marshal.dumps((self.inner.stats.packets, count, self.batch)))
        self.batch.clear()

    def sync(self) -> None:
        """The eviction's question: which connections are ignored? (tcp.py asks it)"""
        self.flush()
        self.send(SYNC, None)
        while self.told() != SYNC:
            pass

    def run(self) -> None:
        """Iterate the capture and send its events; the end (the stats) or the exception
        that stopped it."""
        inner = self.inner
        inner.on_sync(self.sync)
        try:
            self._events()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            if self.batch:
                self.flush()
            try:
                pickle.dumps(exc)
            except Exception:  # noqa: BLE001 - an exception pickle cannot carry
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
            self.send(ERROR, exc)
        else:
            self.flush()
            self.send(END, (inner.stats,))

    def _events(self) -> None:
        """The capture's events into batches: the four kinds of a TCP connection told apart
        by type() and written out here (a call, `isinstance` tests and a starred unpacking
        per event cost the reader a quarter of what it adds to the capture layer), the rest
        by `_other`. An event is read as the plain tuple it is (`Wire`), never narrowed to
        its kind: compiled, a narrowed event's typed fields were unboxed to C values and
        boxed again into new objects for the batch (an int object a frame number)."""
        queued = self.inner.queued  # events of the current packet still to come
        batch = self.batch
        append = batch.append
        #: open connection id -> the key sent for it (`object` keys: the ids are read off
        #: the events untyped, and a typed key was converted at every lookup, compiled)
        sent: dict[object, ConnKey] = {}
        sent_get = sent.get
        # the kinds as locals (compiled, a module's global is looked up in its dict at
        # every use: these classes are Python's, not the compiled module's)
        data_t, close_t, open_t, skipped_t = StreamData, StreamClose, StreamOpen, StreamSkipped
        # (not narrowed to the event's kind: read as the plain tuple it is, see above)
        for event in cast(Iterator[Wire], self.inner):
            kind = type(event)
            if kind is data_t:  # most events
                key, direction, data, ts, frame = event
                cid = key[0]
                if sent_get(cid) is not key:
                    sent[cid] = key
                    append((KEY, *key))
                if queued:  # how many events of the same packet follow this one
                    append((LEFT, len(queued)))
                append((cid, direction, data, ts, frame))
            elif kind is close_t:
                key, reason, ts, frame = event
                cid = key[0]
                if sent.pop(cid, None) is not key:  # the key goes with the connection
                    append((KEY, *key))
                if queued:
                    append((LEFT, len(queued)))
                append((CLOSE, cid, reason, ts, frame))
            elif kind is open_t:
                key, ts, frame = event
                cid = key[0]
                if queued:
                    append((LEFT, len(queued)))
                if sent_get(cid) is not key:  # (a connection's first event: so far always)
                    sent[cid] = key
                    append((OPEN_KEY, ts, frame, *key))  # one item, not a KEY and an OPEN
                else:
                    append((OPEN, cid, ts, frame))
            elif kind is skipped_t:
                key, direction, size, gaps, ts, frame = event
                cid = key[0]
                if sent_get(cid) is not key:
                    sent[cid] = key
                    append((KEY, *key))
                if queued:
                    append((LEFT, len(queued)))
                append((SKIPPED, cid, direction, size, gaps, ts, frame))
            else:
                self._other(event, sent)
            if len(batch) >= BATCH:
                self.flush()

    def _other(self, event: Wire, sent: dict[object, ConnKey]) -> None:
        """A gap, datagram or secrets event into the batch (a connection's key first)."""
        code = CODES[type(event)]
        if type(event) is StreamGap:  # the other keyed kinds are written by `_events`
            key, *fields = event
            if sent.get(key.id) is not key:
                sent[key.id] = key
                self.batch.append((KEY, *key))
            wire: Wire = (code, key.id, *fields)
        else:
            wire = (code, *event)
        left = len(self.inner.queued)
        if left:
            self.batch.append((LEFT, left))
        self.batch.append(wire)


def reader_main(inner: CaptureStream, out_fd: int, ctl_fd: int) -> NoReturn:
    """The reader process: iterate the capture, send the events; exit without running the
    parent's exit handlers or flushing its buffers."""
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller decides; it kills us
        _Reader(inner, out_fd, ctl_fd).run()
    except BaseException:  # noqa: BLE001 - the caller went away (broken pipe) or killed us
        status = 1
    finally:
        os._exit(status)

