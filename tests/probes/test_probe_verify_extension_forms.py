"""Extensions whose form `cryptography` refuses but OpenSSL reads (measured with `openssl
s_client -verify_return_error`, read first for each chain): the verdict is OpenSSL's where
its rule is known here, else "not established" with the reason, never an untrusted verdict
OpenSSL does not give.

A name constraint whose IP address base is 4 bytes (no mask; cryptography raises TypeError
for it) made the probe say "1 (unspecified certificate verification error)", an untrusted
verdict (certificate.untrusted fails `--fail-on high`), and the scan's chain check
"internal error: TypeError", where OpenSSL says 0.

Read in the forms cryptography refuses (engine/certtwin.py), each was "not established": an
extendedKeyUsage without a purpose (OpenSSL: 26, leaf or CA), an empty subjectAltName (the
CN is the host name: 0, or 62), an empty nameConstraints or list of subtrees (0), an
iPAddress of neither 4 nor 16 bytes in a subjectAltName (no address: 0, 64 for
-verify_ip, 53 under an address constraint) or of neither 8 nor 32 bytes in a name
constraint (53 for an address it meets), a basicConstraints BOOLEAN of 0x01 (CA:TRUE: 0,
in an intermediate or the store's root)."""
from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.probes.test_probe_verify_openssl_codes import (
    CA_USAGE,
    Case,
    _build,
    served_verdicts,
)


def _raw(oid: str, value: str) -> x509.UnrecognizedExtension:
    return x509.UnrecognizedExtension(x509.ObjectIdentifier(oid), bytes.fromhex(value))


#: nameConstraints permitting the IP address base 127.0.0.1 of 4 bytes (no mask)
NC_IP_4 = _raw("2.5.29.30", "300aa00830068704" + "7f000001")


@pytest.mark.needs_impl("openssl")
def test_a_name_constraint_address_of_four_bytes_is_no_untrusted_verdict(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    case = Case(inter_extra=((NC_IP_4, True),))
    chain = _build(case, tmp_path)
    code, text, ver = served_verdicts(tls_server, run_cli, case, chain)
    assert code == 0, text
    assert ver["code"] in (None, 0) and "unspecified" not in ver["message"], ver
    root, leaf, key, inter = chain
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "cert,chain", "--json",
                  "--no-progress", "--no-policy", "--cafile", root, "--sni", case.host)
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    assert "internal error" not in res.stdout, res.stdout
    report = json.loads(res.stdout)
    assert report["trust"]["code"] in (None, 0), report["trust"]
    assert "certificate.untrusted" not in {f["code"] for f in report["findings"]}


EKU_EMPTY = _raw("2.5.29.37", "3000")
SAN_EMPTY = _raw("2.5.29.17", "3000")
NC_EMPTY = _raw("2.5.29.30", "3000")
NC_EMPTY_PERMITTED = _raw("2.5.29.30", "3002a000")
#: an iPAddress of 5 bytes (127.0.0.1 and a 0)
SAN_ODD_ADDRESS = _raw("2.5.29.17", "30078705" + "7f00000100")
SAN_LOCALHOST_AND_ODD_ADDRESS = _raw("2.5.29.17", "30128209" + b"localhost".hex() + "8705" +
                                     "7f00000100")
#: a permitted iPAddress base of 7 bytes
NC_ODD_ADDRESS = _raw("2.5.29.30", "300da00b30098707" + "7f000001ffffff")
NC_EXCLUDED_4_BYTES = _raw("2.5.29.30", "300aa10830068704" + "0a000001")
SAN_LOCALHOST_127 = x509.SubjectAlternativeName([
    x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
PERMIT_LOOPBACK = x509.NameConstraints(
    permitted_subtrees=[x509.IPAddress(ipaddress.ip_network("127.0.0.0/8"))],
    excluded_subtrees=None)
CA_TRUE_01 = _raw("2.5.29.19", "3003010101")

FORMS = {
    "leaf-eku-without-a-purpose": (Case(eku=(), leaf_extra=((EKU_EMPTY, False),)), 26),
    "intermediate-eku-without-a-purpose": (Case(inter_extra=((EKU_EMPTY, False),)), 26),
    "leaf-san-empty": (Case(dns=(), leaf_extra=((SAN_EMPTY, False),)), 0),
    "leaf-san-empty-cn-of-another-name": (
        Case(dns=(), leaf_cn="other.test", leaf_extra=((SAN_EMPTY, False),)), 62),
    "intermediate-nameconstraints-empty": (Case(inter_extra=((NC_EMPTY, True),)), 0),
    "intermediate-nameconstraints-empty-permitted-list": (
        Case(inter_extra=((NC_EMPTY_PERMITTED, True),)), 0),
    "leaf-san-address-of-5-bytes": (Case(dns=(), leaf_extra=((SAN_ODD_ADDRESS, False),)), 0),
    "leaf-san-address-of-5-bytes-verify-ip": (
        Case(host="127.0.0.1", dns=(), leaf_extra=((SAN_ODD_ADDRESS, False),)), 64),
    "leaf-san-address-of-5-bytes-under-an-address-constraint": (
        Case(dns=(), leaf_extra=((SAN_LOCALHOST_AND_ODD_ADDRESS, False),),
             constraints=PERMIT_LOOPBACK), 53),
    "intermediate-nameconstraints-address-of-7-bytes": (
        Case(inter_extra=((NC_ODD_ADDRESS, True),)), 0),
    "intermediate-nameconstraints-address-of-7-bytes-meets-an-address": (
        Case(dns=(), leaf_extra=((SAN_LOCALHOST_127, False),),
             inter_extra=((NC_ODD_ADDRESS, True),)), 53),
    "intermediate-nameconstraints-address-of-4-bytes-meets-an-address": (
        Case(dns=(), leaf_extra=((SAN_LOCALHOST_127, False),),
             inter_extra=((NC_EXCLUDED_4_BYTES, True),)), 53),
    "intermediate-ca-boolean-0x01": (Case(inter_bc_raw=CA_TRUE_01), 0),
    "root-ca-boolean-0x01": (Case(root_exts=((CA_TRUE_01, True), (CA_USAGE, True))), 0),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(FORMS))
def test_a_form_openssl_reads_gets_its_verdict(tls_server: Callable[..., Any],
                                               run_cli: Callable[..., Any], tmp_path: Path,
                                               name: str) -> None:
    case, expected = FORMS[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path))
    assert code == expected, (name, code, text)   # s_client -verify_return_error first
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), (name, ver)
    assert ver["ok"] is (code == 0), ver
    if name == "leaf-san-empty":   # it has one, empty: the host name is the CN's
        assert ver["message"] == "0 (ok): localhost matched by the subject CN: the " \
            "certificate has no subjectAltName DNS name (browsers refuse it)", ver


@pytest.mark.needs_impl("openssl")
def test_a_certificate_without_a_san_is_not_said_to_have_an_undecodable_one(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """An intermediate whose extension list cryptography refuses (an extendedKeyUsage
    without a purpose) and that has no subjectAltName: its summary said "(undecodable
    subjectAltName: ...)", an extension it does not have; the leaf's, in a list that
    cryptography refuses too, is one it has."""
    case = Case(inter_extra=((EKU_EMPTY, False),), leaf_extra=((EKU_EMPTY, False),), eku=())
    root, leaf, key, inter = _build(case, tmp_path)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile", root, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    certificates = json.loads(res.stdout)["certificates"]
    assert certificates[1]["san"] == [], certificates[1]
    assert certificates[0]["san"][0].startswith("(undecodable subjectAltName"), certificates[0]
