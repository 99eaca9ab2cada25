"""QUIC Initial packets: versions, their public keys, long headers and CRYPTO frames.

Initial packets are protected with keys anyone can derive (RFC 9001 5.2): HKDF-Extract
with the version's public salt over the client's first Destination Connection ID, then
"client in" / "server in", then "quic key", "quic iv", "quic hp" ("quicv2 ..." for QUIC v2,
RFC 9369). Header protection is removed with AES-ECB over a 16-byte sample and the payload
opened with AES-128-GCM. `quic.QuicTracker` puts the packets of one handshake together.
"""

from __future__ import annotations

from collections.abc import Iterator

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tlsprobe.engine.keyschedule import hkdf_expand_label, hkdf_extract

QUIC_V1, QUIC_V2 = 0x00000001, 0x6B3343CF
SALT_V1 = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
SALT_V2 = bytes.fromhex("0dede3def700a6db819381be6e269dcbf9bd2ed9")
SALT_DRAFT29 = bytes.fromhex("afbfec289993d24c9e9786f19c6111e04390a899")
SALT_DRAFT23 = bytes.fromhex("c3eef712c72ebb5a11a7d2432bb46365bef9f502")
SALT_DRAFT22 = bytes.fromhex("7fbcdb0e7c66bbe9193a96cd21519ebd7a02644a")
#: Google QUIC versions with IETF Initial protection, their salts as Wireshark's
#: packet-quic.c has them. T050 and T051 carry a TLS 1.3 handshake, Q050 QUIC Crypto
#: (CHLO/SHLO messages, `QUIC_CRYPTO_VERSIONS`), which is not TLS.
Q050, T050, T051 = 0x51303530, 0x54303530, 0x54303531
GOOGLE_SALTS = {
    Q050: bytes.fromhex("504574efd066fe2f9d945cfcdbd3a7f0d3b56b45"),
    T050: bytes.fromhex("7ff579e5acd072915580304c43a2367c60488310"),
    T051: bytes.fromhex("7a4edef4e7ccee5fa4506c19124fc8ccda6e033d"),
}
QUIC_CRYPTO_VERSIONS = frozenset({Q050})
#: Facebook mvfst versions and the IETF draft each follows (0xfaceb001: draft 22,
#: 0xfaceb002 and 0xfaceb00e: draft 27, as mvfst and Wireshark derive their keys)
MVFST_DRAFTS = {0xFACEB001: 22, 0xFACEB002: 27, 0xFACEB00E: 27}


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


_GQUIC_LENGTHS = (1, 2, 4, 6)   # gQUIC ACK field lengths by their 2-bit codes


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
