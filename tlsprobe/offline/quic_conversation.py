"""One QUIC handshake of a capture: its CRYPTO streams, Initial keys and (with a key log)
Handshake keys.

Each direction's CRYPTO data (frames possibly out of order and over several packets) is
put back in order per packet-number space (Initial, Handshake: each starts at offset 0)
and cut into whole TLS handshake messages, which go to the connection's `Facts` as TCP's
do; those of Handshake packets count as decrypted. A CONNECTION_CLOSE carrying a TLS alert
(0x100 + alert, RFC 9001 4.8) is the alert. Bounded: `MAX_CRYPTO` bytes of CRYPTO data per
direction and space.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Final

from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import Conversation as _Conversation
from tlsprobe.offline.facts import CLIENT, SERVER
from tlsprobe.offline.quic_handshake import HandshakeKeys
from tlsprobe.offline.quic_packets import (
    CRYPTO,
    GOOGLE_SALTS,
    InitialKeys,
    crypto_frames,
    handshake_frames,
)

MAX_CRYPTO: Final = 1 << 16


class CryptoStream:
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

    __slots__ = ("closed", "dcid", "dcids", "held", "hs", "hs_sides", "keys", "sides",
                 "version")

    def __init__(self, cid: int, client: tuple[str, int], server: tuple[str, int],
                 dcid: bytes, version: int, ts: float, frame: int,
                 caches: AnalysisCaches | None = None) -> None:
        super().__init__(cid, client, server, ts, frame, caches)
        self.dcid, self.version = dcid, version
        self.dcids = [dcid]   # every DCID the client's Initials used (a Retry adds one)
        self.sides = (CryptoStream(), CryptoStream())
        self.keys = {CLIENT: InitialKeys(dcid, version, "client"),
                     SERVER: InitialKeys(dcid, version, "server")}
        #: the Handshake packets' keys (a key log's), why there are none (a note's text,
        #: "" for a key log without this connection), None: not looked up yet
        self.hs: HandshakeKeys | str | None = None
        self.hs_sides = (CryptoStream(), CryptoStream())  # the Handshake packets' CRYPTO streams
        #: Handshake packets before their keys: (direction, packet, pn offset, ts, frame)
        self.held: list[tuple[int, bytes, int, float, int]] = []
        self.closed = False  # a CONNECTION_CLOSE with a TLS alert was read

    def rekey(self, dcid: bytes, version: int, *, restart: bool) -> None:
        """Initial keys of another DCID or version; `restart`: the client begins a new
        handshake (its CRYPTO streams start again at offset 0)."""
        self.dcid, self.version = dcid, version
        if dcid not in self.dcids and len(self.dcids) < 4:
            self.dcids.append(dcid)
        self.keys = {CLIENT: InitialKeys(dcid, version, "client"),
                     SERVER: InitialKeys(dcid, version, "server")}
        if restart:
            self.sides = (CryptoStream(), CryptoStream())

    def crypto(self, direction: int, offset: int, data: bytes, ts: float, frame: int,
               handshake: bool = False) -> None:
        """A CRYPTO frame of an Initial packet, or (`handshake`) of a Handshake packet
        opened with the key log's keys: its whole messages go to the facts."""
        side = (self.hs_sides if handshake else self.sides)[direction]
        side.messages += side.add(offset, data)
        msgs = side.messages
        while len(msgs) >= 4:
            size = 4 + int.from_bytes(msgs[1:4], "big")
            if size > MAX_CRYPTO or len(msgs) < size:
                break
            msg = bytes(msgs[:size])
            del msgs[:size]
            self.message(direction, msg, ts, frame, handshake)

    def close(self, direction: int, code: int, decrypted: bool) -> None:
        """A CONNECTION_CLOSE: a TLS alert (0x100 + alert, RFC 9001 4.8) is the handshake's
        end, as a fatal alert is over TCP."""
        if 0x100 <= code <= 0x1FF:
            self.alert(direction, 2, code - 0x100, decrypted)
            self.closed = True


def read_handshake(conv: Conversation, keys: HandshakeKeys, direction: int, packet: bytes,
                    pn_offset: int, ts: float, frame: int) -> None:
    """A Handshake packet opened and its frames read (one that does not open is passed
    over, as tshark passes it: a packet of another connection, or damaged)."""
    try:
        payload = keys.open(direction, packet, pn_offset)
        for ftype, offset, chunk in handshake_frames(payload):
            if ftype == CRYPTO:
                conv.crypto(direction, offset, chunk, ts, frame, handshake=True)
            else:
                conv.close(direction, offset, True)
    except ValueError:
        return


def frames(payload: bytes, version: int) -> Iterator[tuple[int, int, bytes]]:
    """The CRYPTO and CONNECTION_CLOSE frames of an Initial packet (Google's versions:
    their CRYPTO frames)."""
    if version in GOOGLE_SALTS:
        for offset, chunk in crypto_frames(payload, version):
            yield CRYPTO, offset, chunk
    else:
        yield from handshake_frames(payload)


__all__ = ["MAX_CRYPTO", "Conversation", "CryptoStream", "frames", "read_handshake"]
