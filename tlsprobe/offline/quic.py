"""QUIC Initial packets: the ClientHello and ServerHello of each QUIC handshake.

The packets are opened with the version's public Initial keys (`quic_packets`: versions,
salts, long headers, CRYPTO frames); the CRYPTO frames (possibly out of order and over
several packets) are reassembled into the TLS handshake messages, which go to the same
`Facts` as TCP connections. A conversation (two UDP endpoints and the original DCID) is
reported once its ServerHello is read, or at the end of the capture. The keys follow the
handshake: a Retry (new DCID) or Version Negotiation (new version) restarts it with new
ones, a server answering in another version (RFC 9368) goes on with that version's.
Bounded: at most `MAX_CONVERSATIONS` open conversations and `MAX_CRYPTO` bytes of CRYPTO
data per side.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Final

from tlsprobe.capture import Datagram
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import (
    Analyzed,
    ConversationKey,
    DatagramTracker,
    Endpoint,
)
from tlsprobe.offline.datagram import Conversation as _Conversation
from tlsprobe.offline.facts import CLIENT, SERVER
from tlsprobe.offline.quic_packets import (
    GOOGLE_SALTS,
    MVFST_DRAFTS,
    QUIC_CRYPTO_VERSIONS,
    QUIC_V1,
    QUIC_V2,
    SALT_DRAFT22,
    SALT_DRAFT23,
    SALT_DRAFT29,
    SALT_V1,
    SALT_V2,
    InitialKeys,
    crypto_frames,
    cut_initial,
    draft_of,
    initial_packets,
    version_salt,
)

__all__ = ["GOOGLE_SALTS", "MVFST_DRAFTS", "QUIC_V1", "QUIC_V2", "SALT_DRAFT22", "SALT_DRAFT23",
           "SALT_DRAFT29", "SALT_V1", "SALT_V2", "InitialKeys", "QuicTracker", "crypto_frames",
           "draft_of", "initial_packets", "version_salt"]

MAX_CONVERSATIONS: Final = 4096
MAX_CRYPTO: Final = 1 << 16
MAX_DONE: Final = 65536
MAX_LISTED: Final = 8  # flows named in the note on connections of unknown versions


class _Side:
    """One direction's CRYPTO stream: ranges in any order (out-of-order frames, several
    packets), handed on once contiguous. Waiting ranges are kept in a heap of offsets: each
    costs O(log n) to place and O(log n) to take off once the stream reaches it."""

    __slots__ = ("done_to", "messages", "size", "starts", "waiting")

    def __init__(self) -> None:
        self.starts: list[int] = []          # offsets of the waiting ranges, a heap
        self.waiting: dict[int, bytes] = {}  # offset -> the longest range seen there
        self.done_to = 0
        self.messages = bytearray()
        self.size = 0

    def add(self, offset: int, data: bytes) -> bytes:
        """Store a CRYPTO range; returns the newly contiguous bytes."""
        if offset + len(data) <= self.done_to or not data or self.size > MAX_CRYPTO:
            return b""
        known = self.waiting.get(offset)
        if known is None:
            heapq.heappush(self.starts, offset)
        elif len(known) >= len(data):
            return b""
        self.waiting[offset] = data
        self.size += len(data)
        out = bytearray()
        starts, waiting = self.starts, self.waiting
        while starts and starts[0] <= self.done_to:
            start = heapq.heappop(starts)
            chunk = waiting.pop(start)
            if start + len(chunk) > self.done_to:
                out += chunk[self.done_to - start:]
                self.done_to = start + len(chunk)
        return bytes(out)


class Conversation(_Conversation):
    """One QUIC handshake: its Initial keys and CRYPTO streams."""

    __slots__ = ("dcid", "dcids", "keys", "sides", "version")

    def __init__(self, cid: int, client: tuple[str, int], server: tuple[str, int],
                 dcid: bytes, version: int, ts: float, frame: int,
                 caches: AnalysisCaches | None = None) -> None:
        super().__init__(cid, client, server, ts, frame, caches)
        self.dcid, self.version = dcid, version
        self.dcids = [dcid]   # every DCID the client's Initials used (a Retry adds one)
        self.sides = (_Side(), _Side())
        self.keys = {CLIENT: InitialKeys(dcid, version, "client"),
                     SERVER: InitialKeys(dcid, version, "server")}

    def rekey(self, dcid: bytes, version: int, *, restart: bool) -> None:
        """Initial keys of another DCID or version; `restart`: the client begins a new
        handshake (its CRYPTO streams start again at offset 0)."""
        self.dcid, self.version = dcid, version
        if dcid not in self.dcids and len(self.dcids) < 4:
            self.dcids.append(dcid)
        self.keys = {CLIENT: InitialKeys(dcid, version, "client"),
                     SERVER: InitialKeys(dcid, version, "server")}
        if restart:
            self.sides = (_Side(), _Side())

    def crypto(self, direction: int, offset: int, data: bytes, ts: float, frame: int) -> None:
        side = self.sides[direction]
        side.messages += side.add(offset, data)
        msgs = side.messages
        while len(msgs) >= 4:
            size = 4 + int.from_bytes(msgs[1:4], "big")
            if size > MAX_CRYPTO or len(msgs) < size:
                break
            msg = bytes(msgs[:size])
            del msgs[:size]
            self.facts.on_message(direction, msg, ts, frame)


class _Candidate:
    """A client's first Initial in a version without public keys, until confirmed."""

    __slots__ = ("confirmed", "dcid", "scid", "version")

    def __init__(self, version: int, dcid: bytes, scid: bytes) -> None:
        self.version = version
        self.dcid = dcid
        self.scid = scid
        self.confirmed = False


class UnknownVersions:
    """QUIC connections in versions whose Initial keys are not public: they cannot be read,
    but a capture of them must not be reported as holding no TLS. A client's first Initial
    has a recognisable shape (RFC 8999's invariants: fixed bit, a Destination CID of 8 to
    20 bytes; RFC 9000 14.1: a datagram of at least 1200 bytes), which random bytes of
    other UDP protocols also take now and then; so a candidate counts only once the server
    answers it (a Version Negotiation, or a packet of the same version, sent to the
    client's Source CID) or the client sends it again (same version and DCID). Bounded:
    `MAX_CANDIDATES` candidates followed at once, the oldest dropped."""

    MAX_CANDIDATES = 4096

    def __init__(self) -> None:
        self.candidates: OrderedDict[ConversationKey, _Candidate] = OrderedDict()
        self.connections = 0
        self.flows: dict[ConversationKey, int] = {}  # the first ones: their version

    def packet(self, src: tuple[str, int], dst: tuple[str, int], version: int, dcid: bytes,
               scid: bytes, client_shaped: bool) -> None:
        answered = self.candidates.get((dst, src))
        if answered is not None:
            if not answered.confirmed and dcid == answered.scid and \
                    (version == answered.version or version == 0 and scid == answered.dcid):
                self._confirm((dst, src), answered)
            return
        if version == 0 or not client_shaped or len(dcid) < 8:
            return
        known = self.candidates.get((src, dst))
        if known is not None and not known.confirmed and known.version == version and \
                known.dcid == dcid:
            self._confirm((src, dst), known)  # the client's Initial sent again
        elif known is None:
            self.candidates[(src, dst)] = _Candidate(version, dcid, scid)
            if len(self.candidates) > self.MAX_CANDIDATES:
                self.candidates.popitem(last=False)

    def _confirm(self, key: ConversationKey, entry: _Candidate) -> None:
        entry.confirmed = True
        self.connections += 1
        if len(self.flows) < MAX_LISTED:
            self.flows[key] = entry.version

    def note(self) -> list[str]:
        n = self.connections
        if not n:
            return []
        named = ", ".join(f"{c[0]}:{c[1]} -> {s[0]}:{s[1]} (version 0x{v:08x})"
                          for (c, s), v in self.flows.items())
        return [(f"{n} QUIC connection{'s' if n > 1 else ''} in a version whose Initial keys "
                 f"are not public, not read (first: {named})")]


class QuicTracker(DatagramTracker[Conversation]):
    """Datagrams in, one report per QUIC handshake out."""

    protocol = "quic"
    transport = "quic"

    def __init__(self, file: str, options: object = None,
                 caches: AnalysisCaches | None = None) -> None:
        super().__init__(file, caches)
        #: (client, server, DCID) of the Initials of conversations reported
        self.done: OrderedDict[tuple[Endpoint, Endpoint, bytes], None] = OrderedDict()
        self.unknown = UnknownVersions()  # QUIC in versions without public Initial keys
        #: client Initials cut by the snaplen: (client, server) -> (version, DCID, ts, frame,
        #: the bytes captured)
        self.cut: OrderedDict[ConversationKey, tuple[int, bytes, float, int, int]] = \
            OrderedDict()
        #: whether a key log holds a client random's secrets (set by offline.udp), and the
        #: reported handshakes it did: their Handshake packets are not decrypted here
        self.keyed: Callable[[bytes], bool] | None = None
        self.keyed_count = 0

    def datagram(self, ev: Datagram) -> Iterator[Analyzed]:
        data = ev.data
        if len(data) < 7 or not data[0] & 0x80:
            return
        src, dst = (ev.src, ev.sport), (ev.dst, ev.dport)
        if ev.truncated:
            self._cut(src, dst, data, ev)  # (its whole Initials are still read below)
        version = int.from_bytes(data[1:5], "big")
        if version_salt(version) is None:
            self._unknown_version(src, dst, version, data)
            return
        for version, dcid, _scid, packet, pn_offset, end in initial_packets(data):
            conv, direction = self._conversation(src, dst, dcid, version, packet, pn_offset,
                                                 end, ev)
            if conv is None:
                continue
            conv.last_ts, conv.last_frame = ev.ts, ev.frame
            conv.nbytes[direction] += len(packet)
            if conv.version in QUIC_CRYPTO_VERSIONS:
                continue   # listed with the reason (see _conversation), nothing to read
            try:
                payload = self._open(conv, direction, dcid, version, packet, pn_offset, end)
                for offset, chunk in crypto_frames(payload, version):
                    conv.crypto(direction, offset, chunk, ev.ts, ev.frame)
            except ValueError:
                continue
            if conv.facts.server_hello is not None:
                yield from self._report(conv)

    def _unknown_version(self, src: tuple[str, int], dst: tuple[str, int], version: int,
                         data: bytes) -> None:
        """A long-header packet of a version without known Initial keys (or a Version
        Negotiation, version 0): `unknown` decides whether it shows a QUIC connection."""
        p = 5
        cids = []
        for _ in range(2):  # RFC 8999's invariants: DCID, then SCID, each at most 20 bytes
            if p >= len(data) or data[p] > 20 or p + 1 + data[p] > len(data):
                return
            cids.append(data[p + 1:p + 1 + data[p]])
            p += 1 + data[p]
        self.unknown.packet(src, dst, version, cids[0], cids[1],
                            data[0] & 0xC0 == 0xC0 and len(data) >= 1200)

    def _cut(self, src: Endpoint, dst: Endpoint, data: bytes, ev: Datagram) -> None:
        """A client's Initial cut by the snaplen cannot be opened, but its DCID gives the
        server's Initial keys: kept until a server Initial opens with them."""
        got = cut_initial(data)
        if got is None or (src, dst) in self.open or (dst, src) in self.open:
            return
        self.cut.setdefault((src, dst), (*got, ev.ts, ev.frame, len(data)))
        if len(self.cut) > MAX_CONVERSATIONS:
            self.cut.popitem(last=False)

    def _after_cut(self, src: Endpoint, dst: Endpoint, version: int, packet: bytes,
                   pn_offset: int, end: int) -> Conversation | None:
        """The conversation of a server Initial that opens with the keys of a cut client
        Initial's DCID (so it answers that client), its ClientHello said not read."""
        cut = self.cut.get((dst, src))
        if cut is None:
            return None
        try:
            InitialKeys(cut[1], version, "server").open(packet, pn_offset, end)
        except ValueError:
            return None
        del self.cut[(dst, src)]
        conv = Conversation(self.connections, dst, src, cut[1], cut[0], cut[2], cut[3],
                            self.caches)
        conv.nbytes[CLIENT] = cut[4]
        conv.facts.problem("the client's Initial was cut by the capture's snaplen: its "
                           "ClientHello was not read")
        return conv

    def unread(self) -> list[str]:
        """The note on QUIC connections of unknown versions (empty when there were none)."""
        return self.unknown.note()

    def _conversation(self, src: tuple[str, int], dst: tuple[str, int], dcid: bytes,
                      version: int, packet: bytes, pn_offset: int, end: int,
                      ev: Datagram) -> tuple[Conversation | None, int]:
        for key in ((src, dst), (dst, src)):
            conv = self.open.get(key)
            if conv is not None:
                self.open.move_to_end(key)
                return conv, CLIENT if key[0] == src else SERVER
        if (src, dst, dcid) in self.done:
            return None, CLIENT  # a retransmission of a handshake already reported
        # a new conversation: a client Initial that decrypts and carries CRYPTO data, or
        # a server's answer to a client Initial the snaplen cut
        try:
            payload = InitialKeys(dcid, version, "client").open(packet, pn_offset, end)
        except ValueError:
            return self._start(self._after_cut(src, dst, version, packet, pn_offset, end),
                               SERVER)
        frames = _safe_frames(payload, version)
        if not frames:
            return None, CLIENT
        conv = Conversation(self.connections, src, dst, dcid, version, ev.ts, ev.frame,
                            self.caches)
        if version in QUIC_CRYPTO_VERSIONS:
            if not frames[0][1].startswith(b"CHLO"):
                return None, CLIENT
            conv.facts.problem(f"Google QUIC {version.to_bytes(4, 'big').decode()}: the "
                               "handshake is QUIC Crypto (CHLO), not TLS; not read")
        return self._start(conv, CLIENT)

    def _start(self, conv: Conversation | None, direction: int
               ) -> tuple[Conversation | None, int]:
        """A new conversation followed (None: none), `direction` the side of its first
        packet read: the client's, or the server's when the client's Initial was cut."""
        if conv is None:
            return None, direction
        self.connections += 1
        self.open[(conv.client, conv.server)] = conv
        if len(self.open) > MAX_CONVERSATIONS:
            self.open.popitem(last=False)
        return conv, direction

    @staticmethod
    def _open(conv: Conversation, direction: int, dcid: bytes, version: int, packet: bytes,
              pn_offset: int, end: int) -> bytes:
        """The packet's payload, with the conversation's keys or, when those fail, with
        the keys of the packet's own version and (client side) Destination CID: a client
        Initial after a Retry uses the Retry's Source CID as its DCID (RFC 9000 17.2.5.2)
        and one after a Version Negotiation another version; both start the handshake
        over. A server Initial in another version (compatible version negotiation, RFC
        9368, e.g. v1 to v2) keeps the original DCID and the handshake goes on."""
        try:
            return conv.keys[direction].open(packet, pn_offset, end)
        except ValueError:
            key_dcid = dcid if direction == CLIENT else conv.dcid
            if key_dcid == conv.dcid and version == conv.version:
                raise
        keys = InitialKeys(key_dcid, version, "client" if direction == CLIENT else "server")
        payload = keys.open(packet, pn_offset, end)
        conv.rekey(key_dcid, version, restart=direction == CLIENT)
        return payload

    def _report(self, conv: Conversation) -> Iterator[Analyzed]:
        key = (conv.client, conv.server)
        self.open.pop(key, None)
        for dcid in conv.dcids:  # late copies of Initials before a Retry are not new
            self.done[(conv.client, conv.server, dcid)] = None
        while len(self.done) > MAX_DONE:
            self.done.popitem(last=False)
        yield self._build(conv)

    def _build(self, conv: Conversation) -> Analyzed:
        conv.facts.quic_version = conv.version   # after any change of version (RFC 9368)
        hellos = conv.facts.client_hellos
        if self.keyed is not None and hellos and self.keyed(hellos[0].random):
            self.keyed_count += 1
        return super()._build(conv)

    def reportable(self, conv: Conversation) -> bool:
        """Also a conversation with only a problem (a Google QUIC handshake not read)."""
        f = conv.facts
        return bool(f.client_hellos or f.server_hellos or f.problems)


def _safe_frames(payload: bytes, version: int) -> list[tuple[int, bytes]]:
    try:
        return list(crypto_frames(payload, version))
    except ValueError:
        return []
