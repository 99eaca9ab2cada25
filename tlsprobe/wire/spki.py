"""The named curve of a certificate's EC key, read from the DER without `cryptography`.

X.509 parsing belongs to `cryptography` (wire/certificate.py keeps certificates as DER
bytes), but its x509 package costs a group audit a fifth of its instructions to import
(issue 35, a scan's start-up), and the group audit needs one field of the leaf: the curve
of an ECDSA certificate's key, which TLS 1.2 requires in the client's list
(probes/audit/groups.py). This walks the DER to that field only (RFC 5280 4.1:
Certificate -> tbsCertificate -> subjectPublicKeyInfo -> algorithm; RFC 5480 2.1.1:
id-ecPublicKey with a namedCurve OID) and reads nothing else.
"""

from __future__ import annotations

_SEQUENCE, _INTEGER, _OID, _VERSION = 0x30, 0x02, 0x06, 0xA0
#: id-ecPublicKey (RFC 5480 2.1.1)
EC_PUBLIC_KEY = "1.2.840.10045.2.1"


def der_element(der: bytes, at: int, end: int) -> tuple[int, int, int]:
    """(tag, start of the value, end of the value) of the DER element at `at`; ValueError
    when it does not fit before `end` or its length is not DER."""
    if at + 2 > end:
        raise ValueError("truncated DER element")
    tag, first = der[at], der[at + 1]
    at += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if not 1 <= count <= 4 or at + count > end:
            raise ValueError("bad DER length")
        length = int.from_bytes(der[at:at + count], "big")
        at += count
    if at + length > end:
        raise ValueError("DER element longer than its container")
    return tag, at, at + length


def oid_text(value: bytes) -> str:
    """Dotted form of an OBJECT IDENTIFIER's contents (X.690 8.19)."""
    if not value or value[-1] & 0x80:
        raise ValueError("bad OID")
    arcs: list[int] = []
    n = 0
    for byte in value:
        n = (n << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(n)
            n = 0
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def _expect(der: bytes, at: int, end: int, tag: int) -> tuple[int, int]:
    got, start, stop = der_element(der, at, end)
    if got != tag:
        raise ValueError(f"DER tag 0x{got:02x} where 0x{tag:02x} was expected")
    return start, stop


def _ec_parameters(der: bytes) -> tuple[int, int, int] | None:
    """(tag, start, end of the contents) of the parameters of a DER certificate's
    id-ecPublicKey, None for another kind of key or none; ValueError when the DER does not
    have the shape of a certificate up to its subjectPublicKeyInfo."""
    start, end = _expect(der, 0, len(der), _SEQUENCE)             # Certificate
    at, tbs_end = _expect(der, start, end, _SEQUENCE)             # tbsCertificate
    tag, _, stop = der_element(der, at, tbs_end)
    if tag == _VERSION:
        tag, _, stop = der_element(der, stop, tbs_end)
    if tag != _INTEGER:                                           # serialNumber
        raise ValueError("no serial number")
    at = stop
    for _ in range(4):              # signature, issuer, validity, subject
        at = _expect(der, at, tbs_end, _SEQUENCE)[1]
    spki, spki_end = _expect(der, at, tbs_end, _SEQUENCE)         # subjectPublicKeyInfo
    alg, alg_end = _expect(der, spki, spki_end, _SEQUENCE)        # AlgorithmIdentifier
    oid_start, oid_end = _expect(der, alg, alg_end, _OID)
    if oid_text(der[oid_start:oid_end]) != EC_PUBLIC_KEY or oid_end == alg_end:
        return None
    return der_element(der, oid_end, alg_end)


def ec_named_curve(der: bytes) -> str | None:
    """The dotted namedCurve OID of a DER certificate's id-ecPublicKey, None for another
    kind of key (or EC parameters that are not a named curve); ValueError when the DER
    does not have the shape of a certificate up to its subjectPublicKeyInfo."""
    found = _ec_parameters(der)
    return oid_text(der[found[1]:found[2]]) if found is not None and found[0] == _OID else None


def ec_explicit_parameters(der: bytes) -> bool:
    """A DER certificate's id-ecPublicKey gives its curve by explicit parameters (an
    ECParameters SEQUENCE), not by name; ValueError as `ec_named_curve`."""
    found = _ec_parameters(der)
    return found is not None and found[0] == _SEQUENCE


__all__ = ["EC_PUBLIC_KEY", "der_element", "ec_explicit_parameters", "ec_named_curve",
           "oid_text"]
