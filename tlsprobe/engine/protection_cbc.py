"""CBC and stream record protection for TLS 1.0-1.2 (engine/protection.py makes them for a
suite): MAC-then-encrypt (RFC 5246 section 6.2.3.2) with an explicit IV per record in TLS
1.1+ and the chained IV of TLS 1.0, or encrypt-then-MAC (RFC 7366); besides AES and 3DES,
the CBC ciphers Camellia, SEED, IDEA and single DES (as 3DES with the key repeated), and
the stream cipher RC4 (MAC-then-encrypt, one keystream per direction, RFC 5246 6.2.3.1),
all from cryptography's decrepit module, imported when a protection is made.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from tlsprobe.engine.keyschedule import hash_algorithm
from tlsprobe.engine.protection_base import (
    ALERT_RECORD_OVERFLOW,
    MAX_PLAINTEXT,
    MAX_TLS12_CIPHERTEXT,
    TLS1_0,
    TLS1_2,
    RecordProtection,
    RecordProtectionError,
    record_header,
)
from tlsprobe.engine.suites import CIPHERS, MAC_LEN

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers import BlockCipherAlgorithm

__all__ = ["CbcProtection", "StreamProtection"]


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
        h.update(seq.to_bytes(8, "big") + record_header(content_type, version, len(data)) + data)
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
        return record_header(content_type, self.version, len(body)) + body

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
        return record_header(content_type, self.version, len(body)) + body

    def decrypt(self, content_type: int, version: int, fragment: bytes) -> tuple[int, bytes]:
        if len(fragment) > MAX_TLS12_CIPHERTEXT:
            raise RecordProtectionError("encrypted record exceeds 2^14+2048 bytes",
                                        ALERT_RECORD_OVERFLOW)
        return super().decrypt(content_type, version, self._decryptor.update(bytes(fragment)))
