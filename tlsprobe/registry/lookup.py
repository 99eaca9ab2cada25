"""Lookups and display names over the generated tables.

Names never fail: a known value gives its IANA name, a GREASE value (RFC 8701) gives
"GREASE", anything else gives zero-padded hex ("0x1234" for 16-bit code points, "0x2a" for
8-bit ones). Messages keep raw ints and ask here only at display time.
"""

from __future__ import annotations

from enum import IntEnum

from . import _generated
from .constants import (
    AlertDescription,
    ContentType,
    ExtensionType,
    HandshakeType,
    known_version_name,
)
from .model import CipherSuite, Group, SignatureScheme

_SUITES: dict[int, CipherSuite] = {
    r[0]: CipherSuite(*r) for r in _generated.CIPHER_SUITES}
_GROUPS: dict[int, Group] = {r[0]: Group(*r) for r in _generated.GROUPS}
_SIGSCHEMES: dict[int, SignatureScheme] = {
    r[0]: SignatureScheme(*r) for r in _generated.SIGNATURE_SCHEMES}
_SSLV2: dict[int, tuple[str, str]] = {r[0]: (r[1], r[2]) for r in _generated.SSLV2_CIPHERS}

# RFC 8701 GREASE for PskKeyExchangeModes: 0x0B + 0x1F * n.
_GREASE_PSK_MODES = frozenset(0x0B + 0x1F * n for n in range(8))


# -- GREASE ---------------------------------------------------------------------------------
def is_grease(value: int | bytes) -> bool:
    """RFC 8701 GREASE: 16-bit 0x?A?A code points (suites, groups, extensions, versions,
    signature schemes), or a 2-byte ALPN identifier of the same shape when given bytes."""
    if isinstance(value, (bytes, bytearray)):
        if len(value) != 2:
            return False
        value = int.from_bytes(value, "big")
    return (isinstance(value, int) and 0 <= value <= 0xFFFF
            and value & 0x0F0F == 0x0A0A and value >> 8 == value & 0xFF)


def is_grease_psk_mode(value: int) -> bool:
    """RFC 8701 GREASE value of the 8-bit psk_key_exchange_modes list."""
    return value in _GREASE_PSK_MODES


def _hex(code: int, width: int) -> str:
    try:
        return f"0x{code:0{width}x}"
    except (TypeError, ValueError):
        return repr(code)


def _name16(code: int, name: str | None) -> str:
    if name is not None:
        return name
    return "GREASE" if is_grease(code) else _hex(code, 4)


def _enum_name(enum: type[IntEnum], code: int) -> str | None:
    member = enum._value2member_map_.get(code)
    return member.name if member is not None else None


# -- lookups --------------------------------------------------------------------------------
def cipher_suite(code: int) -> CipherSuite | None:
    return _SUITES.get(code)


def group(code: int) -> Group | None:
    return _GROUPS.get(code)


def signature_scheme(code: int) -> SignatureScheme | None:
    return _SIGSCHEMES.get(code)


def all_suites() -> list[CipherSuite]:
    """Every suite, IANA and non-IANA (see `CipherSuite.iana`), by code."""
    return list(_SUITES.values())


def all_groups() -> list[Group]:
    return list(_GROUPS.values())


def all_signature_schemes() -> list[SignatureScheme]:
    return list(_SIGSCHEMES.values())


def hash_for_suite(code: int) -> str | None:
    """PRF (TLS 1.2) / HKDF (TLS 1.3) hash of a suite: "SHA256", "SHA384", ...; None if unknown."""
    suite = _SUITES.get(code)
    return suite.prf_hash if suite is not None else None


def _tls_equivalent(version: int) -> int:
    """DTLS versions map onto the TLS version they are based on."""
    return {0xFEFF: 0x0302, 0xFEFD: 0x0303, 0xFEFC: 0x0304}.get(version, version)


def suites_for_version(version: int, *, include_non_iana: bool = False,
                       include_scsv: bool = False) -> list[int]:
    """Codes of every suite negotiable in `version` (for cipher enumeration), by code.

    TLS_NULL_WITH_NULL_NULL is left out (it can never be negotiated); signalling values and
    OpenSSL-only suites are left out unless asked for.
    """
    v = _tls_equivalent(version)
    if 0x7F00 <= v <= 0x7FFF:
        v = 0x0304
    out = []
    for s in _SUITES.values():
        if s.is_scsv:
            if include_scsv:
                out.append(s.code)
            continue
        if s.kx == "NULL" or (not s.iana and not include_non_iana):
            continue
        if v in s.versions:
            out.append(s.code)
    return out


def groups_for_version(version: int, *, include_drafts: bool = False) -> list[int]:
    """Codes of the named groups usable in `version`, by code (drafts only on request)."""
    v = _tls_equivalent(version)
    return [g.code for g in _GROUPS.values()
            if g.applies_to(v) and (include_drafts or g.kind != "draft")]


# -- names that never fail ------------------------------------------------------------------
def suite_name(code: int) -> str:
    suite = _SUITES.get(code)
    return _name16(code, suite.name if suite is not None else None)


#: RFC 7919 section 6 (the finite field groups of the registry, kind "ffdhe"): prime sizes
#: in bits (tests/registry/test_registry.py checks them against the primes of kex/ffdhe_primes.py)
FFDHE_BITS: dict[int, int] = {0x0100: 2048, 0x0101: 3072, 0x0102: 4096, 0x0103: 6144,
                              0x0104: 8192}


def ffdhe_bits(code: int) -> int | None:
    """The prime size of the RFC 7919 group `code`; None for any other group."""
    g = _GROUPS.get(code)
    return FFDHE_BITS.get(code) if g is not None and g.kind == "ffdhe" else None


def group_name(code: int) -> str:
    g = _GROUPS.get(code)
    return _name16(code, g.name if g is not None else None)


def sigscheme_name(code: int) -> str:
    s = _SIGSCHEMES.get(code)
    return _name16(code, s.name if s is not None else None)


def extension_name(code: int) -> str:
    return _name16(code, _enum_name(ExtensionType, code))


def version_name(code: int) -> str:
    """'TLS 1.2', 'SSL 3.0', 'DTLS 1.2', 'TLS 1.3 draft 28', 'GREASE', or '0x1234'."""
    try:
        name = known_version_name(code)
    except TypeError:
        name = None
    return _name16(code, name)


def alert_name(code: int) -> str:
    return _enum_name(AlertDescription, code) or _hex(code, 2)


def handshake_name(code: int) -> str:
    return _enum_name(HandshakeType, code) or _hex(code, 2)


def content_type_name(code: int) -> str:
    return _enum_name(ContentType, code) or _hex(code, 2)


def sslv2_cipher_name(code: int) -> str:
    """Name of a 3-byte SSLv2 CIPHER-SPEC, or '0x0700c0'-style hex."""
    entry = _SSLV2.get(code)
    return entry[0] if entry is not None else _hex(code, 6)


# -- labels: "name (0x....)" ----------------------------------------------------------------
def _label(name: str, code: int) -> str:
    hexed = _hex(code, 4)
    return hexed if name == hexed else f"{name} ({hexed})"


def suite_label(code: int) -> str:
    """'TLS_AES_128_GCM_SHA256 (0x1301)'; unknown values give just '0x1234'."""
    return _label(suite_name(code), code)


def group_label(code: int) -> str:
    """'x25519 (0x001d)'; GREASE gives 'GREASE (0x0a0a)'; unknown just '0x1234'."""
    return _label(group_name(code), code)


def sigscheme_label(code: int) -> str:
    return _label(sigscheme_name(code), code)


def extension_label(code: int) -> str:
    return _label(extension_name(code), code)


def version_label(code: int) -> str:
    return _label(version_name(code), code)
