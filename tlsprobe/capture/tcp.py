"""TCP connection tracking: which packets belong to which connection, and who is the client.

Flows are looked up by the raw address and port bytes of the packet (one slice, no string
formatting); both directions of a connection have an entry pointing to their `HalfStream`.
Packets without payload and without SYN/FIN/RST return before any lookup, so the acks that
make up half of most captures cost almost nothing.

Client: the SYN sender (the receiver of a SYN+ACK).  For a connection captured mid-stream,
a port pair with one side below 1024 and the other not names the low port the server
(a STARTTLS server speaks first); otherwise the sender of the first payload is the client.
The TLS layer may decide better from content and call `swap(conn_id)`.

A SYN on a 4-tuple whose connection is closed, or with another initial sequence number,
starts a new connection.  Closed connections are remembered for a while (the newest
``max_closed`` of them) so that late retransmissions do not look like new connections.
A RST closes a connection that carried data only after `RST_LINGER` seconds of capture
time (or its peer's FIN or RST): the peer's bytes still in flight are read.

Open connections are evicted to keep memory flat in their number: see eviction.py.
"""

from __future__ import annotations

import socket
import struct
from collections import OrderedDict, deque
from collections.abc import Callable
from functools import partial
from socket import AF_INET, AF_INET6, inet_ntop
from typing import Final

from tlsprobe.capture.events import (
    CaptureStats,
    ConnKey,
    Event,
    StreamClose,
    StreamData,
    StreamOpen,
    StreamSkipped,
    as_data,
)
from tlsprobe.capture.eviction import IDLE_TIMEOUT, IDLE_TIMEOUT_DATA, Eviction
from tlsprobe.capture.reassembly import MASK, Connection, HalfStream

FIN: Final = 0x01
SYN: Final = 0x02
RST: Final = 0x04
ACK: Final = 0x10
# (typed as ints: compiled, what they unpack is then used unboxed)
_TCP: Final[Callable[[bytes, int], tuple[int, int, int]]] = \
    struct.Struct("!4xI4xBB").unpack_from  # seq, data offset byte, flags
_PORTS: Final[Callable[[bytes, int], tuple[int, int]]] = struct.Struct("!HH").unpack_from
_ACK_NO: Final[Callable[[bytes, int], tuple[int]]] = struct.Struct("!I").unpack_from
# Ethernet + IPv4 + TCP at once, for the capture loops' fast path (stream.py, ngloop.py):
# EtherType, version/IHL, total length, flags/fragment offset, protocol, sequence number,
# data offset, TCP flags. Its result typed as ints: compiled, the loops then test and add
# native integers, where unpacked objects were compared by a generic call each, with every
# constant boxed (eleven a packet).
ETH_IPV4_TCP: Final[Callable[[bytes, int], tuple[int, int, int, int, int, int, int, int]]] = \
    struct.Struct("!12xHBxH2xHxB2x8x4xI4xBB").unpack_from
# NamedTuple(...) without the Python-level __new__: these are made per packet or
# connection, as ``_new(StreamOpen, (key, ts, frame))`` (through a functools.partial of it,
# each made some 280 instructions more: the partial's own call and argument tuple)
_new: Final = tuple.__new__
#: a StreamData, where a variable chooses between it and `events.as_data` (the loops)
_new_data = partial(tuple.__new__, StreamData)


RST_LINGER: Final = 2.0  # seconds of capture time a reset connection still takes in-flight data


def _carried_data(conn: Connection) -> bool:
    """Whether either direction sent payload (or was seen mid-stream): a connection reset
    before any data has nothing in flight worth waiting for."""
    for half in conn.halves:
        if half.next_seq is not None and (half.isn is None or
                                          half.next_seq != (half.isn + 1) & MASK):
            return True
        if half.pending:
            return True
    return False


def ip_text(raw: bytes) -> str:
    """Address as tshark prints it (IPv6 compressed, no brackets)."""
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


class TcpTracker(Eviction):
    """Turns decoded TCP segments into stream events appended to `out`."""

    def __init__(self, stats: CaptureStats, out: list[Event], *, max_pending_bytes: int,
                 max_total_pending_bytes: int, max_connections: int, max_closed: int,
                 idle_timeout: float = IDLE_TIMEOUT,
                 idle_timeout_data: float = IDLE_TIMEOUT_DATA) -> None:
        super().__init__(stats, out, max_pending_bytes, max_total_pending_bytes)
        self.max_connections = max(1, max_connections)
        self.max_closed = max(0, max_closed)
        self.flows: dict[bytes, HalfStream] = {}
        self.open: dict[int, Connection] = {}  # id -> connection, creation order
        self.closed: OrderedDict[int, Connection] = OrderedDict()  # oldest first
        self._next_id = 0
        self._texts: dict[bytes, str] = {}
        self._resets: deque[Connection] = deque()  # reset connections still open, by RST
        self.init_eviction(idle_timeout, idle_timeout_data)

    # -- per packet -----------------------------------------------------------------------
    def segment(self, buf: bytes, addr_off: int, alen: int, l4: int, l4end: int, cut: int,
                ts: float, frame: int) -> None:
        """One TCP segment whose header starts at buf[l4]."""
        if l4end - l4 < 20:
            self.stats.skip("truncated")
            return
        seq, doff, flags = _TCP(buf, l4)
        if doff < 0x50:
            self.stats.skip("bad_tcp_header")
            return
        pstart = l4 + ((doff >> 4) << 2)
        if cut:
            if cut < 0:
                self.stats.ip_first_fragments += 1
                cut = 0
            else:
                self.stats.snaplen_cut += 1
        if pstart >= l4end:
            if pstart > l4end:
                self.stats.skip("truncated" if cut else "bad_tcp_header")
                return
            if not flags & 7 and not cut and not self.held[0]:
                return  # pure ack: nothing to deliver (while a hole waits: `payload`)
        if addr_off + alen + alen == l4:
            key = buf[addr_off:l4 + 4]
        else:
            key = buf[addr_off:addr_off + alen + alen] + buf[l4:l4 + 4]
        self.payload(buf, key, addr_off, alen, l4, pstart, l4end, seq, flags, cut, ts, frame)

    def payload(self, buf: bytes, key: bytes, addr_off: int, alen: int, l4: int, pstart: int,
                l4end: int, seq: int, flags: int, cut: int, ts: float, frame: int) -> None:
        """A segment worth looking at (payload, SYN, FIN or RST) of the flow `key`
        (source address, destination address, source port, destination port, raw)."""
        half = self.flows.get(key)
        if pstart == l4end and not flags & 7 and not cut:  # a pure ack while a hole waits
            if half is not None and not half.conn.closed and buf[l4 + 13] & ACK:
                self.acked(half, _ACK_NO(buf, l4 + 8)[0], ts, frame)
                self.settle(half, ts, frame, buf, -1)
            return
        if half is None or flags & 7:
            self.control(half, key, seq, flags, buf, addr_off, alen, l4, pstart, l4end, cut,
                         ts, frame)
            return
        conn = half.conn
        conn.last = frame
        self.stats.tcp_segments += 1
        if seq == half.next_seq and not cut:
            half.next_seq = (seq + l4end - pstart) & MASK
            if half.skip:
                half.skipped += l4end - pstart
                half.skip_ts, half.skip_frame = ts, frame
            elif self.plain:
                self.out.append(as_data((conn.key[0], half.direction, buf[pstart:l4end], ts,
                                         frame)))
            else:
                self.out.append(_new(StreamData, (conn.key, half.direction, buf[pstart:l4end],
                                                  ts, frame)))
            if conn.watch:
                self.settle(half, ts, frame, buf, l4)
            return
        self.data(half, seq, buf[pstart:l4end], cut, ts, frame)
        if conn.watch and buf[l4 + 13] & ACK:
            self.acked(half, _ACK_NO(buf, l4 + 8)[0], ts, frame)
        if conn.closing and conn.halves[0].complete and conn.halves[1].complete:
            self.close(conn, "fin", ts, frame)

    def settle(self, half: HalfStream, ts: float, frame: int, buf: bytes, l4: int) -> None:
        """After in-order bytes of a watched connection (`Connection.watch`; the segment's
        TCP header at buf[l4], -1: its ack already taken): deliver what waited behind
        them; take its acknowledgement past a hole of the peer's (`acked`); close a
        connection whose two FINs have now been reached; stop watching one that holds
        nothing."""
        if half.pending:
            self.drain(half, ts, frame)
        if l4 >= 0 and buf[l4 + 13] & ACK:
            self.acked(half, _ACK_NO(buf, l4 + 8)[0], ts, frame)
        conn = half.conn
        if conn.closing:
            if conn.halves[0].complete and conn.halves[1].complete:
                self.close(conn, "fin", ts, frame)
        elif not (conn.halves[0].pending or conn.halves[1].pending):
            conn.watch = False

    def control(self, half: HalfStream | None, key: bytes, seq: int, flags: int, buf: bytes,
                addr_off: int, alen: int, l4: int, pstart: int, l4end: int, cut: int,
                ts: float, frame: int) -> None:
        """Segments with SYN, FIN or RST, and the first segment of an unknown flow (`half`:
        the flow's entry, None when unknown)."""
        if self._resets:  # `_sweep_resets` when its first connection is due (most often not)
            head = self._resets[0]
            if head.closed or head.reset is None or ts - head.reset[0] > RST_LINGER:
                self._sweep_resets(ts)
        data = buf[pstart:l4end]
        if flags & SYN:
            if flags & RST:
                self.stats.skip("tcp_syn_rst")
                return
            if half is not None and not self._same_syn(half, seq, flags, _ACK_NO(buf, l4 + 8)[0]):
                if not half.conn.closed:
                    self.close(half.conn, "reused", ts, frame)
                half = None
            if half is None:
                half = self._open(key, buf, addr_off, alen, l4, flags, ts, frame)
            if half.isn is None:
                half.isn = seq
                if half.next_seq is None:
                    half.next_seq = (seq + 1) & MASK
            else:
                self.stats.tcp_retransmissions += 1  # the same SYN again
            seq = (seq + 1) & MASK  # the SYN takes one sequence number; TFO data follows
        elif half is None:
            if flags & (RST | FIN) or not (data or cut):
                self.stats.skip("tcp_without_connection")
                return
            half = self._open(key, buf, addr_off, alen, l4, flags, ts, frame)
        conn = half.conn
        conn.last = frame
        if conn.closed:
            if data or cut:
                self.stats.tcp_after_close += 1
            return
        if (data or cut) and not flags & RST:  # text in a RST is not stream data
            self.stats.tcp_segments += 1
            self.data(half, seq, data, cut, ts, frame)
        if conn.watch and flags & ACK:
            self.acked(half, _ACK_NO(buf, l4 + 8)[0], ts, frame)
        if flags & RST:
            self._rst(conn, half, ts, frame)
            return
        if flags & FIN and conn.reset is not None:  # the peer of a RST ends too
            self.close(conn, "rst", ts, frame)
            return
        if flags & FIN:
            fin = (seq + len(data) + cut) & MASK
            if half.next_seq is None:
                half.next_seq = fin
            half.fin_seq = fin
            other = conn.halves[1 - half.direction]
            if other.fin_seq is not None:
                conn.closing = conn.watch = True
        if conn.closing and conn.halves[0].complete and conn.halves[1].complete:
            self.close(conn, "fin", ts, frame)

    def _rst(self, conn: Connection, half: HalfStream, ts: float, frame: int) -> None:
        """A RST. Bytes its peer had already sent are still in flight and often captured
        after it (a client that resets after the ServerHello: the certificate and key
        exchange follow), so a connection that carried data stays open for `RST_LINGER`
        seconds of capture time, or until its peer also sends FIN or RST, to read them
        (as tshark does); then it closes as "rst" with the RST's time and frame."""
        peer = conn.halves[1 - half.direction]
        if conn.reset is not None and conn.reset_by == half.direction:
            return  # the same side again (it answers each segment still coming with a RST)
        if conn.reset is not None or peer.fin_seq is not None and peer.complete or \
                not _carried_data(conn):
            self.close(conn, "rst", ts, frame)
            return
        conn.reset = (ts, frame)
        conn.reset_by = half.direction
        if half.pending:
            self.flush(half, ts, frame)
        self._resets.append(conn)

    def tick(self, ts: float, frame: int) -> None:
        """Capture time reached `ts` with no packet (a live capture idle): the reset
        connections whose linger is over close now, not at the next SYN, FIN or RST (a
        client that reset a failed handshake on a quiet link was reported only when the
        capture stopped). `frame`: the last packet's number."""
        if self._resets:
            self._sweep_resets(ts)

    def _sweep_resets(self, ts: float) -> None:
        """Close the reset connections whose linger time has passed."""
        resets = self._resets
        while resets:
            conn = resets[0]
            reset = conn.reset
            if not conn.closed and reset is not None and ts - reset[0] <= RST_LINGER:
                return
            resets.popleft()
            if not conn.closed and reset is not None:
                self.close(conn, "rst", *reset)

    def _same_syn(self, half: HalfStream, seq: int, flags: int, ack: int) -> bool:
        """Whether a SYN belongs to the connection this flow maps to (else: a new one)."""
        conn = half.conn
        if conn.closed:
            return False
        if half.isn is None:
            return half.next_seq is None or half.next_seq == (seq + 1) & MASK
        if seq == half.isn:
            return True
        if flags & ACK:
            # Another SYN+ACK answering the same SYN with a new ISN (seen behind some
            # middleboxes): same connection; the latest ISN counts until data flows.
            peer = conn.halves[1 - half.direction]
            if peer.isn is not None and ack == (peer.isn + 1) & MASK:
                if half.next_seq == (half.isn + 1) & MASK and not half.pending:
                    half.isn = seq
                    half.next_seq = (seq + 1) & MASK
                return True
        return False

    # -- connections ----------------------------------------------------------------------
    def _open(self, key: bytes, buf: bytes, addr_off: int, alen: int, l4: int, flags: int,
              ts: float, frame: int) -> HalfStream:
        # eviction.py's sweep and eviction, their cheap tests written out (per connection)
        opened = self._opened_since_sweep = self._opened_since_sweep + 1
        if ts >= self._sweep_at and opened > len(self.open) >> 3:
            self._sweep(ts, frame)
        if len(self.open) >= self._evict_at:
            self._evict(ts, frame)
        two = alen + alen
        src_raw = key[:alen]
        dst_raw = key[alen:two]
        sport, dport = _PORTS(key, two)
        reverse = dst_raw + src_raw + key[two + 2:] + key[two:two + 2]
        if flags & SYN:
            sender_is_client = not flags & ACK
        elif (sport < 1024) != (dport < 1024):
            sender_is_client = dport < 1024
        else:
            sender_is_client = True
        texts = self._texts  # addresses repeat: their text is remembered
        src = texts.get(src_raw)
        if src is None:
            if len(texts) >= 8192:  # bounded: a scan has as many addresses as flows
                texts.clear()
            src = texts[src_raw] = inet_ntop(AF_INET if alen == 4 else AF_INET6, src_raw)
        dst = texts.get(dst_raw)
        if dst is None:
            dst = texts[dst_raw] = inet_ntop(AF_INET if alen == 4 else AF_INET6, dst_raw)
        cid = self._next_id
        self._next_id = cid + 1
        if sender_is_client:
            ckey = _new(ConnKey, (cid, src, sport, dst, dport))
            conn = Connection(ckey, (key, reverse), frame)
            sent, received = conn.halves
        else:
            ckey = _new(ConnKey, (cid, dst, dport, src, sport))
            conn = Connection(ckey, (key, reverse), frame)
            received, sent = conn.halves
        self.flows[key] = sent
        self.flows[reverse] = received
        self.open[cid] = conn
        self.stats.tcp_connections += 1
        self.out.append(_new(StreamOpen, (ckey, ts, frame)))
        return sent

    def close(self, conn: Connection, reason: str, ts: float, frame: int,
              remember: bool = True) -> None:
        """Flush both directions (gaps for what never came) and emit StreamClose (a
        connection that was reset closes as "rst" at its RST, whatever ends it); the
        connection is remembered among the closed ones unless `remember` is False."""
        if conn.closed:
            return
        if conn.reset is not None:
            reason = "rst"
            ts, frame = conn.reset
        out = self.out
        # the directions in the order of the first guess, however often `swap` turned the
        # connection round: what the close emits does not depend on when the reader
        # decided (pipe.py's reader process never hears of a swap)
        for half in conn.halves[::-1] if conn.swapped else conn.halves:
            if half.pending or half.fin_seq is not None and half.next_seq is not None and \
                    half.next_seq != half.fin_seq:
                self.flush(half, ts, frame)
            half.next_seq = None
            if half.skipped or half.skip_gaps:  # its StreamSkipped: what it counted
                out.append(_new(StreamSkipped, (conn.key, half.direction, half.skipped,
                                                half.skip_gaps, half.skip_ts, half.skip_frame)))
                half.skipped = half.skip_gaps = 0
        conn.closed = True
        key = conn.key
        out.append(_new(StreamClose, (key, reason, ts, frame)))
        cid = key[0]  # key.id (a NamedTuple's field by name: a descriptor call)
        self.open.pop(cid, None)
        if self.max_closed and remember:
            closed = self.closed
            closed[cid] = conn
            if len(closed) > self.max_closed:
                self._forget(closed.popitem(False)[1])  # the oldest
        else:
            self._forget(conn)

    def _forget(self, conn: Connection) -> None:
        """Drop a connection's flow entries (unless a newer connection took the 4-tuple)."""
        for key in conn.flow_keys:
            current = self.flows.get(key)
            if current is not None and current.conn is conn:
                del self.flows[key]
        conn.halves = ()  # the halves point back at it: no cycle left for the collector

    def finish(self, ts: float, frame: int) -> None:
        """End of the capture: close what is still open, in order of appearance."""
        for conn in list(self.open.values()):
            self.close(conn, "fin" if conn.closing else "end", ts, frame)

    def release(self) -> None:
        """Drop every connection's state (the capture is done with, maybe early). The
        halves point back at their connection: the cycles are cut here, so that the
        memory goes now rather than in a collection (at exit: a scan of all of them)."""
        for table in (self.open, self.closed):
            for conn in table.values():
                conn.halves = ()
        self._resets.clear()
        self.flows.clear()
        self.open.clear()
        self.closed.clear()
        self._texts.clear()
        self._marks.clear()
        self.held[0] = 0

    def ignore(self, conn_id: int) -> bool:
        """Stop delivering a connection's bytes: from now on they are counted (sequence
        numbers still followed, so retransmissions and holes count right) and reported in
        one StreamSkipped per direction when the connection closes. False if not open."""
        conn = self.open.get(conn_id)
        if conn is None:
            return False
        for half in conn.halves:
            half.skip = True
        return True

    def swap(self, conn_id: int) -> ConnKey | None:
        """Exchange client and server of a connection; later events use the new key."""
        conn = self.open.get(conn_id) or self.closed.get(conn_id)
        if conn is None:
            return None
        conn.key = conn.key.swapped()
        conn.swapped = not conn.swapped
        conn.reset_by = 1 - conn.reset_by  # a direction number too: the same side as before
        h0, h1 = conn.halves
        h0.direction, h1.direction = 1, 0
        conn.halves = (h1, h0)
        return conn.key
