"""Name constraints as OpenSSL 3.0 checks them (check_name_constraints, NAME_CONSTRAINTS_check
and nc_match in crypto/x509/v3_ncons.c): each certificate of the path from the top down (a
self-issued CA certificate is exempt) against the constraints of every CA above it, the
top one first. A certificate's names, in OpenSSL's order: its subject as a directory name
(when not empty), its subject emailAddress attributes (53 when one is not an IA5String,
whatever the constraints), each subjectAltName entry in order,
then, for a leaf without a DNS name, each subject CN that is a host name as cn2dnsid
reads one (no wildcard, no final dot; an embedded NUL is 53). A name is
outside the permitted subtrees when some subtree is of its type and none holds it (47),
inside an excluded one (48); a URI without "scheme://host" or an email address without
"@" is 53 (unsupported or invalid name syntax) once a constraint of its type applies. A
subtree of the name's type with a maximum, or a minimum other than 0, is 49 (OpenSSL
supports neither; cryptography drops both, so they are read from the certificate's bytes);
an otherName or registeredID against a subtree of its type (an otherName: of its type OID)
is 51 (unsupported name constraint type). An SmtpUTF8Mailbox otherName is an email address
for OpenSSL (nc_email_eai): against a host name subtree of ASCII letters, digits, "-" and
"." (no "xn--" label), its host matches case-insensitively; not of UTF8String or without
"@" it is 53; another subtree (a leading dot, a mailbox, an IDN) is NOT_JUDGED (OpenSSL
3.0's conversion of it is not replicated: the verdict is not established).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from functools import lru_cache

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from tlsprobe.wire.ber import der_children, der_element, oid_text

V_PERMITTED = 47
V_EXCLUDED = 48
V_UNSUPPORTED_NAME_SYNTAX = 53
V_SUBTREE_MINMAX = 49
V_UNSUPPORTED_CONSTRAINT_TYPE = 51
#: not a code: OpenSSL's verdict on the name is not known here
NOT_JUDGED = -1
#: engine/certtwin.py's stand-ins (defined here, which it imports): an iPAddress of an
#: odd length (a name, or a subtree's base) and an empty list
_TWIN_ARC = "2.25.329800735698586629295641978511506172918"
ODD_ADDRESS = x509.ObjectIdentifier(_TWIN_ARC + ".2")
NO_NAME = x509.ObjectIdentifier(_TWIN_ARC + ".3")

__all__ = ["NOT_JUDGED", "extension_of", "extension_spans", "name_constraint_problem",
           "raw_extensions", "same_name", "subject_text"]

Problem = tuple[int, str]
#: a name constraints apply to: (kind, value), kind one of "directory name" (x509.Name),
#: "email address", "DNS name", "URI" (str), "address" (an IP address)
Name = tuple[str, object]
_SPACE = " \t\n\v\f\r"
_SMTP_UTF8 = x509.ObjectIdentifier("1.3.6.1.5.5.7.8.9")
_NC_OID = "2.5.29.30"
_NOT_IA5 = "email address not of IA5String"
_BAD_CN = "common name with a NUL"
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.")


def subject_text(cert: x509.Certificate) -> str:
    """A certificate's subject as the verify codes' details name it."""
    return cert.subject.rfc4514_string() or "(empty subject)"


def extension_of(cert: x509.Certificate, kind: type[x509.ExtensionType]
                 ) -> x509.ExtensionType | None:
    """The certificate's extension of `kind` (None: absent, twice or unreadable)."""
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError, TypeError):
        return None


def extension_spans(der: bytes) -> list[tuple[str, int, int]]:
    """(OID, start, end of the value's contents in `der`) of each extension of the
    certificate `der` in order (ValueError: not of the shape of a certificate)."""
    body = der_element(der, 0, len(der))[1]
    tbs = der_children(der, *der_element(der, body, len(der))[1:])
    found = next(((b, e) for t, b, e in tbs if t == 0xA3), None)
    if found is None:
        return []
    out = []
    for _, ext, ext_end in der_children(der, *der_element(der, found[0], found[1])[1:]):
        parts = der_children(der, ext, ext_end)
        out.append((oid_text(der[parts[0][1]:parts[0][2]]), parts[-1][1], parts[-1][2]))
    return out


def raw_extensions(cert: x509.Certificate) -> list[tuple[str, bytes]]:
    """(OID, value) of each extension of `cert` in order, from its own bytes (ValueError:
    not of the shape of a certificate)."""
    der = cert.public_bytes(Encoding.DER)
    return [(oid, der[start:end]) for oid, start, end in extension_spans(der)]


def _limits(cert: x509.Certificate) -> tuple[list[bool], list[bool]]:
    """For each permitted and each excluded subtree of `cert`'s name constraints, in
    order: it has a maximum, or a minimum other than 0 (nc_minmax_valid refuses it)."""
    value = next((v for oid, v in raw_extensions(cert) if oid == _NC_OID), b"")
    lists: dict[int, list[bool]] = {0xA0: [], 0xA1: []}
    for tag, start, stop in der_children(value, *der_element(value, 0, len(value))[1:]):
        for _, sub, sub_end in der_children(value, start, stop):
            fields = der_children(value, sub, sub_end)[1:]
            lists.setdefault(tag, []).append(any(
                t == 0x81 or (t == 0x80 and any(value[a:b])) for t, a, b in fields))
    return lists[0xA0], lists[0xA1]


def _canon(attr: x509.NameAttribute[str | bytes]) -> tuple[str, object]:
    """An attribute as OpenSSL's canonical name encoding compares it: text of the string
    types without leading and trailing white space, inner runs of it as one space, ASCII
    letters in lower case (asn1_string_canon); any other type as it is."""
    value = attr.value
    if not isinstance(value, str) or getattr(attr, "_type", None) == _ASN1Type.NumericString:
        return attr.oid.dotted_string, (getattr(attr, "_type", None), value)
    words = "".join(" " if c in _SPACE else c for c in value.strip(_SPACE)).split(" ")
    text = " ".join(w for w in words if w)
    return attr.oid.dotted_string, "".join(c.lower() if c.isascii() else c for c in text)


@lru_cache(maxsize=1024)
def _canonical(name: x509.Name) -> tuple[frozenset[tuple[str, object]], ...]:
    return tuple(frozenset(_canon(a) for a in rdn) for rdn in name.rdns)


def same_name(a: x509.Name, b: x509.Name) -> bool:
    """`a` and `b` are one name for OpenSSL (X509_NAME_cmp compares their canonical
    encodings: each RDN's attributes as `_canon` reads them, in any order), as it finds an
    issuer by name: case and runs of white space in the string types do not count."""
    return a == b or _canonical(a) == _canonical(b)


def _dn_within(name: x509.Name, base: x509.Name) -> bool:
    """`base`'s RDNs begin `name`'s, compared canonically (nc_dn: a prefix of the canonical
    encoding); an empty base holds every name."""
    rdns, base_rdns = list(name.rdns), list(base.rdns)
    if len(base_rdns) > len(rdns):
        return False
    return all({_canon(a) for a in b} == {_canon(a) for a in n}
               for b, n in zip(base_rdns, rdns, strict=False))


def _dns_within(name: str, base: str) -> bool:
    """nc_dns: the same name, or below it (a base with a leading dot: strictly below);
    case-insensitive; an empty base holds every name."""
    name, base = name.lower(), base.lower()
    if not base or name == base:
        return True
    return name.endswith(base if base.startswith(".") else "." + base)


def _email_within(email: str, base: str) -> bool | int:
    """nc_email: a base with a leading dot and no `@` holds the addresses of hosts below
    it; `local@host` that one address (the local part case-sensitive); `host` the
    addresses at that host; the last `@` of each splits it. 53: no `@` in the address."""
    if "@" not in email:
        return V_UNSUPPORTED_NAME_SYNTAX
    local, host = email.rsplit("@", 1)
    if "@" not in base and base.startswith("."):
        return len(email) > len(base) and email.lower().endswith(base.lower())
    if "@" in base:
        base_local, base = base.rsplit("@", 1)
        if base_local and base_local != local:
            return False
    return host.lower() == base.lower()


def _uri_within(uri: str, base: str) -> bool | int:
    """nc_uri: the host of `scheme://host[:port][/...]` (up to the first ":" after "//",
    else the first "/") is the base's host, or below it for a base with a leading dot;
    case-insensitive. 53: no "://", or an empty host."""
    colon = uri.find(":")
    if colon < 0 or uri[colon + 1:colon + 3] != "//":
        return V_UNSUPPORTED_NAME_SYNTAX
    rest = uri[colon + 3:]
    end = rest.find(":")
    if end < 0:
        end = rest.find("/")
    host = rest if end < 0 else rest[:end]
    if not host:
        return V_UNSUPPORTED_NAME_SYNTAX
    if base.startswith("."):
        return len(host) > len(base) and host.lower().endswith(base.lower())
    return host.lower() == base.lower()


def _within(name: Name, base: x509.GeneralName) -> bool | int | None:
    """`name` inside the subtree `base` (True/False), a code OpenSSL stops at, or None:
    `base` is of another type."""
    kind, value = name
    if kind == "directory name" and isinstance(base, x509.DirectoryName) and \
            isinstance(value, x509.Name):
        return _dn_within(value, base.value)
    if kind == "DNS name" and isinstance(base, x509.DNSName) and isinstance(value, str):
        return _dns_within(value, base.value)
    odd_base = isinstance(base, x509.OtherName) and base.type_id == ODD_ADDRESS
    if kind == "address" and (odd_base or isinstance(value, bytes)):
        # nc_ip: an address of neither 4 nor 16 bytes, or a base of neither 8 nor 32
        return V_UNSUPPORTED_NAME_SYNTAX if odd_base or isinstance(base, x509.IPAddress) \
            else None
    if kind == "address" and isinstance(base, x509.IPAddress) and \
            isinstance(base.value, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return value in base.value   # an IPv4 address is in no IPv6 subtree (nc_ip)
    if kind == "email address" and isinstance(base, x509.RFC822Name) and isinstance(value, str):
        return _email_within(value, base.value)
    if kind == "URI" and isinstance(base, x509.UniformResourceIdentifier) and \
            isinstance(value, str):
        return _uri_within(value, base.value)
    if kind == "SmtpUTF8 mailbox" and isinstance(base, x509.RFC822Name) and \
            isinstance(value, bytes):
        return _eai_within(value, base.value)
    if (kind == "other name" and isinstance(base, x509.OtherName) and
            isinstance(value, x509.OtherName) and base.type_id == value.type_id) or \
            (kind == "registered ID" and isinstance(base, x509.RegisteredID)):
        return V_UNSUPPORTED_CONSTRAINT_TYPE
    return None


def _eai_within(value: bytes, base: str) -> bool | int:
    """nc_email_eai for the subtrees replicated (the module's text): `value` is the DER of
    the otherName's value."""
    if "\0" in base:
        return V_UNSUPPORTED_NAME_SYNTAX
    try:
        tag, start, stop = der_element(value, 0, len(value))
    except ValueError:
        return NOT_JUDGED
    mailbox = value[start:stop]
    if tag != 0x0C or b"@" not in mailbox:
        return V_UNSUPPORTED_NAME_SYNTAX
    if not base or not set(base) <= _HOST_CHARS or base.startswith(".") or \
            any(label.lower().startswith("xn--") for label in base.split(".")):
        return NOT_JUDGED
    host = mailbox.rsplit(b"@", 1)[1]
    return host.lower() == base.lower().encode()


_SAN_KINDS: tuple[tuple[type[x509.GeneralName], str], ...] = (
    (x509.RFC822Name, "email address"), (x509.DNSName, "DNS name"),
    (x509.IPAddress, "address"), (x509.UniformResourceIdentifier, "URI"),
    (x509.DirectoryName, "directory name"), (x509.RegisteredID, "registered ID"))


def _names(cert: x509.Certificate, leaf: bool) -> Iterator[Name]:
    """The names of `cert` constraints apply to, in OpenSSL's order (the module's text)."""
    if len(cert.subject) > 0:
        yield "directory name", cert.subject
    for attr in cert.subject.get_attributes_for_oid(NameOID.EMAIL_ADDRESS):
        if getattr(attr, "_type", None) != _ASN1Type.IA5String:
            yield _NOT_IA5, attr.value   # 53 whatever the constraints' types
        elif isinstance(attr.value, str):
            yield "email address", attr.value
    san = extension_of(cert, x509.SubjectAlternativeName)
    entries = list(san) if isinstance(san, x509.SubjectAlternativeName) else []
    for entry in entries:
        if isinstance(entry, x509.OtherName) and entry.type_id in (ODD_ADDRESS, NO_NAME):
            if entry.type_id == ODD_ADDRESS:   # certtwin.py's stand-in: its bytes
                yield "address", entry.value[2:]
            continue
        if isinstance(entry, x509.OtherName):
            yield ("SmtpUTF8 mailbox", entry.value) if entry.type_id == _SMTP_UTF8 \
                else ("other name", entry)
            continue
        kind = next((k for t, k in _SAN_KINDS if isinstance(entry, t)), None)
        if kind is not None:
            yield kind, entry.value
    if leaf and not any(isinstance(e, x509.DNSName) for e in entries):
        for attr in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME):
            if isinstance(attr.value, str):
                name = _cn_host(attr.value)
                if name is not None:
                    yield name


def _cn_host(value: str) -> Name | None:
    """A subject CN as OpenSSL's cn2dnsid takes it: a host name of two labels or more,
    of letters, digits and "_", with "-" and "." inside only, no "." beside a "." or a
    "-" (a wildcard, a final dot: none); trailing NULs dropped, an embedded one 53."""
    data = value.encode("utf-8").rstrip(b"\0")
    if b"\0" in data:
        return _BAD_CN, value
    dotted = False
    for i, byte in enumerate(data):
        char = chr(byte)
        if char.isascii() and (char.isalnum() or char == "_"):
            continue
        inside = 0 < i < len(data) - 1
        if inside and char == "-":
            continue
        if inside and char == "." and data[i + 1] not in b".-" and data[i - 1] != ord("-"):
            dotted = True
            continue
        return None
    return ("DNS name", data.decode()) if dotted else None


def _nc_verdict(name: Name, nc: x509.NameConstraints,
                limits: tuple[list[bool], list[bool]]) -> int | None:
    """nc_match: among the subtrees of `name`'s type, 49 at one with a minimum or maximum
    (`limits`), 47 when permitted ones exist and none holds it, 48 when an excluded one
    holds it, another code where OpenSSL stops at one (NOT_JUDGED included)."""
    if name[0] in (_NOT_IA5, _BAD_CN):
        return V_UNSUPPORTED_NAME_SYNTAX
    match = 0
    for base, limited in zip(nc.permitted_subtrees or (), limits[0], strict=True):
        verdict = _within(name, base)
        if verdict is None:
            continue
        if limited:
            return V_SUBTREE_MINMAX
        if match == 2:
            continue
        if verdict is not True and verdict is not False:
            return verdict
        match = 2 if verdict else 1
    if match == 1:
        return V_PERMITTED
    for base, limited in zip(nc.excluded_subtrees or (), limits[1], strict=True):
        verdict = _within(name, base)
        if verdict is None:
            continue
        if limited:
            return V_SUBTREE_MINMAX
        if verdict is True:
            return V_EXCLUDED
        if verdict is not False:
            return verdict
    return None


def _shown(name: Name) -> str:
    kind, value = name
    if kind == "address" and isinstance(value, bytes):
        text = f"of {len(value)} bytes ({value.hex()})"
    elif isinstance(value, x509.Name):
        text = value.rfc4514_string() or "(empty name)"
    elif isinstance(value, x509.OtherName):
        text = f"of type {value.type_id.dotted_string}"
    elif isinstance(value, x509.ObjectIdentifier):
        text = value.dotted_string
    elif isinstance(value, bytes):   # an SmtpUTF8Mailbox's DER
        try:
            _, start, stop = der_element(value, 0, len(value))
            text = value[start:stop].decode("utf-8", "replace")
        except ValueError:
            text = value.hex()
    else:
        text = str(value)
    return f"{kind} {text}"


_WHERE = {V_PERMITTED: "is outside the permitted", V_EXCLUDED: "is inside the excluded",
          V_SUBTREE_MINMAX: "meets a subtree with a minimum or maximum (OpenSSL supports "
          "neither) among the", V_UNSUPPORTED_CONSTRAINT_TYPE: "meets a subtree of a type "
          "OpenSSL does not support among the", NOT_JUDGED: "cannot be judged here (OpenSSL "
          "3.0's reading of that subtree is not replicated) against the"}


def name_constraint_problem(path: list[x509.Certificate]) -> Problem | None:
    """The first name of the path's certificates outside a CA's permitted subtrees (47),
    inside its excluded ones (48), of a syntax OpenSSL cannot judge (53), against a
    subtree with a minimum or maximum (49) or of a type OpenSSL does not support (51), as
    the module's text says OpenSSL checks them; NOT_JUDGED for a name whose verdict is not
    known here. ValueError: a name constraints extension not read."""
    for depth in range(len(path) - 1, -1, -1):
        cert = path[depth]
        if depth and same_name(cert.subject, cert.issuer):
            continue
        for ca in reversed(path[depth + 1:]):
            nc = extension_of(ca, x509.NameConstraints)
            if not isinstance(nc, x509.NameConstraints):
                continue
            limits = _limits(ca)
            for name in _names(cert, depth == 0):
                code = _nc_verdict(name, nc, limits)
                if code is not None:
                    where = _WHERE.get(code, "cannot be judged against the")
                    return code, (f"{_shown(name)} of {subject_text(cert)} {where} names of "
                                  f"{subject_text(ca)}")
    return None
