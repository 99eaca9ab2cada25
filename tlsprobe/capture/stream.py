"""The capture layer's entry point: a capture file in, ordered stream events out.

`iter_stream_events(source)` opens the input (format by magic, gzip by magic, ``-`` for
stdin), then reads it packet by packet: container -> link layer/IP/tunnels (decode.py) ->
TCP reassembly (tcp.py) or one `Datagram` per UDP payload.  Events for one packet are
collected in a list and handed out before the next packet is read, so the caller may act
between events, e.g. `swap_direction` when content shows the client is the other side.
The loops (see "the loop" below): `_run` for any container; for speed, `_run_pcap` for a
classic pcap of Ethernet frames and ngloop.py's `_run_pcapng` (the base class's) for pcapng.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator
from typing import ClassVar, Final

from tlsprobe.capture.decode import amsdu_packets, decode, ether
from tlsprobe.capture.events import (
    AMSDU,
    SECRETS_TLS_KEYLOG,
    CaptureStats,
    ConnKey,
    Datagram,
    Event,
    Secrets,
    StreamClose,
    StreamData,
    StreamGap,
    StreamOpen,
    as_data,
)
from tlsprobe.capture.fragments import FragmentTable
from tlsprobe.capture.live import LiveCapture
from tlsprobe.capture.netmon import NetmonReader
from tlsprobe.capture.ngloop import PacketLoop
from tlsprobe.capture.pcap import TICK_RECORD, PacketRecord, PcapReader, quiet_ticks
from tlsprobe.capture.pcapng import SECRETS_RECORD, PcapngReader
from tlsprobe.capture.readers import open_reader
from tlsprobe.capture.source import CaptureSource
from tlsprobe.capture.tcp import ETH_IPV4_TCP, TcpTracker, ip_text

DEFAULT_MAX_PENDING_BYTES: Final = 1 << 20
DEFAULT_MAX_TOTAL_PENDING_BYTES: Final = 64 << 20
DEFAULT_MAX_CONNECTIONS: Final = 65536
DEFAULT_MAX_CLOSED: Final = 4096
_UDP: Final = struct.Struct("!HHH").unpack_from


def keylog_text(secrets: list[Secrets]) -> bytes:
    """The TLS key-log text of these Decryption Secrets Blocks (each ends with a newline)."""
    parts = [s.data if s.data.endswith(b"\n") else s.data + b"\n"
             for s in secrets if s.secrets_type == SECRETS_TLS_KEYLOG]
    return b"".join(parts)


class CaptureStream(PacketLoop):
    """Iterator of `Event`s over one capture, with `stats` and `secrets` alongside.

    Use as ``for event in iter_stream_events(path): ...``; a context manager closes the
    input early. `stats` is complete once the iterator is exhausted."""

    #: a classic pcap of Ethernet frames is read by `_run_pcap` (see "the loop" below);
    #: False: by `_run` like any other capture (the tests compare the two)
    fused_pcap: ClassVar[bool] = True
    #: a pcapng is read by ngloop.py's `_run_pcapng`, the same fusion for its blocks;
    #: False: by `_run` (the tests compare the two)
    fused_pcapng: ClassVar[bool] = True

    def __init__(self, source: CaptureSource | LiveCapture, *, max_pending_bytes: int,
                 max_total_pending_bytes: int, max_connections: int, max_closed: int,
                 udp: bool) -> None:
        self.stats = CaptureStats()
        self.source = source
        self._reader, self._opened = open_reader(source, self.stats)
        self.name = self._opened.name
        self._out: list[Event] = []
        #: events of the current packet made but not handed out yet (pipe.py reads its length)
        self.queued = self._out
        #: set before iterating: a data event comes as a plain tuple, StreamData's fields
        #: with the connection's id in the key's place (`events.as_data`; the analyzer reads
        #: it by position and asks `key_of` for the key when it needs it), as pipe.py's
        #: PipedStream hands them out; a StreamData costs some 1,600 instructions more
        self.plain_data = False
        self._udp_enabled = udp
        self._ip_cache: dict[bytes, str] = {}
        self._tcp = TcpTracker(self.stats, self._out, max_pending_bytes=max_pending_bytes,
                               max_total_pending_bytes=max_total_pending_bytes,
                               max_connections=max_connections, max_closed=max_closed)
        self._frags = FragmentTable(self.stats)
        reader = self._reader  # pcap of Ethernet frames, pcapng: their own loops
        if isinstance(reader, PcapReader):   # a live input's idle time ticks (stdin, --follow)
            reader.quiet = reader.input_quiet
        if self.fused_pcap and isinstance(reader, PcapReader) and reader.link_type == 1:
            self._gen = self._run_pcap(reader)
        elif self.fused_pcapng and isinstance(reader, PcapngReader):
            self._gen = self._run_pcapng(reader)
        else:
            self._gen = self._run()

    # -- public surface -------------------------------------------------------------------
    @property
    def secrets(self) -> list[Secrets]:
        """Decryption Secrets Blocks read so far (pcapng only)."""
        return self._reader.secrets

    def tls_keylog(self) -> bytes:
        """The TLS key-log text of all Decryption Secrets Blocks read so far."""
        return keylog_text(self.secrets)

    def swap_direction(self, conn: ConnKey | int) -> ConnKey | None:
        """Exchange client and server of a connection (e.g. the ClientHello came from the
        side taken for the server). Events not yet handed out, and all later ones, carry
        the new key and flipped directions. Returns the new key (None if unknown)."""
        cid = conn if isinstance(conn, int) else conn.id
        new = self._tcp.swap(cid)
        if new is None:
            return None
        out = self._out  # events of the current packet not handed out yet
        for i, ev in enumerate(out):
            if type(ev) is tuple:  # a plain data event (`plain_data`): holds the id only
                if ev[0] == cid:
                    out[i] = as_data((cid, 1 - ev[1], ev[2], ev[3], ev[4]))
            elif isinstance(ev, (StreamData, StreamGap)) and ev.conn.id == cid:
                out[i] = ev._replace(conn=new, direction=1 - ev.direction)
            elif isinstance(ev, (StreamOpen, StreamClose)) and ev.conn.id == cid:
                out[i] = ev._replace(conn=new)
        return new

    def key_of(self, cid: int) -> ConnKey:
        """The key of the connection of a data event being handed out, as its events come
        now (turned round if swapped): for a `plain_data` event, which holds only the id."""
        tcp = self._tcp
        conn = tcp.open.get(cid) or tcp.closed.get(cid)
        if conn is not None:
            return conn.key
        # closed and forgotten while this packet's events were made (an eviction or the
        # end closing more than the closed table keeps, or none kept): its close is queued
        for ev in self._out:
            if type(ev) is StreamClose and ev.conn.id == cid:
                return ev.conn
        raise KeyError(cid)

    def ignore(self, conn: ConnKey | int) -> bool:
        """Stop delivering a connection's bytes (e.g. its handshake is over and nothing
        more is to be read from it): its later segments are only counted, on the per-packet
        fast path, and each direction's totals come in one `StreamSkipped` just before its
        `StreamClose`. Events already queued for the current packet still come. Returns
        False when the connection is not open."""
        return self._tcp.ignore(conn if isinstance(conn, int) else conn.id)

    def on_sync(self, sync: Callable[[], None]) -> None:
        """Call `sync` before the connection tracker chooses by the ignored connections
        (pipe.py's reader process asks its caller which those are)."""
        self._tcp.sync_ignored = sync

    def close(self) -> None:
        self._gen.close()
        self._opened.close()
        self._tcp.release()  # stopped early: the connection table goes now

    # -- the loop -------------------------------------------------------------------------
    # One record loop per container (PcapReader.packets, PcapngReader.packets,
    # NetmonReader.packets) feeds `_run`: per packet, the fast path for Ethernet + IPv4 +
    # TCP (no IP options or fragments) turns in-order data of a known flow into a StreamData
    # (or only counts it for an ignored connection) right there, ends pure acks there, and
    # hands other TCP segments to the tracker; everything else goes through `_other`.
    #
    # Two exceptions, kept for speed, for the two common containers: `_run_pcap` for a
    # classic pcap of Ethernet frames writes `PcapReader.packets`' record loop and `_run`'s
    # fast path out in one (no generator between the file and the loop, no timestamp
    # computed for a packet that yields no event; through `_run` instead, about 12 % more
    # CPU time in the capture layer, 5 % of `tlsprobe pcap`'s, on benchmarks/pcap.py's
    # capture), and ngloop.py's `_run_pcapng` (the base class's) does the same for
    # pcapng's blocks. Both must give exactly `_run`'s events and stats:
    # tests/capture/test_fast_paths.py compares them with it (`fused_pcap`,
    # `fused_pcapng` off) on the recorded captures, the third-party corpus and built files.
    def _run(self) -> Generator[Event, None, None]:
        out = self._out
        tcp = self._tcp
        flows, held = tcp.flows, tcp.held
        fast = ETH_IPV4_TCP
        plain, mk = self._data_events()
        packets: Generator[PacketRecord, None, None] = self._reader.packets()
        ts, frame = 0.0, 0
        in_order = 0  # segments delivered (or counted) on the fast path
        try:
            for frame, ts, lt, buf, start, end, orig in packets:
                if lt == 1 and end - start >= 54:
                    etype, vihl, total, frag, proto, seq, doff, flags = fast(buf, start)
                    if (etype == 0x0800 and vihl == 0x45 and proto == 6 and doff >= 0x50
                            and not frag & 0x3FFF and 40 <= total <= end - start - 14):
                        l4end = start + 14 + total
                        pstart = start + 34 + ((doff >> 4) << 2)
                        if pstart == l4end and not flags & 7 and not held[0]:
                            continue  # pure ack (while a hole waits: its ack may pass it)
                        if pstart <= l4end:
                            key = buf[start + 26:start + 38]
                            if not flags & 7:
                                half = flows.get(key)
                                if half is not None and seq == half.next_seq and pstart < l4end:
                                    in_order += 1
                                    half.next_seq = (seq + l4end - pstart) & 0xFFFFFFFF
                                    conn = half.conn
                                    conn.last = frame
                                    if half.skip:
                                        half.skipped += l4end - pstart
                                        half.skip_ts = ts
                                        half.skip_frame = frame
                                    else:
                                        yield mk((conn.key[0] if plain else conn.key,
                                                  half.direction, buf[pstart:l4end], ts, frame))
                                    if conn.watch:
                                        tcp.settle(half, ts, frame, buf, start + 34)
                                        while out:
                                            yield out.pop(0)
                                    continue
                            tcp.payload(buf, key, start + 26, 4, start + 34, pstart, l4end, seq,
                                    flags, 0, ts, frame)
                            while out:
                                yield out.pop(0)
                            continue
                self._other(lt, buf, start, end, ts, frame, orig)
                while out:
                    yield out.pop(0)
            yield from self._ending(ts, frame)
        finally:
            self.stats.tcp_segments += in_order
            packets.close()  # runs the reader's final accounting
            self._release()

    def _run_pcap(self, reader: PcapReader) -> Generator[Event, None, None]:
        """The loop for a classic pcap of Ethernet frames, reading its records in place."""
        out = self._out
        tcp = self._tcp
        flows, held = tcp.flows, tcp.held
        fast = ETH_IPV4_TCP
        rec_len, unpack, scale, limit = reader.rec_len, reader.unpack, reader.scale, reader.limit
        plain, mk = self._data_events()
        buf, pos, end = reader.window()
        sec = frac = psec = pfrac = frame = in_order = 0
        try:
            while True:
                psec, pfrac = sec, frac  # the last packet's, when this record is not one
                if end - pos < rec_len:
                    yield from self._idle(reader, sec + frac * scale, frame)
                    got = reader.header_at(pos)
                    if got is None:
                        break
                    buf, pos, end = got
                sec, frac, incl, orig = unpack(buf, pos)
                if incl > limit:
                    reader.too_long(pos, incl)
                    break
                start = pos + rec_len
                if start + incl > end:
                    got = reader.record_at(pos, incl)
                    if got is None:
                        break
                    buf, pos, end = got
                    start = pos + rec_len
                pos = start + incl
                frame += 1
                if incl >= 54:
                    etype, vihl, total, frag, proto, seq, doff, flags = fast(buf, start)
                    if (etype == 0x0800 and vihl == 0x45 and proto == 6 and doff >= 0x50
                            and not frag & 0x3FFF and 40 <= total <= incl - 14):
                        l4end = start + 14 + total
                        pstart = start + 34 + ((doff >> 4) << 2)
                        if pstart == l4end and not flags & 7 and not held[0]:
                            continue  # pure ack (while a hole waits: its ack may pass it)
                        if pstart <= l4end:
                            key = buf[start + 26:start + 38]
                            half = flows.get(key)
                            if flags & 7:
                                tcp.control(half, key, seq, flags, buf, start + 26, 4, start + 34,
                                        pstart, l4end, 0, sec + frac * scale, frame)
                            elif half is not None and seq == half.next_seq and pstart < l4end:
                                in_order += 1
                                half.next_seq = (seq + l4end - pstart) & 0xFFFFFFFF
                                conn = half.conn
                                conn.last = frame
                                if half.skip:
                                    half.skipped += l4end - pstart
                                    half.skip_ts = sec + frac * scale
                                    half.skip_frame = frame
                                else:
                                    yield mk((conn.key[0] if plain else conn.key, half.direction,
                                              buf[pstart:l4end], sec + frac * scale, frame))
                                if not conn.watch:
                                    continue
                                tcp.settle(half, sec + frac * scale, frame, buf, start + 34)
                            else:
                                tcp.payload(buf, key, start + 26, 4, start + 34, pstart, l4end,
                                        seq, flags, 0, sec + frac * scale, frame)
                            while out:
                                yield out.pop(0)
                            continue
                if not orig and not (sec or frac or incl):  # off the fast path only
                    frame -= 1
                    pos = start - rec_len
                    reader.zeros(pos)
                    break
                self._other(1, buf, start, pos, sec + frac * scale, frame, orig)
                while out:
                    yield out.pop(0)
            yield from self._ending(psec + pfrac * scale, frame)
        finally:
            self.stats.tcp_segments += in_order
            reader.done(pos, frame)
            self._release()

    def _idle(self, reader: PcapReader, ts: float, frame: int) -> Generator[Event, None, None]:
        """Between records of a live input (stdin, --follow) that gives nothing: the
        capture's time goes on from the last packet's (`ts`) with the clock, and the reset
        connections whose linger is over close (pcap.quiet_ticks)."""
        if reader.quiet is None or not frame:
            return
        out = self._out
        for tick in quiet_ticks(reader.quiet, ts, frame):
            self._tcp.tick(tick[6] * 1e-6, frame)
            while out:
                yield out.pop(0)

    def _ending(self, ts: float, frame: int) -> Generator[Event, None, None]:
        """The end of the capture: IP fragments never completed, connections still open."""
        self._frags.finish(ts, frame, self._transport)
        self._tcp.finish(ts, frame)
        out = self._out
        while out:
            yield out.pop(0)

    def _release(self) -> None:
        """The loop is over (at the end, or stopped early): final stats, input and
        connection table released."""
        self._finish_stats()
        self._opened.close()
        self._tcp.release()

    def _other(self, lt: int, buf: bytes, start: int, end: int, ts: float,
               frame: int, orig: int) -> None:
        """A packet off the fast path: any link type, IPv6, tunnels, fragments, UDP, odd
        TCP. `orig`: the packet's length on the wire (more than ``end - start`` when the
        snaplen cut it)."""
        if lt == SECRETS_RECORD:
            self._out.append(self._reader.secrets[-1])
            return
        if lt == TICK_RECORD:   # a live capture idle: `orig` is now, in microseconds
            self._tcp.tick(orig * 1e-6, frame)
            return
        r = ether(buf, start, end, 0) if lt == 1 else decode(lt, buf, start, end)
        if isinstance(r, str):
            skipped = self.stats.skipped
            skipped[r] = skipped.get(r, 0) + 1
            return
        self._packet(buf, r, orig - (end - start), ts, frame)

    def _packet(self, buf: bytes, r: tuple[int, int, int, int, int, int], snapcut: int,
                ts: float, frame: int) -> None:
        """A decoded packet (`snapcut`: the bytes of its frame the snaplen left out)."""
        proto, addr_off, alen, l4, l4end, cut = r
        if cut > 0 and cut > snapcut:
            # the IP length claims more than the frame held on the wire: not a snaplen cut
            # (tshark reads the bytes that are there); only the snaplen's share is a gap
            self.stats.ip_length_exceeds_packet += 1
            r = (proto, addr_off, alen, l4, l4end, max(0, snapcut))
        if proto == AMSDU:  # several packets in one 802.11 frame: each read
            for sub in amsdu_packets(buf, addr_off, alen, l4):
                if isinstance(sub, str):
                    self.stats.skip(sub)
                else:
                    self._packet(buf, sub, snapcut, ts, frame)
            return
        if proto < 0:  # an IP fragment
            self._frags.read(buf, r, ts, frame, self._transport)
            return
        self._transport(buf, r, ts, frame)

    def _transport(self, buf: bytes, r: tuple[int, int, int, int, int, int], ts: float,
                   frame: int) -> None:
        proto, addr_off, alen, l4, l4end, cut = r
        if proto == 6:
            self._tcp.segment(buf, addr_off, alen, l4, l4end, cut, ts, frame)
        elif proto == 17 and self._udp_enabled:
            self._udp(buf, addr_off, alen, l4, l4end, cut, ts, frame)

    def _finish_stats(self) -> None:
        reader = self._reader
        if isinstance(reader, PcapReader):
            if self.stats.packets and reader.link_type >= 0:
                self.stats.link_types = {reader.link_type: self.stats.packets}
        elif isinstance(reader, NetmonReader):
            self.stats.link_types = dict(reader.link_types)
        else:
            self.stats.link_types = {k: v for k, v in reader.link_types.items() if v}

    def _udp(self, buf: bytes, addr_off: int, alen: int, l4: int, l4end: int, cut: int,
             ts: float, frame: int) -> None:
        stats = self.stats
        avail = l4end - l4
        if avail < 8:
            stats.skip("truncated")
            return
        sport, dport, ulen = _UDP(buf, l4)
        if cut < 0:
            stats.ip_first_fragments += 1
        elif cut:
            stats.snaplen_cut += 1
        if ulen == 0:  # jumbogram / offload
            ulen = avail + max(cut, 0)
        elif ulen < 8:
            stats.skip("bad_udp_header")
            return
        missing = max(0, ulen - avail)
        data = buf[l4 + 8:l4 + ulen] if not missing else buf[l4 + 8:l4end]
        cache = self._ip_cache
        src_raw = buf[addr_off:addr_off + alen]
        dst_raw = buf[addr_off + alen:addr_off + alen + alen]
        src = cache.get(src_raw)
        if src is None:
            if len(cache) > 65536:
                cache.clear()
            src = cache[src_raw] = ip_text(src_raw)
        dst = cache.get(dst_raw)
        if dst is None:
            dst = cache[dst_raw] = ip_text(dst_raw)
        stats.udp_datagrams += 1
        self._out.append(Datagram(src, sport, dst, dport, data, ts, frame, missing))


def iter_stream_events(source: CaptureSource | LiveCapture, *,
                       max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
                       max_total_pending_bytes: int = DEFAULT_MAX_TOTAL_PENDING_BYTES,
                       max_connections: int = DEFAULT_MAX_CONNECTIONS,
                       max_closed: int = DEFAULT_MAX_CLOSED,
                       udp: bool = True) -> CaptureStream:
    """Open a capture (path, ``-`` for stdin, or binary file object; pcap/pcapng, maybe
    gzip) and return the iterator of its stream events. Raises CaptureError only when
    nothing can be read; later damage ends the iteration with a warning in `.stats`."""
    return CaptureStream(source, max_pending_bytes=max_pending_bytes,
                         max_total_pending_bytes=max_total_pending_bytes,
                         max_connections=max_connections, max_closed=max_closed, udp=udp)
