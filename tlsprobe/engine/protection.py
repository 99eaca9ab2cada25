"""Record protection for one direction of a connection: encrypt outgoing, decrypt incoming.

Each object owns its key material and its 64-bit sequence number, which advances on every
successful encrypt or decrypt (a failed decrypt leaves it alone, so a pcap reader may try
several keys on one record). Every authentication, padding or length failure raises the
one `RecordProtectionError`, carrying the alert a peer would send (bad_record_mac,
record_overflow or unexpected_message).

TLS 1.3 (RFC 8446 section 5.2): nonce = iv XOR seq, additional data = the record header,
TLSInnerPlaintext = content || type || zeros. TLS 1.2 AEAD (RFC 5246 section 6.2.3.3):
additional data = seq || type || version || plaintext length; AES-GCM/CCM nonce = 4-byte
salt || 8-byte explicit nonce sent in the record (RFC 5288, 6655); ChaCha20-Poly1305 nonce
= iv XOR seq with nothing explicit (RFC 7905). CBC: MAC-then-encrypt (RFC 5246 section
6.2.3.2) with an explicit IV per record in TLS 1.1+ and the chained IV of TLS 1.0, or
encrypt-then-MAC (RFC 7366). Besides AES and 3DES, the CBC ciphers Camellia, SEED, IDEA
and single DES (as 3DES with the key repeated), and the stream cipher RC4 (MAC-then-encrypt,
one keystream per direction, RFC 5246 6.2.3.1), all from cryptography's decrepit module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlsprobe.engine.prf import KeyBlock
from tlsprobe.engine.protection_base import (
    ALERT_BAD_RECORD_MAC,
    ALERT_RECORD_OVERFLOW,
    ALERT_UNEXPECTED_MESSAGE,
    APPLICATION_DATA,
    MAX_PLAINTEXT,
    MAX_TLS12_CIPHERTEXT,
    MAX_TLS13_CIPHERTEXT,
    TLS1_0,
    TLS1_2,
    TLS1_3,
    RecordProtection,
    RecordProtectionError,
    record_header,
)
from tlsprobe.engine.protection_cbc import CbcProtection, StreamProtection
from tlsprobe.engine.suites import CIPHERS, SuiteParams

if TYPE_CHECKING:
    # cryptography's ciphers are imported when a protection is made (a probe that stops
    # before the keys, a group audit, imports none of them: scan start-up, issue 35)
    from cryptography.hazmat.primitives.ciphers.aead import (
        AESCCM,
        AESGCM,
        ChaCha20Poly1305,
    )

    _AEAD = AESGCM | AESCCM | ChaCha20Poly1305

__all__ = ["ALERT_BAD_RECORD_MAC", "ALERT_RECORD_OVERFLOW", "ALERT_UNEXPECTED_MESSAGE",
           "APPLICATION_DATA", "MAX_PLAINTEXT", "MAX_TLS12_CIPHERTEXT", "MAX_TLS13_CIPHERTEXT",
           "TLS1_0", "TLS1_2", "TLS1_3", "CbcProtection", "RecordProtection",
           "RecordProtectionError", "StreamProtection", "Tls12AeadProtection",
           "Tls13Protection", "protection_for_suite", "protections_from_key_block"]


def _invalid_tag() -> type[Exception]:
    """cryptography's AEAD tag failure: resolved once by each AEAD protection, with its
    cipher (an import statement per record cost as much as decrypting one)."""
    from cryptography.exceptions import InvalidTag
    return InvalidTag


def _aead(cipher: str, key: bytes) -> _AEAD:
    params = CIPHERS.get(cipher)
    if params is None or not params.aead:
        raise ValueError(f"not an AEAD cipher: {cipher!r}")
    if len(key) != params.key_len:
        raise ValueError(f"{cipher} needs a {params.key_len}-byte key, got {len(key)}")
    from cryptography.hazmat.primitives.ciphers.aead import (
        AESCCM,
        AESGCM,
        ChaCha20Poly1305,
    )
    if cipher.endswith("GCM"):
        return AESGCM(key)
    if "CCM" in cipher:
        return AESCCM(key, tag_length=params.tag_len)
    return ChaCha20Poly1305(key)


def _xor_seq(iv: bytes, seq: int) -> bytes:
    padded = seq.to_bytes(len(iv), "big")
    return bytes(a ^ b for a, b in zip(iv, padded))


class Tls13Protection(RecordProtection):
    """TLS 1.3 AEAD record protection with a traffic key and IV (RFC 8446 section 5.2)."""

    version = TLS1_2  # legacy_record_version on the wire

    def __init__(self, cipher: str, key: bytes, iv: bytes, seq: int = 0) -> None:
        super().__init__(seq)
        self.cipher = cipher
        self._aead = _aead(cipher, key)
        self._invalid_tag = _invalid_tag()
        if len(iv) != 12:
            raise ValueError(f"TLS 1.3 IV must be 12 bytes, got {len(iv)}")
        self._iv = bytes(iv)
        self.tag_len = CIPHERS[cipher].tag_len

    def encrypt(self, content_type: int, plaintext: bytes, padding: int = 0) -> bytes:
        seq = self._next_seq()
        inner = bytes(plaintext) + bytes([content_type]) + bytes(padding)
        header = record_header(APPLICATION_DATA, TLS1_2, len(inner) + self.tag_len)
        out = header + self._aead.encrypt(_xor_seq(self._iv, seq), inner, header)
        self.seq = seq + 1
        return out

    def decrypt(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        seq = self._next_seq()
        if len(fragment) > MAX_TLS13_CIPHERTEXT:
            raise RecordProtectionError(f"encrypted record of {len(fragment)} bytes exceeds "
                                        f"2^14+256", ALERT_RECORD_OVERFLOW)
        if len(fragment) < self.tag_len + 1:
            raise RecordProtectionError(f"encrypted record of {len(fragment)} bytes is "
                                        f"shorter than the tag")
        header = record_header(content_type, version, len(fragment))
        try:
            inner = self._aead.decrypt(_xor_seq(self._iv, seq), bytes(fragment), header)
        except self._invalid_tag:
            raise RecordProtectionError("bad_record_mac: AEAD tag check failed") from None
        if len(inner) > MAX_PLAINTEXT + 1:
            raise RecordProtectionError("TLSInnerPlaintext exceeds 2^14+1 bytes",
                                        ALERT_RECORD_OVERFLOW)
        stripped = inner.rstrip(b"\x00")
        if not stripped:
            raise RecordProtectionError("TLSInnerPlaintext has no content type",
                                        ALERT_UNEXPECTED_MESSAGE)
        self.seq = seq + 1
        return stripped[-1], stripped[:-1]


class Tls12AeadProtection(RecordProtection):
    """TLS 1.2 AEAD: AES-GCM/AES-CCM(_8) with explicit nonce, or ChaCha20-Poly1305 (RFC 7905).

    `fixed_iv` is the key-block IV: the 4-byte salt for GCM/CCM, 12 bytes for ChaCha."""

    def __init__(self, cipher: str, key: bytes, fixed_iv: bytes, version: int = TLS1_2,
                 seq: int = 0) -> None:
        super().__init__(seq)
        self._aead = _aead(cipher, key)
        self._invalid_tag = _invalid_tag()
        params = CIPHERS[cipher]  # _aead has checked the name
        if len(fixed_iv) != params.fixed_iv_len:
            raise ValueError(f"{cipher} needs a {params.fixed_iv_len}-byte IV, "
                             f"got {len(fixed_iv)}")
        self.cipher = cipher
        self.version = version
        self._iv = bytes(fixed_iv)
        self.tag_len = params.tag_len
        self.explicit_len = params.record_iv_len

    def _nonce(self, seq: int, explicit: bytes) -> bytes:
        return self._iv + explicit if self.explicit_len else _xor_seq(self._iv, seq)

    def _aad(self, seq: int, content_type: int, version: int, length: int) -> bytes:
        return seq.to_bytes(8, "big") + record_header(content_type, version, length)

    def encrypt(self, content_type: int, plaintext: bytes) -> bytes:
        seq = self._next_seq()
        explicit = seq.to_bytes(8, "big") if self.explicit_len else b""
        aad = self._aad(seq, content_type, self.version, len(plaintext))
        body = explicit + self._aead.encrypt(self._nonce(seq, explicit), bytes(plaintext), aad)
        self.seq = seq + 1
        return record_header(content_type, self.version, len(body)) + body

    def decrypt(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        seq = self._next_seq()
        if len(fragment) > MAX_TLS12_CIPHERTEXT:
            raise RecordProtectionError("encrypted record exceeds 2^14+2048 bytes",
                                        ALERT_RECORD_OVERFLOW)
        plain_len = len(fragment) - self.explicit_len - self.tag_len
        if plain_len < 0:
            raise RecordProtectionError(f"encrypted record of {len(fragment)} bytes is "
                                        f"shorter than nonce and tag")
        explicit = bytes(fragment[:self.explicit_len])
        aad = self._aad(seq, content_type, version, plain_len)
        try:
            plaintext = self._aead.decrypt(self._nonce(seq, explicit),
                                           bytes(fragment[self.explicit_len:]), aad)
        except self._invalid_tag:
            raise RecordProtectionError("bad_record_mac: AEAD tag check failed") from None
        if len(plaintext) > MAX_PLAINTEXT:
            raise RecordProtectionError("plaintext exceeds 2^14 bytes", ALERT_RECORD_OVERFLOW)
        self.seq = seq + 1
        return content_type, plaintext


def protection_for_suite(suite: SuiteParams, key: bytes, iv: bytes, mac_key: bytes = b"",
                         version: int = TLS1_2, etm: bool = False,
                         seq: int = 0) -> RecordProtection:
    """The protection for one direction of `suite` at `version`.

    TLS 1.3 suites (or version 0x0304): `key`/`iv` are the traffic key and IV. TLS 1.2
    AEAD: `iv` is the key-block fixed IV. CBC/NULL: `mac_key` and, for TLS 1.0 only, `iv`
    as the first chained IV; `etm` when encrypt_then_mac was negotiated."""
    if suite.tls13 or version >= TLS1_3:
        return Tls13Protection(suite.cipher, key, iv, seq)
    if suite.aead:
        return Tls12AeadProtection(suite.cipher, key, iv, version, seq)
    if suite.mac is None:
        raise ValueError(f"suite 0x{suite.code:04x} has neither AEAD nor MAC")
    if suite.cipher_params.stream:
        return StreamProtection(suite.cipher, key, suite.mac, mac_key, version, seq)
    return CbcProtection(suite.cipher, key, suite.mac, mac_key, version, iv, etm, seq)


def protections_from_key_block(suite: SuiteParams, key_block: KeyBlock, version: int,
                               etm: bool = False) -> tuple[RecordProtection, RecordProtection]:
    """(client_write, server_write) protections of a TLS 1.0-1.2 key block."""
    client = protection_for_suite(suite, key_block.client_write_key, key_block.client_write_iv,
                                  key_block.client_write_mac_key, version, etm)
    server = protection_for_suite(suite, key_block.server_write_key, key_block.server_write_iv,
                                  key_block.server_write_mac_key, version, etm)
    return client, server
