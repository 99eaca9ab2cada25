"""The capture loop for pcapng, fused: `PcapngReader.packets`' block loop and the capture
loop's per-packet TCP fast path written out in one (`PacketLoop._run_pcapng`, the loop of
stream.py's `CaptureStream` for a pcapng while `CaptureStream.fused_pcapng` is on).

pcapng is what Wireshark, tshark and dumpcap write, so most users' captures are pcapng.
Read through `CaptureStream._run` they pay a generator resumption and a 7-tuple per
packet, and a timestamp computed for every packet, where most packets (in-order data of a
known flow, pure acks) need none. Here a whole Enhanced Packet Block of a known interface
is read in place with one unpack (type, length, interface, timestamp, lengths), in-order
TCP data of a known flow becomes a `StreamData` right in the loop, pure acks end there,
and a packet's timestamp is computed only when an event needs it (from the raw units and
its interface's resolution and offset, with the reader's own expression).

Everything else is exactly what `PcapngReader.packets()` + `CaptureStream._run` do: any
other block, a refill, damage (the same warnings at the same offsets) go to the reader's
`block`, which `packets()` uses too (section headers, interfaces, statistics, secrets,
simple and obsolete packet blocks, unknown blocks through its `_other`); packets of other
link types and off the fast path go to `CaptureStream._other`. tests/capture/
test_fast_paths.py compares this loop with the general one (`fused_pcapng` off) on pcapng
copies of the recorded captures, every pcapng file of the third-party corpus, and built
files (byte orders, time resolutions and offsets, secrets, damage, mixed link types).
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from tlsprobe.capture.events import (
    CaptureStats,
    ConnKey,
    Event,
    EventIterator,
    StreamData,
    as_data,
)
from tlsprobe.capture.pcap import PacketRecord
from tlsprobe.capture.pcapng import (
    EPB,
    MAX_BLOCK,
    NO_HEAD,
    STOP,
    Interface,
    PcapngReader,
)
from tlsprobe.capture.tcp import ETH_IPV4_TCP, TcpTracker, _new_data

#: a data event's maker: `events.as_data` or a StreamData's
DataMaker = Callable[[tuple[ConnKey | int, int, bytes, float, int]], StreamData]


def _as_packet(record: PacketRecord) -> tuple[int, Interface, int, int, int, int]:
    """A packet record of a block other than an EPB (SPB, PB) in the loop's terms: t,
    an interface whose offset is the record's timestamp (``0 / 1.0 + ts`` is `ts` exactly),
    link type, start, captured length, original length."""
    ts, lt, start, end, orig = record[1], record[2], record[4], record[5], record[6]
    return 0, Interface(lt, 0, 1.0, ts), lt, start, end - start, orig


class PacketLoop(EventIterator):
    """The base of stream.py's `CaptureStream`: what its loops share (events of the
    current packet, the connection tracker, the stats, the packets off the fast path, the
    end) and the fused pcapng loop. A base class rather than a function taking the stream,
    so that stream.py imports this module and not the other way round (no import cycle)
    and, compiled, the loop calls `_other` natively."""

    _out: list[Event]
    _tcp: TcpTracker
    stats: CaptureStats
    plain_data: bool

    def _other(self, lt: int, buf: bytes, start: int, end: int, ts: float,
               frame: int, orig: int) -> None:
        raise NotImplementedError

    def _ending(self, ts: float, frame: int) -> Generator[Event, None, None]:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def _data_events(self) -> tuple[bool, DataMaker]:
        """How the loop's fast path makes a data event: a plain tuple (`plain_data`, then
        told to the tracker too: its own data events alike) or a StreamData; a loop calls
        `maker((conn.key[0] if plain else conn.key, direction, data, ts, frame))`."""
        plain = self._tcp.plain = self.plain_data
        return plain, as_data if plain else _new_data

    def _run_pcapng(self, reader: PcapngReader) -> Generator[Event, None, None]:
        """A pcapng capture's events (`fused_pcapng`); a time is t / rate + offset."""
        out, tcp, stats, fast = self._out, self._tcp, self.stats, ETH_IPV4_TCP
        flows, head, trailer, ifaces = tcp.flows, reader.epb, reader.trailer, reader.interfaces
        (plain, mk), (buf, nxt), held = self._data_events(), reader.window(), tcp.held
        size, nif, iface = len(buf), len(ifaces), Interface(0, 0, 1.0, 0)
        t, pos, frame, in_order = 0, 0, 0, 0
        try:
            while True:
                pos = nxt
                btype, blen, ifid, hi, lo, caplen, orig = head(buf, pos) \
                    if size - pos >= 28 else NO_HEAD
                if btype != EPB or blen < 32 or blen & 3 or blen > MAX_BLOCK or ifid >= nif \
                        or caplen > blen - 32 or size - pos < blen \
                        or trailer(buf, pos + blen - 4)[0] != blen:
                    buf, pos, btype, blen, frame, record = reader.block(buf, pos, frame)
                    if btype == STOP:
                        break
                    head, trailer, ifaces = reader.epb, reader.trailer, reader.interfaces
                    size, nif = len(buf), len(ifaces)
                    if btype != EPB:
                        nxt = pos + blen
                        if record is None:
                            continue
                        t, iface, lt, start, caplen, orig = _as_packet(record)
                    else:
                        btype, blen, ifid, hi, lo, caplen, orig = head(buf, pos)
                nxt = pos + blen
                if btype == EPB:
                    frame += 1
                    iface = ifaces[ifid]
                    iface.packets += 1
                    t, lt, start = (hi << 32) | lo, iface.link_type, pos + 28
                if lt == 1 and caplen >= 54:
                    etype, vihl, total, frag, proto, seq, doff, flags = fast(buf, start)
                    if (etype == 0x0800 and vihl == 0x45 and proto == 6 and doff >= 0x50
                            and not frag & 0x3FFF and 40 <= total <= caplen - 14):
                        l4end = start + 14 + total
                        pstart = start + 34 + ((doff >> 4) << 2)
                        if pstart == l4end and not flags & 7 and not held[0]:
                            continue  # pure ack (while a hole waits: its ack may pass it)
                        if pstart <= l4end:
                            key = buf[start + 26:start + 38]
                            half = flows.get(key)
                            if flags & 7:
                                tcp.control(half, key, seq, flags, buf, start + 26, 4, start + 34,
                                            pstart, l4end, 0, t / iface.rate + iface.offset,
                                            frame)
                            elif half is not None and seq == half.next_seq and pstart < l4end:
                                in_order += 1
                                half.next_seq = (seq + l4end - pstart) & 0xFFFFFFFF
                                conn = half.conn
                                conn.last = frame
                                if half.skip:
                                    half.skipped += l4end - pstart
                                    half.skip_ts = t / iface.rate + iface.offset
                                    half.skip_frame = frame
                                else:
                                    yield mk((conn.key[0] if plain else conn.key, half.direction,
                                              buf[pstart:l4end], t / iface.rate + iface.offset,
                                              frame))
                                if conn.watch:
                                    tcp.settle(half, t / iface.rate + iface.offset, frame, buf,
                                               start + 34)
                            else:
                                tcp.payload(buf, key, start + 26, 4, start + 34, pstart, l4end,
                                            seq, flags, 0, t / iface.rate + iface.offset, frame)
                            while out:
                                yield out.pop(0)
                            continue
                self._other(lt, buf, start, start + caplen, t / iface.rate + iface.offset, frame,
                            orig)
                while out:
                    yield out.pop(0)
            reader.done(pos, frame)  # before the end's events, as `_run`'s reader does
            yield from self._ending(t / iface.rate + iface.offset, frame)
        finally:
            stats.tcp_segments += in_order
            reader.done(pos, frame)  # (stopped early; once only)
            self._release()
