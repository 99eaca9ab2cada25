"""QUIC handshakes: the ClientHello and ServerHello of their Initial packets, and with a
key log the rest of the handshake in their Handshake packets.

The Initial packets are opened with the version's public Initial keys (`quic_packets`:
versions, salts, long headers, CRYPTO frames); the CRYPTO frames are reassembled into TLS
handshake messages (`quic_conversation`), which go to the same `Facts` as TCP connections.
Once the ServerHello is read, a key log with the connection's handshake traffic secrets
gives the Handshake packets' keys (`quic_handshake`). A conversation (two UDP endpoints and
the original DCID) is reported when its handshake is decided: at its ServerHello without
those keys, at the client's Finished with them, at a CONNECTION_CLOSE carrying a TLS alert,
or at the end of the capture. The Initial keys follow the handshake: a Retry (new DCID) or
Version Negotiation (new version) restarts it with new ones, a server answering in another
version (RFC 9368) goes on with that version's. Bounded: at most `MAX_CONVERSATIONS` open
conversations and `MAX_CRYPTO` bytes of CRYPTO data per side and packet-number space.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Final

from tlsprobe.capture import Datagram
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import (
    Analyzed,
    ConversationKey,
    DatagramTracker,
    Endpoint,
)
from tlsprobe.offline.facts import CLIENT, SERVER
from tlsprobe.offline.quic_conversation import (
    MAX_CRYPTO,
    Conversation,
    CryptoStream,
    frames,
    read_handshake,
)
from tlsprobe.offline.quic_handshake import MAX_HELD, HandshakeKeys, handshake_keys
from tlsprobe.offline.quic_packets import (
    CRYPTO,
    GOOGLE_SALTS,
    HANDSHAKE,
    INITIAL,
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
    long_packets,
    version_salt,
)

__all__ = ["GOOGLE_SALTS", "MAX_CRYPTO", "MVFST_DRAFTS", "QUIC_V1", "QUIC_V2", "SALT_DRAFT22",
           "SALT_DRAFT23", "SALT_DRAFT29", "SALT_V1", "SALT_V2", "Conversation", "CryptoStream",
           "InitialKeys", "QuicTracker", "crypto_frames", "draft_of", "initial_packets",
           "version_salt"]

MAX_CONVERSATIONS: Final = 4096
MAX_DONE: Final = 65536
MAX_LISTED: Final = 8  # flows named in the note on connections of unknown versions


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
        yield from self.drain()
        for code, version, dcid, _scid, packet, pn_offset, end in long_packets(data):
            if code == INITIAL:
                conv = self._initial(src, dst, dcid, version, packet, pn_offset, end, ev)
            elif code == HANDSHAKE and self.secrets is not None:
                conv = self._handshake(src, dst, packet, pn_offset, ev)
            else:
                continue
            if conv is not None and self._decided(conv):
                yield from self._report(conv)

    def _initial(self, src: Endpoint, dst: Endpoint, dcid: bytes, version: int,
                 packet: bytes, pn_offset: int, end: int, ev: Datagram) -> Conversation | None:
        """An Initial packet: its conversation (None: none followed) with its CRYPTO data
        read."""
        conv, direction = self._conversation(src, dst, dcid, version, packet, pn_offset,
                                             end, ev)
        if conv is None:
            return None
        conv.last_ts, conv.last_frame = ev.ts, ev.frame
        conv.nbytes[direction] += len(packet)
        if conv.version in QUIC_CRYPTO_VERSIONS:
            return None   # listed with the reason (see _conversation), nothing to read
        try:
            payload = self._open(conv, direction, dcid, version, packet, pn_offset, end)
            for ftype, offset, chunk in frames(payload, version):
                if ftype == CRYPTO:
                    conv.crypto(direction, offset, chunk, ev.ts, ev.frame)
                else:
                    conv.close(direction, offset, False)
        except ValueError:
            return None
        return conv

    def _handshake(self, src: Endpoint, dst: Endpoint, packet: bytes, pn_offset: int,
                   ev: Datagram) -> Conversation | None:
        """A Handshake packet of a followed conversation: opened with the key log's keys
        (held while those are not known yet)."""
        conv = self.open.get((src, dst))
        direction = CLIENT
        if conv is None:
            conv, direction = self.open.get((dst, src)), SERVER
            if conv is None:
                return None
        keys = conv.hs
        if keys is None:   # before the ServerHello: kept if the key log can open it
            hellos = conv.facts.client_hellos
            if len(conv.held) < MAX_HELD and hellos and self.secrets is not None and \
                    self.secrets(hellos[0].random):
                conv.held.append((direction, packet, pn_offset, ev.ts, ev.frame))
                conv.nbytes[direction] += len(packet)
            return None
        if not isinstance(keys, HandshakeKeys):
            return None    # (not read: its bytes and frame are not the report's)
        conv.last_ts, conv.last_frame = ev.ts, ev.frame
        conv.nbytes[direction] += len(packet)
        read_handshake(conv, keys, direction, packet, pn_offset, ev.ts, ev.frame)
        return conv

    def _decided(self, conv: Conversation) -> bool:
        """Is the handshake decided: a TLS alert closed it, or its ServerHello was read and
        either the key log cannot open its Handshake packets or the client's Finished was
        read in them."""
        f = conv.facts
        if conv.closed:
            return True
        if f.server_hello is None:
            return False
        if conv.hs is None:
            self._key(conv)
        return not isinstance(conv.hs, HandshakeKeys) or f.finished[CLIENT]

    def _key(self, conv: Conversation) -> None:
        """The Handshake keys of a conversation whose ServerHello was read, from the key
        log; the packets held before are read with them."""
        f = conv.facts
        hellos = f.client_hellos
        secrets = self.secrets(hellos[0].random) if self.secrets is not None and hellos \
            else None
        conv.hs = keys = handshake_keys(secrets, f.cipher_suite, conv.version)
        if not isinstance(keys, HandshakeKeys):
            return
        f.decrypted = True
        held, conv.held = conv.held, []
        for direction, packet, pn_offset, ts, frame in held:
            read_handshake(conv, keys, direction, packet, pn_offset, ts, frame)

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
        self.follow_new(self.traced(conv), MAX_CONVERSATIONS)
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
        if conv.hs is None and conv.facts.server_hello is not None:
            self._key(conv)     # (reported at the end of the capture, say)
        keys = conv.hs
        if isinstance(keys, HandshakeKeys):
            self.keyed_count += 1
        elif keys:
            self.keyed_count += 1
            self.not_decrypted[keys] = self.not_decrypted.get(keys, 0) + 1
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
