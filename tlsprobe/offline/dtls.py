"""DTLS over UDP (RFC 6347, RFC 9147 record layer for DTLS 1.0/1.2): the handshake of each
conversation, read into the same `Facts` as a TCP connection.

A DTLS record carries epoch and sequence number (13-byte header) and a handshake message
carries message_seq, fragment_offset and fragment_length (12-byte header), so messages are
rebuilt from fragments that may arrive in any order or twice. Whole messages are rewritten
in TLS form (4-byte header; the ClientHello without its cookie, which TLS does not have) and
handed to `Facts`, so the summaries and fingerprints are the TLS ones (JA4 with "d").
Records of epoch 0 only: everything after ChangeCipherSpec is encrypted. A conversation is
reported once both sides encrypt, or at the end of the capture. Bounded like QUIC.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tlsprobe.capture import Datagram
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import Analyzed, DatagramTracker
from tlsprobe.offline.datagram import Conversation as _Conversation
from tlsprobe.offline.facts import CLIENT, SERVER

#: DTLS 1.0, 1.2, 1.3 and OpenSSL's pre-RFC DTLS 1.0 ("DTLS1_BAD_VER")
DTLS_VERSIONS: Final = frozenset((0xFEFF, 0xFEFD, 0xFEFC, 0x0100))
MAX_CONVERSATIONS: Final = 4096
MAX_MESSAGE: Final = 1 << 16


def dtls_records(datagram: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """(content type, version, epoch, fragment) of each record of a datagram; stops at the
    first thing that is not a DTLS record."""
    p = 0
    while p + 13 <= len(datagram):
        ct = datagram[p]
        version = int.from_bytes(datagram[p + 1:p + 3], "big")
        if not 20 <= ct <= 26 or version not in DTLS_VERSIONS:
            return
        epoch = int.from_bytes(datagram[p + 3:p + 5], "big")
        length = int.from_bytes(datagram[p + 11:p + 13], "big")
        if p + 13 + length > len(datagram):
            return
        yield ct, version, epoch, datagram[p + 13:p + 13 + length]
        p += 13 + length


def looks_like_dtls(datagram: bytes) -> bool:
    """A DTLS record header at the start of a datagram."""
    return len(datagram) >= 13 and 20 <= datagram[0] <= 26 and \
        int.from_bytes(datagram[1:3], "big") in DTLS_VERSIONS


def tls_form(msg_type: int, body: bytes) -> bytes:
    """A whole DTLS handshake message body as the TLS message (ClientHello: no cookie)."""
    if msg_type == 1 and len(body) >= 35:
        sid_end = 35 + body[34]
        if sid_end < len(body):
            body = body[:sid_end] + body[sid_end + 1 + body[sid_end]:]
    return bytes([msg_type]) + len(body).to_bytes(3, "big") + body


class _Message:
    __slots__ = ("body", "have", "msg_type")

    def __init__(self, msg_type: int, length: int) -> None:
        self.msg_type = msg_type
        self.body = bytearray(length)
        self.have: set[int] = set()   # fragment offsets received (a message has few)


#: why a DTLS handshake whose secrets the key log has is not decrypted (a note's text)
NOT_DECRYPTED: Final = ("DTLS: its protected records are not decrypted, only what it sends "
                        "in clear is read (tshark -o tls.keylog_file:FILE decrypts them)")


class Conversation(_Conversation):
    """One DTLS handshake: its messages being rebuilt from fragments."""

    __slots__ = ("done_seq", "encrypted", "filled", "pending")

    def __init__(self, cid: int, client: tuple[str, int], server: tuple[str, int], ts: float,
                 frame: int, caches: AnalysisCaches | None = None) -> None:
        super().__init__(cid, client, server, ts, frame, caches)
        self.facts.dtls = True
        self.pending: tuple[dict[int, _Message], dict[int, _Message]] = ({}, {})
        self.done_seq: tuple[set[int], set[int]] = (set(), set())
        self.filled: dict[tuple[int, int], int] = {}
        self.encrypted = [False, False]

    def handshake(self, direction: int, fragment: bytes, ts: float, frame: int) -> None:
        p = 0
        while p + 12 <= len(fragment):
            msg_type = fragment[p]
            length = int.from_bytes(fragment[p + 1:p + 4], "big")
            seq = int.from_bytes(fragment[p + 4:p + 6], "big")
            offset = int.from_bytes(fragment[p + 6:p + 9], "big")
            size = int.from_bytes(fragment[p + 9:p + 12], "big")
            data = fragment[p + 12:p + 12 + size]
            p += 12 + size
            if len(data) != size or offset + size > length or length > MAX_MESSAGE or \
                    seq in self.done_seq[direction]:
                continue
            msg = self.pending[direction].get(seq)
            if msg is None:
                msg = self.pending[direction][seq] = _Message(msg_type, length)
            if offset in msg.have:
                continue
            msg.body[offset:offset + size] = data
            msg.have.add(offset)
            key = (direction, seq)
            self.filled[key] = self.filled.get(key, 0) + size
            if self.filled[key] >= length:
                del self.pending[direction][seq]
                self.filled.pop(key, None)
                self.done_seq[direction].add(seq)
                self.message(direction, tls_form(msg_type, bytes(msg.body)), ts, frame)


class DtlsTracker(DatagramTracker[Conversation]):
    """Datagrams in, one report per DTLS handshake out."""

    protocol = "dtls"
    transport = "dtls"

    def _build(self, conv: Conversation) -> Analyzed:
        self.keys_unused(conv, NOT_DECRYPTED)
        return super()._build(conv)

    def datagram(self, ev: Datagram, framing: str | None = None) -> Iterator[Analyzed]:
        """One datagram (its DTLS records; `framing`: what they were unwrapped from, said
        in the report of a conversation it starts)."""
        yield from self.drain()
        src, dst = (ev.src, ev.sport), (ev.dst, ev.dport)
        conv, direction = None, CLIENT
        for key in ((src, dst), (dst, src)):
            conv = self.open.get(key)
            if conv is not None:
                direction = CLIENT if key[0] == src else SERVER
                break
        records = list(dtls_records(ev.data))
        if conv is None:
            # a conversation starts with a ClientHello in epoch 0, or with the server's
            # ServerHello where the capture holds only the server's side (as tshark reads)
            if not records or records[0][0] != 22 or records[0][2] != 0 or \
                    records[0][3][:1] not in (b"\x01", b"\x02"):
                return
            if records[0][3][:1] == b"\x02":
                src, dst, direction = dst, src, SERVER
            conv = self.traced(Conversation(self.connections, src, dst, ev.ts, ev.frame,
                                            self.caches))
            conv.facts.framing = framing
            self.connections += 1
            self.follow_new(conv, MAX_CONVERSATIONS)
        conv.last_ts, conv.last_frame = ev.ts, ev.frame
        conv.nbytes[direction] += len(ev.data)
        for ct, _version, epoch, fragment in records:
            if epoch:
                conv.encrypted[direction] = True
                conv.facts.mark_encrypted(direction, ev.ts)
            elif ct == 22:
                conv.handshake(direction, fragment, ev.ts, ev.frame)
            elif ct == 21 and len(fragment) == 2:
                conv.alert(direction, fragment[0], fragment[1])
            elif ct == 20:
                conv.facts.change_cipher_spec(direction)
        if conv.encrypted[0] and conv.encrypted[1]:
            self.open.pop((conv.client, conv.server), None)
            yield self._build(conv)
