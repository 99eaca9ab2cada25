"""The DER twin of a certificate `cryptography` refuses as a whole in a form OpenSSL reads.

OpenSSL's d2i reads BER and values DER or the string types do not allow; `cryptography`
refuses the whole certificate for any of them. The twin is the same certificate for
OpenSSL's checks, written as `cryptography` loads it (measured with `openssl verify`, 3.0):

- every length definite and in its shortest form (wire/spki.der_certificate);
- each extension's critical BOOLEAN as DER writes it (a byte other than 0x00 and 0xFF is
  TRUE; FALSE, the DEFAULT, left out);
- a version written out as v1 (the DEFAULT) left out, v2 or one above v3 as v3;
- a PrintableString or IA5String of a name (issuer, subject) holding what its type does
  not allow ('@', '_', '*', a byte above 0x7F) as a UTF8String of the same characters,
  each byte one (OpenSSL's ASN1_STRING_to_UTF8): X509_NAME_cmp compares the canonical
  encodings, where both are UTF-8, and its host name and name constraint checks read the
  text as UTF-8 alike;
- `odd_times`: a validity time OpenSSL's X509_cmp_time cannot compare (a UTCTime without
  seconds, a fraction, an offset) as one never current (`NEVER`): OpenSSL says 13 or 14
  where it checks the dates, and no other reader may take that stand-in for the time.

The twin's signature no longer holds: it is checked over the bytes as sent
(wire/spki.signed_parts). A NumericString holding other than digits and spaces stays
refused: OpenSSL compares it as it is, and no other type compares the same.
"""

from __future__ import annotations

from tlsprobe.wire.ber import der_element, der_length
from tlsprobe.wire.spki import der_certificate

__all__ = ["NEVER", "der_twin", "extension_list", "positions", "tlv",
           "uncomparable_times", "with_contents"]

_PRINTABLE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 '()+,-./:=?")
_PRINTABLE_STRING, _IA5_STRING, _UTF8_STRING = 0x13, 0x16, 0x0C
#: what stands for a time OpenSSL cannot compare (X509_cmp_time): never current
NEVER = (b"\x18\x0f99991231235959Z", b"\x18\x0f19500101000000Z")


def tlv(tag: int, body: bytes) -> bytes:
    """One DER element."""
    return bytes([tag]) + der_length(len(body)) + body


def positions(der: bytes, start: int, end: int) -> list[int]:
    """Where each element from `start` to `end` begins."""
    out = []
    while start < end:
        out.append(start)
        start = der_element(der, start, end)[2]
    return out


def _spans(der: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of each whole element from `start` to `end`."""
    return [(p, der_element(der, p, end)[2]) for p in positions(der, start, end)]


def with_contents(der: bytes, at: int, start: int, stop: int, new: bytes) -> bytes:
    """The DER element at `at` with the contents [start, stop) of an element inside it
    replaced by `new`, each enclosing length written anew."""
    tag, body, end = der_element(der, at, len(der))
    if (body, end) == (start, stop):
        inner = new
    else:
        parts, pos = [], body
        while pos < end:
            child_end = der_element(der, pos, end)[2]
            parts.append(with_contents(der, pos, start, stop, new) if pos <= start < child_end
                         else der[pos:child_end])
            pos = child_end
        inner = b"".join(parts)
    return tlv(tag, inner)


def _tbs_fields(der: bytes) -> list[tuple[int, int, int]]:
    """(tag, start, end of the contents) of each field of a DER certificate's
    tbsCertificate."""
    _, body, end = der_element(der, 0, len(der))
    _, at, tbs_end = der_element(der, body, end)
    fields = []
    while at < tbs_end:
        fields.append(der_element(der, at, tbs_end))
        at = fields[-1][2]
    return fields


def extension_list(der: bytes) -> tuple[int, int] | None:
    """(start, end) of the contents of a DER certificate's SEQUENCE OF Extension, None
    when it has none; ValueError when it is not DER of a certificate's shape."""
    found = None
    for tag, start, stop in _tbs_fields(der):
        found = (start, stop) if tag == 0xA3 else found
    if found is None:
        return None
    _, start, stop = der_element(der, *found)
    return start, stop


def der_twin(der: bytes, *, odd_times: bool = False) -> bytes:
    """The twin of the certificate `der` (the module's text; `der` itself when nothing was
    rewritten); ValueError when it does not have a certificate's outline."""
    new = _version(_plain_names(_critical_flags(der_certificate(der))))
    return _times(new)[0] if odd_times else new


def uncomparable_times(der: bytes) -> tuple[bytes | None, bytes | None]:
    """The contents of the notBefore and of the notAfter of the certificate `der` that are
    times OpenSSL cannot compare (13, 14), None for one it compares; ValueError when it
    does not have a certificate's outline."""
    found = _times(der_certificate(der))[1]
    return found[0], found[1]


def _well_formed(tag: int, value: bytes) -> bool:
    """A time X509_cmp_time (OpenSSL 3.0) compares: a UTCTime of 12 digits and Z, or a
    GeneralizedTime of 14 digits and Z (no fraction, no offset, seconds written)."""
    size = {0x17: 13, 0x18: 15}.get(tag)
    return size == len(value) and value[:-1].isdigit() and value.endswith(b"Z")


def _times(der: bytes) -> tuple[bytes, tuple[bytes | None, bytes | None]]:
    """`der` (a certificate in DER lengths) with each validity time OpenSSL cannot compare
    replaced by a stand-in that is never current, and the contents of those that were
    (notBefore, notAfter; None: a time it compares); ValueError for one not of a
    certificate's shape."""
    fields = _tbs_fields(der)
    index = 4 if fields and fields[0][0] == 0xA0 else 3
    if len(fields) <= index:
        raise ValueError("no validity")
    _, start, stop = fields[index]
    spans = _spans(der, start, stop)
    values = [der[der_element(der, a, b)[1]:b] for a, b in spans]
    bad = [not _well_formed(der[a], v) for (a, _), v in zip(spans, values, strict=True)]
    if len(bad) != 2 or not any(bad):
        return der, (None, None)
    new = b"".join(NEVER[i] if bad[i] else der[a:b] for i, (a, b) in enumerate(spans))
    return (with_contents(der, 0, start, stop, new),
            (values[0] if bad[0] else None, values[1] if bad[1] else None))


def _critical_flags(der: bytes) -> bytes:
    """`der` with each extension's critical BOOLEAN as DER writes it (TRUE as 0xFF, FALSE
    left out); ValueError for a certificate not in DER otherwise."""
    span = extension_list(der)
    if span is None:
        return der
    start, stop = span
    extensions, at = [], start
    while at < stop:
        _, part, at = der_element(der, at, stop)
        fields = []
        while part < at:
            tag, value, end = der_element(der, part, at)
            if tag == 0x01 and end - value == 1:
                fields.append(b"\x01\x01\xff" if der[value] else b"")
            else:
                fields.append(der[part:end])
            part = end
        extensions.append(tlv(0x30, b"".join(fields)))
    new = b"".join(extensions)
    return der if new == der[start:stop] else with_contents(der, 0, start, stop, new)


def _version(der: bytes) -> bytes:
    """`der` without a version written out as v1, the DEFAULT, and with v2 or a version
    above v3 as v3: OpenSSL reads each (only v1 has a meaning of its own, EXFLAG_V1; the
    others are checked alike but in strict mode, which s_client does not set)."""
    fields = _tbs_fields(der)
    if not fields or fields[0][0] != 0xA0:
        return der
    _, body, end = der_element(der, 0, len(der))
    _, tbs, tbs_end = der_element(der, body, end)
    version = der[fields[0][1]:fields[0][2]]
    if version == b"\x02\x01\x00":
        return with_contents(der, 0, tbs, tbs_end, der[fields[0][2]:tbs_end])
    if len(version) == 3 and version[:2] == b"\x02\x01" and version[2] in range(1, 0x80) and \
            version[2] != 2:
        return with_contents(der, 0, fields[0][1], fields[0][2], b"\x02\x01\x02")
    return der


def _plain_names(der: bytes) -> bytes:
    """`der` with the strings of its issuer and subject that cryptography refuses (the
    module's text) as UTF8Strings."""
    fields = _tbs_fields(der)
    first = 1 if fields and fields[0][0] == 0xA0 else 0
    for index in (first + 4, first + 2):   # the subject first: the issuer's span holds
        if len(fields) <= index:
            raise ValueError("no issuer or subject")
        _, start, stop = fields[index]
        new = _name_strings(der, start, stop)
        if new != der[start:stop]:
            der = with_contents(der, 0, start, stop, new)
    return der


def _name_strings(der: bytes, start: int, stop: int) -> bytes:
    """The contents of a Name (RDNs of attributes: an OID and a value) with each value
    cryptography refuses rewritten."""
    rdns = []
    for rdn_start, rdn_end in _spans(der, start, stop):
        _, a, b = der_element(der, rdn_start, rdn_end)
        attributes = []
        for attr_start, attr_end in _spans(der, a, b):
            _, c, d = der_element(der, attr_start, attr_end)
            parts = _spans(der, c, d)
            if len(parts) == 2:
                tag, value, end = der_element(der, *parts[1])
                text = der[value:end]
                if _refused(tag, text):
                    attributes.append(tlv(0x30, der[parts[0][0]:parts[0][1]] + tlv(
                        _UTF8_STRING, text.decode("latin-1").encode())))
                    continue
            attributes.append(der[attr_start:attr_end])
        rdns.append(tlv(0x31, b"".join(attributes)))
    return b"".join(rdns)


def _refused(tag: int, text: bytes) -> bool:
    """A string of a type whose characters cryptography checks, holding one it refuses."""
    if tag == _PRINTABLE_STRING:
        return not _PRINTABLE.issuperset(text)
    return tag == _IA5_STRING and any(b > 0x7F for b in text)
