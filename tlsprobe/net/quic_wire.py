"""QUIC v1 wire pieces for the live client (RFC 9000, RFC 9001): pure functions, no sockets.

Variable-length integers, packet protection keys from a TLS secret ("quic key", "quic iv",
"quic hp"), header protection (AES-ECB or ChaCha20 over a 16-byte sample), long and short
header packets (built and opened), the frames the handshake needs (PADDING, PING, ACK,
CRYPTO, CONNECTION_CLOSE, HANDSHAKE_DONE; others are skipped when their length is known),
the Retry integrity tag (RFC 9001 5.8) and the CRYPTO stream reassembly. Every reader
raises ValueError on bytes it cannot read, never IndexError.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from tlsprobe.engine.keyschedule import hkdf_expand_label, hkdf_extract

#: QUIC v1 and its Initial salt (RFC 9001 5.2); offline/quic_packets.py holds the same values
#: with those of the other versions captures show (net/ does not import offline/)
QUIC_V1 = 0x00000001
SALT_V1 = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")

INITIAL, HANDSHAKE, APPLICATION = 0, 2, 3     # packet number spaces (0-RTT unused)
LONG_TYPES = {0: "Initial", 1: "0-RTT", 2: "Handshake", 3: "Retry"}   # QUIC v1
RETRY_KEY_V1 = bytes.fromhex("be0c690b9f66575a1d766b54e368c84e")
RETRY_NONCE_V1 = bytes.fromhex("461599d35d632bf2239825bb")
#: suite -> (AEAD key length, hash, ChaCha20?) of the TLS 1.3 suites QUIC allows
SUITES = {0x1301: (16, "sha256", False), 0x1302: (32, "sha384", False),
          0x1303: (32, "sha256", True)}


def varint(value: int) -> bytes:
    """RFC 9000 16: the shortest encoding of `value` (< 2^62)."""
    if value < 0x40:
        return bytes([value])
    if value < 0x4000:
        return (value | 0x4000).to_bytes(2, "big")
    if value < 0x40000000:
        return (value | 0x80000000).to_bytes(4, "big")
    if value < 1 << 62:
        return (value | 0xC000000000000000).to_bytes(8, "big")
    raise ValueError(f"{value} does not fit a QUIC varint")


def pull_varint(buf: bytes, p: int) -> tuple[int, int]:
    """(value, next offset) of the varint at `p`; ValueError when cut."""
    if p >= len(buf):
        raise ValueError("truncated varint")
    size = 1 << (buf[p] >> 6)
    if p + size > len(buf):
        raise ValueError("truncated varint")
    return int.from_bytes(buf[p:p + size], "big") & ((1 << (8 * size - 2)) - 1), p + size


def pull_bytes(buf: bytes, p: int, n: int) -> tuple[bytes, int]:
    if n < 0 or p + n > len(buf):
        raise ValueError(f"field of {n} bytes runs past the end")
    return buf[p:p + n], p + n


class PacketKeys:
    """One direction's packet protection for one epoch (RFC 9001 5.1-5.4)."""

    def __init__(self, secret: bytes, suite: int = 0x1301) -> None:
        key_len, hash_name, chacha = SUITES.get(suite, SUITES[0x1301])
        key = hkdf_expand_label(secret, b"quic key", b"", key_len, hash_name)
        self.iv = hkdf_expand_label(secret, b"quic iv", b"", 12, hash_name)
        hp = hkdf_expand_label(secret, b"quic hp", b"", key_len, hash_name)
        self.aead: AESGCM | ChaCha20Poly1305 = ChaCha20Poly1305(key) if chacha else AESGCM(key)
        self._hp_key = hp
        self._chacha = chacha

    @classmethod
    def initial(cls, dcid: bytes, side: str) -> PacketKeys:
        """The Initial keys of `side` ("client" or "server") for the client's first DCID."""
        secret = hkdf_expand_label(hkdf_extract(SALT_V1, dcid), f"{side} in".encode(), b"", 32)
        return cls(secret)

    def mask(self, sample: bytes) -> bytes:
        """The 5-byte header protection mask of a 16-byte sample."""
        if self._chacha:
            enc = Cipher(algorithms.ChaCha20(self._hp_key, sample), None).encryptor()
            return enc.update(bytes(5))
        enc = Cipher(algorithms.AES(self._hp_key), modes.ECB()).encryptor()
        return (enc.update(sample) + enc.finalize())[:5]

    def nonce(self, pn: int) -> bytes:
        return (int.from_bytes(self.iv, "big") ^ pn).to_bytes(12, "big")


def seal(keys: PacketKeys, header: bytes, pn: int, pn_len: int, payload: bytes) -> bytes:
    """Encrypt `payload` after `header` (which ends with the packet number) and apply header
    protection; the payload must be long enough for the sample (caller pads)."""
    sealed = header + keys.aead.encrypt(keys.nonce(pn), payload, header)
    pn_offset = len(header) - pn_len
    mask = keys.mask(sealed[pn_offset + 4:pn_offset + 20])
    first = sealed[0] ^ (mask[0] & (0x0F if sealed[0] & 0x80 else 0x1F))
    pn_bytes = bytes(b ^ m for b, m in zip(sealed[pn_offset:pn_offset + pn_len], mask[1:]))
    return bytes([first]) + sealed[1:pn_offset] + pn_bytes + sealed[pn_offset + pn_len:]


def long_header(ptype: int, dcid: bytes, scid: bytes, pn: int, payload_len: int,
                token: bytes | None = None, pn_len: int = 2) -> bytes:
    """A v1 long header up to the packet number; `payload_len` excludes the 16-byte tag."""
    out = bytes([0xC0 | (ptype << 4) | (pn_len - 1)]) + QUIC_V1.to_bytes(4, "big")
    out += bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    if ptype == 0:
        out += varint(len(token or b"")) + (token or b"")
    length = pn_len + payload_len + 16
    return out + (length | 0x4000).to_bytes(2, "big") + (pn & 0xFFFF).to_bytes(pn_len, "big")


def short_header(dcid: bytes, pn: int, pn_len: int = 2) -> bytes:
    return bytes([0x40 | (pn_len - 1)]) + dcid + (pn & 0xFFFF).to_bytes(pn_len, "big")


def decode_pn(truncated: int, pn_len: int, largest: int) -> int:
    """RFC 9000 A.3: the full packet number nearest the next expected one."""
    expected = largest + 1
    win = 1 << (pn_len * 8)
    candidate = (expected & ~(win - 1)) | truncated
    if candidate <= expected - win // 2 and candidate < (1 << 62) - win:
        return candidate + win
    if candidate > expected + win // 2 and candidate >= win:
        return candidate - win
    return candidate


def unprotect(keys: PacketKeys, packet: bytes, pn_offset: int,
              largest: int) -> tuple[int, bytes]:
    """(packet number, plaintext payload) of one packet; ValueError when it does not open."""
    if pn_offset + 20 > len(packet):
        raise ValueError("packet too short for the header protection sample")
    mask = keys.mask(packet[pn_offset + 4:pn_offset + 20])
    first = packet[0] ^ (mask[0] & (0x0F if packet[0] & 0x80 else 0x1F))
    pn_len = (first & 0x03) + 1
    pn_bytes = bytes(b ^ m for b, m in zip(packet[pn_offset:pn_offset + pn_len], mask[1:]))
    header = bytes([first]) + packet[1:pn_offset] + pn_bytes
    pn = decode_pn(int.from_bytes(pn_bytes, "big"), pn_len, largest)
    try:
        return pn, keys.aead.decrypt(keys.nonce(pn), packet[pn_offset + pn_len:], header)
    except InvalidTag:
        raise ValueError("packet does not decrypt") from None


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
        if version != QUIC_V1:
            raise ValueError(f"long header packet of QUIC version 0x{version:08x}")
        kind = LONG_TYPES[(first >> 4) & 3]
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


def retry_tag(odcid: bytes, retry_without_tag: bytes) -> bytes:
    """The Retry integrity tag (RFC 9001 5.8) a v1 Retry must end with."""
    pseudo = bytes([len(odcid)]) + odcid + retry_without_tag
    return AESGCM(RETRY_KEY_V1).encrypt(RETRY_NONCE_V1, b"", pseudo)


MAX_CRYPTO = 1 << 16        # CRYPTO bytes accepted per epoch
MAX_RANGES = 256            # out-of-order CRYPTO ranges waiting per epoch


class CryptoStream:
    """One epoch's incoming CRYPTO stream: ranges in any order, handed on (`ready`) once
    contiguous; ValueError past MAX_CRYPTO bytes or MAX_RANGES waiting ranges."""

    def __init__(self) -> None:
        self.next = 0
        self.ranges: dict[int, bytes] = {}
        self.ready = bytearray()

    def add(self, offset: int, data: bytes) -> None:
        if offset + len(data) > MAX_CRYPTO:
            raise ValueError(f"beyond {MAX_CRYPTO} bytes (CRYPTO_BUFFER_EXCEEDED)")
        if offset + len(data) <= self.next or not data:
            return
        if len(self.ranges) >= MAX_RANGES:
            raise ValueError(f"more than {MAX_RANGES} gaps")
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
    for (_, prev_low), (high, low) in zip(ranges, ranges[1:]):
        out += varint(prev_low - high - 2) + varint(high - low)
    return out


def close_frame(error: int, reason: bytes = b"") -> bytes:
    """A CONNECTION_CLOSE of the transport kind (0x1c), allowed in every packet type."""
    return b"\x1c" + varint(error) + varint(0) + varint(len(reason)) + reason
