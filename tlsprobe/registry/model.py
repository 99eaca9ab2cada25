"""Typed rows of the registry: cipher suites, named groups, signature schemes.

The data lives in `_generated.py` as plain tuples; these frozen dataclasses give it names and
the derived properties that probes and policy checks ask about (AEAD? CBC? export? ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BITS_RE = re.compile(r"\((\d+)\)$")
_CBC_CIPHERS = frozenset({"AES", "Camellia", "ARIA", "3DES", "DES", "IDEA", "SEED", "RC2"})
_FORWARD_SECRET_KX = frozenset({"ECDHE", "DHE", "ECDHE_PSK", "DHE_PSK", "TLS13", "CECPQ1"})


@dataclass(frozen=True, slots=True)
class CipherSuite:
    """One cipher suite.

    `kx`: "ECDHE", "DHE", "RSA", "PSK", "ECDHE_PSK", "DHE_PSK", "RSA_PSK", "ECDH", "DH"
    (static, certificate-bound), "SRP", "KRB5", "ECCPWD", "GOST", "CECPQ1", "TLS13" (any
    group, negotiated outside the suite), "NULL", or "SCSV" for signalling values.
    Anonymous DH/ECDH suites send an ephemeral ServerKeyExchange, so they are "DHE"/"ECDHE"
    with `auth` "anon". `auth`: "RSA", "ECDSA", "DSS", "PSK", "anon", "TLS13", "DH", "ECDH",
    "KRB5", "SRP", "ECCPWD", "GOST", "NULL", "SCSV".
    `enc` is the OpenSSL spelling with key bits, e.g. "AESGCM(128)", "ChaCha20(256)", "NULL";
    `mac` is "AEAD", "SHA1", "SHA256", "SHA384", "MD5", "NULL", ...
    `versions` lists the protocol version ids the suite may be negotiated in.
    `iana` is False for suites known only from OpenSSL/testssl (pre-standard, vendor).
    `prf_hash` is the TLS 1.2 PRF / TLS 1.3 HKDF hash ("SHA256", "SHA384", "SM3", ...).
    """

    code: int
    name: str
    openssl_name: str | None
    kx: str
    auth: str
    enc: str
    mac: str
    versions: tuple[int, ...]
    iana: bool = True
    export: bool = False
    prf_hash: str | None = None

    @property
    def cipher(self) -> str:
        """Bulk cipher family without key size: "AESGCM", "ChaCha20", "3DES", "NULL"."""
        return self.enc.split("(", 1)[0]

    @property
    def enc_bits(self) -> int:
        """Nominal key bits of the bulk cipher (0 for NULL encryption)."""
        m = _BITS_RE.search(self.enc)
        return int(m.group(1)) if m else 0

    @property
    def is_aead(self) -> bool:
        return self.mac == "AEAD"

    @property
    def is_cbc(self) -> bool:
        return self.cipher in _CBC_CIPHERS

    @property
    def is_null(self) -> bool:
        """No encryption at all (integrity-only or TLS_NULL_WITH_NULL_NULL)."""
        return self.enc == "NULL" and not self.is_scsv

    @property
    def is_anon(self) -> bool:
        """No server authentication (anonymous DH/ECDH, or the NULL suite)."""
        return self.auth in ("anon", "NULL")

    @property
    def is_export(self) -> bool:
        return self.export

    @property
    def is_rc4(self) -> bool:
        return self.cipher == "RC4"

    @property
    def is_3des(self) -> bool:
        return self.cipher == "3DES"

    @property
    def is_des(self) -> bool:
        """Single DES (56 or 40 bits)."""
        return self.cipher == "DES"

    @property
    def is_scsv(self) -> bool:
        """Signalling value, not a real suite (TLS_FALLBACK_SCSV, renegotiation SCSV)."""
        return self.kx == "SCSV"

    @property
    def is_tls13(self) -> bool:
        return self.kx == "TLS13"

    @property
    def forward_secret(self) -> bool:
        return self.kx in _FORWARD_SECRET_KX

    @property
    def weaknesses(self) -> tuple[str, ...]:
        """Short tags a policy check can report: NULL, anon, export, RC4, DES, 3DES, MD5, ..."""
        tags = []
        if self.is_null:
            tags.append("NULL")
        if self.is_anon and not self.is_scsv:
            tags.append("anon")
        if self.export:
            tags.append("export")
        if self.cipher in ("RC4", "DES", "3DES", "RC2", "IDEA"):
            tags.append(self.cipher)
        if self.mac == "MD5":
            tags.append("MD5")
        if 0 < self.enc_bits < 112:
            tags.append(f"{self.enc_bits}-bit")
        return tuple(tags)

    def applies_to(self, version: int) -> bool:
        return version in self.versions


@dataclass(frozen=True, slots=True)
class Group:
    """A TLS named group (supported_groups / key_share / ServerKeyExchange named_curve).

    `kind` is one of "ec", "ecx", "ffdhe", "mlkem", "hybrid", "draft", "gost", "other".
    `tls12` means usable in TLS 1.0-1.2 (ECDHE/DHE named groups), `tls13` in TLS 1.3
    key_share. `dtls_ok` is the registry's DTLS-OK column (None when not registered yet).
    """

    code: int
    name: str
    kind: str
    tls12: bool
    tls13: bool
    recommended: bool
    aliases: tuple[str, ...] = ()
    dtls_ok: bool | None = None
    iana: bool = True

    def applies_to(self, version: int) -> bool:
        if version in (0x0304, 0xFEFC) or 0x7F00 <= version <= 0x7FFF:
            return self.tls13
        return self.tls12


@dataclass(frozen=True, slots=True)
class SignatureScheme:
    """A SignatureScheme (TLS 1.3) / (hash, signature) pair (TLS 1.2).

    `iana` is False for TLS 1.2 pairs that the registry lists only as "reserved for
    backward compatibility" (e.g. dsa_sha256 0x0402), named here for readable traces.
    """

    code: int
    name: str
    recommended: bool = False
    iana: bool = True
