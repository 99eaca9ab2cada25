"""RDP over UDP (MS-RDPEUDP, MS-RDPEUDP2): the TLS of its reliable channel, read.

A session starts with the client's SYN to UDP port 3389 (snSourceAck 0xFFFFFFFF, the SYN
flag) and the server's SYN+ACK. Version 1 packets (big-endian header: flags, then the
optional SYN, correlation id, SYNEX, ACK vector, FEC, ack-of-acks and source payload
headers) carry one chunk of the TLS stream each, numbered by their packet sequence
number; a lossy session (SYNLOSSY) carries DTLS instead, read by the DTLS tracker. Once the
SYN+ACK has agreed on version 3 (SYNEX version 0x0101), MS-RDPEUDP2 packets follow: bytes
0 and 7 swapped on the wire, then a little-endian header whose flags say which of the ACK,
overhead, delayed-ack, ack-of-acks, data, ack-vector and channel payloads are present; a
data packet's channel sequence number orders its chunk of the TLS stream.

The chunks are put back in order per direction (out-of-order ones held, up to
`MAX_PENDING`) and the stream read by the fast reader, as TLS over TCP is. A session is
reported once both sides encrypt, or at the end of the capture; one whose reliable channel
held no TLS is listed in a note with the reason (`unreadable`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from tlsprobe.capture import Datagram
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import Analyzed, Conversation, SessionTracker

if TYPE_CHECKING:
    from tlsprobe.offline.dtls import DtlsTracker
from tlsprobe.offline.facts import CLIENT, SERVER
from tlsprobe.offline.fast import MAX_HELD, FastReader

if TYPE_CHECKING:
    from tlsprobe.offline.flowreader import FlowReader

PORT = 3389
# MS-RDPEUDP 2.2.2.1 RDPUDP_FEC_HEADER uFlags
SYN: Final = 0x0001
ACK: Final = 0x0004
DATA: Final = 0x0008
FEC: Final = 0x0010
AOA: Final = 0x0100
SYNLOSSY: Final = 0x0200
CORRELATION_ID: Final = 0x0800
SYNEX: Final = 0x1000
VERSION_INFO_VALID: Final = 0x0001
VERSION_3: Final = 0x0101  # RDPUDP_PROTOCOL_VERSION_3: MS-RDPEUDP2 after the SYN exchange
# MS-RDPEUDP2 2.2.1.1 flags (the low 12 bits of the little-endian word after the prefix)
V2_ACK: Final = 0x001
V2_DATA: Final = 0x004
V2_ACKVEC: Final = 0x008
V2_AOA: Final = 0x010
V2_OVERHEAD: Final = 0x040
V2_DELAYACK: Final = 0x100
V2_DUMMY: Final = 0x8  # packet type of padding packets (MTU probes): their data is not stream data
MAX_PENDING: Final = 64  # out-of-order chunks held per direction before the missing one is given up
MAX_SESSIONS: Final = 1024
MAX_LISTED: Final = 4096  # sessions without TLS named in the note (all are counted)
#: a first chunk this far past the expected start starts the stream itself (a capture
#: whose first packets were lost)
MAX_START_DISTANCE: Final = 1024
_BE16: Final = struct.Struct("!H").unpack_from
_BE32: Final = struct.Struct("!I").unpack_from
_LE16: Final = struct.Struct("<H").unpack_from


def is_syn(data: bytes) -> bool:
    """A client's SYN: no acknowledged sequence number yet, the SYN flag without ACK."""
    if len(data) < 16 or data[:4] != b"\xff\xff\xff\xff":
        return False
    flags = _BE16(data, 6)[0]
    return bool(flags & SYN) and not flags & ACK


def syn_version(data: bytes) -> int | None:
    """The protocol version a SYN or SYN+ACK names in its SYNEX payload (None: none)."""
    flags = _BE16(data, 6)[0]
    p = 16  # the header, then snInitialSequenceNumber, uUpStreamMtu, uDownStreamMtu
    if flags & CORRELATION_ID:
        p += 32
    if not flags & SYNEX or len(data) < p + 4 or not _BE16(data, p)[0] & VERSION_INFO_VALID:
        return None
    return int(_BE16(data, p + 2)[0])


def v1_chunk(data: bytes) -> tuple[int, bytes] | None:
    """(packet sequence number, payload) of a version 1 data packet; None for other
    packets and for a header that does not fit the datagram."""
    if len(data) < 8:
        return None
    flags = _BE16(data, 6)[0]
    if flags & SYN or not flags & DATA:
        return None
    p = 8
    if flags & ACK:  # RDPUDP_ACK_VECTOR_HEADER, padded to a 4-byte boundary
        if len(data) < p + 2:
            return None
        size = 2 + _BE16(data, p)[0]
        p += size + -size % 4
    if flags & FEC:
        p += 10
    if flags & AOA:
        p += 4
    if len(data) <= p + 8:
        return None
    return int(_BE32(data, p)[0]), data[p + 8:]


def v2_chunk(data: bytes) -> tuple[int, bytes] | None:
    """(channel sequence number, payload) of an MS-RDPEUDP2 data packet; None for acks,
    padding and a header that does not fit."""
    if len(data) < 8:
        return None
    u = bytearray(data)
    u[0], u[7] = data[7], data[0]  # swapped on the wire (MS-RDPEUDP2 2.2.1)
    flags = _LE16(u, 1)[0] & 0xFFF
    if not flags & V2_DATA or (u[0] >> 1) & 0xF == V2_DUMMY:
        return None
    p = 3
    if flags & V2_ACK:
        if len(u) < p + 7:
            return None
        p += 7 + (u[p + 6] & 0xF)  # the delayed acks follow the 7 fixed bytes
    if flags & V2_OVERHEAD:
        p += 1
    if flags & V2_DELAYACK:
        p += 3
    if flags & V2_AOA:
        p += 2
    p += 2  # the data sequence number
    if flags & V2_ACKVEC:
        if len(u) < p + 3:
            return None
        coded = u[p + 2]
        p += 3 + (coded & 0x7F) + (4 if coded & 0x80 else 0)
    if len(u) <= p + 2:
        return None
    return int(_LE16(u, p)[0]), bytes(u[p + 2:])


class _Channel:
    """One direction's reliable stream: chunks in sequence order (`modulus`: 2**32 for
    version 1 packet numbers, 2**16 for RDPEUDP2 channel numbers). `start`: the number
    the first chunk should carry (the SYN's initial sequence number + 1; RDPEUDP2 channels
    start at 1), or None: then, as when the first chunk seen is far from it, the first
    chunk seen starts the stream."""

    __slots__ = ("caches", "delivered", "expected", "gaps", "modulus", "pending")

    def __init__(self, modulus: int, caches: AnalysisCaches, start: int | None = None) -> None:
        self.modulus = modulus
        self.caches = caches  # held chunks count against the analysis's budget (MAX_HELD)
        self.expected = start
        self.pending: dict[int, bytes] = {}
        self.gaps = 0
        self.delivered = False

    def release(self) -> None:
        """The session is done: its held chunks go."""
        self.caches.held -= sum(len(c) for c in self.pending.values())
        self.pending = {}

    def add(self, seq: int, chunk: bytes) -> bytes:
        """The stream bytes this chunk makes contiguous (b"" when it is early or a copy).
        Past `MAX_PENDING` held chunks, or the analysis's budget of held bytes, the missing
        one is given up (counted in `gaps`)."""
        if self.expected is None or not self.delivered and not self.pending and \
                (seq - self.expected) % self.modulus >= MAX_START_DISTANCE:
            self.expected = seq
        ahead = (seq - self.expected) % self.modulus
        if ahead >= self.modulus // 2:
            return b""  # a retransmission of what was already read
        caches = self.caches
        if ahead:
            if seq not in self.pending:
                self.pending[seq] = chunk
                caches.held += len(chunk)
            if len(self.pending) <= MAX_PENDING and caches.held <= MAX_HELD:
                return b""
            self.gaps += 1
            expected = self.expected
            self.expected = min(self.pending, key=lambda s: (s - expected) % self.modulus)
            chunk = self.pending.pop(self.expected)
            caches.held -= len(chunk)
        self.delivered = True
        parts = [chunk]
        nxt = (self.expected + 1) % self.modulus
        while nxt in self.pending:
            part = self.pending.pop(nxt)
            caches.held -= len(part)
            parts.append(part)
            nxt = (nxt + 1) % self.modulus
        self.expected = nxt
        return b"".join(parts)


class _Session(Conversation):
    """One RDP-over-UDP session: its version, channels and the TLS read from them."""

    __slots__ = ("channels", "dtls_started", "handed", "lossy", "reader", "v2_from")

    def __init__(self, sid: int, client: tuple[str, int], server: tuple[str, int], ts: float,
                 frame: int, lossy: bool, caches: AnalysisCaches | None = None) -> None:
        super().__init__(sid, client, server, ts, frame, caches)
        self.facts.framing = "rdp-udp"
        self.reader: FastReader | FlowReader = FastReader(self.facts)
        self.lossy = lossy
        self.handed = False  # a lossy session's DTLS was handed to the DTLS tracker
        self.dtls_started = False  # ... and a conversation of that tracker began with it
        self.v2_from: int | None = None  # frames after this one are MS-RDPEUDP2
        self.channels = (_Channel(1 << 32, self.facts.caches),
                         _Channel(1 << 32, self.facts.caches))

    def syn(self, direction: int, data: bytes) -> None:
        """A SYN of this direction: its data packets are numbered from its initial
        sequence number + 1."""
        self.channels[direction].expected = (_BE32(data, 8)[0] + 1) & 0xFFFFFFFF

    def release(self) -> None:
        """Done with: held chunks and partial messages leave the analysis's budget."""
        for channel in self.channels:
            channel.release()
        self.reader.release()

    def trace_lines(self) -> list[str] | None:
        return self.reader.trace_lines()


class RdpUdpTracker(SessionTracker[_Session]):
    """UDP datagrams of RDP-over-UDP sessions in, one report per session out."""

    protocol = "tls"
    transport = "tcp"

    def _build(self, session: _Session) -> Analyzed:
        self.keys_unused(session, "RDP over UDP: its TLS records are not decrypted "
                                  "(tshark -o tls.keylog_file:FILE decrypts them)")
        return super()._build(session)

    def __init__(self, file: str, caches: AnalysisCaches | None,
                 dtls: Callable[[], DtlsTracker]) -> None:
        super().__init__(file, caches)
        #: sessions whose reliable channel gave no TLS: (client, server) -> why (the first
        #: MAX_LISTED of them; `unreadable_count` counts them all)
        self.unreadable: dict[tuple[tuple[str, int], tuple[str, int]], str] = {}
        self.unreadable_count = 0
        self.dtls = dtls  # gives the capture's DTLS tracker, which reads a lossy session

    def datagram(self, ev: Datagram) -> Iterator[Analyzed]:
        session, direction = self.find(ev)
        data = ev.data
        if session is None:
            if not is_syn(data):
                return
            lossy = bool(_BE16(data, 6)[0] & SYNLOSSY)
            session = _Session(self.connections, (ev.src, ev.sport), (ev.dst, ev.dport),
                               ev.ts, ev.frame, lossy, self.caches)
            session.reader = self.stream_reader(session.facts)
            session.syn(CLIENT, data)
            self.follow(session)
            if len(self.open) > MAX_SESSIONS:
                oldest = self.open[next(iter(self.open))]
                self.unfollow(oldest)
                self._unreadable(oldest, f"dropped: over {MAX_SESSIONS} sessions at once")
            return
        session.last_ts, session.last_frame = ev.ts, ev.frame
        session.nbytes[direction] += len(data)
        if session.v2_from is None and len(data) >= 16 and _BE16(data, 6)[0] & SYN:
            session.syn(direction, data)
            if direction == SERVER and syn_version(data) == VERSION_3:
                session.v2_from = ev.frame  # the SYN+ACK: RDPEUDP2 from the next packet
                caches = session.facts.caches
                session.channels = (_Channel(1 << 16, caches, 1), _Channel(1 << 16, caches, 1))
        elif session.v2_from is None or ev.frame > session.v2_from:
            yield from self._data(session, direction, ev)

    def _data(self, session: _Session, direction: int, ev: Datagram) -> Iterator[Analyzed]:
        got = v2_chunk(ev.data) if session.v2_from is not None else v1_chunk(ev.data)
        if got is None:
            return
        if session.lossy and session.v2_from is None:
            session.handed = True
            dtls = self.dtls()
            before = dtls.connections
            yield from dtls.datagram(ev._replace(data=got[1]), "rdp-udp")
            if dtls.connections > before and not session.dtls_started:
                session.dtls_started = True
                self.connections -= 1  # the DTLS tracker's conversation: counted there
            return
        channel = session.channels[direction]
        gaps = channel.gaps
        tls = channel.add(*got)
        if channel.gaps != gaps:
            session.reader.gap_side(direction, ev.ts, ev.frame)
        if tls:
            session.reader.feed_side(direction, tls, ev.ts, ev.frame)
        halves = session.reader.halves
        if halves[0].counting and halves[1].counting:
            self.unfollow(session)
            yield self._build(session)

    def unfollow(self, session: _Session) -> None:
        super().unfollow(session)
        session.release()

    def _unreadable(self, session: _Session, why: str) -> None:
        self.unreadable_count += 1
        if len(self.unreadable) < MAX_LISTED:
            self.unreadable.setdefault((session.client, session.server), why)

    def reportable(self, conv: _Session) -> bool:
        """A session still open at the end is reported when TLS was read from it; one
        without is listed (a lossy session whose DTLS began a conversation of the DTLS
        tracker is that tracker's to report)."""
        if conv.facts.client_hellos or conv.facts.server_hellos:
            return True
        if conv.lossy and not conv.handed or not conv.lossy and not any(
                c.delivered or c.pending for c in conv.channels):
            self._unreadable(conv, "no data packet captured")
        elif not conv.lossy:
            self._unreadable(conv, "no TLS record found in its reliable channel")
        elif not conv.dtls_started:
            self._unreadable(conv, "no DTLS ClientHello in its lossy channel")
        return False

    def finish(self) -> Iterator[Analyzed]:
        for session in self.open.values():
            session.release()
        yield from super().finish()
