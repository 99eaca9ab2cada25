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

import datetime
import ipaddress
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers.bercert import children, pem, tlv
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


# -- critical flags not in DER: cryptography refuses the whole certificate ----------------
NOW = datetime.datetime.now(datetime.UTC)
SAN_OID, BC_OID = "0603551d11", "0603551d13"
UNKNOWN_OID = "06092b06010401868d1f01"   # 1.3.6.1.4.1.99999.1
UNKNOWN = _raw("1.3.6.1.4.1.99999.1", "0500")


def _flag(oid: str, byte: str) -> Callable[[bytes], bytes]:
    """The critical BOOLEAN of the extension `oid` (DER) written with the byte `byte`."""
    return lambda tbs: tbs.replace(bytes.fromhex(oid + "0101ff"),
                                   bytes.fromhex(oid + "0101" + byte))


def _signed(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str,
            signer: ec.EllipticCurvePrivateKey,
            exts: list[tuple[x509.ExtensionType, bool]],
            edit: Callable[[bytes], bytes] | None = None) -> bytes:
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW - datetime.timedelta(days=1))
               .not_valid_after(NOW + datetime.timedelta(days=30)))
    for ext, critical in exts:
        builder = builder.add_extension(ext, critical)
    der = builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.DER)
    if edit is None:
        return der
    tbs, algorithm, _ = children(der)
    new = edit(tbs)
    assert new != tbs
    return tlv(0x30, new + algorithm + tlv(0x03, b"\x00" + signer.sign(
        new, ec.ECDSA(hashes.SHA256()))))


SAN_LOCALHOST = x509.SubjectAlternativeName([x509.DNSName("localhost")])
CA = x509.BasicConstraints(ca=True, path_length=None)
#: (leaf extensions, leaf edit, intermediate edit, a forged leaf, OpenSSL's code)
FLAGS = {
    "leaf-san-critical-0x01": ([(SAN_LOCALHOST, True)], _flag(SAN_OID, "01"), None, False, 0),
    "leaf-san-critical-false-written-out": ([(SAN_LOCALHOST, True)], _flag(SAN_OID, "00"),
                                            None, False, 0),
    "intermediate-basicconstraints-critical-0x01": ([(SAN_LOCALHOST, False)], None,
                                                    _flag(BC_OID, "01"), False, 0),
    "leaf-unknown-extension-critical-0x01": ([(SAN_LOCALHOST, False), (UNKNOWN, True)],
                                             _flag(UNKNOWN_OID, "01"), None, False, 34),
    "leaf-unknown-extension-critical-false-written-out": (
        [(SAN_LOCALHOST, False), (UNKNOWN, True)], _flag(UNKNOWN_OID, "00"), None, False, 0),
    "forged-leaf-san-critical-0x01": ([(SAN_LOCALHOST, True)], _flag(SAN_OID, "01"), None,
                                      True, 7),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(FLAGS))
def test_critical_flags_not_in_der(tls_server: Callable[..., Any],
                                   run_cli: Callable[..., Any], tmp_path: Path,
                                   name: str) -> None:
    """An extension's critical BOOLEAN of 0x01, or FALSE written out (DER omits the
    DEFAULT): OpenSSL reads the certificate; cryptography refuses it whole, and tlsprobe
    said "not established" for each (the certificate cannot be parsed). It is now read
    through a copy in DER (certtwin.parsed_twin), its signature checked over the bytes as
    sent (a forged one is 7)."""
    chain = _flag_chain(tmp_path, name)
    code, text, ver = served_verdicts(tls_server, run_cli, Case(), chain)
    assert code == FLAGS[name][4], (name, code, text)   # s_client -verify_return_error first
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), (name, ver)


def _flag_chain(tmp_path: Path, name: str) -> tuple[Path, Path, Path, Path]:
    leaf_exts, leaf_edit, inter_edit, forged, _ = FLAGS[name]
    root_key, inter_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = _signed("Codes Root", root_key, "Codes Root", root_key, [(CA, True)])
    inter = _signed("Codes CA", inter_key, "Codes Root", root_key, [(CA, True)], inter_edit)
    leaf = _signed("localhost", leaf_key, "Codes CA",
                   ec.generate_private_key(ec.SECP256R1()) if forged else inter_key,
                   leaf_exts, leaf_edit)
    for file, der in (("root.pem", root), ("inter.pem", inter), ("leaf.pem", leaf)):
        (tmp_path / file).write_bytes(pem(der))
    (tmp_path / "leaf.key").write_bytes(leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return (tmp_path / "root.pem", tmp_path / "leaf.pem", tmp_path / "leaf.key",
            tmp_path / "inter.pem")


@pytest.mark.needs_impl("openssl")
def test_the_scan_reads_a_leaf_whose_critical_flag_is_not_in_der(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """The scan's certificate checks read such a leaf as the trust verdict does: its
    chain check said "inconclusive: a certificate of the chain does not parse"."""
    root, leaf, key, inter = _flag_chain(tmp_path, "leaf-san-critical-0x01")
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "chain,key_usage", "--json",
                  "--no-progress", "--no-policy", "--cafile", root, "--sni", "localhost")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    report = json.loads(res.stdout)
    assert report["trust"]["code"] == 0, report["trust"]
    verdicts = {c["name"]: c for c in report["check_results"]}
    assert verdicts["chain"]["verdict"] != "inconclusive", verdicts["chain"]
    assert verdicts["chain"]["details"]["path"] == [0, 1], verdicts["chain"]
