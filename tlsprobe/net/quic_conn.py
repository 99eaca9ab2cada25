"""The client side of one QUIC v1 or v2 connection, sans-IO: datagrams in and out, TLS
records to and from the engine.

The TLS engine (engine.client.ClientHandshake) speaks TLS records; over QUIC its handshake
messages travel in CRYPTO frames without records (RFC 9001 4). This class translates, so the
engine runs unchanged under the one driver: the engine's plaintext handshake records become
Initial CRYPTO data; its encrypted records are opened with the client's TLS 1.3 handshake
(then application) traffic secret, read from the engine's key schedule, and their messages
become Handshake CRYPTO data; its ChangeCipherSpec is dropped (QUIC has none). The other
way, the server's Initial CRYPTO data reaches the engine as plaintext records, its Handshake
and 1-RTT CRYPTO data as records protected with the server's traffic secret, and a
CONNECTION_CLOSE carrying a TLS alert (0x100 + alert) as that alert. Packet protection keys
for each epoch come from the same secrets (RFC 9001 5.1), with the labels of the version in
use (v2: RFC 9369); a server's first Initial in another version we offered in
version_information moves the connection to that version (RFC 9368 compatible version
negotiation), which its transport parameters must confirm.

Bounded: the bytes of the server's datagrams (--max-bytes, as over TCP), its packets with
CRYPTO data (--max-records, which over QUIC counts
them: the engine's records are only our framing of that data), CRYPTO data per epoch (the engine's --max-message and `MAX_CRYPTO` more: past
it, or past the out-of-order ranges kept, a limit of ours, closed with
CRYPTO_BUFFER_EXCEEDED), packets waiting for keys, frames per packet. Peer faults end as
HandshakeFailure (protocol, closed, alert).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlsprobe.engine.client import Limits
from tlsprobe.engine.common import HandshakeFailure
from tlsprobe.engine.protection import Tls13Protection
from tlsprobe.errors import FailureKind
from tlsprobe.net import quic_wire as w
from tlsprobe.net.quic_info import QuicInfo, frame_name
from tlsprobe.net.quic_records import EngineRecords
from tlsprobe.net.quic_send import DATAGRAM, INITIAL_ROOM, MAX_INITIAL, PacketsOut
from tlsprobe.net.quic_versions import VersionHandling

if TYPE_CHECKING:
    from tlsprobe.engine.interface import Handshake

#: the bounds of our Initial datagrams (quic_send.py) stay importable from here
__all__ = ["DATAGRAM", "INITIAL_ROOM", "MAX_CRYPTO", "MAX_INITIAL", "MAX_WAITING", "QuicConnection"]

MAX_CRYPTO = w.MAX_CRYPTO
MAX_WAITING = 32            # packets kept until their keys are known


class QuicConnection(PacketsOut, VersionHandling, EngineRecords):
    """Packet-level state of one client connection (see the module docstring)."""

    def __init__(self, info: QuicInfo, limits: Limits | None = None) -> None:
        self.info = info
        limits = limits or Limits()
        self.max_packets = limits.max_records   # over QUIC: packets with CRYPTO data
        self.max_bytes = limits.max_bytes       # the bytes of the server's datagrams
        self.bytes_in = 0
        self.engine: Handshake | None = None
        self.scid = info.scid
        self.original_dcid = info.original_dcid
        self.dcid = info.original_dcid
        self.token = b""
        self.key_dcid = self.dcid           # what the Initial keys derive from (Retry: new)
        self.version = info.version         # of our packets; the server may change it once
        self.send_keys: dict[int, w.PacketKeys] = {}
        self.recv_keys: dict[int, w.PacketKeys] = {}
        self._initial_keys()
        self.pn = {w.INITIAL: 0, w.HANDSHAKE: 0, w.APPLICATION: 0}
        self.largest = {w.INITIAL: -1, w.HANDSHAKE: -1, w.APPLICATION: -1}
        self.received: dict[int, set[int]] = {w.INITIAL: set(), w.HANDSHAKE: set(),
                                              w.APPLICATION: set()}
        self.ack_due = {w.INITIAL: False, w.HANDSHAKE: False, w.APPLICATION: False}
        self.crypto_out = {w.INITIAL: 0, w.HANDSHAKE: 0, w.APPLICATION: 0}
        self.crypto_limit = w.crypto_limit(limits.max_message)
        self.crypto_in = {space: w.CryptoStream(self.crypto_limit)
                          for space in (w.INITIAL, w.HANDSHAKE, w.APPLICATION)}
        self.initial_sent: list[tuple[int, bytes]] = []   # for Retry and retransmission
        self.handshake_sent: list[tuple[int, bytes]] = []   # our Finished, to send again
        self.server_prot: dict[int, Tls13Protection] = {}   # records for the engine
        self.client_prot: dict[int, Tls13Protection] = {}   # to open the engine's records
        self.client_finished = False
        self.waiting: list[w.Packet] = []
        self.engine_out = bytearray()
        self.outbox: list[bytes] = []       # datagrams to send
        self.alert: int | None = None       # a TLS alert the server closed with
        self.heard = False                  # any packet from the server opened
        self.opened = 0                     # packets from the server opened
        self.crypto_packets = 0             # of them, with CRYPTO data (--max-records)
        self.hello_mark = 0                 # server Initial CRYPTO bytes when our last hello left
        self.reset = False                  # the server sent a stateless reset
        self.retried = False
        self.closing = False                # the engine sent close_notify
        self.closed = False                 # our CONNECTION_CLOSE is out
        self.peer_closed: tuple[int, str] | None = None
        self.hs_stream = bytearray()        # the server's Handshake messages, for 0x39
        self.discarded: set[int] = set()    # spaces whose keys are gone (RFC 9001 4.9)

    # -- keys ----------------------------------------------------------------------------
    def _initial_keys(self) -> None:
        """The Initial keys of the current version and destination connection ID."""
        self.send_keys[w.INITIAL] = w.PacketKeys.initial(self.key_dcid, "client", self.version)
        self.recv_keys[w.INITIAL] = w.PacketKeys.initial(self.key_dcid, "server", self.version)

    def _discard(self, space: int) -> None:
        """Drop a space's packet keys (RFC 9001 4.9): Initial once our first Handshake
        packet is out (4.9.1), Handshake once the handshake is confirmed by HANDSHAKE_DONE
        (4.9.2, RFC 9001 4.1.2); nothing is sent in that space again, packets received in it
        are ignored."""
        self.send_keys.pop(space, None)
        self.recv_keys.pop(space, None)
        self.ack_due[space] = False
        self.discarded.add(space)

    def update_keys(self) -> None:
        """Install the packet keys of each epoch once the engine's key schedule has them."""
        keys = self.engine.session_keys() if self.engine is not None else None
        if keys is None or not keys.tls13:
            return
        suite = keys.cipher_suite
        for space, server, client in (
                (w.HANDSHAKE, keys.server_handshake_traffic_secret,
                 keys.client_handshake_traffic_secret),
                (w.APPLICATION, keys.server_application_traffic_secret,
                 keys.client_application_traffic_secret)):
            if server is None or client is None or space in self.server_prot:
                continue
            self.recv_keys[space] = w.PacketKeys(server, suite, self.version)
            self.send_keys[space] = w.PacketKeys(client, suite, self.version)
            self.server_prot[space] = keys.protection(server)
            self.client_prot[space] = keys.protection(client)

    # -- engine -> server ----------------------------------------------------------------
    def from_engine(self, data: bytes) -> None:
        """The engine's output (TLS records) becomes CRYPTO frames or a CONNECTION_CLOSE."""
        self.update_keys()
        self.engine_out += data
        while len(self.engine_out) >= 5:
            size = int.from_bytes(self.engine_out[3:5], "big")
            if len(self.engine_out) < 5 + size:
                break
            record = bytes(self.engine_out[:5 + size])
            del self.engine_out[:5 + size]
            self._engine_record(record[0], record)
        self.flush()

    def _engine_record(self, ctype: int, record: bytes) -> None:
        body = record[5:]
        if ctype == 22:
            self._crypto_out(w.INITIAL, body)
        elif ctype == 21 and len(body) == 2:
            self._engine_alert(body[1])
        elif ctype == 23:
            space = w.APPLICATION if self.client_finished else w.HANDSHAKE
            prot = self.client_prot.get(space)
            if prot is None:
                return
            try:
                inner_type, inner = prot.decrypt_record(record)
            except ValueError as exc:   # our own record: a bug in the epoch tracking
                raise HandshakeFailure(FailureKind.INTERNAL, "tlsprobe could not carry its "
                                       f"own TLS record over QUIC: {exc}") from None
            if inner_type == 21 and len(inner) == 2:
                self._engine_alert(inner[1])
            elif inner_type == 22:
                self._crypto_out(space, inner)
                if w.has_finished(inner):
                    self.client_finished = self.info.finished_sent = True

    def _engine_alert(self, description: int) -> None:
        if description == 0:       # close_notify: QUIC closes with CONNECTION_CLOSE instead
            self.closing = True
            return
        self.send_close(0x100 + description)

    def _crypto_out(self, space: int, data: bytes) -> None:
        if space == w.INITIAL and not self.closed:
            start = self.crypto_out[space]
            self.crypto_out[space] += len(data)
            self.initial_sent.append((start, data))
            self.hello_mark = self.crypto_in[w.INITIAL].next
            sent = self._send_initial(start, data)
            if len(self.initial_sent) == 1:
                self.info.client_hello_packets = sent
            return
        if space == w.HANDSHAKE:
            self.handshake_sent.append((self.crypto_out[space], data))
        self._send_crypto(space, self.crypto_out[space], data)
        self.crypto_out[space] += len(data)

    def _send_crypto(self, space: int, start: int, data: bytes) -> None:
        for i in range(0, len(data), 1000):
            self._send(space, w.crypto_frame(start + i, data[i:i + 1000]))

    def resend_handshake(self) -> None:
        """Our Handshake CRYPTO data (the Finished) again: no HANDSHAKE_DONE came yet."""
        for start, data in self.handshake_sent if not self.closed else []:
            self._send_crypto(w.HANDSHAKE, start, data)

    @property
    def answered(self) -> bool:
        """Whether the server's Initial CRYPTO data answered our last ClientHello; until then
        it is sent again on a timer (an ACK does not stop it: part of the hello may be lost)."""
        return self.crypto_in[w.INITIAL].next > self.hello_mark

    # -- server -> engine ----------------------------------------------------------------
    def datagram(self, data: bytes) -> None:
        """One datagram from the server; a datagram it cannot read is counted, dropped."""
        self.info.datagrams_received += 1
        self.bytes_in += len(data)
        if self.bytes_in > self.max_bytes:   # ours, as over TCP: the server broke no rule
            self.send_close(0x100 + 80)
            raise HandshakeFailure(FailureKind.LIMIT, f"server sent more than "
                                   f"{self.max_bytes} bytes in QUIC datagrams, tlsprobe's "
                                   "limit (--max-bytes raises it)")
        self.update_keys()
        token = dict(self.info.transport_parameters or ()).get(0x02)
        if isinstance(token, bytes) and w.is_stateless_reset(
                data, token, self.recv_keys.get(w.APPLICATION), self.scid,
                self.largest[w.APPLICATION]):
            self.reset = self.closed = True     # nothing more is sent (RFC 9000 10.3.1)
            return
        packets: list[w.Packet] = []
        try:   # RFC 9000 12.2: each coalesced packet is processed on its own, so the
            packets.extend(w.split_datagram(data, len(self.scid)))   # packets read before
        except ValueError as exc:             # bytes that cannot be read are kept
            self.info.ignore(f"datagram of {len(data)} bytes: {exc}" if not packets else
                             f"the bytes after packet {len(packets)} of a datagram of "
                             f"{len(data)} bytes: {exc}")
        for packet in packets:
            self._packet(packet)
        self.flush()

    def _packet(self, packet: w.Packet) -> None:
        if packet.kind == "VersionNegotiation":
            self._version_negotiation(packet)
            return
        if packet.kind == "Retry":
            self._retry(packet)
            return
        if packet.dcid != self.scid:
            self.info.ignore(f"{packet.kind} packet for another connection ID")
            return
        if packet.kind != "1-RTT" and packet.version != self.version and \
                not self._compatible(packet):
            return
        space = {"Initial": w.INITIAL, "Handshake": w.HANDSHAKE, "1-RTT": w.APPLICATION}.get(
            packet.kind)
        if space is None:    # 0-RTT: only a client sends it (RFC 9000 17.2.3)
            self.info.ignore(f"a {packet.kind} packet from the server")
            return
        keys = self.recv_keys.get(space)
        if keys is None and space in self.discarded:
            self.info.ignore(f"{packet.kind} packet after its keys were discarded "
                             "(RFC 9001 4.9)")
            return
        if keys is None:
            if len(self.waiting) < MAX_WAITING:
                self.waiting.append(packet)
            else:
                self.info.ignore(f"{packet.kind} packet: more than {MAX_WAITING} waiting "
                                 "for their keys")
            return
        try:
            pn, payload = w.unprotect(keys, packet.data, packet.pn_offset, self.largest[space])
            frames = w.parse_frames(payload)
        except ValueError as exc:
            self.info.ignore(f"{packet.kind} packet: {exc}")
            return
        if pn in self.received[space]:   # RFC 9000 12.3: a packet number is processed once
            self.info.ignore(f"{packet.kind} packet number {pn} again (RFC 9000 12.3)")
            return
        problem = w.packet_problem(packet, frames, self.pn[space])
        if problem is not None:
            self.send_close(problem[0])
            raise HandshakeFailure(FailureKind.PROTOCOL, problem[1])
        wrong = w.not_permitted(space, frames)
        if wrong is not None:
            self.send_close(0xA)
            article = "an" if packet.kind == "Initial" else "a"
            raise HandshakeFailure(FailureKind.PROTOCOL, f"server sent a "
                                   f"{frame_name(wrong.type)} frame in {article} {packet.kind} "
                                   "packet "
                                   "(RFC 9000 12.4 forbids it there: PROTOCOL_VIOLATION)")
        if space == w.INITIAL and not self.heard:
            self.dcid = packet.scid       # the server's chosen connection ID from now on
        self.heard = True
        self.opened += 1
        self._count_crypto(frames)
        self.largest[space] = max(self.largest[space], pn)
        if len(self.received[space]) < 4096:
            self.received[space].add(pn)
        self.info.note("<", packet.kind, pn, packet.dcid, packet.scid, payload)
        for frame in frames:
            self._frame(space, packet.kind, frame)
            if frame.ack_eliciting:
                self.ack_due[space] = True

    def _count_crypto(self, frames: list[w.Frame]) -> None:
        """--max-records over QUIC: the server's packets with CRYPTO data (what feeds the
        engine, as records do over TCP; ACK and PING packets cost no memory, and the
        deadline bounds them) past it are our limit, no fault of the server's."""
        if not any(f.type == 0x06 for f in frames):
            return
        self.crypto_packets += 1
        if self.crypto_packets > self.max_packets:
            self.send_close(0x100 + 80)
            raise HandshakeFailure(FailureKind.LIMIT, "server sent more than "
                                   f"{self.max_packets} QUIC packets with CRYPTO data, "
                                   "tlsprobe's limit (--max-records, which counts them over "
                                   "QUIC, raises it)")

    def _frame(self, space: int, kind: str, frame: w.Frame) -> None:
        if frame.type == 0x06:
            try:
                self.crypto_in[space].add(frame.offset, frame.data)
            except w.CryptoLimit as exc:   # RFC 9000 7.5: our bound, closed with 0xd
                self.send_close(0xD)
                raise HandshakeFailure(FailureKind.LIMIT, f"server's {kind} CRYPTO data is "
                                       f"over tlsprobe's limit: {exc}") from None
        elif frame.type == 0x1E:
            self.info.handshake_done = True
            self._discard(w.HANDSHAKE)      # the handshake is confirmed (RFC 9001 4.1.2)
        elif frame.type == 0x1A and not self.closed:   # RFC 9000 8.2.2: answered at once,
            self._send(space, b"\x1b" + frame.data, DATAGRAM)   # in 1,200 bytes or more
        elif frame.type in (0x1C, 0x1D):
            reason = frame.data[:200].decode("latin-1")
            self.peer_closed = self.info.closed_by_server = (frame.error, reason)
            self.info.closed_by_application = frame.type == 0x1D
            if frame.type == 0x1C and 0x100 <= frame.error <= 0x1FF:
                self.alert = frame.error - 0x100
            self.closed = True

    def retry_waiting(self) -> None:
        """Open the packets that arrived before their keys, now that keys may be known."""
        self.update_keys()
        waiting, self.waiting = self.waiting, []
        for packet in waiting:
            self._packet(packet)
        self.flush()
