"""The key exchange of each accepted suite, as the connection that accepted it established
it (`suite_row`): the suites table's "Kx" column ("ECDH 253", "DH 1024", "RSA 2048"), as
testssl.sh's and sslscan's cipher lists show it, with the weak marks of
policy/suite_strength.py.

Everything comes from that connection's `Outcome` (the engine's `key_exchange()` facts,
its certificate, an export suite's temporary RSA key); what it did not establish (it
stopped before the ServerKeyExchange, sent no certificate, or used a key we cannot size)
is "unknown", never a guess from another connection. Sizes are counted as `openssl
s_client` and testssl.sh count them: x25519 253 bits, x448 448, a named curve its field
size, a DH prime its bit length, RSA its modulus. A post-quantum group (ML-KEM, a hybrid
such as X25519MLKEM768) has no single size in that sense: it is named, not sized.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from tlsprobe import registry
from tlsprobe.model.audit import SuiteRow
from tlsprobe.model.describe import TEMP_KEY, certificate_info
from tlsprobe.model.probe import Cipher, Codepoint
from tlsprobe.policy.suite_strength import kx_strength, kx_weakness, suite_weaknesses
from tlsprobe.probes.audit.outcome import HELLO_RETRY, Outcome

__all__ = ["group_bits", "suite_row"]

#: the key exchange kind of a named group by its registry kind
_GROUP_KIND = {"ec": "ECDHE", "ecx": "ECDHE", "gost": "ECDHE", "ffdhe": "DHE",
               "mlkem": "KEM", "hybrid": "hybrid", "draft": "hybrid"}
#: the word of a sized key exchange in the label, by kind
_WORD = {"ECDHE": "ECDH", "ECDH": "ECDH", "ECDHE_PSK": "ECDH", "DHE": "DH", "DH": "DH",
         "DHE_PSK": "DH", "RSA": "RSA", "RSA_PSK": "RSA"}
#: suites whose key exchange has no size to establish: labelled by their kind
_UNSIZED = frozenset({"PSK", "SRP", "KRB5", "ECCPWD", "GOST", "CECPQ1", "NULL"})
_CURVE_BITS = re.compile(r"(\d{3})")
UNKNOWN = "unknown"


class _Kx(NamedTuple):
    kind: str
    bits: int | None = None
    label: str = UNKNOWN
    group: int | None = None
    source: str | None = None


def group_bits(code: int) -> int | None:
    """The size of a classic named group as OpenSSL prints it (x25519 253, secp384r1 384,
    ffdhe2048 2048, sect571r1 570 (its order), GC256A 256, curveSM2 256); None for post-quantum and
    unknown groups."""
    if code in TEMP_KEY:
        return TEMP_KEY[code][1]
    info = registry.group(code)
    if info is None:
        return None
    if info.kind == "ffdhe":
        return registry.ffdhe_bits(code)
    if info.kind in ("ec", "ecx", "gost"):
        if info.name == "curveSM2":
            return 256
        found = _CURVE_BITS.search(info.name)
        return int(found.group(1)) if found else None
    return None


def _sized(kind: str, bits: int | None, source: str | None, group: int | None = None) -> _Kx:
    label = f"{_WORD.get(kind, kind)} {bits}" if bits is not None else UNKNOWN
    return _Kx(kind, bits, label, group, source if bits is not None else None)


def _group(code: int, source: str, kind: str | None = None) -> _Kx:
    """A key exchange in named group `code` (a TLS 1.3 key share or HelloRetryRequest, a
    TLS 1.2 ServerKeyExchange curve); `kind`: the suite's, else the group's."""
    info = registry.group(code)
    family = _GROUP_KIND.get(info.kind, "") if info is not None else ""
    if family in ("KEM", "hybrid"):
        return _Kx(family, None, registry.group_name(code), code, source)
    if not family:   # no registered group: named by its code, not sized
        return _Kx(kind or UNKNOWN, None, registry.group_name(code), code, source)
    return _sized(kind if kind in _WORD else family, group_bits(code), source, code)


@lru_cache(maxsize=64)
def _certificate_key(der: bytes) -> tuple[str, int | None]:
    info = certificate_info(der)
    return info.key_type, info.key_bits


def _certificate(kind: str, out: Outcome) -> _Kx:
    """Static RSA (and RSA_PSK) key transport, static ECDH/DH: the leaf's key; an export
    suite's temporary RSA key when the server sent one (RFC 2246 7.4.3)."""
    if kind in ("RSA", "RSA_PSK") and out.rsa_temp_bits is not None:
        return _sized(kind, out.rsa_temp_bits, "server_key_exchange")
    if not out.certificates:
        return _Kx(kind)
    key_type, bits = _certificate_key(out.certificates[0])
    if kind in ("RSA", "RSA_PSK") and key_type == "RSA" or \
            kind == "ECDH" and key_type.startswith("EC ") or kind == "DH" and key_type == "DH":
        return _sized(kind, bits, "certificate")
    return _Kx(kind)


def _established(suite_kind: str, out: Outcome) -> _Kx:
    if out.status == HELLO_RETRY:
        return _group(out.hrr_group, "hello_retry_request") if out.hrr_group is not None \
            else _Kx(suite_kind)
    kx = out.key_exchange
    if suite_kind in _UNSIZED or kx is not None and kx.kind == "PSK":
        return _Kx(suite_kind if suite_kind in _UNSIZED else "PSK", None,
                   suite_kind if suite_kind in _UNSIZED else "PSK")
    if kx is None:
        return _Kx(suite_kind)
    if kx.kind == "TLS13":
        return _group(kx.group, kx.source) if kx.group is not None else _Kx(suite_kind)
    if suite_kind in ("RSA", "RSA_PSK", "ECDH", "DH"):
        return _certificate(suite_kind, out)
    if kx.source != "server_key_exchange":
        return _Kx(suite_kind)
    if kx.group is not None:
        return _group(kx.group, kx.source, suite_kind)
    if kx.dh_prime is not None:
        ffdhe = out.group if out.group is not None and registry.ffdhe_bits(out.group) else None
        return _sized(suite_kind, kx.dh_prime.bit_length(), kx.source, ffdhe)
    if kx.explicit_curve:
        return _Kx(suite_kind, None, "ECDH explicit curve", None, kx.source)
    return _Kx(suite_kind)


def suite_row(code: int, out: Outcome | None) -> SuiteRow:
    """The row of suite `code`, accepted on the connection `out` (None: not recorded)."""
    suite = registry.cipher_suite(code)
    suite_kind = suite.kx if suite is not None else UNKNOWN
    kx = _established(suite_kind, out) if out is not None and out.answered \
        else _Kx(suite_kind)
    if kx.label == UNKNOWN and kx.kind in _UNSIZED:
        kx = kx._replace(label=kx.kind)
    strength = kx_strength(kx.kind, kx.bits)
    why = kx_weakness(kx.kind, kx.bits, kx.label)
    reasons = suite_weaknesses(code) + ((why,) if why else ())
    return SuiteRow(Cipher.of(code), kx.kind, kx.bits, kx.label,
                    Codepoint.group(kx.group) if kx.group is not None else None, kx.source,
                    strength, bool(reasons), reasons)
