"""A certificate with an extension OpenSSL cannot cache (x509v3_cache_extensions sets
EXFLAG_INVALID) has no issuer for OpenSSL and issues nothing: `openssl s_client
-verify_return_error` says 20, read first here for each chain. tlsprobe said 26 for a
leaf with an empty keyUsage, and 79 for a CA whose nameConstraints or basicConstraints were
not of their ASN.1 type (cryptography refuses the whole extension list, which read as no
basicConstraints). A certificatePolicies that cryptography cannot decode is ignored by
OpenSSL (0): tlsprobe said 79 (untrusted); that verdict is now not established.

Extensions of the right ASN.1 type whose contents OpenSSL's decoder refuses (a BOOLEAN of two
bytes, a padded INTEGER, a BIT STRING of 8 unused bits, an EKU entry that is no OID, an
authorityKeyIdentifier field of an unknown tag, a GeneralName of a universal tag, an
otherName without its OID) or its extension cache refuses (a keyUsage whose first 16 bits
are clear once the unused bits are, a CRL distribution point without name or CRL issuer, a
proxyCertInfo beside a subjectAltName or CA:TRUE) are 20: tlsprobe said "not established"
(cryptography refuses them too), 26 or even 0 (a proxyCertInfo, a Netscape certificate type
of no bits byte). A basicConstraints of an indefinite length (BER OpenSSL reads: 0) was 20;
it is now not established, as is a proxy certificate OpenSSL can cache (40)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.probes.test_probe_verify_openssl_codes import (
    CA_USAGE,
    Case,
    _build,
    _rsa2000,
    _openssl_verdict,
    served_verdicts,
)


def _raw(oid: str, value: bytes) -> x509.UnrecognizedExtension:
    return x509.UnrecognizedExtension(x509.ObjectIdentifier(oid), value)


EMPTY_KU = x509.KeyUsage(False, False, False, False, False, False, False, False, False)
NOT_A_SEQUENCE_NC = _raw("2.5.29.30", b"\x04\x00")
NEGATIVE_PATH_LENGTH = _raw("2.5.29.19", b"\x30\x06\x01\x01\xff\x02\x01\xff")
NETSCAPE_NOT_BITS = _raw("2.16.840.1.113730.1.1", b"\x04\x00")
POLICIES_GARBAGE = _raw("2.5.29.32", b"\x04\x00")
#: of their ASN.1 type, with contents OpenSSL's decoder or extension cache refuses (20);
#: cryptography refuses them too, so tlsprobe said "not established" (or 26, 0)
BOOLEAN_OF_TWO_BYTES = _raw("2.5.29.19", bytes.fromhex("30040102ffff"))
PADDED_PATH_LENGTH = _raw("2.5.29.19", bytes.fromhex("30070101ff02020001"))
KU_UNUSED_BITS_8 = _raw("2.5.29.15", bytes.fromhex("03020880"))
KU_ONLY_A_PADDING_BIT = _raw("2.5.29.15", bytes.fromhex("03020701"))
KU_BITS_PAST_16_ONLY = _raw("2.5.29.15", bytes.fromhex("0304000000ff"))
EKU_NOT_AN_OID = _raw("2.5.29.37", bytes.fromhex("30020500"))
EKU_OID_0x80 = _raw("2.5.29.37", bytes.fromhex("300306018f"))
AKI_UNKNOWN_FIELD = _raw("2.5.29.35", bytes.fromhex("3002a300"))
CRL_POINT_WITHOUT_NAME = _raw("2.5.29.31", bytes.fromhex("30063004810205a0"))
SAN_UNIVERSAL_TAG = _raw("2.5.29.17", bytes.fromhex("30020500"))
SAN_OTHERNAME_NO_OID = _raw("2.5.29.17", bytes.fromhex("3004a0020500"))
NC_BASE_NOT_A_NAME = _raw("2.5.29.30", bytes.fromhex("3006a00430020500"))
NETSCAPE_NO_BITS_BYTE = _raw("2.16.840.1.113730.1.1", b"\x03\x00")
NETSCAPE_UNUSED_BITS_9 = _raw("2.16.840.1.113730.1.1", bytes.fromhex("03020980"))
#: proxyCertInfo (id-ppl-inheritAll) in a certificate with a subjectAltName or CA:TRUE
PROXY = _raw("1.3.6.1.5.5.7.1.14", bytes.fromhex("300c300a06082b06010505071501"))
PROXY_NO_POLICY = _raw("1.3.6.1.5.5.7.1.14", bytes.fromhex("30020500"))
#: BER OpenSSL reads (an indefinite length): tlsprobe said 20, OpenSSL trusts it
BC_INDEFINITE_LENGTH = _raw("2.5.29.19", bytes.fromhex("30800101ff0000"))

CASES = {
    "leaf-empty-keyusage": (Case(leaf_extra=((EMPTY_KU, True),)), 20),
    "leaf-netscape-type-not-a-bit-string": (Case(leaf_extra=((NETSCAPE_NOT_BITS, False),)), 20),
    "intermediate-nameconstraints-not-a-sequence": (
        Case(inter_extra=((NOT_A_SEQUENCE_NC, True),)), 20),
    "root-negative-path-length": (
        Case(root_exts=((NEGATIVE_PATH_LENGTH, True), (CA_USAGE, True))), 20),
    # OpenSSL ignores it (no policy checking): cryptography cannot read the CA's extensions
    "intermediate-policies-unreadable": (Case(inter_extra=((POLICIES_GARBAGE, False),)), 0),
    "intermediate-ca-boolean-of-two-bytes": (Case(inter_bc_raw=BOOLEAN_OF_TWO_BYTES), 20),
    "intermediate-padded-path-length": (Case(inter_bc_raw=PADDED_PATH_LENGTH), 20),
    "leaf-keyusage-unused-bits-8": (Case(leaf_extra=((KU_UNUSED_BITS_8, True),)), 20),
    "leaf-keyusage-only-a-padding-bit": (Case(leaf_extra=((KU_ONLY_A_PADDING_BIT, True),)), 20),
    "leaf-keyusage-bits-past-16-only": (Case(leaf_extra=((KU_BITS_PAST_16_ONLY, True),)), 20),
    "leaf-eku-not-an-oid": (Case(eku=(), leaf_extra=((EKU_NOT_AN_OID, False),)), 20),
    "leaf-eku-oid-subidentifier-0x80": (Case(eku=(), leaf_extra=((EKU_OID_0x80, False),)), 20),
    "leaf-aki-unknown-field": (Case(leaf_extra=((AKI_UNKNOWN_FIELD, False),)), 20),
    "leaf-crl-point-without-name": (Case(leaf_extra=((CRL_POINT_WITHOUT_NAME, False),)), 20),
    "leaf-san-universal-tag": (Case(dns=(), leaf_extra=((SAN_UNIVERSAL_TAG, False),)), 20),
    "leaf-san-othername-without-oid": (Case(dns=(), leaf_extra=((SAN_OTHERNAME_NO_OID, False),)),
                                       20),
    "intermediate-nameconstraints-base-not-a-name": (
        Case(inter_extra=((NC_BASE_NOT_A_NAME, True),)), 20),
    "leaf-netscape-type-no-bits-byte": (Case(leaf_extra=((NETSCAPE_NO_BITS_BYTE, False),)), 20),
    "leaf-netscape-type-unused-bits-9": (Case(leaf_extra=((NETSCAPE_UNUSED_BITS_9, False),)), 20),
    "leaf-proxy-with-subjectaltname": (Case(leaf_extra=((PROXY, False),)), 20),
    "leaf-proxy-without-policy": (Case(dns=(), leaf_extra=((PROXY_NO_POLICY, False),)), 20),
    "intermediate-proxy-ca": (Case(inter_extra=((PROXY, False),)), 20),
    "intermediate-basicconstraints-indefinite-length": (
        Case(inter_bc_raw=BC_INDEFINITE_LENGTH), 0),
}

#: OpenSSL's verdict needs checks not made here: not established (what cryptography does
#: not read, or a proxy certificate OpenSSL can cache: 40, proxies not allowed)
NOT_ESTABLISHED = {"intermediate-policies-unreadable": "cannot read the extensions of CN=Codes CA",
                   "intermediate-basicconstraints-indefinite-length":
                   "cannot read the extensions of CN=Codes CA",
                   "leaf-proxy-only": "CN=localhost is a proxy certificate"}
CASES["leaf-proxy-only"] = (Case(dns=(), leaf_extra=((PROXY, False),)), 40)


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_invalid_extension_code_is_openssls(tls_server: Callable[..., Any],
                                            run_cli: Callable[..., Any], tmp_path: Path,
                                            name: str) -> None:
    case, expected = CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path))
    assert code == expected, (name, code, text)
    if name in NOT_ESTABLISHED:
        assert ver["code"] is None and ver["ok"] is False, (name, ver)
        assert ver["message"].startswith("not established: " + NOT_ESTABLISHED[name]), ver
        return
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text}): "), (name, ver)
    assert "has an extension OpenSSL refuses" in ver["message"], ver



def _der(tag: int, body: bytes) -> bytes:
    size = len(body)
    width = (size.bit_length() + 7) // 8
    head = bytes([size]) if size < 0x80 else bytes([0x80 | width]) + size.to_bytes(width, "big")
    return bytes([tag]) + head + body


#: a stand-in extension OID (1.2.3.5) and the OIDs written over it, as DER of one length
STAND_IN = bytes.fromhex("06032a0305")
TWICE = {"subjectAltName": bytes.fromhex("0603551d11"),   # 2.5.29.17: OpenSSL caches it
         "unknown": bytes.fromhex("06032a0304")}          # 1.2.3.4: OpenSSL ignores it


def _twice(folder: Path, which: str) -> None:
    """leaf.pem issued again with an extension twice (the library builds each once): the
    stand-in is renamed in the signed bytes, which the intermediate's key signs again."""
    leaf = x509.load_pem_x509_certificate((folder / "leaf.pem").read_bytes())
    key = serialization.load_pem_private_key((folder / "inter.key").read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    builder = (x509.CertificateBuilder().subject_name(leaf.subject).issuer_name(leaf.issuer)
               .public_key(leaf.public_key()).serial_number(leaf.serial_number)
               .not_valid_before(leaf.not_valid_before_utc)
               .not_valid_after(leaf.not_valid_after_utc))
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    builder = builder.add_extension(san, False)
    if which == "unknown":
        builder = builder.add_extension(_raw("1.2.3.4", b"\x05\x00"), False)
    builder = builder.add_extension(_raw("1.2.3.5", san.public_bytes() if which ==
                                         "subjectAltName" else b"\x05\x00"), False)
    tbs = builder.sign(key, hashes.SHA256()).tbs_certificate_bytes
    assert tbs.count(STAND_IN) == 1
    tbs = tbs.replace(STAND_IN, TWICE[which])
    signature = key.sign(tbs, ec.ECDSA(hashes.SHA256()))
    algorithm = _der(0x30, _der(0x06, bytes.fromhex("2a8648ce3d040302")))   # ecdsa-with-SHA256
    der = _der(0x30, tbs + algorithm + _der(0x03, b"\x00" + signature))
    (folder / "leaf.pem").write_bytes(
        x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM))


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize(("which", "expected"), [("subjectAltName", 20), ("unknown", 0)])
def test_an_extension_twice(tls_server: Callable[..., Any], run_cli: Callable[..., Any],
                            tmp_path: Path, which: str, expected: int) -> None:
    """A leaf with an extension twice: cryptography refuses its extension list
    (DuplicateExtension, no ValueError), which both `tlsprobe HOST` and `scan` reported as
    "internal error" (a bug in tlsprobe). OpenSSL finds no issuer of a leaf with a cached
    extension twice (20) and ignores an unknown one twice (0: not established here)."""
    case = Case(leaf_serial=7)   # issued by `openssl x509`, which leaves inter.key
    root, leaf, key, inter = _build(case, tmp_path)
    _twice(tmp_path, which)
    srv = tls_server("openssl", extra=["-cert", str(leaf), "-key", str(key), "-cert_chain",
                                       str(inter)])
    code, text = _openssl_verdict(srv.port, root, case.host)   # the real tool first
    assert code == expected, (code, text)
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", case.host, "--cafile", root, "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    if code:
        assert ver["code"] == 20 and "two subjectAltName extensions" in ver["message"], ver
    else:
        assert ver["code"] is None and "Duplicate 1.2.3.4 extension" in ver["message"], ver
        # it has one, which cannot be read: "no subjectAltName" was said
        assert "no subjectAltName" not in ver["message"], ver
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "cert,chain,sct", "--json",
                  "--no-progress", "--no-policy", "--cafile", root, "--sni", case.host)
    assert "internal error" not in res.stdout + res.stderr, (res.stdout, res.stderr)
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    report = json.loads(res.stdout.splitlines()[0])
    assert report["trust"]["code"] == (20 if code else None), report["trust"]


#: CA:FALSE with a pathLenConstraint: OpenSSL reads it as CA:FALSE (the path length is
#: checked in strict mode only); cryptography refuses the extension list, so tlsprobe said
#: "not established" for each of these
CA_FALSE_PATH_LENGTH = _raw("2.5.29.19", bytes.fromhex("3003020100"))
CA_FALSE_CASES = {
    "leaf": (Case(leaf_bc_raw=CA_FALSE_PATH_LENGTH), 0),
    "leaf-of-another-name": (Case(host="other.test", leaf_bc_raw=CA_FALSE_PATH_LENGTH), 62),
    "leaf-eku-client": (Case(leaf_bc_raw=CA_FALSE_PATH_LENGTH,
                             eku=(x509.ObjectIdentifier("1.3.6.1.5.5.7.3.2"),)), 26),
    "intermediate": (Case(inter_bc_raw=CA_FALSE_PATH_LENGTH), 79),
    # the library refuses the path above the leaf (an RSA-2000 CA key): not established
    "leaf-under-an-rsa2000-intermediate": (Case(leaf_bc_raw=CA_FALSE_PATH_LENGTH,
                                                inter_key=_rsa2000), 0),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CA_FALSE_CASES))
def test_ca_false_with_a_path_length(tls_server: Callable[..., Any],
                                     run_cli: Callable[..., Any], tmp_path: Path,
                                     name: str) -> None:
    case, expected = CA_FALSE_CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path),
                                      "-cipher", "DEFAULT:@SECLEVEL=0")
    assert code == expected, (name, code, text)
    if name == "leaf-under-an-rsa2000-intermediate":
        assert ver["code"] is None and "its own way" in ver["message"], ver
        return
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), (name, ver)
    assert ver["ok"] is (code == 0), ver
