"""A certificate with an extension OpenSSL cannot cache (x509v3_cache_extensions sets
EXFLAG_INVALID) has no issuer for OpenSSL and issues nothing: `openssl s_client
-verify_return_error` says 20, read first here for each chain. tlsprobe said 26 for a
leaf with an empty keyUsage, and 79 for a CA whose nameConstraints or basicConstraints were
not of their ASN.1 type (cryptography refuses the whole extension list, which read as no
basicConstraints). A certificatePolicies that cryptography cannot decode is ignored by
OpenSSL (0): tlsprobe said 79 (untrusted); that verdict is now not established."""

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

CASES = {
    "leaf-empty-keyusage": (Case(leaf_extra=((EMPTY_KU, True),)), 20),
    "leaf-netscape-type-not-a-bit-string": (Case(leaf_extra=((NETSCAPE_NOT_BITS, False),)), 20),
    "intermediate-nameconstraints-not-a-sequence": (
        Case(inter_extra=((NOT_A_SEQUENCE_NC, True),)), 20),
    "root-negative-path-length": (
        Case(root_exts=((NEGATIVE_PATH_LENGTH, True), (CA_USAGE, True))), 20),
    # OpenSSL ignores it (no policy checking): cryptography cannot read the CA's extensions
    "intermediate-policies-unreadable": (Case(inter_extra=((POLICIES_GARBAGE, False),)), 0),
}


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("name", list(CASES))
def test_invalid_extension_code_is_openssls(tls_server: Callable[..., Any],
                                            run_cli: Callable[..., Any], tmp_path: Path,
                                            name: str) -> None:
    case, expected = CASES[name]
    code, text, ver = served_verdicts(tls_server, run_cli, case, _build(case, tmp_path))
    assert code == expected, (name, code, text)
    if code == 0:
        assert ver["code"] is None and ver["ok"] is False, (name, ver)
        assert ver["message"].startswith("not established: cannot read the extensions of "
                                         "CN=Codes CA"), ver
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
