"""Eviction of open TCP connections: memory flat in their number, no handshake lost.

A capture of a million SYNs must not keep a million connections, and a connection whose
handshake is being read must not be dropped half-way (the rest would read as a new
connection taken from the middle, and the report would lose fields tshark shows). Open
connections are evicted (closed with reason "evicted", counted by reason in `CaptureStats`):

* when idle: no packet for ``idle_timeout`` seconds of capture time (60 s; 600 s once
  payload flowed, as Suricata's new/established timeouts), checked as connections open;
* over a quarter of ``max_connections`` open (at least 1024): the least recently used of
  those that carried no payload yet (an eighth of the limit at a time; a later SYN+ACK or
  data segment opens such a connection again and loses none of its bytes); over
  ``max_connections`` also of those whose bytes the reader no longer wants (`ignore`:
  handshake read, or not TLS) -- never one whose handshake may be in progress; only past
  twice the limit, when nothing else is left, the least recently used of the rest
  (counted apart as "in progress").

Evicted connections that carried payload are remembered as closed ones are, so that their
late packets do not start a new connection read from the middle; payload-less ones are
forgotten at once.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from operator import attrgetter
from typing import Final

from tlsprobe.capture.reassembly import MASK, Connection, Reassembler

IDLE_TIMEOUT: Final = 60.0  # capture seconds without a packet before a connection is evicted
IDLE_TIMEOUT_DATA: Final = 600.0  # the same once payload has flowed


def _quiet(conn: Connection) -> bool:
    """No payload seen in either direction (SYN, SYN+ACK, bare FIN only)."""
    for half in conn.halves:
        isn = half.isn
        if half.pending or (half.next_seq is not None
                            and (isn is None or half.next_seq != (isn + 1) & MASK)):
            return False
    return True


def _nothing() -> None:
    pass


class Eviction(Reassembler):
    """The eviction layer of `TcpTracker` (tcp.py), which owns the tables used here. One
    chain of single bases (Reassembler -> Eviction -> TcpTracker), not a mixin: mypyc's
    native classes take no multiple inheritance (the compiled fast path)."""

    open: dict[int, Connection]
    max_connections: int

    def close(self, conn: Connection, reason: str, ts: float, frame: int,
              remember: bool = True) -> None:
        raise NotImplementedError

    def init_eviction(self, idle_timeout: float, idle_timeout_data: float) -> None:
        #: called before a choice that depends on which connections the reader ignores,
        #: to bring those flags up to date: nothing to do when the reader runs in this
        #: process (its `ignore` calls set them at once); pipe.py's reader process sets it
        self.sync_ignored: Callable[[], None] = _nothing
        self.idle_timeout = idle_timeout
        self.idle_timeout_data = idle_timeout_data
        # payload-less connections are evicted from a quarter of the limit on (a small
        # limit, as in tests, is taken whole)
        self._quiet_limit = max(self.max_connections >> 2, min(self.max_connections, 1024))
        self._evict_at = self._quiet_limit  # open count that triggers an eviction
        self._marks: deque[tuple[float, int]] = deque()  # (capture time, frame) checkpoints
        self._sweep_at = float("-inf")
        self._opened_since_sweep = 0

    def _sweep(self, ts: float, frame: int) -> None:
        """Evict connections idle for their timeout of capture time. Runs as connections
        open (tcp.py's `_open` calls it, and `_evict` when the table is full), at most
        every quarter timeout of capture time and once per eighth of the table opened, so
        its scan costs O(1) per connection."""
        self._opened_since_sweep = 0
        quick, slow = sorted((self.idle_timeout, self.idle_timeout_data))
        self._sweep_at = ts + quick / 4
        marks = self._marks
        marks.append((ts, frame))
        # a connection whose last packet came before a checkpoint at least `timeout`
        # seconds old has been idle that long (frames are numbered in capture order)
        while len(marks) > 1 and marks[1][0] <= ts - slow:
            marks.popleft()
        cut_quiet = cut_data = 0
        for mark_ts, mark_frame in marks:
            if mark_ts <= ts - self.idle_timeout:
                cut_quiet = mark_frame
            if mark_ts <= ts - self.idle_timeout_data:
                cut_data = mark_frame
        if not cut_quiet and not cut_data:
            return
        victims = [conn for conn in self.open.values()
                   if conn.last < (cut_quiet if _quiet(conn) else cut_data)]
        for conn in victims:
            self.stats.tcp_evicted_idle += 1
            self._drop(conn, ts, frame)

    def _evict(self, ts: float, frame: int) -> None:
        """The table is full: evict the least recently used of the connections that
        carried no payload (past a quarter of the limit: losing one loses no byte of a
        stream, a later SYN+ACK or data segment opens it again), and past the limit also
        those the reader ignores; past twice the limit, when nothing else is left, any."""
        self._sweep(ts, frame)
        limit = self.max_connections
        step = max(1, limit >> 3)
        full = len(self.open) >= limit
        if full:
            self.sync_ignored()  # the choice below depends on what the reader ignores
        spare = [conn for conn in self.open.values()
                 if _quiet(conn) or full and conn.halves[0].skip]
        for conn in heapq.nsmallest(step, spare, key=attrgetter("last")):
            self.stats.tcp_evicted_limit += 1
            self._drop(conn, ts, frame)
        if len(self.open) >= 2 * limit:  # only handshakes in progress left: the oldest go
            for conn in heapq.nsmallest(step, self.open.values(), key=attrgetter("last")):
                self.stats.tcp_evicted_limit += 1
                self.stats.tcp_evicted_in_progress += 1
                self._drop(conn, ts, frame)
        # look again once another eighth of the limit has opened
        self._evict_at = max(self._quiet_limit, len(self.open) + step)

    def _drop(self, conn: Connection, ts: float, frame: int) -> None:
        """Close an evicted connection; one that never carried payload is forgotten at
        once (nothing late of it could be mistaken for the middle of a stream)."""
        self.stats.tcp_evicted += 1
        self.close(conn, "evicted", ts, frame, remember=not _quiet(conn))
