"""QUIC v1 and v2 wire pieces for the live client (RFC 9000, RFC 9001, RFC 9369): pure
functions, no sockets.

Variable-length integers, packet protection keys, header protection, sealing, opening and
the Retry integrity tag come from wire.quic (shared with the capture reader); here: long and
short headers (built), the packets of a datagram (split), the frames the handshake needs
(PADDING, PING, ACK, CRYPTO, CONNECTION_CLOSE, HANDSHAKE_DONE, PATH_CHALLENGE and
PATH_RESPONSE; others are skipped when their length is known), which frames a packet type
may carry and the CRYPTO stream reassembly. Every reader raises ValueError on bytes
it cannot read, never IndexError.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass

from tlsprobe.wire.quic import (
    QUIC_V1,
    QUIC_V2,
    SALT_V1,
    SALT_V2,
    SUITES,
    PacketKeys,
    decode_pn,
    long_type,
    long_type_bits,
    pull_bytes,
    pull_varint,
    retry_tag,
    seal,
    unprotect,
    varint,
    version_name,
)

__all__ = ["APPLICATION", "HANDSHAKE", "INITIAL", "QUIC_V1", "QUIC_V2", "SALT_V1", "SALT_V2",
           "SUITES", "VERSIONS", "CryptoLimit", "CryptoStream", "Frame", "Packet", "PacketKeys",
           "ack_frame", "close_frame", "crypto_frame", "crypto_limit", "decode_pn",
           "has_finished", "long_header", "new_connection_ids", "not_permitted", "packet_problem", "parse_frames", "pull_bytes", "pull_varint", "retry_tag",
           "seal", "short_header", "split_datagram", "unprotect", "varint", "version_name"]

INITIAL, HANDSHAKE, APPLICATION = 0, 2, 3     # packet number spaces (0-RTT unused)
VERSIONS = (QUIC_V1, QUIC_V2)                 # the versions the client speaks


def long_header(ptype: int, dcid: bytes, scid: bytes, pn: int, payload_len: int,
                token: bytes | None = None, pn_len: int = 2, version: int = QUIC_V1) -> bytes:
    """A long header up to the packet number; `ptype` is the v1 type code (0 Initial,
    2 Handshake), `payload_len` excludes the 16-byte tag."""
    bits = long_type_bits(ptype, version)
    out = bytes([0xC0 | (bits << 4) | (pn_len - 1)]) + version.to_bytes(4, "big")
    out += bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    if ptype == 0:
        out += varint(len(token or b"")) + (token or b"")
    length = pn_len + payload_len + 16
    return out + (length | 0x4000).to_bytes(2, "big") + (pn & 0xFFFF).to_bytes(pn_len, "big")


def short_header(dcid: bytes, pn: int, pn_len: int = 2) -> bytes:
    return bytes([0x40 | (pn_len - 1)]) + dcid + (pn & 0xFFFF).to_bytes(pn_len, "big")


@dataclass(frozen=True)
class Packet:
    """One packet of a datagram, header read, payload still protected."""

    kind: str            # Initial, Handshake, 0-RTT, Retry, 1-RTT, VersionNegotiation
    version: int
    dcid: bytes
    scid: bytes
    data: bytes          # the whole packet
    pn_offset: int       # Retry: where its token starts; VN: where the versions start
    token: bytes = b""


def split_datagram(datagram: bytes, short_dcid_len: int) -> Iterator[Packet]:
    """The packets coalesced in one datagram (RFC 9000 12.2); ValueError when unreadable."""
    p = 0
    while p < len(datagram):
        start = p
        first = datagram[p]
        if not first & 0x80:
            dcid, _ = pull_bytes(datagram, p + 1, short_dcid_len)
            yield Packet("1-RTT", QUIC_V1, dcid, b"", datagram[p:], 1 + short_dcid_len)
            return
        version_b, p = pull_bytes(datagram, p + 1, 4)
        version = int.from_bytes(version_b, "big")
        n, p = pull_bytes(datagram, p, 1)
        dcid, p = pull_bytes(datagram, p, n[0])
        n, p = pull_bytes(datagram, p, 1)
        scid, p = pull_bytes(datagram, p, n[0])
        if version == 0:
            yield Packet("VersionNegotiation", 0, dcid, scid, datagram[start:], p - start)
            return
        if version not in VERSIONS:
            raise ValueError(f"long header packet of QUIC version 0x{version:08x}")
        kind = long_type(first, version)
        if kind == "Retry":
            yield Packet(kind, version, dcid, scid, datagram[start:], p - start)
            return
        token = b""
        if kind == "Initial":
            size, p = pull_varint(datagram, p)
            token, p = pull_bytes(datagram, p, size)
        length, p = pull_varint(datagram, p)
        _, end = pull_bytes(datagram, p, length)
        yield Packet(kind, version, dcid, scid, datagram[start:end], p - start, token)
        p = end


def is_stateless_reset(data: bytes, token: bytes, keys: PacketKeys | None, our_cid: bytes,
                       largest: int) -> bool:
    """A stateless reset (RFC 9000 10.3): a short-header datagram of at least 21 bytes that
    ends in the server's stateless_reset_token (from its transport parameters: before them
    none is known and such a datagram is only unreadable) and does not open as a 1-RTT
    packet for `our_cid` with `keys`."""
    if len(token) != 16 or len(data) < 21 or data[0] & 0xC0 != 0x40 or data[-16:] != token:
        return False
    if keys is not None and data[1:1 + len(our_cid)] == our_cid:
        try:
            unprotect(keys, data, 1 + len(our_cid), largest)
            return False
        except ValueError:
            pass
    return True


MAX_CRYPTO = 1 << 16        # CRYPTO bytes per epoch beside its largest handshake message
MAX_RANGES = 256            # out-of-order CRYPTO ranges waiting per epoch


def crypto_limit(max_message: int) -> int:
    """CRYPTO bytes accepted per epoch: one handshake message of up to `max_message` (the
    engine's --max-message: a certificate chain) and MAX_CRYPTO for the others."""
    return max_message + MAX_CRYPTO


class CryptoLimit(ValueError):
    """More CRYPTO data than the client's own bounds allow (RFC 9000 7.5 lets a client
    bound its buffer and close with CRYPTO_BUFFER_EXCEEDED): no fault of the server's."""


class CryptoStream:
    """One epoch's incoming CRYPTO stream: ranges in any order, handed on (`ready`) once
    contiguous; CryptoLimit past `limit` bytes or MAX_RANGES waiting ranges."""

    def __init__(self, limit: int = MAX_CRYPTO) -> None:
        self.limit = limit
        self.next = 0
        self.ranges: dict[int, bytes] = {}
        self.ready = bytearray()

    def add(self, offset: int, data: bytes) -> None:
        if offset + len(data) > self.limit:
            raise CryptoLimit(f"beyond {self.limit} bytes in one packet number space "
                              "(--max-message raises it)")
        if offset + len(data) <= self.next or not data:
            return
        if len(self.ranges) >= MAX_RANGES:
            raise CryptoLimit(f"more than {MAX_RANGES} out-of-order ranges waiting (a fixed "
                              "bound, docs/LIMITS.md)")
        if len(data) > len(self.ranges.get(offset, b"")):
            self.ranges[offset] = data
        moved = True
        while moved:
            moved = False
            for start in sorted(self.ranges):
                chunk = self.ranges[start]
                if start > self.next:
                    break
                del self.ranges[start]
                if start + len(chunk) > self.next:
                    self.ready += chunk[self.next - start:]
                    self.next = start + len(chunk)
                    moved = True


# -- frames ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Frame:
    """One frame: its type, and what the client acts on (CRYPTO data, ACK ranges, the
    CONNECTION_CLOSE error code and reason)."""

    type: int
    offset: int = 0
    data: bytes = b""
    error: int = 0
    ranges: tuple[tuple[int, int], ...] = ()

    @property
    def ack_eliciting(self) -> bool:
        return self.type not in (0x00, 0x02, 0x03, 0x1C, 0x1D)


#: frames skipped by the number of varints they hold (RFC 9000 19)
_VARINT_FRAMES = {0x04: 3, 0x05: 2, 0x10: 1, 0x11: 2, 0x12: 1, 0x13: 1, 0x14: 1, 0x15: 2,
                  0x16: 1, 0x17: 1, 0x19: 1}


def parse_frames(payload: bytes) -> list[Frame]:
    """The frames of a decrypted payload; ValueError on a frame that cannot be read."""
    frames: list[Frame] = []
    p = 0
    while p < len(payload):
        ftype, p = pull_varint(payload, p)
        if ftype in (0x00, 0x01, 0x1E):
            if ftype or not frames or frames[-1].type:
                frames.append(Frame(ftype))
        elif ftype in (0x02, 0x03):
            frame, p = _ack(payload, p, ftype)
            frames.append(frame)
        elif ftype == 0x06:
            offset, p = pull_varint(payload, p)
            size, p = pull_varint(payload, p)
            data, p = pull_bytes(payload, p, size)
            frames.append(Frame(ftype, offset, data))
        elif ftype in (0x1C, 0x1D):
            error, p = pull_varint(payload, p)
            if ftype == 0x1C:
                _, p = pull_varint(payload, p)
            size, p = pull_varint(payload, p)
            reason, p = pull_bytes(payload, p, size)
            frames.append(Frame(ftype, data=reason, error=error))
        elif ftype in (0x1A, 0x1B):   # PATH_CHALLENGE, PATH_RESPONSE (RFC 9000 19.17-18)
            data, p = pull_bytes(payload, p, 8)
            frames.append(Frame(ftype, data=data))
        elif ftype == 0x07:
            size, p = pull_varint(payload, p)
            _, p = pull_bytes(payload, p, size)
            frames.append(Frame(ftype))
        elif 0x08 <= ftype <= 0x0F:   # STREAM
            _, p = pull_varint(payload, p)
            if ftype & 0x04:
                _, p = pull_varint(payload, p)
            size = len(payload) - p
            if ftype & 0x02:
                size, p = pull_varint(payload, p)
            _, p = pull_bytes(payload, p, size)
            frames.append(Frame(ftype))
        elif ftype == 0x18:           # NEW_CONNECTION_ID
            _, p = pull_varint(payload, p)
            _, p = pull_varint(payload, p)
            n, p = pull_bytes(payload, p, 1)
            _, p = pull_bytes(payload, p, n[0] + 16)
            frames.append(Frame(ftype))
        elif ftype in _VARINT_FRAMES:
            for _ in range(_VARINT_FRAMES[ftype]):
                _, p = pull_varint(payload, p)
            frames.append(Frame(ftype))
        else:
            raise ValueError(f"unknown frame type 0x{ftype:x}")
    return frames


#: the frames an Initial or Handshake packet may carry (RFC 9000 12.4, table 3): PADDING,
#: PING, ACK, CRYPTO and the transport CONNECTION_CLOSE
HANDSHAKE_FRAMES = frozenset({0x00, 0x01, 0x02, 0x03, 0x06, 0x1C})


def not_permitted(space: int, frames: list[Frame]) -> Frame | None:
    """The first frame a packet of `space` may not carry (RFC 9000 12.4: a connection
    error of type PROTOCOL_VIOLATION), or None."""
    if space == APPLICATION:
        return None
    return next((f for f in frames if f.type not in HANDSHAKE_FRAMES), None)


def packet_problem(packet: Packet, frames: list[Frame], sent: int) -> tuple[int, str] | None:
    """(our CONNECTION_CLOSE's error code, the error's text) when a server packet that
    opened breaks a rule the client enforces: a token in its Initial (RFC 9000 17.2.2:
    PROTOCOL_VIOLATION), an ACK frame that acknowledges a negative packet number (19.3.1:
    FRAME_ENCODING_ERROR) or a packet never sent in its space (`sent`: packets we sent
    there; 13.1: PROTOCOL_VIOLATION); else None."""
    if packet.token:
        return 0xA, (f"server sent an Initial packet with a token of {len(packet.token)} "
                     "bytes (RFC 9000 17.2.2: a server's Initial has Token Length 0; "
                     "PROTOCOL_VIOLATION)")
    for frame in frames:
        if frame.type not in (0x02, 0x03):
            continue
        if min(low for low, _ in frame.ranges) < 0:
            return 0x7, (f"server's {packet.kind} packet has an ACK frame whose ranges "
                         "reach below packet number 0 (RFC 9000 19.3.1: "
                         "FRAME_ENCODING_ERROR)")
        largest = frame.ranges[0][1]
        if largest >= sent:
            return 0xA, (f"server's {packet.kind} packet has an ACK frame for packet number "
                         f"{largest}, but tlsprobe sent {sent} packets in that space (RFC "
                         "9000 13.1: PROTOCOL_VIOLATION)")
    return None


def _ack(payload: bytes, p: int, ftype: int) -> tuple[Frame, int]:
    largest, p = pull_varint(payload, p)
    _, p = pull_varint(payload, p)
    count, p = pull_varint(payload, p)
    first, p = pull_varint(payload, p)
    ranges = [(largest - first, largest)]
    low = largest - first
    for _ in range(min(count, 256)):
        gap, p = pull_varint(payload, p)
        size, p = pull_varint(payload, p)
        high = low - gap - 2
        low = high - size
        ranges.append((low, high))
    if count > 256:
        raise ValueError(f"ACK frame with {count} ranges")
    if ftype == 0x03:
        for _ in range(3):
            _, p = pull_varint(payload, p)
    return Frame(ftype, ranges=tuple(ranges)), p


def crypto_frame(offset: int, data: bytes) -> bytes:
    return b"\x06" + varint(offset) + varint(len(data)) + data


def ack_frame(received: set[int]) -> bytes:
    """An ACK frame (delay 0) for the packet numbers in `received` (not empty)."""
    pns = sorted(received, reverse=True)
    ranges: list[tuple[int, int]] = []   # (high, low), descending
    for pn in pns:
        if ranges and ranges[-1][1] == pn + 1:
            ranges[-1] = (ranges[-1][0], pn)
        else:
            ranges.append((pn, pn))
    ranges = ranges[:32]
    out = b"\x02" + varint(ranges[0][0]) + varint(0) + varint(len(ranges) - 1)
    out += varint(ranges[0][0] - ranges[0][1])
    for (_, prev_low), (high, low) in itertools.pairwise(ranges):
        out += varint(prev_low - high - 2) + varint(high - low)
    return out


def close_frame(error: int, reason: bytes = b"") -> bytes:
    """A CONNECTION_CLOSE of the transport kind (0x1c), allowed in every packet type."""
    return b"\x1c" + varint(error) + varint(0) + varint(len(reason)) + reason


def has_finished(messages: bytes) -> bool:
    """Whether the handshake messages in one record include a Finished (type 20)."""
    p = 0
    while p + 4 <= len(messages):
        if messages[p] == 20:
            return True
        p += 4 + int.from_bytes(messages[p + 1:p + 4], "big")
    return False


def new_connection_ids() -> tuple[bytes, bytes]:
    """A fresh (source, destination) connection ID pair, 8 bytes each."""
    return os.urandom(8), os.urandom(8)
