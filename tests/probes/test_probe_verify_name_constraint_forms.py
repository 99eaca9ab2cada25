"""Name constraints of the forms beyond DNS names and email addresses, checked as OpenSSL
3.0's NAME_CONSTRAINTS_check does: URIs (the host of scheme://host), directory names (the
subject, and a subjectAltName directoryName, by canonical prefix), IP addresses (an IPv4
address is in no IPv6 subtree), in OpenSSL's order, with 53 for a name OpenSSL cannot
judge (a URI without "//host", an email address without "@"). s_client's code is read
first for each chain. Before, tlsprobe judged DNS names, addresses and email addresses
only: a URI or directory name violation (47, 48) and the syntax errors (53) were "not
established" (cryptography's verifier refuses URI and directoryName constraints)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from tests.probes.test_probe_verify_openssl_codes import Case, _build, served_verdicts


def _raw(kind: type[x509.GeneralName], value: str) -> x509.GeneralName:
    name = kind.__new__(kind)
    name._value = value   # the constructor refuses the syntax OpenSSL judges (53)
    return name


def _dn(org: str, cn: str | None = None) -> x509.DirectoryName:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]
    if cn is not None:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.DirectoryName(x509.Name(attrs))


def _ip(text: str) -> x509.IPAddress:
    return x509.IPAddress(ipaddress.ip_address(text))


def _net(text: str) -> x509.IPAddress:
    return x509.IPAddress(ipaddress.ip_network(text))


def _case(names: list[x509.GeneralName], permit: list[x509.GeneralName] | None,
          exclude: list[x509.GeneralName] | None) -> Case:
    """The leaf's subjectAltName: localhost and `names`; the intermediate's constraints."""
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"), *names])
    return Case(dns=(), leaf_extra=((san, False),), constraints=x509.NameConstraints(
        permitted_subtrees=permit, excluded_subtrees=exclude))


URI = x509.UniformResourceIdentifier
CASES = {
    "uri-outside-permitted": (_case([_raw(URI, "https://other.test/x")],
                                    [URI("www.example.test")], None), 47),
    "uri-inside-excluded": (_case([_raw(URI, "https://Bad.Test:8443/x")], None,
                                  [URI("bad.test")]), 48),
    "uri-without-host": (_case([_raw(URI, "urn:example:a")], [URI("example.test")], None), 53),
    "directory-name-inside-excluded": (_case([_dn("Bad", "x")], None, [_dn("  BAD ")]), 48),
    "subject-outside-permitted-directory-names": (_case([], [_dn("Acme")], None), 47),
    "address-outside-permitted": (_case([_ip("11.1.2.3")], [_net("10.0.0.0/8")], None), 47),
    "ipv4-address-against-an-ipv6-subtree": (_case([_ip("10.1.2.3")], [_net("::/0")], None),
                                             47),
    "address-inside-excluded": (_case([_ip("10.1.2.3")], None, [_net("10.1.0.0/16")]), 48),
    "address-inside-permitted": (_case([_ip("10.1.2.3")], [_net("10.0.0.0/8")], None), 0),
    "email-without-at": (_case([_raw(x509.RFC822Name, "example.test")],
                               [x509.RFC822Name("example.test")], None), 53),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_name_constraint_code_is_openssls(tls_server: Callable[..., Any],
                                          run_cli: Callable[..., Any], tmp_path: Path,
                                          name: str) -> None:
    case, expected = CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path))
    assert code == expected, (name, code, text)
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), (name, ver)
    assert ver["ok"] is (code == 0), ver
