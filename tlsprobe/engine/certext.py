"""A certificate whose extensions OpenSSL cannot cache: OpenSSL 3.0's x509v3_cache_extensions
sets EXFLAG_INVALID, and its issuer check (X509_check_issued, ossl_x509_likely_issued)
then fails for that certificate both as subject and as issuer. Such a certificate has no
issuer and issues nothing, not even itself: `openssl verify` says 20 (unable to get local
issuer certificate) at the certificate below it, or at it when it is the leaf, a
self-signed one in the trust store included.

The extensions OpenSSL caches are read from the certificate's own bytes (cryptography
refuses the whole extension list for one it cannot decode, and decodes some OpenSSL
accepts, such as CA:FALSE with a pathLenConstraint, no better), with the rules of OpenSSL's
decoder (crypto/asn1: a BOOLEAN of one byte, an INTEGER of minimal length, an OID whose
subidentifiers do not start with 0x80, a BIT STRING whose unused-bit count is 0 to 7; a
SEQUENCE of its fields in order and nothing else; bytes after the value are ignored) and
of x509v3_cache_extensions: one of these extensions twice, one that does not decode, a
keyUsage without any of its first 16 bits set (RFC 5280 4.2.1.3), a negative
pathLenConstraint, a CRL distribution point with neither name nor CRL issuer, a
proxyCertInfo beside CA:TRUE, a subjectAltName or an issuerAltName (measured with
`openssl verify`, 3.0). BER that OpenSSL may read (an indefinite length, a length of
more than four bytes, a constructed string) and content not looked at here (names) are
not judged: cryptography's verifier then gives no verdict (not established). A proxy
certificate OpenSSL can cache is `proxy_certificate`: its checks are not made here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from cryptography import x509

from tlsprobe.engine.nameconstraints import (
    raw_extensions,
    same_name,
    subject_text,
)
from tlsprobe.wire.ber import der_element

__all__ = ["basic_constraints", "invalid_extension", "invalid_near", "problem_of", "unreadable"]

_SEQUENCE, _BIT_STRING, _OCTET_STRING, _BOOLEAN, _INTEGER = 0x30, 0x03, 0x04, 0x01, 0x02
_OID = 0x06
_PROXY, _SAN, _IAN, _BC = "1.3.6.1.5.5.7.1.14", "2.5.29.17", "2.5.29.18", "2.5.29.19"

#: the extensions x509v3_cache_extensions decodes (name, the tag its value starts with)
_CACHED = {
    _BC: ("basicConstraints", _SEQUENCE), "2.5.29.15": ("keyUsage", _BIT_STRING),
    "2.5.29.37": ("extendedKeyUsage", _SEQUENCE),
    "2.5.29.14": ("subjectKeyIdentifier", _OCTET_STRING),
    "2.5.29.35": ("authorityKeyIdentifier", _SEQUENCE),
    _SAN: ("subjectAltName", _SEQUENCE), "2.5.29.30": ("nameConstraints", _SEQUENCE),
    "2.5.29.31": ("cRLDistributionPoints", _SEQUENCE),
    "1.3.6.1.5.5.7.1.7": ("ipAddrBlocks", _SEQUENCE),
    "1.3.6.1.5.5.7.1.8": ("autonomousSysIds", _SEQUENCE),
    _PROXY: ("proxyCertInfo", _SEQUENCE),
    "2.16.840.1.113730.1.1": ("Netscape certificate type", _BIT_STRING),
}


class _Bad(ValueError):
    """Bytes OpenSSL's decoder refuses."""


class _Unjudged(ValueError):
    """BER OpenSSL's decoder may accept, not read here."""


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of the contents, end of the element) of the element at `pos` (_Bad: none
    there; _Unjudged: a high tag number, an indefinite length, one of over four bytes)."""
    if pos + 1 < len(data) and (data[pos] & 0x1F == 0x1F or data[pos + 1] == 0x80
                                or data[pos + 1] > 0x84):
        raise _Unjudged("BER not read here")
    try:
        return der_element(data, pos, len(data))
    except ValueError as exc:
        raise _Bad(str(exc)) from None


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    while start < end:
        tag, body, start = _tlv(data, start)
        out.append((tag, body, start))
    if start != end:
        raise _Bad("overrun")
    return out


def _fields(data: bytes, body: int, end: int, order: tuple[int, ...]
            ) -> dict[int, tuple[int, int]]:
    """The fields of a SEQUENCE whose optional fields have the tags `order`, in that order:
    {tag: (start, end) of its contents}; _Bad for another tag or order (OpenSSL's template
    decoder leaves it unread: a length mismatch)."""
    found: dict[int, tuple[int, int]] = {}
    at = 0
    for tag, start, stop in _children(data, body, end):
        while at < len(order) and order[at] != tag:
            at += 1
        if at == len(order):
            raise _Bad("a field out of place")
        found[tag] = (start, stop)
        at += 1
    return found


def _integer(data: bytes, start: int, stop: int) -> bool:
    """An INTEGER's contents as c2i_ASN1_INTEGER reads them: whether it is negative (_Bad:
    empty, or padded)."""
    if stop <= start:
        raise _Bad("an empty INTEGER")
    neg = data[start] & 0x80
    if stop - start > 1:
        pad = data[start] == 0 or (data[start] == 0xFF and any(data[start + 1:stop]))
        if pad and neg == data[start + 1] & 0x80:
            raise _Bad("a padded INTEGER")
    return bool(neg)


def _oid(data: bytes, start: int, stop: int) -> None:
    """c2i_ASN1_OBJECT's rules: not empty, the last byte ends a subidentifier, and none
    starts with 0x80."""
    value = data[start:stop]
    if not value or value[-1] & 0x80 or any(
            b == 0x80 and (i == 0 or not value[i - 1] & 0x80) for i, b in enumerate(value)):
        raise _Bad("an OBJECT IDENTIFIER that is not one")


def _bits(data: bytes, start: int, stop: int) -> bytes:
    """A BIT STRING's bits as c2i_ASN1_BIT_STRING keeps them (the unused bits cleared)."""
    if stop <= start or data[start] > 7:
        raise _Bad("a BIT STRING without a count of unused bits from 0 to 7")
    bits = bytearray(data[start + 1:stop])
    if bits:
        bits[-1] &= (0xFF << data[start]) & 0xFF
    return bytes(bits)


def _basic_constraints(value: bytes, body: int, end: int) -> str | None:
    fields = _fields(value, body, end, (_BOOLEAN, _INTEGER))
    if _BOOLEAN in fields and fields[_BOOLEAN][1] - fields[_BOOLEAN][0] != 1:
        raise _Bad("a BOOLEAN not of one byte")
    if _INTEGER in fields and _integer(value, *fields[_INTEGER]):
        return "its basicConstraints' pathLenConstraint is negative"
    return None


def _key_usage(value: bytes, body: int, end: int) -> str | None:
    bits = _bits(value, body, end)
    if not any(bits[:2]):   # ex_kusage: the first two bytes
        return "its keyUsage has none of its 9 bits set"
    return None


def _usages(value: bytes, body: int, end: int) -> None:
    for tag, start, stop in _children(value, body, end):
        if tag != _OID:
            raise _Bad("an extendedKeyUsage entry that is no OBJECT IDENTIFIER")
        _oid(value, start, stop)


def _general_name(data: bytes, tag: int, start: int, stop: int) -> None:
    """A GeneralName of a context-specific tag [0] to [8], constructed for the SEQUENCE
    types (otherName: an OID and an explicit [0] value; directoryName: an explicit Name)
    and primitive for the OID (registeredID); a constructed string is not read here."""
    number, constructed = tag & 0x1F, bool(tag & 0x20)
    if tag & 0xC0 != 0x80 or number > 8:
        raise _Bad("a GeneralName of no GeneralName's tag")
    if number in (0, 3, 4, 5) and not constructed or number == 8 and constructed:
        raise _Bad("a GeneralName of the wrong form")
    if number == 0:
        fields = _fields(data, start, stop, (_OID, 0xA0))
        if len(fields) != 2:
            raise _Bad("an otherName without its type or value")
        _oid(data, *fields[_OID])
    elif number == 4 and [t for t, _, _ in _children(data, start, stop)] != [_SEQUENCE]:
        raise _Bad("a directoryName that is no Name")
    elif number == 8:
        _oid(data, start, stop)
    elif constructed and number in (1, 2, 6, 7):
        raise _Unjudged("a constructed string")


def _general_names(value: bytes, body: int, end: int) -> None:
    for tag, start, stop in _children(value, body, end):
        _general_name(value, tag, start, stop)


def _name_constraints(value: bytes, body: int, end: int) -> None:
    """Two optional lists ([0] permitted, [1] excluded) of GeneralSubtree: a GeneralName
    and the INTEGERs minimum [0] and maximum [1], each optional."""
    for start, stop in _fields(value, body, end, (0xA0, 0xA1)).values():
        for tag, sub, sub_end in _children(value, start, stop):
            parts = _children(value, sub, sub_end) if tag == _SEQUENCE else []
            if not parts:
                raise _Bad("a GeneralSubtree that is no SEQUENCE of a GeneralName")
            _general_name(value, *parts[0])
            after = parts[0][2]
            for start_, stop_ in _fields(value, after, sub_end, (0x80, 0x81)).values():
                _integer(value, start_, stop_)


def _key_identifier(value: bytes, body: int, end: int) -> None:
    fields = _fields(value, body, end, (0x80, 0xA0, 0xA1, 0x82))
    if 0xA0 in fields:
        raise _Unjudged("a constructed keyIdentifier")
    if 0xA1 in fields:
        _general_names(value, *fields[0xA1])
    if 0x82 in fields:
        _integer(value, *fields[0x82])


def _distribution_points(value: bytes, body: int, end: int) -> str | None:
    for tag, start, stop in _children(value, body, end):
        if tag != _SEQUENCE:
            raise _Bad("a distribution point that is no SEQUENCE")
        fields = _fields(value, start, stop, (0xA0, 0x81, 0xA1, 0xA2))
        if 0xA1 in fields:
            raise _Unjudged("constructed reasons")
        if 0x81 in fields:
            _bits(value, *fields[0x81])
        if 0xA0 not in fields and (0xA2 not in fields or fields[0xA2][0] == fields[0xA2][1]):
            return "its cRLDistributionPoints has a point with neither name nor CRL issuer"
    return None


def _proxy(value: bytes, body: int, end: int) -> None:
    fields = _fields(value, body, end, (_INTEGER, _SEQUENCE))
    if _SEQUENCE not in fields:
        raise _Bad("no proxyPolicy")
    if _INTEGER in fields:
        _integer(value, *fields[_INTEGER])
    policy = _fields(value, *fields[_SEQUENCE], (_OID, _OCTET_STRING, 0x24))
    if _OID not in policy:
        raise _Bad("no policyLanguage")
    _oid(value, *policy[_OID])
    if 0x24 in policy:
        raise _Unjudged("a constructed policy")


def _netscape_type(value: bytes, body: int, end: int) -> None:
    _bits(value, body, end)


#: the readers of the contents of those extensions whose contents are judged here: each
#: raises _Bad where OpenSSL's decoder fails, or says what x509v3_cache_extensions refuses
_READERS: dict[str, Callable[[bytes, int, int], str | None]] = {
    _BC: _basic_constraints, "2.5.29.15": _key_usage, "2.5.29.37": _usages,
    "2.5.29.35": _key_identifier, "2.5.29.31": _distribution_points, _PROXY: _proxy,
    _SAN: _general_names, "2.5.29.30": _name_constraints,
    "2.16.840.1.113730.1.1": _netscape_type}


def problem_of(oid: str, value: bytes) -> str | None:
    """Why x509v3_cache_extensions refuses the extension `oid` of `value`, or None (one it
    does not cache, or BER not read here, included)."""
    return _problem(oid, value) if oid in _CACHED else None


def _problem(oid: str, value: bytes) -> str | None:
    name, tag = _CACHED[oid]
    try:
        if not value or value[0] != tag:
            return f"its {name} extension is not of its ASN.1 type"
        _, body, end = _tlv(value, 0)
        reader = _READERS.get(oid)
        return None if reader is None else reader(value, body, end)
    except _Unjudged:
        return None
    except ValueError:
        return f"its {name} extension does not decode"


def _says_ca(value: bytes) -> bool:
    """A basicConstraints that decodes says CA:TRUE (a BOOLEAN not zero)."""
    return basic_constraints(value)[0]


def basic_constraints(value: bytes) -> tuple[bool, bytes]:
    """(CA:TRUE, the pathLenConstraint INTEGER's contents or b"") of a basicConstraints
    as OpenSSL's decoder reads it (any BOOLEAN byte not zero is TRUE); ValueError when it
    does not decode."""
    fields = _fields(value, *_tlv(value, 0)[1:], (_BOOLEAN, _INTEGER))
    length = fields.get(_INTEGER)
    return (_BOOLEAN in fields and value[fields[_BOOLEAN][0]] != 0,
            value[length[0]:length[1]] if length else b"")


def _proxy_beside(exts: list[tuple[str, bytes]]) -> str | None:
    """x509v3_cache_extensions refuses a proxyCertInfo in a certificate that says CA:TRUE
    or has a subjectAltName or issuerAltName."""
    found = dict(exts)
    if _PROXY not in found:
        return None
    if _SAN in found or _IAN in found:
        return "it has a proxyCertInfo and a subject or issuer alternative name"
    if _BC in found and _says_ca(found[_BC]):
        return "it has a proxyCertInfo and says CA:TRUE"
    return None


@lru_cache(maxsize=256)
def invalid_extension(cert: x509.Certificate) -> str | None:
    """Why OpenSSL's extension cache marks `cert` invalid (no issuer is found for it, and
    it issues nothing), or None."""
    try:
        exts = raw_extensions(cert)
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
    return _proxy_beside(exts)


def invalid_near(cert: x509.Certificate, others: list[x509.Certificate]) -> str | None:
    """Why OpenSSL finds no issuer of `cert` when its extensions, or those of a
    certificate of its issuer's name, cannot be cached (certext.py), or None."""
    problem = invalid_extension(cert)
    if problem is not None:
        return (f"{subject_text(cert)} has an extension OpenSSL refuses ({problem}): OpenSSL "
                "finds no issuer of it")
    for other in others:
        problem = invalid_extension(other) if same_name(other.subject, cert.issuer) else None
        if problem is not None:
            return (f"the issuer {subject_text(other)} of {subject_text(cert)} has an extension "
                    f"OpenSSL refuses ({problem}): OpenSSL takes it for no issuer")
    return None


def unreadable(path: list[x509.Certificate]) -> str | None:
    """Why OpenSSL's checks of the path's extensions cannot be made here: cryptography
    cannot decode the extensions of one of its certificates (one it does not read as
    OpenSSL does, such as trailing bytes or a malformed certificatePolicies, which OpenSSL
    ignores unless it checks policies), or one is a proxy certificate (OpenSSL checks its
    issuer's keyUsage and refuses proxies unless told to allow them), or None."""
    for cert in path:
        try:
            len(cert.extensions)
        except (ValueError, TypeError, x509.DuplicateExtension) as exc:
            text = " ".join(str(exc).split())[:160]
            return (f"cannot read the extensions of {subject_text(cert)} ({text}): OpenSSL's "
                    "checks of them cannot be made")
        if any(e.oid.dotted_string == _PROXY for e in cert.extensions):
            return (f"{subject_text(cert)} is a proxy certificate (proxyCertInfo): OpenSSL's "
                    "checks of proxy certificates are not made here")
    return None
