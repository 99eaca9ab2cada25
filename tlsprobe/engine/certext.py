"""A certificate whose extensions OpenSSL cannot cache: OpenSSL 3.0's x509v3_cache_extensions
sets EXFLAG_INVALID, and its issuer check (X509_check_issued, ossl_x509_likely_issued)
then fails for that certificate both as subject and as issuer. Such a certificate has no
issuer and issues nothing, not even itself: `openssl verify` says 20 (unable to get local
issuer certificate) at the certificate below it, or at it when it is the leaf, a
self-signed one in the trust store included.

The extensions OpenSSL caches are read from the certificate's own bytes (cryptography
refuses the whole extension list for one it cannot decode, and decodes some OpenSSL
accepts, such as CA:FALSE with a pathLenConstraint, no better): a keyUsage without any
bit set (RFC 5280 4.2.1.3), a basicConstraints that is no SEQUENCE of an optional BOOLEAN
and an optional INTEGER or whose pathLenConstraint is negative, one of these extensions
twice, and one whose value does not start with its ASN.1 type's tag (measured with
`openssl verify`, 3.0). A value of the right type that OpenSSL's decoder may still refuse
is not judged here (cryptography's verifier then gives no verdict: not established).
"""

from __future__ import annotations

from functools import lru_cache

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tlsprobe.engine.nameconstraints import subject_text
from tlsprobe.wire.spki import der_element, oid_text

__all__ = ["invalid_extension", "invalid_near", "unreadable"]

_SEQUENCE, _BIT_STRING, _OCTET_STRING, _BOOLEAN, _INTEGER = 0x30, 0x03, 0x04, 0x01, 0x02

#: the extensions x509v3_cache_extensions decodes (name, the tag its value starts with)
_CACHED = {
    "2.5.29.19": ("basicConstraints", _SEQUENCE), "2.5.29.15": ("keyUsage", _BIT_STRING),
    "2.5.29.37": ("extendedKeyUsage", _SEQUENCE),
    "2.5.29.14": ("subjectKeyIdentifier", _OCTET_STRING),
    "2.5.29.35": ("authorityKeyIdentifier", _SEQUENCE),
    "2.5.29.17": ("subjectAltName", _SEQUENCE), "2.5.29.30": ("nameConstraints", _SEQUENCE),
    "2.5.29.31": ("cRLDistributionPoints", _SEQUENCE),
    "1.3.6.1.5.5.7.1.7": ("ipAddrBlocks", _SEQUENCE),
    "1.3.6.1.5.5.7.1.8": ("autonomousSysIds", _SEQUENCE),
    "1.3.6.1.5.5.7.1.14": ("proxyCertInfo", _SEQUENCE),
    "2.16.840.1.113730.1.1": ("Netscape certificate type", _BIT_STRING),
}


class _Bad(ValueError):
    """Bytes that are no DER element."""


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of the contents, end of the element) of the element at `pos` (ValueError:
    none there)."""
    return der_element(data, pos, len(data))


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    while start < end:
        tag, body, start = _tlv(data, start)
        out.append((tag, body, start))
    if start != end:
        raise _Bad("overrun")
    return out


def _extensions(der: bytes) -> list[tuple[str, bytes]]:
    """(OID, value) of each extension of the certificate `der`, in order."""
    body = _tlv(der, 0)[1]
    tbs = _children(der, *_tlv(der, body)[1:])
    found = next(((b, e) for t, b, e in tbs if t == 0xA3), None)
    if found is None:
        return []
    _, seq, seq_end = _tlv(der, found[0])
    out = []
    for _, ext, ext_end in _children(der, seq, seq_end):
        parts = _children(der, ext, ext_end)
        value = parts[-1]
        out.append((oid_text(der[parts[0][1]:parts[0][2]]), der[value[1]:value[2]]))
    return out


def _basic_constraints(value: bytes) -> str | None:
    _, body, end = _tlv(value, 0)
    parts = _children(value, body, end)
    tags = [t for t, _, _ in parts]
    if tags not in ([], [_BOOLEAN], [_INTEGER], [_BOOLEAN, _INTEGER]):
        return "its basicConstraints are not a CA flag and a path length"
    if tags and tags[-1] == _INTEGER:
        _, start, stop = parts[-1]
        if stop > start and value[start] & 0x80:
            return "its basicConstraints' pathLenConstraint is negative"
    return None


def _key_usage(value: bytes) -> str | None:
    _, body, end = _tlv(value, 0)
    if not any(value[body + 1:end]):
        return "its keyUsage has no bit set"
    return None


def _problem(oid: str, value: bytes) -> str | None:
    name, tag = _CACHED[oid]
    try:
        if not value or value[0] != tag:
            return f"its {name} extension is not of its ASN.1 type"
        _tlv(value, 0)
        if oid == "2.5.29.19":
            return _basic_constraints(value)
        if oid == "2.5.29.15":
            return _key_usage(value)
    except ValueError:
        return f"its {name} extension is not readable DER"
    return None


@lru_cache(maxsize=256)
def invalid_extension(cert: x509.Certificate) -> str | None:
    """Why OpenSSL's extension cache marks `cert` invalid (no issuer is found for it, and
    it issues nothing), or None."""
    try:
        exts = _extensions(cert.public_bytes(Encoding.DER))
    except (ValueError, IndexError):
        return None   # the parser read it: a shape not judged here
    seen: set[str] = set()
    for oid, value in exts:
        if oid not in _CACHED:
            continue
        if oid in seen:
            return f"it has two {_CACHED[oid][0]} extensions"
        seen.add(oid)
        problem = _problem(oid, value)
        if problem is not None:
            return problem
    return None


def invalid_near(cert: x509.Certificate, others: list[x509.Certificate]) -> str | None:
    """Why OpenSSL finds no issuer of `cert` when its extensions, or those of a
    certificate of its issuer's name, cannot be cached (certext.py), or None."""
    problem = invalid_extension(cert)
    if problem is not None:
        return (f"{subject_text(cert)} has an extension OpenSSL refuses ({problem}): OpenSSL "
                "finds no issuer of it")
    for other in others:
        problem = invalid_extension(other) if other.subject == cert.issuer else None
        if problem is not None:
            return (f"the issuer {subject_text(other)} of {subject_text(cert)} has an extension "
                    f"OpenSSL refuses ({problem}): OpenSSL takes it for no issuer")
    return None


def unreadable(path: list[x509.Certificate]) -> str | None:
    """Why OpenSSL's checks of the path's extensions cannot be made here: cryptography
    cannot decode the extensions of one of its certificates (one it does not read as
    OpenSSL does, such as trailing bytes or a malformed certificatePolicies, which OpenSSL
    ignores unless it checks policies), or None."""
    for cert in path:
        try:
            len(cert.extensions)
        except (ValueError, x509.DuplicateExtension) as exc:
            text = " ".join(str(exc).split())[:160]
            return (f"cannot read the extensions of {subject_text(cert)} ({text}): OpenSSL's "
                    "checks of them cannot be made")
    return None
