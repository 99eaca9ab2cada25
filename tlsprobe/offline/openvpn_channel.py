"""TLS inside OpenVPN: the control channel's packets -> the TLS bytes they carry.

An OpenVPN packet starts with an opcode byte (opcode << 3 | key_id). Control packets carry
the sender's 8-byte session id, with tls-auth an HMAC, a replay packet id and a time, then
an array of acknowledged packet ids (with the peer's session id when not empty) and, except
in a bare ACK, the message packet id; the TLS bytes of P_CONTROL_V1 follow. Over TCP each
packet has a 2-byte length in front. The TLS stream is the P_CONTROL_V1 payloads in message
packet id order (retransmissions dropped, reordering undone within a bounded window).

The tls-auth HMAC length depends on the digest configured: it is found as the one that
makes the first P_CONTROL_V1 payload start with a TLS handshake record. With tls-crypt
(or tls-crypt-v2) the control channel is encrypted: `unreadable` then says so, and the
connection is still listed.

The stream framer (offline.framing) unwraps OpenVPN over TCP with `ControlChannel`; the
UDP sessions are followed by offline.openvpn's tracker.
"""

from __future__ import annotations

from typing import Final

P_CONTROL_V1: Final = 4
P_ACK_V1: Final = 5
P_DATA_V1: Final = 6
P_DATA_V2: Final = 9
RESET_CLIENT: Final = frozenset((1, 7, 10))  # HARD_RESET_CLIENT V1, V2, V3
RESET_SERVER: Final = frozenset((2, 8))  # HARD_RESET_SERVER V1, V2
CONTROL = frozenset((1, 2, 3, 4, 5, 7, 8, 10, 11))
#: tls-auth HMAC lengths: SHA-1, SHA-256, SHA-512, MD5, SHA-384, SHA-224, then none. A
#: length is taken only with a plausible replay id and time after the HMAC, tried before
#: none: an HMAC byte that reads as an ack count can make "none" frame the same payload
HMAC_SIZES: Final = (20, 32, 64, 16, 48, 28, 0)
_TIME_RANGE: Final = (946684800, 4102444800)  # 2000 .. 2100
MAX_WAITING: Final = 64  # out-of-order control packets held per direction
MAX_PROBES: Final = 4  # P_CONTROL_V1 packets tried for the HMAC length before giving up
MAX_PACKET = 1 << 16
MAX_SESSIONS: Final = 4096
TLS_CRYPT: Final = "control channel encrypted (tls-crypt) or an unknown tls-auth digest"


def is_reset(packet: bytes | bytearray, client: bool) -> bool:
    """A hard reset, the first packet of a session (key id 0)."""
    return len(packet) >= 14 and packet[0] & 7 == 0 and \
        packet[0] >> 3 in (RESET_CLIENT if client else RESET_SERVER)


def answers(server: bytes, client: bytes) -> bool:
    """Whether a server's hard reset answers this client's: its ack array names the
    client's session id (plain or tls-auth: a 64-bit match), or both carry a replay id and
    a time after the same HMAC length (tls-auth, tls-crypt: acks encrypted) with times a
    day apart at most. One side's first bytes alone are no evidence: DNP3's `05 64 08`
    reads as a length and a client reset, a QUIC short header as a reset byte."""
    if not (is_reset(client, True) and is_reset(server, False)):
        return False
    sid = client[1:9]
    for hmac in HMAC_SIZES:
        off = 9 + (hmac + 8 if hmac else 0)
        if off < len(server) and 1 <= server[off] <= 8:
            end = off + 1 + 4 * server[off]
            if server[end:end + 8] == sid:
                return True
    for hmac in HMAC_SIZES:
        if _auth_plausible(server, hmac) and _auth_plausible(client, hmac):
            server_time = int.from_bytes(server[13 + hmac:17 + hmac], "big")
            client_time = int.from_bytes(client[13 + hmac:17 + hmac], "big")
            if abs(server_time - client_time) <= 86400:
                return True
    return False


def _control(packet: bytes, hmac: int) -> tuple[int, bytes] | None:
    """(message packet id, payload) of a P_CONTROL_V1 read with an HMAC of `hmac` bytes."""
    off = 9 + (hmac + 8 if hmac else 0)
    if off >= len(packet):
        return None
    acks = packet[off]
    if acks > 8:
        return None
    off += 1 + 4 * acks + (8 if acks else 0)
    if off + 4 > len(packet):
        return None
    return int.from_bytes(packet[off:off + 4], "big"), packet[off + 4:]


def _auth_plausible(packet: bytes, hmac: int) -> bool:
    """After an HMAC of `hmac` bytes: a replay packet id and a time that can be real."""
    if len(packet) < 9 + hmac + 8:
        return False
    replay = int.from_bytes(packet[9 + hmac:13 + hmac], "big")
    when = int.from_bytes(packet[13 + hmac:17 + hmac], "big")
    return 0 < replay < 1 << 24 and _TIME_RANGE[0] <= when <= _TIME_RANGE[1]


class ControlChannel:
    """One direction of an OpenVPN session: packets (or TCP bytes) in, TLS bytes out."""

    __slots__ = ("_buf", "_early", "_tcp", "data_packets", "first", "hmac", "next_pid",
                 "probes", "unreadable", "waiting")
    kind = "openvpn"
    raw = False  # (an MS-TDS channel ends in raw records; this one never does)

    def __init__(self, tcp: bool) -> None:
        self._tcp = tcp
        self._buf = bytearray()
        self.hmac: int | None = None
        self.next_pid = 0
        self.waiting: dict[int, bytes] = {}
        self.probes = 0
        self._early: list[bytes] = []  # control packets seen before the HMAC length was
        self.unreadable: str | None = None
        self.data_packets = 0
        self.first: bytes | None = None  # this direction's first packet (its start), kept

    def feed(self, data: bytes) -> bytes:
        """TCP bytes of this direction: the TLS bytes they complete."""
        buf = self._buf
        buf += data
        out = []
        p = 0
        while len(buf) - p >= 2:
            length = (buf[p] << 8) | buf[p + 1]
            if len(buf) - p < 2 + length:
                break
            out.append(self.packet(bytes(buf[p + 2:p + 2 + length])))
            p += 2 + length
        del buf[:p]
        if len(buf) > MAX_PACKET:
            buf.clear()
            self.unreadable = "OpenVPN framing lost"
        return b"".join(out)

    def packet(self, packet: bytes) -> bytes:
        """One OpenVPN packet: the TLS bytes it makes available (maybe none)."""
        if self.first is None:
            self.first = packet[:128]
        if not packet or self.unreadable is not None:
            return b""
        op = packet[0] >> 3
        if op == P_DATA_V1 or op == P_DATA_V2:
            self.data_packets += 1
            return b""
        if op != P_CONTROL_V1:
            return b""
        if self.hmac is None:
            for size in HMAC_SIZES:
                if size and not _auth_plausible(packet, size):
                    continue
                got = _control(packet, size)
                if got is not None and got[1][:2] in (b"\x16\x03", b"\x15\x03"):
                    self.hmac, self.next_pid = size, got[0]
                    break
            else:
                self.probes += 1
                if self.probes >= MAX_PROBES:
                    self.unreadable = TLS_CRYPT
                    self._early = []
                else:  # maybe a later piece that came first: read once the start is found
                    self._early.append(packet)
                return b""
            early, self._early = self._early, []
            return self._payload(packet) + b"".join(self._payload(p) for p in early)
        return self._payload(packet)

    def _payload(self, packet: bytes) -> bytes:
        """A P_CONTROL_V1 once the HMAC length is known: the TLS bytes now in order."""
        got = _control(packet, self.hmac or 0)
        if got is None:
            return b""
        pid, payload = got
        if (pid - self.next_pid) & 0xFFFFFFFF >= 0x80000000 or pid in self.waiting:
            return b""  # retransmitted
        if len(self.waiting) >= MAX_WAITING:
            self.unreadable = "too many control packets out of order"
            return b""
        self.waiting[pid] = payload
        out = []
        while self.next_pid in self.waiting:
            out.append(self.waiting.pop(self.next_pid))
            self.next_pid = (self.next_pid + 1) & 0xFFFFFFFF
        return b"".join(out)
