"""Host name matching of a server certificate, as OpenSSL's X509_check_host and
X509_check_ip do with the flags `openssl s_client -verify_hostname` uses (none).

A DNS name is matched against the subjectAltName DNS names; when the certificate has none
(no subjectAltName, or one with addresses only), against each subject commonName, as
OpenSSL does unless told never to (browsers do not: a CN-only certificate is said so). A
pattern holds at most one wildcard, in its first label, at the start or the end of that
label (`*.example.com`, `f*.example.com`, `*x.example.com`; not `f*o.example.com`), with
at least two dots and no A-label (`xn--`) in that label; the wildcard stands for one or
more characters of a label when it is the whole label, else for zero or more, and never
for part of an A-label. An address is matched against the subjectAltName addresses only.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["NameMatch", "dns_form", "is_address", "match_host", "sans", "subject_name"]


def dns_form(name: str) -> str:
    """A host name as certificates hold it: lower case, and a U-label as the A-label the
    server_name extension sends (IDNA, wire/extensions.py); ValueError when it has none. A
    final dot stays: OpenSSL's X509_check_host compares it (`name.` matches no certificate
    name without one, `openssl x509 -checkhost`)."""
    name = name.lower()
    if name.isascii():
        return name
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise ValueError(f"{name} has no IDNA form ({exc})") from None


def subject_name(name: str) -> x509.DNSName | x509.IPAddress:
    """`name` as the general name it is checked as: an address, else a DNS name."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return x509.DNSName(dns_form(name))


def is_address(name: str) -> bool:
    """`name` is an IPv4 or IPv6 address (checked as `-verify_ip` checks it), not a host
    name."""
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def sans(leaf: x509.Certificate) -> x509.SubjectAlternativeName | None:
    """The leaf's subjectAltName (None: absent or unreadable)."""
    try:
        return leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError, TypeError):
        return None


def _ldh(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "-")


def _wildcard(pattern: str) -> int | None:
    """The position of `pattern`'s one valid wildcard (module docstring), else None (the
    pattern is then compared as it is, a `*` being an ordinary character)."""
    labels = pattern.split(".")
    if len(labels) < 3 or pattern.count("*") != 1 or "*" not in labels[0]:
        return None
    first = labels[0]
    star = first.index("*")
    if 0 < star < len(first) - 1 or first.lower().startswith("xn--"):
        return None
    for label in labels:   # letters, digits, inner hyphens; the wildcard's label may be "*"
        bare = label.replace("*", "", 1)
        if not label or label.startswith("-") or bare.endswith("-") \
                or not all(_ldh(c) for c in bare):
            return None
    return star


def _equal(pattern: str, host: str) -> bool:
    return "\0" not in pattern and pattern.lower() == host


def _pattern_matches(pattern: str, host: str) -> bool:
    """`host` (dns_form) matches the certificate's `pattern` (module docstring)."""
    star = _wildcard(pattern)
    if star is None:
        return _equal(pattern, host)
    prefix, suffix = pattern[:star].lower(), pattern[star + 1:].lower()
    if len(host) < len(prefix) + len(suffix) or not host.startswith(prefix) \
            or not host.endswith(suffix):
        return False
    middle = host[len(prefix):len(host) - len(suffix)]
    whole_label = not prefix and suffix.startswith(".")
    if whole_label and not middle:
        return False
    if not whole_label and host.startswith("xn--"):
        return False
    return middle == "*" or all(_ldh(c) for c in middle)


@dataclass(frozen=True)
class NameMatch:
    """`ok`: the name matches; `by_cn`: the subject commonName was what was matched
    against (the certificate has no subjectAltName DNS name)."""

    ok: bool
    by_cn: bool = False


def _common_names(leaf: x509.Certificate) -> list[str]:
    return [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            if isinstance(a.value, str)]


def match_host(leaf: x509.Certificate, hostname: str) -> NameMatch:
    """Whether `hostname` (a DNS name or an address) is a name of `leaf`."""
    san = sans(leaf)
    try:
        subject = subject_name(hostname)
    except ValueError:   # no IDNA form, or a name the library's DNSName refuses
        return NameMatch(False)
    if isinstance(subject, x509.IPAddress):
        return NameMatch(san is not None and
                         subject.value in san.get_values_for_type(x509.IPAddress))
    host = subject.value
    dns = san.get_values_for_type(x509.DNSName) if san is not None else []
    if dns:
        return NameMatch(any(_pattern_matches(p, host) for p in dns))
    return NameMatch(any(_pattern_matches(p, host) for p in _common_names(leaf)), by_cn=True)
