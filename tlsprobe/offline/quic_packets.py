"""QUIC Initial packets: versions, their public keys, long headers and CRYPTO frames.

Initial packets are protected with keys anyone can derive (RFC 9001 5.2): HKDF-Extract
with the version's public salt over the client's first Destination Connection ID, then
"client in" / "server in", then "quic key", "quic iv", "quic hp" ("quicv2 ..." for QUIC v2,
RFC 9369); the versions, salts and key derivation are wire.quic's, shared with the live
client. Header protection is removed with AES-ECB over a 16-byte sample and the payload
opened with AES-128-GCM. `quic.QuicTracker` puts the packets of one handshake together.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tlsprobe.wire.quic import (
    GOOGLE_SALTS,
    MVFST_DRAFTS,
    Q050,
    QUIC_CRYPTO_VERSIONS,
    QUIC_V1,
    QUIC_V2,
    SALT_DRAFT22,
    SALT_DRAFT23,
    SALT_DRAFT29,
    SALT_V1,
    SALT_V2,
    T050,
    T051,
    draft_of,
    initial_secret,
    key_material,
    version_salt,
)
from tlsprobe.wire.quic import pull_varint as _varint

__all__ = [
    "CONNECTION_CLOSE",
    "CRYPTO",
    "GOOGLE_SALTS",
    "HANDSHAKE",
    "INITIAL",
    "MVFST_DRAFTS",
    "Q050",
    "QUIC_CRYPTO_VERSIONS",
    "QUIC_V1",
    "QUIC_V2",
    "SALT_DRAFT22",
    "SALT_DRAFT23",
    "SALT_DRAFT29",
    "SALT_V1",
    "SALT_V2",
    "T050",
    "T051",
    "InitialKeys",
    "crypto_frames",
    "cut_initial",
    "draft_of",
    "handshake_frames",
    "initial_packets",
    "long_packets",
    "version_salt",
]


class InitialKeys:
    """One direction's Initial packet protection."""

    def __init__(self, dcid: bytes, version: int, side: str) -> None:
        key, self.iv, hp = key_material(initial_secret(dcid, version, side), version)
        self.aead = AESGCM(key)
        self.hp = Cipher(algorithms.AES(hp), modes.ECB())

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


def cut_initial(datagram: bytes) -> tuple[int, bytes] | None:
    """(version, dcid) of a datagram cut by the capture's snaplen that starts with a
    client-shaped Initial of a known version (RFC 9000 17.2: DCID of 8 to 20 bytes), whose
    header survived though its payload cannot be opened."""
    if len(datagram) < 7 or not datagram[0] & 0x80:
        return None
    version = int.from_bytes(datagram[1:5], "big")
    if version_salt(version) is None or version in QUIC_CRYPTO_VERSIONS:
        return None
    if (datagram[0] >> 4) & 0x03 != (1 if version == QUIC_V2 else 0):
        return None
    n = datagram[5]
    if not 8 <= n <= 20 or 6 + n > len(datagram):
        return None
    return version, datagram[6:6 + n]


def initial_packets(datagram: bytes) -> Iterator[tuple[int, bytes, bytes, bytes, int, int]]:
    """(version, dcid, scid, packet, pn_offset, end) of each long-header Initial packet
    coalesced in one datagram; stops at the first packet that is not one. The fixed bit
    (0x40) is not required: RFC 9287 lets a peer grease it, and the version (one this
    module knows) is what says the packet is QUIC."""
    for code, version, dcid, scid, packet, pn_offset, end in long_packets(datagram):
        if code == INITIAL:
            yield version, dcid, scid, packet, pn_offset, end


INITIAL: Final = 0     # the v1 type codes of long-header packets (RFC 9000 17.2)
HANDSHAKE: Final = 2


def long_packets(datagram: bytes
                 ) -> Iterator[tuple[int, int, bytes, bytes, bytes, int, int]]:
    """(v1 type code, version, dcid, scid, packet, pn_offset, end) of each long-header
    packet (Initial 0, 0-RTT 1, Handshake 2, whatever the version's own bits) coalesced in
    one datagram, in order; stops at a Retry, a short header or a version this module does
    not know."""
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
        bits = (datagram[start] >> 4) & 0x03
        code = (bits - 1) & 3 if version == QUIC_V2 else bits
        try:
            if code == INITIAL:
                token_len, p = _varint(datagram, p)
                p += token_len
            elif code == 3:  # Retry: no length field
                return
            length, p = _varint(datagram, p)
        except ValueError:
            return
        end = p + length
        if end > len(datagram):
            return
        yield code, version, dcid, scid, datagram[start:end], p - start, end - start
        p = end


def crypto_frames(payload: bytes, version: int = QUIC_V1) -> Iterator[tuple[int, bytes]]:
    """(offset, data) of the CRYPTO frames of an Initial packet's payload."""
    if version in GOOGLE_SALTS:
        yield from _gquic_crypto_frames(payload)
        return
    for ftype, offset, data in handshake_frames(payload):
        if ftype != CONNECTION_CLOSE:
            yield offset, data


CRYPTO: Final = 0x06
CONNECTION_CLOSE: Final = 0x1C


def handshake_frames(payload: bytes) -> Iterator[tuple[int, int, bytes]]:
    """The frames of an Initial or Handshake packet's payload that carry something to read:
    (CRYPTO, offset, data) and (CONNECTION_CLOSE, error code, reason phrase). PADDING, PING
    and ACK are passed over; the walk ends at a frame these packets may not carry (RFC 9000
    12.4) or at the end of a CONNECTION_CLOSE. Raises ValueError on a cut frame."""
    p = 0
    while p < len(payload):
        ftype = payload[p]
        if ftype == 0x00 or ftype == 0x01:      # PADDING, PING
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
        elif ftype == CRYPTO:
            offset, p = _varint(payload, p + 1)
            size, p = _varint(payload, p)
            yield CRYPTO, offset, payload[p:p + size]
            p += size
        elif ftype == CONNECTION_CLOSE:
            code, p = _varint(payload, p + 1)
            _, p = _varint(payload, p)        # the frame type that caused it
            size, p = _varint(payload, p)
            yield CONNECTION_CLOSE, code, payload[p:p + size]
            return
        else:                  # anything not allowed in Initial and Handshake packets
            return


_GQUIC_LENGTHS: Final = (1, 2, 4, 6)   # gQUIC ACK field lengths by their 2-bit codes


def _gquic_crypto_frames(payload: bytes) -> Iterator[tuple[int, bytes]]:
    """Q050/T050/T051 frames keep Google QUIC's layout (as Wireshark's packet-gquic.c reads
    them): CRYPTO is type 0x08 (varint offset and length), PADDING 0x00 fills the rest,
    PING is 0x07, ACK is 0x40-0x7f (Q034+ layout: largest acked, delta time, ack blocks,
    timestamps). Other frames end the walk: a CRYPTO frame after one is not read."""
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
        elif ftype & 0xC0 == 0x40:
            p = _gquic_ack_end(payload, p, ftype)
        else:
            return


def _gquic_ack_end(payload: bytes, p: int, ftype: int) -> int:
    """Where a gQUIC (Q034+) ACK frame starting at `p` ends; raises ValueError if cut."""
    largest = _GQUIC_LENGTHS[(ftype >> 2) & 3]
    block = _GQUIC_LENGTHS[ftype & 3]
    p += 1 + largest + 2
    blocks = 0
    if ftype & 0x20:
        blocks = _byte(payload, p)
        p += 1
    p += block + blocks * (1 + block)
    stamps = _byte(payload, p)
    p += 1
    if stamps:
        p += 5 + (stamps - 1) * 3
    if p > len(payload):
        raise ValueError("truncated gQUIC ACK frame")
    return p


def _byte(payload: bytes, p: int) -> int:
    if p >= len(payload):
        raise ValueError("truncated gQUIC ACK frame")
    return payload[p]
