"""Name constraints OpenSSL 3.0 does not support, and names beyond the five kinds judged
before, checked as NAME_CONSTRAINTS_check does (s_client's code read first for each chain):
a subtree of the name's type with a maximum, or a minimum other than 0, is 49 (cryptography
drops both: tlsprobe said 0, trusted); an otherName or registeredID against a subtree of its
type is 51 (tlsprobe: not established); an SmtpUTF8Mailbox otherName is an email address
for OpenSSL (tlsprobe ignored it: 0 where OpenSSL says 47, 48, or 53 for one not of
UTF8String or without "@"); a subject emailAddress that is no IA5String is 53 whatever the
constraints' types (tlsprobe: 0). A leaf's CN is a DNS name for them only as OpenSSL's
cn2dnsid reads one (tlsprobe said 47 for a wildcard, a final dot, "a-.example.test"). An SmtpUTF8 mailbox against a subtree whose reading by
OpenSSL 3.0 is not replicated (a leading dot) is not established, never a code."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.x509.name import _ASN1Type
from cryptography.x509.oid import NameOID

from tests.probes.test_probe_verify_openssl_codes import Case, _build, served_verdicts


def _der(tag: int, body: bytes) -> bytes:
    assert len(body) < 0x80
    return bytes([tag, len(body)]) + body


def _constraints(permit: list[bytes], exclude: list[bytes] = []) -> x509.UnrecognizedExtension:
    """nameConstraints of these GeneralSubtrees, as bytes (the library drops min and max)."""
    body = (_der(0xA0, b"".join(permit)) if permit else b"") + \
        (_der(0xA1, b"".join(exclude)) if exclude else b"")
    return x509.UnrecognizedExtension(x509.ObjectIdentifier("2.5.29.30"), _der(0x30, body))


def _subtree(base: bytes, minimum: int | None = None, maximum: int | None = None) -> bytes:
    extra = (b"" if minimum is None else _der(0x80, bytes([minimum]))) + \
        (b"" if maximum is None else _der(0x81, bytes([maximum])))
    return _der(0x30, base + extra)


def _dns(name: str) -> bytes:
    return _der(0x82, name.encode())


def _email(name: str) -> bytes:
    return _der(0x81, name.encode())


UPN = bytes.fromhex("060a2b060104018237140203")    # 1.3.6.1.4.1.311.20.2.3
SMTP_UTF8 = bytes.fromhex("06082b06010505070809")  # 1.3.6.1.5.5.7.8.9
RID = _der(0x88, bytes.fromhex("2a0304"))          # 1.2.3.4


def _other(oid: bytes, value: bytes) -> bytes:
    return _der(0xA0, oid + _der(0xA0, value))


def _case(permit: list[bytes], exclude: list[bytes] = [], names: list[bytes] = [],
          email: x509.NameAttribute[str] | None = None) -> Case:
    """The intermediate's constraints; the leaf's subjectAltName: `names`, then localhost."""
    san = x509.UnrecognizedExtension(x509.ObjectIdentifier("2.5.29.17"),
                                     _der(0x30, b"".join(names) + _dns("localhost")))
    return Case(dns=(), leaf_extra=((san, False),), leaf_email=email,
                inter_extra=((_constraints(permit, exclude), True),))


UTF8_EMAIL = x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.test", _type=_ASN1Type.UTF8String)
CASES = {
    "dns-subtree-with-minimum": (_case([_subtree(_dns("localhost"), minimum=1)]), 49),
    "dns-subtree-with-maximum": (_case([_subtree(_dns("localhost"), maximum=5)]), 49),
    "excluded-dns-subtree-with-maximum": (_case([], [_subtree(_dns("other.test"), maximum=5)]),
                                          49),
    # after a subtree that holds the name, the next of its type is still checked
    "maximum-after-a-match": (_case([_subtree(_dns("localhost")),
                                     _subtree(_dns("other.test"), minimum=1)]), 49),
    "directory-name-subtree-with-maximum": (_case([_subtree(_der(0xA4, _der(0x30, b"")),
                                                            maximum=1)]), 49),
    # of another type than every name: not looked at
    "email-subtree-with-maximum": (_case([_subtree(_email("a.test"), maximum=5)]), 0),
    "registered-id": (_case([_subtree(RID)], names=[RID]), 51),
    "other-name": (_case([_subtree(_other(UPN, _der(0x0C, b"a@b")))],
                         names=[_other(UPN, _der(0x0C, b"x@y"))]), 51),
    "smtputf8-outside-permitted": (_case([_subtree(_email("example.test"))],
                                         names=[_other(SMTP_UTF8, _der(0x0C, b"a@other.test"))]),
                                   47),
    "smtputf8-inside-excluded": (_case([], [_subtree(_email("example.test"))],
                                       names=[_other(SMTP_UTF8, _der(0x0C, b"a@Example.test"))]),
                                 48),
    "smtputf8-inside-permitted": (_case([_subtree(_email("Example.TEST"))],
                                        names=[_other(SMTP_UTF8, _der(0x0C, b"a@example.test"))]),
                                  0),
    "smtputf8-not-utf8string": (_case([_subtree(_email("example.test"))],
                                      names=[_other(SMTP_UTF8, _der(0x16, b"a@example.test"))]),
                                53),
    "smtputf8-without-at": (_case([_subtree(_email("example.test"))],
                                  names=[_other(SMTP_UTF8, _der(0x0C, b"example.test"))]), 53),
    "subject-email-of-utf8string": (_case([_subtree(_dns("localhost"))], email=UTF8_EMAIL), 53),
    "smtputf8-against-a-leading-dot": (_case([_subtree(_email(".example.test"))], names=[
        _other(SMTP_UTF8, _der(0x0C, b"a@b.example.test"))]), 47),
}
#: a leaf without subjectAltName: its CN is a DNS name for the constraints only as
#: OpenSSL's cn2dnsid reads one (tlsprobe took a wildcard, a final dot or "-." for one: 47)
PERMIT_OTHER = x509.NameConstraints(permitted_subtrees=[x509.DNSName("other.test")],
                                    excluded_subtrees=None)
for _cn, _code in (("*.example.test", 0), ("a-.example.test", 0), ("www.example.test.", 0),
                   ("a_b.example.test", 47), ("www.other.test", 0)):
    CASES[f"cn-{_cn}"] = (Case(dns=(), leaf_cn=_cn, host=_cn.replace("*", "www"),
                               constraints=PERMIT_OTHER), _code)
NOT_ESTABLISHED = {"smtputf8-against-a-leading-dot"}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_name_constraint_limit_code_is_openssls(tls_server: Callable[..., Any],
                                                run_cli: Callable[..., Any], tmp_path: Path,
                                                name: str) -> None:
    case, expected = CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path))
    assert code == expected, (name, code, text)
    if name in NOT_ESTABLISHED:
        assert ver["code"] is None and ver["ok"] is False, (name, ver)
        assert ver["message"].startswith("not established: SmtpUTF8 mailbox a@b.example.test"),\
            ver
        return
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), (name, ver)
    assert ver["ok"] is (code == 0), ver
