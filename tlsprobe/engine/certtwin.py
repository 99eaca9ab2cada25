"""A readable twin of a certificate whose extensions `cryptography` refuses in a form
OpenSSL reads (measured with `openssl verify -purpose sslserver`, 3.0), to read its
extensions with, never to check its signature (which no longer holds): each extension
rewritten into one cryptography reads that means the same to OpenSSL's checks.

- basicConstraints: CA:FALSE with a pathLenConstraint (OpenSSL reads it as CA:FALSE, the
  path length checked only in strict mode) or CA:FALSE written out (a DEFAULT encoded) as
  an empty SEQUENCE; a BOOLEAN of a byte other than 0x00 and 0xFF as TRUE (0xFF).
- extendedKeyUsage without a purpose (OpenSSL: no purpose, 26 for a TLS server) as one of
  `NO_PURPOSE`, a purpose no check knows.
- subjectAltName: an iPAddress of neither 4 nor 16 bytes (OpenSSL matches it to no
  address; a name constraint of addresses says 53 for it, nc_ip) as an otherName of type
  `ODD_ADDRESS` holding its bytes; an empty list as one otherName of type `NO_NAME`,
  which stands for nothing (no DNS name: the host name is the CN's, as OpenSSL reads it).
- nameConstraints: an empty list of subtrees dropped (OpenSSL: no constraint), a
  subtree's iPAddress base of neither 8 nor 32 bytes (53 for any address it meets) as an
  otherName of type `ODD_ADDRESS`; no subtree left: one base of type `NO_NAME`.
engine/nameconstraints.py reads those otherNames as OpenSSL reads what they stand for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tlsprobe.engine.certext import basic_constraints, problem_of
from tlsprobe.engine.nameconstraints import NO_NAME, ODD_ADDRESS
from tlsprobe.model.pubkey import load_certificate
from tlsprobe.wire.ber import der_element, oid_text
from tlsprobe.wire.dertwin import (
    der_twin,
    extension_list,
    positions,
    tlv,
    uncomparable_times,
    with_contents,
)

__all__ = ["NO_NAME", "NO_PURPOSE", "ODD_ADDRESS", "original_of", "parsed_twin",
           "readable_certificate", "readable_twin", "time_format_errors"]

#: each twin made by `parsed_twin` (its DER) -> the certificate as sent, whose signature
#: is the one to check; bounded, the least recently used dropped first (a twin in use is
#: asked for at each signature check of its path)
_ORIGINALS: OrderedDict[bytes, bytes] = OrderedDict()
_ORIGINALS_MAX = 1024
#: the same for the trust store's twins (`parsed_twin(pinned=True)`), kept while the
#: process runs: a store read once serves every verification after it
_PINNED: dict[bytes, bytes] = {}
_LOCK = threading.Lock()

#: the stand-ins' OIDs (a UUID arc, X.667: no certificate names them)
NO_PURPOSE = x509.ObjectIdentifier("2.25.329800735698586629295641978511506172918.1")


def _oid(oid: x509.ObjectIdentifier) -> bytes:
    arcs = [int(a) for a in oid.dotted_string.split(".")]
    body = bytearray()
    for n in [40 * arcs[0] + arcs[1], *arcs[2:]]:
        chunk = [n & 0x7F]
        while n > 0x7F:
            n >>= 7
            chunk.append(0x80 | (n & 0x7F))
        body += bytes(reversed(chunk))
    return tlv(0x06, bytes(body))


def _other_name(oid: x509.ObjectIdentifier, value: bytes = b"") -> bytes:
    """An otherName GeneralName ([0] type-id, [0] EXPLICIT an OCTET STRING of `value`)."""
    return tlv(0xA0, _oid(oid) + tlv(0xA0, tlv(0x04, value)))


def _elements(value: bytes) -> list[tuple[int, bytes, bytes]]:
    """(tag, contents, whole element) of each element inside the one element `value`."""
    _, at, end = der_element(value, 0, len(value))
    out = []
    while at < end:
        tag, start, stop = der_element(value, at, end)
        out.append((tag, value[start:stop], value[at:stop]))
        at = stop
    return out


def _basic_constraints(value: bytes) -> bytes:
    ca, length = basic_constraints(value)
    return tlv(0x30, b"\x01\x01\xff" + (tlv(0x02, length) if length else b"")) if ca \
        else b"\x30\x00"


def _usages(value: bytes) -> bytes:
    return value if _elements(value) else tlv(0x30, _oid(NO_PURPOSE))


def _names(value: bytes) -> bytes:
    names = [_other_name(ODD_ADDRESS, body) if tag == 0x87 and len(body) not in (4, 16)
             else whole for tag, body, whole in _elements(value)]
    return tlv(0x30, b"".join(names) or _other_name(NO_NAME))


def _subtree(whole: bytes) -> bytes:
    parts = _elements(whole)
    tag, body, _ = parts[0]
    if tag != 0x87 or len(body) in (8, 32):
        return whole
    return tlv(0x30, _other_name(ODD_ADDRESS, body) + b"".join(p[2] for p in parts[1:]))


def _constraints(value: bytes) -> bytes:
    lists = [tlv(tag, b"".join(_subtree(w) for _, _, w in _elements(whole)))
             for tag, body, whole in _elements(value) if body]
    return tlv(0x30, b"".join(lists) or tlv(0xA0, tlv(0x30, _other_name(NO_NAME))))


#: the rewriting of each extension whose forms are read here, by OID
_REWRITES: dict[str, Callable[[bytes], bytes]] = {
    "2.5.29.19": _basic_constraints, "2.5.29.37": _usages, "2.5.29.17": _names,
    "2.5.29.30": _constraints}


def readable_twin(cert: x509.Certificate) -> x509.Certificate:
    """`cert` itself (the very object: a caller may tell a twin by identity) when
    cryptography reads its extensions, else its twin (the module's text) when that reads
    them, else `cert`."""
    try:
        len(cert.extensions)
        return cert
    except (ValueError, TypeError, x509.DuplicateExtension):
        return _twin(cert) or cert


@lru_cache(maxsize=64)
def _twin(cert: x509.Certificate) -> x509.Certificate | None:
    der = cert.public_bytes(Encoding.DER)
    try:
        span = extension_list(der)
        if span is None:
            return None
        parts, changed, at = [], False, span[0]
        while at < span[1]:   # each extension read once: a hostile list costs linear time
            _, body, end = der_element(der, at, span[1])
            fields = [der_element(der, pos, end) for pos in positions(der, body, end)]
            head = positions(der, body, end)[-1]   # the OCTET STRING's header
            oid, value = oid_text(der[fields[0][1]:fields[0][2]]), der[fields[-1][1]:end]
            rewrite = _REWRITES.get(oid)
            new = value if rewrite is None or problem_of(oid, value) is not None \
                else rewrite(value)   # (one OpenSSL refuses: certext.py judged it, 20)
            changed = changed or new != value
            parts.append(der[at:end] if new == value else
                         tlv(0x30, der[body:head] + tlv(0x04, new)))
            at = end
        if not changed:
            return None
        twin = load_certificate(with_contents(der, 0, *span, b"".join(parts)))
        len(twin.extensions)
    except (ValueError, TypeError, x509.DuplicateExtension):
        return None
    return twin


def parsed_twin(der: bytes, *, pinned: bool = False,
                odd_times: bool = False) -> x509.Certificate | None:
    """A certificate cryptography refuses as a whole only for its lengths (BER's longer or
    indefinite forms: wire/spki.der_certificate) or its extensions' critical flags (a
    BOOLEAN of a byte other than 0x00 and 0xFF; FALSE, the DEFAULT, written out), which
    OpenSSL reads alike, read through a copy in DER; None for any other certificate. Its
    signature is checked over the bytes as sent (`original_of`), as OpenSSL checks it
    over the tbsCertificate it read; `pinned`: a trust store's, whose original is never
    dropped; `odd_times`: a validity time OpenSSL cannot compare read as one never
    current (`time_format_errors`), for the trust verdict alone (no other reader may
    take that stand-in for the certificate's time)."""
    try:
        new = der_twin(der, odd_times=odd_times)
        twin = load_certificate(new) if new != der else None
    except (ValueError, x509.InvalidVersion):   # (no ValueError: X.509 v2, v4+)
        return None
    if twin is not None and pinned:
        with _LOCK:
            _PINNED[new] = der
    elif twin is not None:
        with _LOCK:
            _ORIGINALS[new] = der
            _ORIGINALS.move_to_end(new)
            while len(_ORIGINALS) > _ORIGINALS_MAX:
                _ORIGINALS.popitem(last=False)
    return twin


def readable_certificate(der: bytes, *, odd_times: bool = False) -> x509.Certificate:
    """`load_certificate(der)`, or the twin `parsed_twin` makes of a certificate refused
    only for its lengths or critical flags (its signature is checked over the bytes as sent by
    chainpath.issued). Raises ValueError as `load_certificate`."""
    try:
        return load_certificate(der)
    except ValueError:
        twin = parsed_twin(der, odd_times=odd_times)
        if twin is None:
            raise
        return twin


def original_of(cert: x509.Certificate) -> bytes | None:
    """The certificate as sent of a twin `parsed_twin` made, else None."""
    if not _ORIGINALS and not _PINNED:
        return None
    der = cert.public_bytes(Encoding.DER)
    with _LOCK:
        if der in _PINNED:
            return _PINNED[der]
        original = _ORIGINALS.get(der)
        if original is not None:
            _ORIGINALS.move_to_end(der)
    return original


def time_format_errors(cert: x509.Certificate) -> tuple[bool, bool]:
    """Whether the notBefore and the notAfter of the certificate as sent are times OpenSSL
    cannot compare (13, 14): only a twin's (`parsed_twin`) can be."""
    original = original_of(cert)
    if original is None:
        return False, False
    try:
        found = uncomparable_times(original)
    except ValueError:
        return False, False
    return found[0] is not None, found[1] is not None
