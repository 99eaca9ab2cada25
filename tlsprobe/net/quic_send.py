"""The packets a QUIC client connection sends (net.quic_conn.QuicConnection): each sealed
in its packet number space with a due ACK, an Initial padded to 1,200 bytes (RFC 9000 14.1)
or more after a Retry with a long token, our Initial CRYPTO data sent again, and
CONNECTION_CLOSE in the epochs the server may read. A mixin, as quic_records.EngineRecords
and quic_versions.VersionHandling: the state is the connection's."""

from __future__ import annotations

from tlsprobe.engine.common import HandshakeFailure
from tlsprobe.errors import FailureKind
from tlsprobe.net import quic_wire as w
from tlsprobe.net.quic_info import QuicInfo

__all__ = ["DATAGRAM", "INITIAL_ROOM", "MAX_INITIAL", "PacketsOut"]

DATAGRAM = 1200             # our datagrams that carry an Initial are padded to this size
INITIAL_ROOM = 512          # CRYPTO bytes an Initial keeps beside a long Retry token
MAX_INITIAL = 65507         # the largest UDP datagram (IPv4): our longest Initial datagram


class PacketsOut:
    """The sending methods of QuicConnection (whose attributes these are)."""

    info: QuicInfo
    send_keys: dict[int, w.PacketKeys]
    received: dict[int, set[int]]
    ack_due: dict[int, bool]
    pn: dict[int, int]
    dcid: bytes
    scid: bytes
    token: bytes
    version: int
    outbox: list[bytes]
    discarded: set[int]
    initial_sent: list[tuple[int, bytes]]
    closed: bool

    def _discard(self, space: int) -> None:
        raise NotImplementedError

    def _long_header(self, space: int, payload_len: int) -> bytes:
        ptype = 0 if space == w.INITIAL else 2
        return w.long_header(ptype, self.dcid, self.scid, self.pn[space], payload_len,
                             self.token if space == w.INITIAL else None,
                             version=self.version)

    def _send(self, space: int, frames: bytes, size: int = 0) -> None:
        """Seal one packet in `space` (with a due ACK) and queue it as one datagram, padded
        to `size` bytes (an Initial: to `initial_size`)."""
        keys = self.send_keys.get(space)
        if keys is None:
            return
        if self.ack_due[space] and self.received[space]:
            frames = w.ack_frame(self.received[space]) + frames
            self.ack_due[space] = False
        pn = self.pn[space]
        if space == w.INITIAL:
            size = self.initial_size()
        header_size = len(self._long_header(space, 0)) if space != w.APPLICATION else \
            len(w.short_header(self.dcid, pn))
        frames += bytes(max(0, size - header_size - 16 - len(frames)))
        frames += bytes(max(0, 4 - len(frames)))       # room for the protection sample
        header = (self._long_header(space, len(frames)) if space != w.APPLICATION
                  else w.short_header(self.dcid, pn))
        self.outbox.append(w.seal(keys, header, pn, 2, frames))
        self.info.note(">", ("Initial", "", "Handshake", "1-RTT")[space], pn, self.dcid,
                       self.scid if space != w.APPLICATION else b"", frames)
        self.pn[space] = pn + 1
        if space == w.HANDSHAKE and w.INITIAL not in self.discarded:
            self._discard(w.INITIAL)

    def flush(self) -> None:
        """Queue the ACKs that are due."""
        for space in (w.INITIAL, w.HANDSHAKE, w.APPLICATION):
            if self.ack_due[space] and not self.closed:
                self._send(space, b"")

    def initial_size(self) -> int:
        """The size of our datagrams that carry an Initial: 1,200 bytes (RFC 9000 14.1),
        larger when the Retry token would leave less than INITIAL_ROOM bytes of CRYPTO data
        (14.1 sets 1,200 as the least, not the most), up to MAX_INITIAL."""
        header = len(self._long_header(w.INITIAL, 0)) + 16 + 12
        return min(MAX_INITIAL, max(DATAGRAM, header + INITIAL_ROOM))

    def _send_initial(self, start: int, data: bytes) -> int:
        """Initial CRYPTO data in as many padded packets as it needs; returns the count."""
        room = self.initial_size() - len(self._long_header(w.INITIAL, 0)) - 16 - 12
        if room < 100:   # our bound (a token this long fills a UDP datagram): no fault
            self.send_close(0x1)
            raise HandshakeFailure(FailureKind.LIMIT, f"server's Retry token of "
                                   f"{len(self.token)} bytes leaves no room for CRYPTO data "
                                   f"in an Initial datagram of {MAX_INITIAL} bytes, the "
                                   "largest UDP datagram and tlsprobe's limit")
        for i in range(0, len(data), room):
            self._send(w.INITIAL, w.crypto_frame(start + i, data[i:i + room]))
        return -(-len(data) // room)

    def retransmit(self) -> None:
        """No answer yet (or a Retry): send our Initial CRYPTO data again in new packets."""
        for start, data in self.initial_sent:
            self._send_initial(start, data)

    def send_close(self, error: int) -> None:
        """CONNECTION_CLOSE in the highest epoch we have keys for, and in Handshake with it
        until the handshake is confirmed (RFC 9000 10.2.3: the server may not have 1-RTT
        keys yet); once confirmed, Handshake keys are discarded and 1-RTT alone carries it."""
        if self.closed:
            return
        spaces = [s for s in (w.HANDSHAKE, w.APPLICATION) if s in self.send_keys] or \
            [s for s in (w.INITIAL,) if s in self.send_keys]
        for space in spaces:
            self._send(space, w.close_frame(error))
        self.closed = True
        self.info.closed_by_us = error
