"""QUIC packet pieces shared by the live client (net/quic_*) and the capture reader
(offline/quic*): versions and their Initial salts, variable-length integers, long-header
packet types, packet protection keys, header protection, sealing and opening, and the
Retry integrity tag. Pure functions and small classes, no sockets.

QUIC v1 (RFC 9000, RFC 9001) and v2 (RFC 9369) differ on the wire only in what this module
holds: the version number, the Initial salt, the HKDF labels ("quic key" / "quicv2 key",
"quic iv" / "quicv2 iv", "quic hp" / "quicv2 hp"), the long-header type bits and the Retry
integrity key and nonce. The IETF drafts, Google's T050/T051/Q050 and Facebook's mvfst
versions are known for their Initial salts only (captures show them; the client speaks v1
and v2). Every reader raises ValueError on bytes it cannot read, never IndexError.
"""

from __future__ import annotations

import hmac
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

QUIC_V1: Final = 0x00000001
QUIC_V2: Final = 0x6B3343CF
SALT_V1: Final = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
SALT_V2: Final = bytes.fromhex("0dede3def700a6db819381be6e269dcbf9bd2ed9")
SALT_DRAFT29: Final = bytes.fromhex("afbfec289993d24c9e9786f19c6111e04390a899")
SALT_DRAFT23: Final = bytes.fromhex("c3eef712c72ebb5a11a7d2432bb46365bef9f502")
SALT_DRAFT22: Final = bytes.fromhex("7fbcdb0e7c66bbe9193a96cd21519ebd7a02644a")
#: Google QUIC versions with IETF Initial protection, their salts as Wireshark's
#: packet-quic.c has them. T050 and T051 carry a TLS 1.3 handshake, Q050 QUIC Crypto
#: (CHLO/SHLO messages, `QUIC_CRYPTO_VERSIONS`), which is not TLS.
Q050: Final = 0x51303530
T050: Final = 0x54303530
T051: Final = 0x54303531
GOOGLE_SALTS: Final = {
    Q050: bytes.fromhex("504574efd066fe2f9d945cfcdbd3a7f0d3b56b45"),
    T050: bytes.fromhex("7ff579e5acd072915580304c43a2367c60488310"),
    T051: bytes.fromhex("7a4edef4e7ccee5fa4506c19124fc8ccda6e033d"),
}
QUIC_CRYPTO_VERSIONS: Final = frozenset({Q050})
#: Facebook mvfst versions and the IETF draft each follows (0xfaceb001: draft 22,
#: 0xfaceb002 and 0xfaceb00e: draft 27, as mvfst and Wireshark derive their keys)
MVFST_DRAFTS: Final = {0xFACEB001: 22, 0xFACEB002: 27, 0xFACEB00E: 27}

#: the versions the live client speaks, by name (`--quic-version`)
VERSION_NAMES: Final = {QUIC_V1: "v1", QUIC_V2: "v2"}
#: long-header packet types by their v1 codes; v2 adds one to each code (RFC 9369 3.2)
LONG_TYPES: Final = ("Initial", "0-RTT", "Handshake", "Retry")
#: Retry integrity AEAD key and nonce (RFC 9001 5.8, RFC 9369 3.3.3)
RETRY_KEYS: Final = {
    QUIC_V1: (bytes.fromhex("be0c690b9f66575a1d766b54e368c84e"),
                     bytes.fromhex("461599d35d632bf2239825bb")),
    QUIC_V2: (bytes.fromhex("8fb4b01b56ac48e260fbcbcead7ccc92"),
                     bytes.fromhex("d86969bc2d7c6d9990efb04a")),
}
#: suite -> (AEAD key length, hash, ChaCha20?) of the TLS 1.3 suites QUIC allows
SUITES: Final = {0x1301: (16, "sha256", False), 0x1302: (32, "sha384", False),
                 0x1303: (32, "sha256", True)}


def version_name(version: int) -> str:
    """"v1", "v2", "draft-29" (0xff00001d), "mvfst draft-27" (Facebook's), "Google T051",
    "reserved" (0x?a?a?a?a, RFC 9000 15: to force version negotiation), or the version in
    hex."""
    name = VERSION_NAMES.get(version)
    if name is not None:
        return name
    if version >> 8 == 0xFF0000:
        return f"draft-{version & 0xFF}"
    if version in MVFST_DRAFTS:
        return f"mvfst draft-{MVFST_DRAFTS[version]}"
    if version in GOOGLE_SALTS:
        return f"Google {version.to_bytes(4, 'big').decode()}"
    if version & 0x0F0F0F0F == 0x0A0A0A0A:
        return "reserved"
    return f"0x{version:08x}"


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
    changed the salt at drafts 23, 29 and 33 (33 and 34 already use v1's). A version
    reserved to force version negotiation (0x?a?a?a?a, RFC 9000 15) has no salt of its
    own: clients that send one (quic-interop-runner's test "V") protect the Initial with
    draft 29's, which is what Wireshark tries; the AEAD tag says whether it was right."""
    if version == QUIC_V1:
        return SALT_V1, "quic"
    if version == QUIC_V2:
        return SALT_V2, "quicv2"
    if version & 0x0F0F0F0F == 0x0A0A0A0A:
        return SALT_DRAFT29, "quic"
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


def label_prefix(version: int) -> str:
    """The HKDF label prefix of a version's packet protection ("quic" unless v2)."""
    return "quicv2" if version == QUIC_V2 else "quic"


def long_type(first: int, version: int) -> str:
    """The type name of a long-header packet from its first byte."""
    code = (first >> 4) & 3
    return LONG_TYPES[(code - 1) & 3 if version == QUIC_V2 else code]


def long_type_bits(v1_code: int, version: int) -> int:
    """The two type bits a packet of v1 type code `v1_code` carries in `version`."""
    return (v1_code + 1) & 3 if version == QUIC_V2 else v1_code


# -- integers and fields -----------------------------------------------------------------
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
    """(n bytes at `p`, next offset); ValueError when they run past the end."""
    if n < 0 or p + n > len(buf):
        raise ValueError(f"field of {n} bytes runs past the end")
    return buf[p:p + n], p + n


# -- packet protection -------------------------------------------------------------------
def hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    """HKDF-Extract with SHA-256 (RFC 5869), as the Initial secrets use it. wire/ sits below
    engine/ (docs/INTERNALS.md), so the few lines of HKDF QUIC needs are kept here; tests
    check them against engine.keyschedule."""
    return hmac.digest(salt, ikm, "sha256")


def hkdf_expand_label(secret: bytes, label: bytes, length: int,
                      hash_name: str = "sha256") -> bytes:
    """HKDF-Expand-Label (RFC 8446 7.1) with an empty context, `length` < 256 bytes."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.digest(secret, block + info + bytes([counter]), hash_name)
        out += block
        counter += 1
    return out[:length]


def initial_secret(dcid: bytes, version: int, side: str) -> bytes:
    """The Initial secret of `side` ("client" or "server") for the client's DCID (RFC 9001
    5.2); an unknown version gets v1's salt."""
    salt = (version_salt(version) or (SALT_V1, "quic"))[0]
    return hkdf_expand_label(hkdf_extract(salt, dcid), f"{side} in".encode(), 32)


def key_material(secret: bytes, version: int, key_len: int = 16,
                 hash_name: str = "sha256") -> tuple[bytes, bytes, bytes]:
    """(AEAD key, IV, header protection key) of one packet protection secret."""
    prefix = label_prefix(version)
    return (hkdf_expand_label(secret, f"{prefix} key".encode(), key_len, hash_name),
            hkdf_expand_label(secret, f"{prefix} iv".encode(), 12, hash_name),
            hkdf_expand_label(secret, f"{prefix} hp".encode(), key_len, hash_name))


class PacketKeys:
    """One direction's packet protection for one epoch (RFC 9001 5.1-5.4)."""

    def __init__(self, secret: bytes, suite: int = 0x1301, version: int = QUIC_V1) -> None:
        key_len, hash_name, chacha = SUITES.get(suite, SUITES[0x1301])
        key, self.iv, hp = key_material(secret, version, key_len, hash_name)
        self.aead: AESGCM | ChaCha20Poly1305 = ChaCha20Poly1305(key) if chacha else AESGCM(key)
        self._hp_key = hp
        self._chacha = chacha

    @classmethod
    def initial(cls, dcid: bytes, side: str, version: int = QUIC_V1) -> PacketKeys:
        """The Initial keys of `side` ("client" or "server") for the client's DCID."""
        return cls(initial_secret(dcid, version, side), version=version)

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


def retry_tag(odcid: bytes, retry_without_tag: bytes, version: int = QUIC_V1) -> bytes:
    """The Retry integrity tag (RFC 9001 5.8, RFC 9369 3.3.3) a Retry must end with."""
    key, nonce = RETRY_KEYS.get(version, RETRY_KEYS[QUIC_V1])
    pseudo = bytes([len(odcid)]) + odcid + retry_without_tag
    return AESGCM(key).encrypt(nonce, b"", pseudo)
