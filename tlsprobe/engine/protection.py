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

import os
from typing import TYPE_CHECKING

from tlsprobe.engine.keyschedule import hash_algorithm
from tlsprobe.engine.prf import KeyBlock
from tlsprobe.engine.suites import CIPHERS, MAC_LEN, SuiteParams

APPLICATION_DATA = 23
TLS1_0, TLS1_2, TLS1_3 = 0x0301, 0x0303, 0x0304
MAX_PLAINTEXT = 1 << 14
MAX_TLS13_CIPHERTEXT = MAX_PLAINTEXT + 256
MAX_TLS12_CIPHERTEXT = MAX_PLAINTEXT + 2048
_SEQ_LIMIT = 1 << 64

# AlertDescription values (RFC 8446 section 6)
ALERT_UNEXPECTED_MESSAGE = 10
ALERT_BAD_RECORD_MAC = 20
ALERT_RECORD_OVERFLOW = 22

if TYPE_CHECKING:
    # cryptography's ciphers are imported when a protection is made (a probe that stops
    # before the keys, a group audit, imports none of them: scan start-up, issue 35)
    from cryptography.hazmat.primitives.ciphers import BlockCipherAlgorithm
    from cryptography.hazmat.primitives.ciphers.aead import (
        AESCCM,
        AESGCM,
        ChaCha20Poly1305,
    )

    _AEAD = AESGCM | AESCCM | ChaCha20Poly1305


class RecordProtectionError(ValueError):
    """A protected record failed to decrypt or authenticate; `alert` is what to send."""

    def __init__(self, reason: str, alert: int = ALERT_BAD_RECORD_MAC) -> None:
        self.reason = reason
        self.alert = alert
        super().__init__(reason)


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


def _header(content_type: int, version: int, length: int) -> bytes:
    if length > 0xFFFF:
        raise ValueError(f"record of {length} bytes does not fit a 16-bit length")
    return bytes([content_type]) + version.to_bytes(2, "big") + length.to_bytes(2, "big")


def _xor_seq(iv: bytes, seq: int) -> bytes:
    padded = seq.to_bytes(len(iv), "big")
    return bytes(a ^ b for a, b in zip(iv, padded))


class RecordProtection:
    """Base of all protections: sequence handling and whole-record decryption."""

    version: int = TLS1_2

    def __init__(self, seq: int = 0) -> None:
        self.seq = seq

    def _next_seq(self) -> int:
        if self.seq >= _SEQ_LIMIT - 1:
            raise RecordProtectionError("sequence number exhausted", ALERT_UNEXPECTED_MESSAGE)
        return self.seq

    def encrypt(self, content_type: int, plaintext: bytes) -> bytes:
        """Protect one record; returns the whole record, 5-byte header included."""
        raise NotImplementedError

    def decrypt(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        """Open one record given its header fields; returns (content type, plaintext)."""
        raise NotImplementedError

    def decrypt_record(self, record: bytes) -> tuple[int, bytes]:
        """Open one whole record (5-byte header + fragment)."""
        if len(record) < 5 or int.from_bytes(record[3:5], "big") != len(record) - 5:
            raise RecordProtectionError("record header length does not match the record")
        return self.decrypt(record[0], int.from_bytes(record[1:3], "big"), record[5:])


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
        header = _header(APPLICATION_DATA, TLS1_2, len(inner) + self.tag_len)
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
        header = _header(content_type, version, len(fragment))
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
        return seq.to_bytes(8, "big") + _header(content_type, version, length)

    def encrypt(self, content_type: int, plaintext: bytes) -> bytes:
        seq = self._next_seq()
        explicit = seq.to_bytes(8, "big") if self.explicit_len else b""
        aad = self._aad(seq, content_type, self.version, len(plaintext))
        body = explicit + self._aead.encrypt(self._nonce(seq, explicit), bytes(plaintext), aad)
        self.seq = seq + 1
        return _header(content_type, self.version, len(body)) + body

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


class CbcProtection(RecordProtection):
    """CBC block cipher with HMAC (and the NULL cipher, MAC only).

    MAC-then-encrypt by default; `encrypt_then_mac=True` for RFC 7366. TLS 1.1+ send a
    random explicit IV in each record; TLS 1.0 chains: `iv` (from the key block) starts the
    chain and each record's last ciphertext block is the next record's IV."""

    def __init__(self, cipher: str, key: bytes, mac: str, mac_key: bytes,
                 version: int = TLS1_2, iv: bytes = b"", encrypt_then_mac: bool = False,
                 seq: int = 0) -> None:
        super().__init__(seq)
        params = CIPHERS.get(cipher)
        if params is None or params.aead:
            raise ValueError(f"not a CBC or NULL cipher: {cipher!r}")
        if len(key) != params.key_len:
            raise ValueError(f"{cipher} needs a {params.key_len}-byte key, got {len(key)}")
        if mac not in MAC_LEN or len(mac_key) != MAC_LEN[mac]:
            raise ValueError(f"MAC {mac!r} with a {len(mac_key)}-byte key")
        self.cipher = cipher
        self.version = version
        self.encrypt_then_mac = encrypt_then_mac and params.block_len > 0
        self.block_len = params.block_len
        self.mac_len = MAC_LEN[mac]
        self._mac_hash = hash_algorithm(mac)
        self._mac_key = bytes(mac_key)
        self._explicit_iv = version > TLS1_0 and self.block_len > 0
        self._algorithm = _block_algorithm(cipher, bytes(key))
        # cryptography's HMAC, CBC and the stdlib's constant-time compare, resolved once
        # (import statements per record cost as much as the record's MAC)
        import hmac as stdlib_hmac  # (hashlib with it: not at start-up)

        from cryptography.hazmat.primitives import hmac
        from cryptography.hazmat.primitives.ciphers import Cipher, modes
        self._hmac, self._cipher, self._mode = hmac.HMAC, Cipher, modes.CBC
        self._compare = stdlib_hmac.compare_digest
        if self.block_len and not self._explicit_iv and len(iv) != self.block_len:
            raise ValueError(f"TLS 1.0 CBC needs a {self.block_len}-byte initial IV")
        self._chain_iv = bytes(iv)

    def _mac(self, seq: int, content_type: int, version: int, data: bytes) -> bytes:
        """HMAC over seq || type || version || length || data (RFC 5246 6.2.3.1)."""
        h = self._hmac(self._mac_key, self._mac_hash)
        h.update(seq.to_bytes(8, "big") + _header(content_type, version, len(data)) + data)
        return h.finalize()

    def _cbc(self, iv: bytes, data: bytes, encrypt: bool) -> bytes:
        assert self._algorithm is not None
        cipher = self._cipher(self._algorithm, self._mode(iv))
        ctx = cipher.encryptor() if encrypt else cipher.decryptor()
        return ctx.update(data) + ctx.finalize()

    def _pad(self, data: bytes) -> bytes:
        pad_len = self.block_len - (len(data) + 1) % self.block_len
        if pad_len == self.block_len:
            pad_len = 0
        return data + bytes([pad_len]) * (pad_len + 1)

    def encrypt(self, content_type: int, plaintext: bytes) -> bytes:
        seq = self._next_seq()
        plaintext = bytes(plaintext)
        if not self.block_len:  # NULL cipher
            body = plaintext + self._mac(seq, content_type, self.version, plaintext)
        else:
            iv = os.urandom(self.block_len) if self._explicit_iv else self._chain_iv
            prefix = iv if self._explicit_iv else b""
            if self.encrypt_then_mac:
                body = prefix + self._cbc(iv, self._pad(plaintext), True)
                body += self._mac(seq, content_type, self.version, body)
                ciphertext = body[:-self.mac_len]
            else:
                mac = self._mac(seq, content_type, self.version, plaintext)
                body = prefix + self._cbc(iv, self._pad(plaintext + mac), True)
                ciphertext = body
            if not self._explicit_iv:
                self._chain_iv = ciphertext[-self.block_len:]
        self.seq = seq + 1
        return _header(content_type, self.version, len(body)) + body

    def decrypt(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        seq = self._next_seq()
        fragment = bytes(fragment)
        if len(fragment) > MAX_TLS12_CIPHERTEXT:
            raise RecordProtectionError("encrypted record exceeds 2^14+2048 bytes",
                                        ALERT_RECORD_OVERFLOW)
        if not self.block_len:
            plaintext = self._check_mac_tail(seq, content_type, version, fragment)
        elif self.encrypt_then_mac:
            plaintext = self._decrypt_etm(seq, content_type, version, fragment)
        else:
            plaintext = self._decrypt_mte(seq, content_type, version, fragment)
        if len(plaintext) > MAX_PLAINTEXT:
            raise RecordProtectionError("plaintext exceeds 2^14 bytes", ALERT_RECORD_OVERFLOW)
        self.seq = seq + 1
        return content_type, plaintext

    def _check_mac_tail(self, seq: int, content_type: int, version: int, data: bytes) -> bytes:
        if len(data) < self.mac_len:
            raise RecordProtectionError("record shorter than its MAC")
        content, tag = data[:len(data) - self.mac_len], data[len(data) - self.mac_len:]
        if not self._compare(self._mac(seq, content_type, version, content), tag):
            raise RecordProtectionError("bad_record_mac: MAC check failed")
        return content

    def _split_iv(self, data: bytes) -> tuple[bytes, bytes]:
        if self._explicit_iv:
            return data[:self.block_len], data[self.block_len:]
        return self._chain_iv, data

    def _unpad(self, padded: bytes, min_left: int) -> bytes:
        """Remove TLS padding; every byte of padding must equal the padding length."""
        pad_len = padded[-1]
        if pad_len + 1 + min_left > len(padded):
            raise RecordProtectionError("bad_record_mac: bad padding")
        tail = padded[len(padded) - pad_len - 1:]
        if tail.count(pad_len) != len(tail):
            raise RecordProtectionError("bad_record_mac: bad padding")
        return padded[:len(padded) - pad_len - 1]

    def _decrypt_etm(self, seq: int, content_type: int, version: int, data: bytes) -> bytes:
        iv_len = self.block_len if self._explicit_iv else 0
        body_len = len(data) - self.mac_len - iv_len
        if body_len < self.block_len or body_len % self.block_len:
            raise RecordProtectionError("bad_record_mac: ciphertext length not a whole "
                                        "number of blocks")
        covered = self._check_mac_tail(seq, content_type, version, data)
        iv, ciphertext = self._split_iv(covered)
        plaintext = self._unpad(self._cbc(iv, ciphertext, False), 0)
        if not self._explicit_iv:
            self._chain_iv = ciphertext[-self.block_len:]
        return plaintext

    def _decrypt_mte(self, seq: int, content_type: int, version: int, data: bytes) -> bytes:
        iv, ciphertext = self._split_iv(data)
        if len(ciphertext) < self.block_len or len(ciphertext) % self.block_len \
                or len(ciphertext) < self.mac_len + 1:
            raise RecordProtectionError("bad_record_mac: ciphertext length not a whole "
                                        "number of blocks")
        content_and_mac = self._unpad(self._cbc(iv, ciphertext, False), self.mac_len)
        content = self._check_mac_tail(seq, content_type, version, content_and_mac)
        if not self._explicit_iv:
            self._chain_iv = ciphertext[-self.block_len:]
        return content


def _block_algorithm(cipher: str, key: bytes) -> BlockCipherAlgorithm | None:
    """The block cipher of a CBC suite (None for NULL and stream ciphers)."""
    from cryptography.hazmat.decrepit.ciphers import algorithms as decrepit
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    from cryptography.hazmat.primitives.ciphers import algorithms
    if cipher.startswith("AES"):
        return algorithms.AES(key)
    if cipher.startswith("3DES"):
        return TripleDES(key)
    if cipher.startswith("CAMELLIA"):
        return decrepit.Camellia(key)
    if cipher.startswith("SEED"):
        return decrepit.SEED(key)
    if cipher.startswith("IDEA"):
        return decrepit.IDEA(key)
    if cipher.startswith("DES"):
        return TripleDES(key * 3)  # EDE with one key is single DES
    return None


class StreamProtection(CbcProtection):
    """RC4 with HMAC: MAC-then-encrypt under one keystream per direction, no IV, no padding.

    The keystream cannot be rewound, so unlike the other protections a failed decrypt has
    consumed the record's keystream (the direction is then out of step, as a peer's is)."""

    def __init__(self, cipher: str, key: bytes, mac: str, mac_key: bytes,
                 version: int = TLS1_2, seq: int = 0) -> None:
        super().__init__("NULL", b"", mac, mac_key, version, seq=seq)
        params = CIPHERS.get(cipher)
        if params is None or not params.stream or len(key) != params.key_len:
            raise ValueError(f"not a stream cipher with a {len(key)}-byte key: {cipher!r}")
        self.cipher = cipher
        from cryptography.hazmat.decrepit.ciphers import algorithms as decrepit
        from cryptography.hazmat.primitives.ciphers import Cipher
        rc4 = Cipher(decrepit.ARC4(bytes(key)), mode=None)
        self._encryptor = rc4.encryptor()
        self._decryptor = rc4.decryptor()

    def encrypt(self, content_type: int, plaintext: bytes) -> bytes:
        seq = self._next_seq()
        plaintext = bytes(plaintext)
        body = self._encryptor.update(plaintext + self._mac(seq, content_type, self.version,
                                                            plaintext))
        self.seq = seq + 1
        return _header(content_type, self.version, len(body)) + body

    def decrypt(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        if len(fragment) > MAX_TLS12_CIPHERTEXT:
            raise RecordProtectionError("encrypted record exceeds 2^14+2048 bytes",
                                        ALERT_RECORD_OVERFLOW)
        return super().decrypt(content_type, version, self._decryptor.update(bytes(fragment)))


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
