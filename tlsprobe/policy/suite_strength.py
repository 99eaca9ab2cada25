"""Weak cipher suites: the one rule that marks a row of the suites table weak.

A suite is weak when the suite itself is (the registry's `weaknesses`: NULL encryption,
anonymous, export, RC4, DES, 3DES, RC2, IDEA (64-bit blocks or broken ciphers), an MD5 MAC,
a bulk key under 112 bits) or when the key exchange its connection established is weak.
The key-exchange rule follows NIST SP 800-57 Part 1 (rev. 5, table 2): 112 bits of security
are the floor, which is 2048-bit finite-field DH or RSA and a 224-bit elliptic curve;
1024-bit DH/RSA and 160-bit curves give 80 bits (disallowed since 2013, within reach of a
state: Logjam), and anything smaller is insecure:

| key exchange | ok | weak | insecure |
| --- | --- | --- | --- |
| DH (prime bits), RSA (key bits) | 2048 and more | 1024 to 2047 | under 1024 |
| ECDH (curve bits, x25519 253) | 224 and more | 160 to 223 | under 160 |
| post-quantum (ML-KEM, hybrids) | always | | |

A size that was not established (a PSK suite, SRP, an explicit curve, a connection that
stopped before the ServerKeyExchange) is "unknown" and never weak by itself. CBC suites
are not marked here (LUCKY13 and the BEAST check report them), nor is the missing forward
secrecy of static RSA (the `suite.no_forward_secrecy` finding). Model values in, verdicts
out; the audit stores them on each `SuiteRow`.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.model.vocab import KxStrength

__all__ = ["EC_FLOOR", "FF_FLOOR", "kx_strength", "kx_weakness", "suite_weaknesses"]

#: (insecure below, weak below) in bits: finite-field DH and RSA, elliptic curves
FF_FLOOR = (1024, 2048)
EC_FLOOR = (160, 224)
#: the key exchange kinds sized as finite-field (prime or modulus bits) and as curves
_FF_KINDS = frozenset({"DHE", "DH", "RSA", "DHE_PSK", "RSA_PSK"})
_EC_KINDS = frozenset({"ECDHE", "ECDH", "ECDHE_PSK"})
_PQ_KINDS = frozenset({"hybrid", "KEM"})


def kx_strength(kind: str, bits: int | None) -> KxStrength:
    """The strength of a key exchange of `kind` (SuiteRow.kx_kind) and size `bits`."""
    if kind in _PQ_KINDS:
        return KxStrength.OK
    if bits is None:
        return KxStrength.UNKNOWN
    floors = FF_FLOOR if kind in _FF_KINDS else EC_FLOOR if kind in _EC_KINDS else None
    if floors is None:
        return KxStrength.UNKNOWN
    insecure, weak = floors
    return KxStrength.INSECURE if bits < insecure else KxStrength.WEAK if bits < weak \
        else KxStrength.OK


def kx_weakness(kind: str, bits: int | None, label: str) -> str | None:
    """Why the key exchange is weak ("DH 1024: under 2048 bits"), None when it is not."""
    strength = kx_strength(kind, bits)
    if strength not in (KxStrength.WEAK, KxStrength.INSECURE):
        return None
    insecure, weak = FF_FLOOR if kind in _FF_KINDS else EC_FLOOR
    floor = weak if strength == KxStrength.WEAK else insecure
    return f"{label}: under {floor} bits" + (" (insecure)" if strength ==
                                             KxStrength.INSECURE else "")


def suite_weaknesses(code: int) -> tuple[str, ...]:
    """The suite's own weaknesses (the registry's tags), () for an unknown code."""
    suite = registry.cipher_suite(code)
    return suite.weaknesses if suite is not None and not suite.is_scsv else ()
