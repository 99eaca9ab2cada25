"""Name constraints as OpenSSL 3.0 checks them (check_name_constraints, NAME_CONSTRAINTS_check
and nc_match in crypto/x509/v3_ncons.c): each certificate of the path from the top down (a
self-issued CA certificate is exempt) against the constraints of every CA above it, the
top one first. A certificate's names, in OpenSSL's order: its subject as a directory name
(when not empty), its subject emailAddress attributes, each subjectAltName entry in order,
then, for a leaf without a DNS name, each subject CN that is a host name. A name is
outside the permitted subtrees when some subtree is of its type and none holds it (47),
inside an excluded one (48); a URI without "scheme://host" or an email address without
"@" is 53 (unsupported or invalid name syntax) once a constraint of its type applies.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

V_PERMITTED = 47
V_EXCLUDED = 48
V_UNSUPPORTED_NAME_SYNTAX = 53

__all__ = ["extension_of", "name_constraint_problem", "subject_text"]

Problem = tuple[int, str]
#: a name constraints apply to: (kind, value), kind one of "directory name" (x509.Name),
#: "email address", "DNS name", "URI" (str), "address" (an IP address)
Name = tuple[str, object]
_SPACE = " \t\n\v\f\r"


def subject_text(cert: x509.Certificate) -> str:
    """A certificate's subject as the verify codes' details name it."""
    return cert.subject.rfc4514_string() or "(empty subject)"


def extension_of(cert: x509.Certificate, kind: type[x509.ExtensionType]
                 ) -> x509.ExtensionType | None:
    """The certificate's extension of `kind` (None: absent, twice or unreadable)."""
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError):
        return None


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
    if kind == "address" and isinstance(base, x509.IPAddress) and \
            isinstance(base.value, (ipaddress.IPv4Network, ipaddress.IPv6Network)):
        return value in base.value   # an IPv4 address is in no IPv6 subtree (nc_ip)
    if kind == "email address" and isinstance(base, x509.RFC822Name) and isinstance(value, str):
        return _email_within(value, base.value)
    if kind == "URI" and isinstance(base, x509.UniformResourceIdentifier) and \
            isinstance(value, str):
        return _uri_within(value, base.value)
    return None


_SAN_KINDS: tuple[tuple[type[x509.GeneralName], str], ...] = (
    (x509.RFC822Name, "email address"), (x509.DNSName, "DNS name"),
    (x509.IPAddress, "address"), (x509.UniformResourceIdentifier, "URI"),
    (x509.DirectoryName, "directory name"))


def _names(cert: x509.Certificate, leaf: bool) -> Iterator[Name]:
    """The names of `cert` constraints apply to, in OpenSSL's order (the module's text);
    other kinds of subjectAltName entries are not judged here."""
    if len(cert.subject) > 0:
        yield "directory name", cert.subject
    for attr in cert.subject.get_attributes_for_oid(NameOID.EMAIL_ADDRESS):
        if isinstance(attr.value, str):
            yield "email address", attr.value
    san = extension_of(cert, x509.SubjectAlternativeName)
    entries = list(san) if isinstance(san, x509.SubjectAlternativeName) else []
    for entry in entries:
        kind = next((k for t, k in _SAN_KINDS if isinstance(entry, t)), None)
        if kind is not None:
            yield kind, entry.value
    if leaf and not any(isinstance(e, x509.DNSName) for e in entries):
        for attr in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME):
            value = attr.value
            if isinstance(value, str) and "." in value.strip(".") and all(
                    c.isascii() and (c.isalnum() or c in "-._*") for c in value):
                yield "DNS name", value


def _nc_verdict(name: Name, nc: x509.NameConstraints) -> int | None:
    """nc_match: 47 when subtrees of `name`'s type are permitted and none holds it, 48 when
    an excluded one holds it, another code where OpenSSL stops at one."""
    judged = [v for v in (_within(name, b) for b in nc.permitted_subtrees or ())
              if v is not None]
    code = next((v for v in judged if not isinstance(v, bool)), None)
    if code is not None:
        return code
    if judged and not any(judged):
        return V_PERMITTED
    for base in nc.excluded_subtrees or ():
        verdict = _within(name, base)
        if verdict is not None and not isinstance(verdict, bool):
            return verdict
        if verdict is True:
            return V_EXCLUDED
    return None


def _shown(name: Name) -> str:
    kind, value = name
    text = (value.rfc4514_string() or "(empty name)") if isinstance(value, x509.Name) \
        else str(value)
    return f"{kind} {text}"


def name_constraint_problem(path: list[x509.Certificate]) -> Problem | None:
    """The first name of the path's certificates outside a CA's permitted subtrees (47),
    inside its excluded ones (48), or of a syntax OpenSSL cannot judge (53), as the
    module's text says OpenSSL checks them."""
    for depth in range(len(path) - 1, -1, -1):
        cert = path[depth]
        if depth and cert.subject == cert.issuer:
            continue
        for ca in reversed(path[depth + 1:]):
            nc = extension_of(ca, x509.NameConstraints)
            if not isinstance(nc, x509.NameConstraints):
                continue
            for name in _names(cert, depth == 0):
                code = _nc_verdict(name, nc)
                if code is not None:
                    where = {V_PERMITTED: "is outside the permitted", V_EXCLUDED:
                             "is inside the excluded"}.get(code, "cannot be judged against the")
                    return code, (f"{_shown(name)} of {subject_text(cert)} {where} names of "
                                  f"{subject_text(ca)}")
    return None
