"""QUIC Initial packets: the ClientHello and ServerHello of each QUIC handshake.

Initial packets are protected with keys anyone can derive (RFC 9001 5.2): HKDF-Extract
with the version's public salt over the client's first Destination Connection ID, then
"client in" / "server in", then "quic key", "quic iv", "quic hp" (RFC 9369 "quicv2 ..."
labels for QUIC v2). Header protection is removed with AES-ECB over a 16-byte sample, the
payload opened with AES-128-GCM, and the CRYPTO frames (possibly out of order and over
several packets) reassembled into the TLS handshake messages, which go to the same `Facts`
as TCP connections. A conversation (two UDP endpoints and the original DCID) is reported
once its ServerHello is read, or at the end of the capture. Bounded: at most
`MAX_CONVERSATIONS` open conversations and `MAX_CRYPTO` bytes of CRYPTO data per side.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tlsprobe.capture import Datagram
from tlsprobe.engine.keyschedule import hkdf_expand_label, hkdf_extract
from tlsprobe.offline.build import Endpoints, build_report
from tlsprobe.offline.facts import CLIENT, SERVER, Facts

QUIC_V1, QUIC_V2 = 0x00000001, 0x6B3343CF
SALT_V1 = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
SALT_V2 = bytes.fromhex("0dede3def700a6db819381be6e269dcbf9bd2ed9")
SALT_DRAFT29 = bytes.fromhex("afbfec289993d24c9e9786f19c6111e04390a899")
SALT_DRAFT23 = bytes.fromhex("c3eef712c72ebb5a11a7d2432bb46365bef9f502")
SALT_DRAFT22 = bytes.fromhex("7fbcdb0e7c66bbe9193a96cd21519ebd7a02644a")
#: Google QUIC versions with IETF Initial protection and a TLS 1.3 handshake (T050, T051),
#: their salts as Wireshark's packet-quic.c has them. Q050 is left out: its Initial packets
#: carry QUIC Crypto (CHLO/SHLO), not TLS.
GOOGLE_SALTS = {
    0x54303530: bytes.fromhex("7ff579e5acd072915580304c43a2367c60488310"),  # T050
    0x54303531: bytes.fromhex("7a4edef4e7ccee5fa4506c19124fc8ccda6e033d"),  # T051
}
#: Facebook mvfst versions and the IETF draft each follows (0xfaceb001: draft 22,
#: 0xfaceb002 and 0xfaceb00e: draft 27, as mvfst and Wireshark derive their keys)
MVFST_DRAFTS = {0xFACEB001: 22, 0xFACEB002: 27, 0xFACEB00E: 27}
MAX_CONVERSATIONS = 4096
MAX_CRYPTO = 1 << 16
MAX_DONE = 65536


def draft_of(version: int) -> int | None:
    """The IETF draft a QUIC version's Initial packets follow: 0xff0000XX is draft XX
    (22..34 read here: older drafts had another long header), mvfst versions by
    `MVFST_DRAFTS`; None for other versions."""
    if version >> 8 == 0xFF0000 and 22 <= version & 0xFF <= 34:
        return version & 0xFF
    return MVFST_DRAFTS.get(version)


def version_salt(version: int) -> tuple[bytes, str] | None:
    """(initial salt, HKDF label prefix) of a QUIC version, None when unknown.

    RFC 9001 5.2 (v1), RFC 9369 3.3 (v2: its own salt and "quicv2" labels); the drafts
    changed the salt at drafts 23, 29 and 33 (33 and 34 already use v1's)."""
    if version == QUIC_V1:
        return SALT_V1, "quic"
    if version == QUIC_V2:
        return SALT_V2, "quicv2"
    google = GOOGLE_SALTS.get(version)
    if google is not None:
        return google, "quic"
    draft = draft_of(version)
    if draft is None:
        return None
    if draft >= 33:
        return SALT_V1, "quic"
    if draft >= 29:
        return SALT_DRAFT29, "quic"
    return (SALT_DRAFT23 if draft >= 23 else SALT_DRAFT22), "quic"


def _varint(buf: bytes, p: int) -> tuple[int, int]:
    if p >= len(buf):
        raise ValueError("truncated varint")
    size = 1 << (buf[p] >> 6)
    if p + size > len(buf):
        raise ValueError("truncated varint")
    value = buf[p] & 0x3F
    for b in buf[p + 1:p + size]:
        value = (value << 8) | b
    return value, p + size


class InitialKeys:
    """One direction's Initial packet protection."""

    def __init__(self, dcid: bytes, version: int, side: str) -> None:
        salt, prefix = version_salt(version) or (SALT_V1, "quic")
        secret = hkdf_expand_label(hkdf_extract(salt, dcid), f"{side} in".encode(), b"", 32)
        self.aead = AESGCM(hkdf_expand_label(secret, f"{prefix} key".encode(), b"", 16))
        self.iv = hkdf_expand_label(secret, f"{prefix} iv".encode(), b"", 12)
        self.hp = Cipher(algorithms.AES(hkdf_expand_label(secret, f"{prefix} hp".encode(),
                                                          b"", 16)), modes.ECB())

    def open(self, packet: bytes, pn_offset: int, end: int) -> bytes:
        """Remove header protection and decrypt; raises ValueError."""
        if pn_offset + 4 + 16 > end:
            raise ValueError("packet too short for the header protection sample")
        encryptor = self.hp.encryptor()
        mask = encryptor.update(packet[pn_offset + 4:pn_offset + 20]) + encryptor.finalize()
        first = packet[0] ^ (mask[0] & 0x0F)
        pn_len = (first & 0x03) + 1
        pn_bytes = bytes(b ^ m for b, m in zip(packet[pn_offset:pn_offset + pn_len], mask[1:]))
        header = bytes([first]) + packet[1:pn_offset] + pn_bytes
        nonce = (int.from_bytes(self.iv, "big") ^ int.from_bytes(pn_bytes, "big")).to_bytes(
            12, "big")
        try:
            return self.aead.decrypt(nonce, packet[pn_offset + pn_len:end], header)
        except InvalidTag:
            raise ValueError("Initial packet does not decrypt") from None


def initial_packets(datagram: bytes) -> Iterator[tuple[int, bytes, bytes, bytes, int, int]]:
    """(version, dcid, scid, packet, pn_offset, end) of each long-header Initial packet
    coalesced in one datagram; stops at the first packet that is not one. The fixed bit
    (0x40) is not required: RFC 9287 lets a peer grease it, and the version (one this
    module knows) is what says the packet is QUIC."""
    p = 0
    while p + 7 <= len(datagram) and datagram[p] & 0x80:
        start = p
        version = int.from_bytes(datagram[p + 1:p + 5], "big")
        if version_salt(version) is None:
            return
        p += 5
        dcid = datagram[p + 1:p + 1 + datagram[p]]
        p += 1 + datagram[p]
        if p >= len(datagram):
            return
        scid = datagram[p + 1:p + 1 + datagram[p]]
        p += 1 + datagram[p]
        kind = (datagram[start] >> 4) & 0x03
        initial = kind == (1 if version == QUIC_V2 else 0)
        try:
            if initial:
                token_len, p = _varint(datagram, p)
                p += token_len
            elif kind == (0 if version == QUIC_V2 else 3):  # Retry: no length field
                return
            length, p = _varint(datagram, p)
        except ValueError:
            return
        end = p + length
        if end > len(datagram):
            return
        if initial:
            yield version, dcid, scid, datagram[start:end], p - start, end - start
        p = end


def crypto_frames(payload: bytes, version: int = QUIC_V1) -> Iterator[tuple[int, bytes]]:
    """(offset, data) of the CRYPTO frames of an Initial packet's payload."""
    if version in GOOGLE_SALTS:
        yield from _gquic_crypto_frames(payload)
        return
    p = 0
    while p < len(payload):
        ftype = payload[p]
        if ftype == 0x00 or ftype == 0x01:      # PADDING
            p += 1
        elif ftype in (0x02, 0x03):  # ACK
            _, p = _varint(payload, p + 1)
            _, p = _varint(payload, p)
            count, p = _varint(payload, p)
            _, p = _varint(payload, p)
            for _ in range(count):
                _, p = _varint(payload, p)
                _, p = _varint(payload, p)
            if ftype == 0x03:
                for _ in range(3):
                    _, p = _varint(payload, p)
        elif ftype == 0x06:    # CRYPTO
            offset, p = _varint(payload, p + 1)
            size, p = _varint(payload, p)
            yield offset, payload[p:p + size]
            p += size
        else:                  # CONNECTION_CLOSE or anything not allowed in Initial
            return


def _gquic_crypto_frames(payload: bytes) -> Iterator[tuple[int, bytes]]:
    """T050/T051 frames keep Google QUIC's layout (as Wireshark's packet-gquic.c reads
    them): CRYPTO is type 0x08 (varint offset and length), PADDING 0x00 fills the rest,
    PING is 0x07. Other frames (gQUIC ACK, STOP_WAITING) end the walk: a CRYPTO frame
    after one of them is not read."""
    p = 0
    while p < len(payload):
        ftype = payload[p]
        if ftype == 0x00:
            return
        if ftype == 0x07:
            p += 1
        elif ftype == 0x08:
            offset, p = _varint(payload, p + 1)
            size, p = _varint(payload, p)
            yield offset, payload[p:p + size]
            p += size
        else:
            return


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


class Conversation:
    __slots__ = (
        "client",
        "dcid",
        "facts",
        "first_frame",
        "first_ts",
        "id",
        "keys",
        "last_frame",
        "last_ts",
        "nbytes",
        "server",
        "sides",
        "version",
    )

    def __init__(self, cid: int, client: tuple[str, int], server: tuple[str, int],
                 dcid: bytes, version: int, ts: float, frame: int) -> None:
        self.id = cid
        self.client, self.server = client, server
        self.dcid, self.version = dcid, version
        self.facts = Facts()
        self.sides = (_Side(), _Side())
        self.keys = {CLIENT: InitialKeys(dcid, version, "client"),
                     SERVER: InitialKeys(dcid, version, "server")}
        self.first_ts = self.last_ts = ts
        self.first_frame = self.last_frame = frame
        self.nbytes = [0, 0]

    def rekey(self, dcid: bytes, version: int, *, restart: bool) -> None:
        """Initial keys of another DCID or version; `restart`: the client begins a new
        handshake (its CRYPTO streams start again at offset 0)."""
        self.dcid, self.version = dcid, version
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


class QuicTracker:
    """Datagrams in, one report per QUIC handshake out."""

    def __init__(self, file: str, options: Any = None) -> None:
        self.file = file
        self.open: OrderedDict[tuple[Any, ...], Conversation] = OrderedDict()
        self.done: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self.connections = 0

    def datagram(self, ev: Datagram) -> Iterator[Any]:
        data = ev.data
        if ev.truncated or len(data) < 7 or not data[0] & 0x80:
            return
        src, dst = (ev.src, ev.sport), (ev.dst, ev.dport)
        for version, dcid, _scid, packet, pn_offset, end in initial_packets(data):
            conv, direction = self._conversation(src, dst, dcid, version, packet, pn_offset,
                                                 end, ev)
            if conv is None:
                continue
            conv.last_ts, conv.last_frame = ev.ts, ev.frame
            conv.nbytes[direction] += len(packet)
            try:
                payload = self._open(conv, direction, dcid, version, packet, pn_offset, end)
                for offset, chunk in crypto_frames(payload, version):
                    conv.crypto(direction, offset, chunk, ev.ts, ev.frame)
            except ValueError:
                continue
            if conv.facts.server_hello is not None:
                yield from self._report(conv)

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
        # a new conversation: a client Initial that decrypts and carries CRYPTO data
        try:
            payload = InitialKeys(dcid, version, "client").open(packet, pn_offset, end)
        except ValueError:
            return None, CLIENT
        if not _safe_frames(payload, version):
            return None, CLIENT
        conv = Conversation(self.connections, src, dst, dcid, version, ev.ts, ev.frame)
        self.connections += 1
        self.open[(src, dst)] = conv
        if len(self.open) > MAX_CONVERSATIONS:
            self.open.popitem(last=False)
        return conv, CLIENT

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

    def _report(self, conv: Conversation) -> Iterator[Any]:
        key = (conv.client, conv.server)
        self.open.pop(key, None)
        self.done[(conv.client, conv.server, conv.dcid)] = None
        if len(self.done) > MAX_DONE:
            self.done.popitem(last=False)
        yield self._build(conv)

    def _build(self, conv: Conversation) -> Any:
        from tlsprobe.offline.analyzer import Analyzed
        where = Endpoints(self.file, conv.id, "udp", "quic", conv.client[0], conv.client[1],
                          conv.server[0], conv.server[1], conv.first_frame, conv.last_frame,
                          conv.first_ts, conv.last_ts, conv.nbytes[0], conv.nbytes[1], None)
        return Analyzed(build_report(where, conv.facts, "quic"), None)

    def finish(self) -> Iterator[Any]:
        for conv in list(self.open.values()):
            if conv.facts.client_hellos or conv.facts.server_hellos:
                yield self._build(conv)
        self.open.clear()


def _safe_frames(payload: bytes, version: int) -> list[tuple[int, bytes]]:
    try:
        return list(crypto_frames(payload, version))
    except ValueError:
        return []
