"""Per-direction TCP byte-stream reassembly.

A `HalfStream` is one direction of one connection.  Bytes are delivered in sequence order;
segments that arrive early wait in a bounded list of pending segments.  Policy, as in
tshark's and Suricata's default:

* retransmitted and overlapping bytes: the first seen copy wins (later copies are counted,
  and counted as conflicts when their bytes differ from a pending copy);
* a hole that is not filled before the pending bytes pass ``max_pending_bytes`` (per
  direction) or ``max_total_pending_bytes`` (all connections), or by the end of the
  connection, becomes a `StreamGap` of the exact size, and delivery goes on after it;
* bytes the capture cut off (snaplen) are a gap of the announced size right away;
* sequence numbers are compared modulo 2**32 (wraparound), with the usual half-window rule:
  a segment starting less than 2**31 ahead of the next expected byte is "future";
* when the first data after a SYN lies more than 16 MiB away from ISN+1, or starts at the
  SYN's own sequence number (synthetic captures that do not count the SYN), the stream
  follows the data (counted as a resync) instead of waiting for a hole that cannot be
  filled or dropping the first byte as already delivered.

`Reassembler` is the mixin that owns the output list and the counters; `TcpTracker` (tcp.py)
adds connection tracking on top of it. `Connection` (the two halves and the key) is here
too, beside `HalfStream`, so that the mixins (this one, eviction.py) can name it.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

from tlsprobe.capture.events import (
    CaptureStats,
    ConnKey,
    Event,
    StreamData,
    StreamGap,
    as_data,
)

MASK: Final = 0xFFFFFFFF
HALF_SPACE: Final = 0x80000000
RESYNC_DISTANCE: Final = 1 << 24  # first data this far from ISN+1 cannot belong to that SYN
#: every half's `pending` until its first early segment, shared and never added to:
#: `_insert` gives the half a list of its own (most halves never hold one, and a list
#: made and freed per half cost some 700 instructions, 1.3 k a connection)
NO_PENDING: Final[list[tuple[int, bytes, int]]] = []


class HalfStream:
    """One direction of a connection: where the next byte is expected and what waits."""

    __slots__ = (
        "acked",
        "conn",
        "direction",
        "fin_seq",
        "isn",
        "next_seq",
        "pending",
        "pending_bytes",
        "pending_ts",
        "skip",
        "skip_frame",
        "skip_gaps",
        "skip_ts",
        "skipped",
    )

    def __init__(self, conn: Connection, direction: int) -> None:
        self.conn = conn
        self.direction = direction
        self.next_seq: int | None = None  # None: nothing seen yet, or connection closed
        self.isn: int | None = None
        # (seq, data, cut) by sequence; the shared empty list until a segment waits
        self.pending: list[tuple[int, bytes, int]] = NO_PENDING
        self.pending_bytes = 0
        self.pending_ts = 0.0  # the capture time of the latest segment that went pending
        self.fin_seq: int | None = None
        #: the peer acknowledged bytes up to here, past a hole (`Reassembler.acked`)
        self.acked: int | None = None
        # ignored connection: bytes are counted instead of delivered (one StreamSkipped)
        self.skip = False
        self.skipped = 0
        self.skip_gaps = 0
        self.skip_ts = 0.0
        self.skip_frame = 0

    @property
    def complete(self) -> bool:
        """Everything up to this direction's FIN has been delivered (or nothing was seen)."""
        return not self.pending and (self.next_seq is None or self.next_seq == self.fin_seq)


class Connection:
    """One TCP connection: its key (client -> server) and its two halves."""

    __slots__ = ("closed", "closing", "flow_keys", "halves", "key", "last", "reset",
                 "reset_by", "swapped", "watch")

    def __init__(self, key: ConnKey, flow_keys: tuple[bytes, bytes], last: int) -> None:
        self.key = key
        # index = direction (0: client -> server)
        self.halves: tuple[HalfStream, ...] = (HalfStream(self, 0), HalfStream(self, 1))
        self.last = last
        self.closed = False
        self.closing = False  # both FINs seen; closes once nothing is missing
        self.flow_keys = flow_keys
        self.reset: tuple[float, int] | None = None  # (ts, frame) of a RST still lingering
        self.reset_by = 0  # the direction that sent it
        self.swapped = False  # oriented against the tracker's first guess (`swap`)
        #: bytes wait in a half, or both FINs came: each in-order segment calls
        #: `TcpTracker.settle` (delivery behind it, acknowledgements, the close), which
        #: clears it once neither holds (one test on the per-packet fast path)
        self.watch = False


class Reassembler:
    """Data-segment handling shared by the connection tracker."""

    def __init__(self, stats: CaptureStats, out: list[Event], max_pending_bytes: int,
                 max_total_pending_bytes: int) -> None:
        self.stats = stats
        self.out = out
        self.max_pending_bytes = max_pending_bytes
        self.max_total_pending_bytes = max_total_pending_bytes
        #: pending bytes of all connections, in a list of one so that the packet loops
        #: read it from a local (`held[0]`, where an attribute of the tracker costs some
        #: hundred instructions a pure ack in pure Python)
        self.held = [0]
        #: data events as plain tuples, the connection's id in the key's place (set by
        #: the stream before its loop starts: `CaptureStream.plain_data`)
        self.plain = False

    # -- output ---------------------------------------------------------------------------
    def _gap(self, half: HalfStream, start: int, size: int, ts: float, frame: int) -> None:
        """`size` bytes from sequence number `start` will never come."""
        self.stats.tcp_gaps += 1
        self.stats.tcp_gap_bytes += size
        if half.skip:
            half.skip_gaps += size
            return
        self.out.append(StreamGap(half.conn.key, half.direction, size, ts, frame, start))

    def _deliver(self, half: HalfStream, data: bytes, ts: float, frame: int) -> None:
        """In-order bytes off the fast path: an event, or counted for an ignored half."""
        if half.skip:
            half.skipped += len(data)
            half.skip_ts, half.skip_frame = ts, frame
            return
        if self.plain:
            self.out.append(as_data((half.conn.key[0], half.direction, data, ts, frame)))
        else:
            self.out.append(StreamData(half.conn.key, half.direction, data, ts, frame))

    # -- segments -------------------------------------------------------------------------
    def data(self, half: HalfStream, seq: int, data: bytes, cut: int, ts: float,
             frame: int) -> None:
        """A payload segment that did not take the in-order fast path."""
        stats = self.stats
        nxt = half.next_seq
        if nxt is None:
            if half.conn.closed:
                stats.tcp_after_close += 1
                return
            nxt = half.next_seq = seq  # capture started mid-stream: begin here
        n = len(data)
        rel = (seq - nxt) & MASK
        if rel and half.isn is not None and nxt == (half.isn + 1) & MASK and not half.pending \
                and (seq == half.isn and n > 1 or min(rel, MASK + 1 - rel) > RESYNC_DISTANCE):
            # The first data after the SYN does not start at ISN+1. At the SYN's own number
            # (a capture synthesized without counting the SYN; a keep-alive probe there has
            # at most one byte), or nowhere near it (several SYN+ACKs, a middlebox rewriting
            # ISNs): the sequence space in use is the data's. Follow the data.
            stats.tcp_resyncs += 1
            nxt = half.next_seq = seq
            rel = 0
        if rel == 0:
            back = 0
        elif rel < HALF_SPACE:
            self._insert(half, seq, data, cut)
            half.pending_ts = ts
            half.conn.watch = True
            stats.tcp_out_of_order += 1
            if (half.pending_bytes > self.max_pending_bytes
                    or self.held[0] > self.max_total_pending_bytes):
                self._relieve(half, ts, frame)
            return
        else:
            back = (nxt - seq) & MASK
            if back >= n:
                stats.tcp_retransmissions += 1
                return
            stats.tcp_overlaps += 1  # already delivered bytes win, the tail is new
        if n > back:
            self._deliver(half, data[back:] if back else data, ts, frame)
        nxt = (seq + n) & MASK
        if cut > 0:
            self._gap(half, nxt, cut, ts, frame)
            nxt = (nxt + cut) & MASK
        half.next_seq = nxt
        if half.pending:
            self.drain(half, ts, frame)

    def _insert(self, half: HalfStream, seq: int, data: bytes, cut: int) -> None:
        """Queue a future segment, keeping only bytes no pending segment already holds.

        The pending list is sorted by distance from the next expected byte; the place of a
        segment is found by bisection and only its neighbours are looked at, so a segment
        costs O(log n) comparisons however shuffled the capture is (the list insert itself
        is one memmove)."""
        nxt = half.next_seq
        if nxt is None:  # not reachable from data(), which sets it first
            return
        start = (seq - nxt) & MASK
        stop = start + len(data)
        pending = half.pending
        if not pending:  # (maybe the shared NO_PENDING: never appended to)
            half.pending = [(seq, data, cut)]
            half.pending_bytes += len(data)
            self.held[0] += len(data)
            return
        if start >= ((pending[-1][0] - nxt) & MASK) + len(pending[-1][1]):
            pending.append((seq, data, cut))
            half.pending_bytes += len(data)
            self.held[0] += len(data)
            return
        i = bisect_left(pending, start, key=lambda p: (p[0] - nxt) & MASK)
        if i and ((pending[i - 1][0] - nxt) & MASK) + len(pending[i - 1][1]) > start:
            i -= 1  # the segment before overlaps the start of this one
        pieces: list[tuple[int, int]] = []
        cur = start
        j = i
        while j < len(pending):
            p_seq, p_data, _ = pending[j]
            s = (p_seq - nxt) & MASK
            if s >= stop:
                break
            e = s + len(p_data)
            j += 1
            if e <= cur:
                continue
            if s > cur:
                pieces.append((cur, s))
            ov_start, ov_end = max(cur, s), min(e, stop)
            if data[ov_start - start:ov_end - start] != p_data[ov_start - s:ov_end - s]:
                self.stats.tcp_overlap_conflicts += 1
            cur = e
            if cur >= stop:
                break
        if cur < stop:
            pieces.append((cur, stop))
        if j == i:  # nothing pending overlaps: one insert at its place
            pending.insert(i, (seq, data, cut))
            half.pending_bytes += len(data)
            self.held[0] += len(data)
            return
        if not pieces:
            self.stats.tcp_retransmissions += 1
            return
        self.stats.tcp_overlaps += 1
        for a, b in pieces:
            piece = ((nxt + a) & MASK, data[a - start:b - start], cut if b == stop else 0)
            k = bisect_left(pending, a, lo=i, key=lambda p: (p[0] - nxt) & MASK)
            pending.insert(k, piece)
            half.pending_bytes += b - a
            self.held[0] += b - a

    def drain(self, half: HalfStream, ts: float, frame: int) -> None:
        """Deliver pending segments that have become contiguous with the stream (those
        delivered are removed from the list at once, not one by one)."""
        pending = half.pending
        nxt = half.next_seq
        if nxt is None:
            return
        i, count = 0, len(pending)
        while i < count:
            seq, data, cut = pending[i]
            rel = (seq - nxt) & MASK
            if rel and rel < HALF_SPACE:
                break
            i += 1
            n = len(data)
            half.pending_bytes -= n
            self.held[0] -= n
            back = (nxt - seq) & MASK if rel else 0
            if back < n:
                self._deliver(half, data[back:] if back else data, ts, frame)
                nxt = (seq + n) & MASK
            if cut > 0:
                size = ((seq + n + cut) - nxt) & MASK
                if size and size < HALF_SPACE:
                    if i < count:
                        size = min(size, (pending[i][0] - nxt) & MASK)
                    self._gap(half, nxt, size, ts, frame)
                    nxt = (nxt + size) & MASK
        if i:
            del pending[:i]
        half.next_seq = nxt

    def _relieve(self, half: HalfStream, ts: float, frame: int) -> None:
        """Too much is pending: give up on holes (as gaps) until under the bounds again."""
        self.stats.tcp_pending_flushes += 1
        while half.pending and (half.pending_bytes > self.max_pending_bytes
                                or self.held[0] > self.max_total_pending_bytes):
            self._skip_hole(half, ts, frame)

    def _skip_hole(self, half: HalfStream, ts: float, frame: int) -> None:
        nxt = half.next_seq
        first = half.pending[0][0]
        if nxt is not None:
            size = (first - nxt) & MASK
            if size and size < HALF_SPACE:
                self._gap(half, nxt, size, ts, frame)
        half.next_seq = first
        self.drain(half, ts, frame)

    def acked(self, half: HalfStream, ack: int, ts: float, frame: int) -> None:
        """A segment of `half`'s sender acknowledging its peer's bytes up to `ack`, while
        some bytes are pending (`held`). A hole the peer's receiver acknowledged
        was delivered but never captured (it will not be sent again): it becomes a gap,
        and what waited behind it goes on, as at the close. Not at once: a capture can
        show an acknowledgement a little before the data it acknowledges (taken at a
        point between the two, or reordered by the capturing host), so the hole is given
        up at the connection's next segment after it (`HalfStream.acked`), if still open
        then; and an acknowledgement timed before the bytes waiting behind the hole (a
        file whose packets are out of their time order) is not taken. The part of a hole
        beyond the acknowledgement is still waited for."""
        conn = half.conn
        if conn.closed:
            return
        for h in conn.halves:
            if h.acked is not None:
                mark, h.acked = h.acked, None
                self._lost_before(h, mark, ts, frame)
        peer = conn.halves[1 - half.direction]
        nxt = peer.next_seq
        if peer.pending and nxt is not None and 0 < (ack - nxt) & MASK < HALF_SPACE and \
                ts >= peer.pending_ts:
            peer.acked = ack

    def _lost_before(self, half: HalfStream, ack: int, ts: float, frame: int) -> None:
        """The holes of `half` before `ack` (acknowledged, never captured) are gaps."""
        while half.pending:
            nxt = half.next_seq
            if nxt is None:
                return
            rel = (ack - nxt) & MASK
            hole = (half.pending[0][0] - nxt) & MASK
            if not rel or rel >= HALF_SPACE or hole >= HALF_SPACE:
                return
            size = min(rel, hole)
            if size:
                self._gap(half, nxt, size, ts, frame)
                half.next_seq = (nxt + size) & MASK
            self.drain(half, ts, frame)
            if size < hole:
                return

    def flush(self, half: HalfStream, ts: float, frame: int) -> None:
        """End of a direction: pending segments go out with gaps, then any hole before FIN."""
        while half.pending:
            self._skip_hole(half, ts, frame)
        nxt = half.next_seq
        if nxt is not None and half.fin_seq is not None:
            size = (half.fin_seq - nxt) & MASK
            if size and size < HALF_SPACE:
                self._gap(half, nxt, size, ts, frame)
                half.next_seq = half.fin_seq
