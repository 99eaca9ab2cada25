"""A certificate's key fields, read from the DER without `cryptography`'s X.509 parser.

X.509 parsing belongs to `cryptography` (wire/certificate.py keeps certificates as DER
bytes), but its x509 package costs a group audit a fifth of its instructions to import
(issue 35, a scan's start-up), and the group audit needs one field of the leaf: the curve
of an ECDSA certificate's key, which TLS 1.2 requires in the client's list
(probes/audit/groups.py). This walks the DER to that field only (RFC 5280 4.1:
Certificate -> tbsCertificate -> subjectPublicKeyInfo -> algorithm; RFC 5480 2.1.1:
id-ecPublicKey with a namedCurve OID) and reads nothing else.

The same walk gives the engine the server's key when `cryptography` refuses the certificate
as a whole (a length in one of BER's other forms, longer or indefinite, a time OpenSSL
reads: OpenSSL accepts
these certificates and s_client completes the handshake): `certificate_shape` tells such a
certificate from garbage, `subject_public_key_info` gives its key as DER for
`serialization.load_der_public_key` (engine/verify.py `leaf_key`), so the server's
signature is still checked.
"""

from __future__ import annotations

from tlsprobe.wire.ber import ber_element, der_length, oid_text

_SEQUENCE, _SET, _INTEGER, _BIT_STRING, _OID, _VERSION = 0x30, 0x31, 0x02, 0x03, 0x06, 0xA0
_BOOLEAN, _OCTET_STRING, _UTC_TIME, _GENERALIZED_TIME = 0x01, 0x04, 0x17, 0x18
#: id-ecPublicKey (RFC 5480 2.1.1)
EC_PUBLIC_KEY = "1.2.840.10045.2.1"


def _expect(der: bytes, at: int, end: int, tag: int) -> tuple[int, int, int]:
    """(start, end of the contents, end of the element) of the element of `tag` at `at`."""
    got, start, stop, after = ber_element(der, at, end)
    if got != tag:
        raise ValueError(f"DER tag 0x{got:02x} where 0x{tag:02x} was expected")
    return start, stop, after


def _subject_and_spki(der: bytes) -> tuple[int, int]:
    """(start of the subject, start of the subjectPublicKeyInfo) of a certificate, read by
    its outline; ValueError when the DER does not have the shape of a certificate up to
    them."""
    start, end, _ = _expect(der, 0, len(der), _SEQUENCE)          # Certificate
    at, tbs_end, _ = _expect(der, start, end, _SEQUENCE)          # tbsCertificate
    tag, _, _, after = ber_element(der, at, tbs_end)
    if tag == _VERSION:
        tag, _, _, after = ber_element(der, after, tbs_end)
    if tag != _INTEGER:                                           # serialNumber
        raise ValueError("no serial number")
    at = after
    for _ in range(3):              # signature, issuer, validity
        at = _expect(der, at, tbs_end, _SEQUENCE)[2]
    return at, _expect(der, at, tbs_end, _SEQUENCE)[2]            # subject


def _spki(der: bytes) -> tuple[int, int, int, int]:
    """(start of the element, start, end of the contents, end of the element) of a
    certificate's subjectPublicKeyInfo; ValueError when the DER does not have the shape
    of a certificate up to it."""
    at = _subject_and_spki(der)[1]
    spki, spki_end, after = _expect(der, at, len(der), _SEQUENCE)
    return at, spki, spki_end, after


def signed_parts(der: bytes) -> tuple[bytes, bytes]:
    """(the tbsCertificate's bytes as sent, the signature's bytes) of a certificate, read
    by its outline (what its issuer's key signed, whatever form `cryptography` reads);
    ValueError as `certificate_shape`."""
    start, end, _ = _expect(der, 0, len(der), _SEQUENCE)
    tbs = _expect(der, start, end, _SEQUENCE)[2]
    signature, signature_end, _ = _expect(der, _algorithm(der, tbs, end), end, _BIT_STRING)
    if signature == signature_end or der[signature] != 0:
        raise ValueError("a signature that is not a whole number of bytes")
    return der[start:tbs], der[signature + 1:signature_end]


def extension_oids(der: bytes) -> list[str]:
    """The dotted OIDs of a certificate's extensions in order, read by its outline (an
    extension list `cryptography` refuses as a whole still says which it holds);
    ValueError as `certificate_shape`."""
    start, end, _ = _expect(der, 0, len(der), _SEQUENCE)
    tbs_end = _expect(der, start, end, _SEQUENCE)[1]
    at = _expect(der, _subject_and_spki(der)[1], tbs_end, _SEQUENCE)[2]
    out = []
    while at < tbs_end:
        tag, body, stop, at = ber_element(der, at, tbs_end)
        if tag != 0xA3:
            continue
        ext, ext_end, _ = _expect(der, body, stop, _SEQUENCE)
        while ext < ext_end:
            field, field_end, ext = _expect(der, ext, ext_end, _SEQUENCE)
            oid, oid_end, _ = _expect(der, field, field_end, _OID)
            out.append(oid_text(der[oid:oid_end]))
    return out


def subject_name(der: bytes) -> bytes:
    """A certificate's subject Name as DER (definite lengths in the shortest form, as
    `x509.Name.from_bytes` reads it), by its outline alone; ValueError as
    `certificate_shape`."""
    at, end = _subject_and_spki(der)
    return _shortest(der, at, end, key_too=False)


def _ec_parameters(der: bytes) -> tuple[int, int, int] | None:
    """(tag, start, end of the contents) of the parameters of a DER certificate's
    id-ecPublicKey, None for another kind of key or none; ValueError when the DER does not
    have the shape of a certificate up to its subjectPublicKeyInfo."""
    _, spki, spki_end, _ = _spki(der)
    alg, alg_end, _ = _expect(der, spki, spki_end, _SEQUENCE)     # AlgorithmIdentifier
    oid_start, oid_end, after = _expect(der, alg, alg_end, _OID)
    if oid_text(der[oid_start:oid_end]) != EC_PUBLIC_KEY or after == alg_end:
        return None
    return ber_element(der, after, alg_end)[:3]


def certificate_shape(der: bytes) -> None:
    """ValueError unless `der` is one certificate by its ASN.1 outline (RFC 5280 4.1): a
    SEQUENCE of tbsCertificate, an AlgorithmIdentifier and a BIT STRING, nothing after it;
    the tbsCertificate's fields each of its type, in order (names as SEQUENCEs of SETs of
    attribute SEQUENCEs, two times, a subjectPublicKeyInfo, the extensions each an OID, an
    optional BOOLEAN and an OCTET STRING). Lengths may be BER's other forms (longer ones,
    indefinite ones of constructed elements) and values what DER or the string types do
    not allow: OpenSSL reads such a certificate, and `cryptography` refuses it; it is the
    server's, not garbage."""
    start, end, after = _expect(der, 0, len(der), _SEQUENCE)
    if after != len(der):
        raise ValueError(f"{len(der) - after} bytes after the certificate")
    tbs, tbs_end, at = _expect(der, start, end, _SEQUENCE)        # tbsCertificate
    at = _algorithm(der, at, end)                                 # signatureAlgorithm
    if _expect(der, at, end, _BIT_STRING)[2] != end:              # signatureValue
        raise ValueError("more than three fields in the certificate")
    _tbs_outline(der, tbs, tbs_end)


def _tbs_outline(der: bytes, at: int, end: int) -> None:
    tag, _, _, after = ber_element(der, at, end)
    if tag == _VERSION:
        at = after
    at = _expect(der, at, end, _INTEGER)[2]                       # serialNumber
    at = _algorithm(der, at, end)                                 # signature
    at = _name(der, at, end)                                      # issuer
    start, stop, at = _expect(der, at, end, _SEQUENCE)            # validity
    for _ in range(2):
        tag, _, _, start = ber_element(der, start, stop)
        if tag not in (_UTC_TIME, _GENERALIZED_TIME):
            raise ValueError(f"DER tag 0x{tag:02x} where a time was expected")
    if start != stop:
        raise ValueError("more than two times in the validity")
    at = _name(der, at, end)                                      # subject
    start, stop, at = _expect(der, at, end, _SEQUENCE)            # subjectPublicKeyInfo
    if _expect(der, _algorithm(der, start, stop), stop, _BIT_STRING)[2] != stop:
        raise ValueError("more than two fields in the subjectPublicKeyInfo")
    for optional in (0x81, 0x82, 0xA3):                           # unique ids, extensions
        if at < end and der[at] == optional:
            tag, start, stop, at = ber_element(der, at, end)
            if tag == 0xA3:
                _extensions(der, start, stop)
    if at != end:
        raise ValueError("a field after the tbsCertificate's last")


def _algorithm(der: bytes, at: int, end: int) -> int:
    """The end of the AlgorithmIdentifier at `at` (a SEQUENCE that starts with an OID)."""
    start, stop, after = _expect(der, at, end, _SEQUENCE)
    _expect(der, start, stop, _OID)
    return after


def _name(der: bytes, at: int, end: int) -> int:
    """The end of the Name at `at`: a SEQUENCE of SETs of SEQUENCEs, each starting with an
    attribute type's OID."""
    at, stop, after = _expect(der, at, end, _SEQUENCE)
    while at < stop:
        start, set_end, at = _expect(der, at, stop, _SET)
        while start < set_end:
            start = _algorithm(der, start, set_end)
    return after


def _extensions(der: bytes, at: int, end: int) -> None:
    """[3] EXPLICIT SEQUENCE OF Extension (OID, optional BOOLEAN, OCTET STRING)."""
    at, stop, after = _expect(der, at, end, _SEQUENCE)
    if after != end:
        raise ValueError("more than the extensions in [3]")
    while at < stop:
        start, ext_end, at = _expect(der, at, stop, _SEQUENCE)
        start = _expect(der, start, ext_end, _OID)[2]
        if start < ext_end and der[start] == _BOOLEAN:
            start = ber_element(der, start, ext_end)[3]
        if _expect(der, start, ext_end, _OCTET_STRING)[2] != ext_end:
            raise ValueError("more than three fields in an extension")


def has_certificate_shape(der: bytes) -> bool:
    """`certificate_shape` as a test."""
    try:
        certificate_shape(der)
    except ValueError:
        return False
    return True


def subject_public_key_info(der: bytes, *, key_too: bool = False) -> bytes:
    """A certificate's subjectPublicKeyInfo as DER (lengths definite and in their shortest
    form, as `cryptography` loads it: serialization.load_der_public_key), read by its
    outline alone; ValueError as `certificate_shape`. `key_too`: the subjectPublicKey's
    contents as well when they are DER elements (an RSA key): only for a key that does
    not load as it is, since an EC point or an Ed25519 key may look like one by chance."""
    at, _, _, end = _spki(der)
    return _shortest(der, at, end, key_too=key_too)


def spki_algorithm(der: bytes) -> str:
    """The dotted OID of a certificate's subjectPublicKeyInfo algorithm; ValueError as
    `certificate_shape`."""
    _, spki, spki_end, _ = _spki(der)
    alg, alg_end, _ = _expect(der, spki, spki_end, _SEQUENCE)
    oid_start, oid_end, _ = _expect(der, alg, alg_end, _OID)
    return oid_text(der[oid_start:oid_end])


def _shortest(der: bytes, at: int, end: int, depth: int = 0, *, key_too: bool) -> bytes:
    """The elements from `at` to `end` re-encoded with definite lengths in the shortest
    form (X.690 10.1), constructed ones (and a BIT STRING holding whole elements, as an
    RSA key's does) element by element."""
    if depth > 16:
        raise ValueError("DER nested too deep")
    out = bytearray()
    while at < end:
        tag, start, stop, after = ber_element(der, at, end)
        if tag & 0x20:
            value = _shortest(der, start, stop, depth + 1, key_too=key_too)
        elif key_too and tag == _BIT_STRING and stop - start > 1 and der[start] == 0:
            try:
                value = b"\x00" + _shortest(der, start + 1, stop, depth + 1, key_too=True)
            except ValueError:   # a key that is no DER (an EC point, Ed25519): as it is
                value = der[start:stop]
        else:
            value = der[start:stop]
        out += bytes([tag]) + der_length(len(value)) + value
        at = after
    return bytes(out)


#: rsaEncryption and id-RSASSA-PSS: keys whose subjectPublicKey holds DER elements
_RSA_KEYS = frozenset({"1.2.840.113549.1.1.1", "1.2.840.113549.1.1.10"})


def der_certificate(der: bytes) -> bytes:
    """A certificate that has a certificate's outline (`certificate_shape`) with every
    length definite and in its shortest form, an RSA key's own lengths too: the same
    certificate for OpenSSL, which reads BER lengths, in the form `cryptography` loads.
    Its signature holds over the bytes as sent only (`signed_parts` of `der`). ValueError
    as `certificate_shape`."""
    certificate_shape(der)
    return _shortest(der, 0, len(der), key_too=spki_algorithm(der) in _RSA_KEYS)


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


__all__ = ["EC_PUBLIC_KEY", "certificate_shape", "der_certificate",
           "ec_explicit_parameters", "ec_named_curve", "extension_oids", "has_certificate_shape",
           "signed_parts",
           "spki_algorithm", "subject_name", "subject_public_key_info"]
