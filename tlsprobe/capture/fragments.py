"""IPv4 and IPv6 fragment reassembly, bounded in datagrams, bytes and capture time.

`decode` (decode.py) hands a fragment over as ``(FRAGMENT_V4 or FRAGMENT_V6, ip_off,
ip_end, depth, frag_at, cut)``; `FragmentTable.add` keeps its bytes under the datagram's key
(addresses, identification and, for IPv4, protocol, as tshark keys them) and, once the
pieces cover the datagram from 0 to the end the last fragment announces, returns the whole
IP packet rebuilt (header with the fragment fields cleared and the total length set) for
`decode` to read like any packet.  Overlapping pieces: the first copy of a byte wins.

Bounds: at most `max_datagrams` datagrams and `max_bytes` bytes wait (the oldest is given
up first), a datagram waits at most `timeout` seconds of capture time (and a fragment
repeated within that time after its datagram was whole is counted as a duplicate), a reassembled
datagram is at most 65,535 bytes of payload (IPv6 jumbograms are not fragmented).  A
datagram given up is counted in `CaptureStats.ip_fragments_incomplete`; when its first
fragment is there, that fragment is still handed back (as tshark's "first fragment" cut,
``cut == -1``) so that the transport header and the bytes it carries are not lost (the
rest is counted in `ip_fragment_bytes_lost`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from tlsprobe.capture.events import AMSDU, FRAGMENT_V4, FRAGMENT_V6, CaptureStats

Decoded6 = tuple[int, int, int, int, int, int]
#: where a reassembled packet goes: (buffer, decoded transport tuple, ts, frame)
Deliver = Callable[[bytes, Decoded6, float, int], None]
MAX_DATAGRAMS: Final = 1024
MAX_BYTES: Final = 8 << 20
TIMEOUT: Final = 60.0
MAX_PAYLOAD: Final = 0xFFFF


class _Datagram:
    __slots__ = ("cut", "first_header", "header", "pieces", "size", "total", "ts")

    def __init__(self, ts: float) -> None:
        self.ts = ts
        self.pieces: list[tuple[int, bytes]] = []  # (offset, bytes) in arrival order
        self.size = 0  # bytes held
        self.total: int | None = None  # payload length, known from the last fragment
        self.header = b""  # IP header to rebuild from (the first fragment's, else any)
        self.first_header = False
        self.cut = False  # a piece was cut short by the snaplen


class FragmentTable:
    """Datagrams being reassembled, oldest first."""

    def __init__(self, stats: CaptureStats, max_datagrams: int = MAX_DATAGRAMS,
                 max_bytes: int = MAX_BYTES, timeout: float = TIMEOUT) -> None:
        self.stats = stats
        self.max_datagrams = max_datagrams
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.held = 0
        self._table: OrderedDict[bytes, _Datagram] = OrderedDict()
        #: datagrams completed lately (key -> time): a fragment repeated after its datagram
        #: was whole is a duplicate, not the start of a datagram that never completes
        self._done: OrderedDict[bytes, float] = OrderedDict()

    def add(self, buf: bytes, r: Decoded6, ts: float,
            given_up: list[bytes]) -> bytes | None:
        """One fragment (as `decode` described it). Returns the reassembled IP packet when
        this fragment completes its datagram, else None. Datagrams given up on the way
        (too old, over the bounds) whose first fragment is known are appended to
        `given_up` as that fragment rebuilt as an unfragmented packet (the caller reads
        it as a first fragment: ``cut == -1``)."""
        kind, off, ip_end, _depth, at, cut = r
        stats = self.stats
        stats.ip_fragments += 1
        if kind == FRAGMENT_V4:
            ihl = (buf[off] & 15) << 2
            field = (buf[off + 6] << 8) | buf[off + 7]
            offset, more = (field & 0x1FFF) << 3, bool(field & 0x2000)
            key = bytes(buf[off + 12:off + 20]) + bytes(buf[off + 9:off + 10]) + \
                bytes(buf[off + 4:off + 6])
            header = bytes(buf[off:off + ihl])
            data = bytes(buf[off + ihl:ip_end])
        else:
            field = (buf[at + 2] << 8) | buf[at + 3]
            offset, more = field & 0xFFF8, bool(field & 1)
            key = bytes(buf[off + 8:off + 40]) + bytes(buf[at + 4:at + 8])
            # the rebuilt packet: fixed header with the fragment's next header, no
            # extension headers before it (the decoder has no use for them)
            header = bytes(buf[off:off + 6]) + bytes(buf[at:at + 1]) + bytes(buf[off + 7:off + 40])
            data = bytes(buf[at + 8:ip_end])
        self._expire(ts, given_up)
        dg = self._table.get(key)
        if dg is None:
            done = self._done.get(key)
            if done is not None and ts - done <= self.timeout:
                stats.ip_fragment_duplicates += 1
                return None
            dg = self._table[key] = _Datagram(ts)
        end = offset + len(data) + max(cut, 0)
        if end > MAX_PAYLOAD:
            self._give_up(key, given_up)
            return None
        if cut > 0:
            dg.cut = True
        if not more:
            dg.total = end
        if offset == 0 or not dg.header:
            dg.header = header
            dg.first_header = offset == 0
        dg.pieces.append((offset, data))
        dg.size += len(data)
        self.held += len(data)
        packet = self._complete(kind, dg)
        if packet is not None:
            self._table.pop(key)
            self.held -= dg.size
            stats.ip_reassembled += 1
            self._done[key] = ts
            self._done.move_to_end(key)
            if len(self._done) > self.max_datagrams:
                self._done.popitem(last=False)
            return packet
        while len(self._table) > self.max_datagrams or self.held > self.max_bytes:
            self._give_up(next(iter(self._table)), given_up)
        return None

    def _complete(self, kind: int, dg: _Datagram) -> bytes | None:
        """The whole packet once the pieces reach from 0 to the announced end."""
        total = dg.total
        if total is None or not dg.first_header:
            return None
        out = bytearray()
        for offset, data in sorted(dg.pieces, key=lambda p: p[0]):
            if offset > len(out):
                if not dg.cut:
                    return None  # a hole: wait for the fragment that fills it
                break
            if offset + len(data) > len(out):
                out += data[len(out) - offset:]
        if len(out) < total and not dg.cut:
            return None
        return _rebuild(kind, dg.header, bytes(out[:total]), total)

    def _expire(self, ts: float, given_up: list[bytes]) -> None:
        table = self._table
        while table:
            key, dg = next(iter(table.items()))
            if ts - dg.ts <= self.timeout:
                break
            self._give_up(key, given_up)

    def _give_up(self, key: bytes, given_up: list[bytes]) -> None:
        dg = self._table.pop(key)
        self.held -= dg.size
        stats = self.stats
        stats.ip_fragments_incomplete += 1
        for offset, data in dg.pieces:
            if offset == 0 and dg.first_header:
                kind = FRAGMENT_V4 if dg.header[0] >> 4 == 4 else FRAGMENT_V6
                given_up.append(_rebuild(kind, dg.header, data, len(data)))
                stats.ip_fragment_bytes_lost += dg.size - len(data)
                return
        stats.ip_fragment_bytes_lost += dg.size

    def read(self, buf: bytes, r: Decoded6, ts: float, frame: int, deliver: Deliver) -> None:
        """A fragment from the packet loop: the datagram it completes, and the first
        fragments of datagrams given up, go to `deliver` once decoded."""
        given_up: list[bytes] = []
        packet = self.add(buf, r, ts, given_up)
        for first in given_up:
            self._first_fragment(first, ts, frame, deliver)
        if packet is None:
            return
        from tlsprobe.capture.decode import ip_any
        whole = ip_any(packet, 0, len(packet), r[3])
        if isinstance(whole, str):
            self.stats.skip(whole)
        elif whole[0] == AMSDU:  # (802.11 in a tunnel in the fragments: rare, said)
            self.stats.skip("wlan_amsdu")
        elif whole[0] < 0:
            self.stats.skip("bad_ip_header")  # a fragment inside a reassembled fragment
        else:
            deliver(packet, whole, ts, frame)

    def _first_fragment(self, packet: bytes, ts: float, frame: int, deliver: Deliver) -> None:
        """The first fragment of a datagram never completed: its transport header and
        bytes are read, the rest is unknown (cut -1)."""
        from tlsprobe.capture.decode import ip_any
        r = ip_any(packet, 0, len(packet), 0)
        if isinstance(r, str):
            self.stats.skip(r)
        elif r[0] >= 0:
            deliver(packet, (*r[:5], -1), ts, frame)

    def finish(self, ts: float, frame: int, deliver: Deliver) -> None:
        """End of the capture: every datagram still waiting is given up (its first
        fragment, when there, delivered)."""
        given_up: list[bytes] = []
        while self._table:
            self._give_up(next(iter(self._table)), given_up)
        for first in given_up:
            self._first_fragment(first, ts, frame, deliver)


def _rebuild(kind: int, header: bytes, payload: bytes, total: int) -> bytes:
    """An unfragmented IP packet: the header with its length set to `total` payload bytes
    (`payload` may be shorter when a piece was cut by the snaplen: the decoder then sees
    a cut packet) and the fragment fields cleared."""
    if kind == FRAGMENT_V4:
        length = len(header) + total
        return header[:2] + bytes((length >> 8, length & 255)) + header[4:6] + b"\x00\x00" + \
            header[8:] + payload
    return header[:4] + bytes((total >> 8, total & 255)) + header[6:] + payload


