"""Parse user-typed names of groups, cipher suites and signature schemes into code points.

Accepted: IANA names in any case, common aliases (P-256, prime256v1, X25519, ML-KEM-768),
OpenSSL spellings (ECDHE-RSA-AES128-GCM-SHA256, RSA+SHA256, RSA-PSS+SHA256) and hex code
points ("0x001d", "001d", "1d"; suites also "0x13,0x01"). Any 16-bit code point is accepted
as hex, known or not, so probes can offer private-use values. Decimal digits alone without
0x ("29", "4588": tshark and `openssl s_client -trace` print groups in decimal) read
differently as hex and as decimal: refused, naming both readings, unless zero-padded to four
digits ("0017") or under 10. Errors are one-line ValueErrors.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tlsprobe.errors import did_you_mean
from tlsprobe.escaping import quoted_text

from .lookup import (
    all_groups,
    all_signature_schemes,
    all_suites,
    group_label,
    sigscheme_label,
    suite_label,
)

_HEX_RE = re.compile(r"(?:0x)?([0-9a-f]{1,4})", re.IGNORECASE)
_HEX_PAIR_RE = re.compile(r"0x([0-9a-f]{2})\s*,\s*0x([0-9a-f]{2})", re.IGNORECASE)
_SIGALG_PLUS_RE = re.compile(r"([a-z0-9-]+)\+(sha1|sha224|sha256|sha384|sha512|md5)",
                             re.IGNORECASE)


def _squash(text: str) -> str:
    """Case- and punctuation-insensitive key: 'P-256' -> 'p256', 'ML-KEM-768' -> 'mlkem768'."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


def _parse_hex(text: str, label: Callable[[int], str], *, pairs: bool = False) -> int | None:
    m = _HEX_RE.fullmatch(text)
    if m:
        digits = m.group(1)
        if digits.isdecimal() and int(digits) > 9 and text[:2].lower() != "0x" \
                and not (len(digits) == 4 and digits[0] == "0"):
            hexa, deci = int(digits, 16), int(digits)
            raise ValueError(f"{quoted_text(text)} is ambiguous: hex {label(hexa)} or decimal "
                             f"{label(deci)}; write the code point with 0x (0x{hexa:04x} or "
                             f"0x{deci:04x})")
        return int(digits, 16)
    if pairs:
        m = _HEX_PAIR_RE.fullmatch(text)
        if m:
            return int(m.group(1) + m.group(2), 16)
    return None


def _build_group_index() -> dict[str, int]:
    index: dict[str, int] = {}
    for g in all_groups():
        for key in (g.name, *g.aliases):
            index.setdefault(_squash(key), g.code)
    return index


def _build_suite_index() -> dict[str, int]:
    index: dict[str, int] = {}
    suites = sorted(all_suites(), key=lambda s: (not s.iana, s.code))  # IANA wins on clashes
    for s in suites:
        index.setdefault(s.name.upper(), s.code)
    for s in suites:
        if s.openssl_name:
            index.setdefault(s.openssl_name.upper(), s.code)
    return index


def _build_sigscheme_index() -> dict[str, int]:
    index: dict[str, int] = {}
    for s in all_signature_schemes():
        index.setdefault(_squash(s.name), s.code)
    return index


_GROUP_INDEX = _build_group_index()
_SUITE_INDEX = _build_suite_index()
_SIGSCHEME_INDEX = _build_sigscheme_index()

# OpenSSL "SIG+HASH" sigalg spellings -> IANA names.
_ECDSA_BY_HASH = {"sha256": "ecdsa_secp256r1_sha256", "sha384": "ecdsa_secp384r1_sha384",
                  "sha512": "ecdsa_secp521r1_sha512"}
_SIG_PREFIX = {"rsa": "rsa_pkcs1_", "dsa": "dsa_", "ecdsa": "ecdsa_", "rsa-pss": "rsa_pss_rsae_",
               "pss": "rsa_pss_rsae_", "rsa_pss": "rsa_pss_rsae_"}


def _clean(text: object, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty {what} name")
    return text.strip()


def parse_group(text: str) -> int:
    """Group code point from an IANA name, alias (P-256, prime256v1, X25519) or hex."""
    t = _clean(text, "group")
    code = _GROUP_INDEX.get(_squash(t))
    if code is None:
        code = _GROUP_INDEX.get(_squash(re.sub(r"^group-", "", t, flags=re.IGNORECASE)))
    if code is None:
        code = _parse_hex(t, group_label)
    if code is None:
        names = [n for g in all_groups() for n in (g.name, *g.aliases)]
        raise ValueError(f"unknown group {quoted_text(t)}" + (did_you_mean(t, names) or
                         " (use an IANA name like x25519, an alias like P-256, or a hex code "
                         "point like 0x001d)"))
    return code


def parse_suite(text: str) -> int:
    """Suite code point from an IANA name, an OpenSSL name, or hex ('0xc02f', '0xC0,0x2F')."""
    t = _clean(text, "cipher suite")
    key = t.upper()
    for candidate in (key, re.sub(r"^SSL_", "TLS_", key), "TLS_" + key):
        if candidate in _SUITE_INDEX:
            return _SUITE_INDEX[candidate]
    code = _parse_hex(t, suite_label, pairs=True)
    if code is None:
        raise ValueError(f"unknown cipher suite {quoted_text(t)}" + (did_you_mean(t, _SUITE_INDEX) or
                         " (use an IANA name like TLS_AES_128_GCM_SHA256, an OpenSSL name "
                         "like ECDHE-RSA-AES128-GCM-SHA256, or hex like 0x1301)"))
    return code


def parse_sigscheme(text: str) -> int:
    """Signature scheme code point from an IANA name (any case), an OpenSSL-style name
    (RSA+SHA256, ECDSA+SHA384, RSA-PSS+SHA256, ML-DSA-65) or hex ('0x0804')."""
    t = _clean(text, "signature scheme")
    code = _SIGSCHEME_INDEX.get(_squash(t))
    m = _SIGALG_PLUS_RE.fullmatch(t)
    if code is None and m:
        sig, hash_name = m.group(1).lower(), m.group(2).lower()
        name = None
        if sig == "ecdsa" and hash_name in _ECDSA_BY_HASH:
            name = _ECDSA_BY_HASH[hash_name]
        elif sig in _SIG_PREFIX:
            name = _SIG_PREFIX[sig] + hash_name
        code = _SIGSCHEME_INDEX.get(_squash(name)) if name else None
    if code is None:
        code = _parse_hex(t, sigscheme_label)
    if code is None:
        names = [s.name for s in all_signature_schemes()]
        raise ValueError(f"unknown signature scheme {quoted_text(t)}" + (did_you_mean(t, names) or
                         " (use an IANA name like rsa_pss_rsae_sha256, an OpenSSL name like "
                         "RSA+SHA256, or hex like 0x0804)"))
    return code
