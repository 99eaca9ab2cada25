"""The chain is verified with the rules OpenSSL (and curl, and the browsers' private-CA
handling) apply, not with the CA/Browser Forum profile alone: a private CA made by
`openssl req -x509` with its defaults has no keyUsage, and certificates issued by hand may
lack authorityKeyIdentifier. OpenSSL accepts both; tlsprobe said "1 (unspecified ...):
invalid extension: keyUsage ... missing required" and the scan's certificate.untrusted
(high) failed CI on a chain every client trusts. A CA keyUsage without keyCertSign, or a CA
certificate without basicConstraints CA:TRUE, stays refused, as OpenSSL refuses it. Each
case is checked against `openssl s_client` on the same server first."""
from __future__ import annotations

import datetime
import ipaddress
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NOW = datetime.datetime.now(datetime.timezone.utc)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pki(folder: Path, *, ca_key_usage: x509.KeyUsage | None, aki: bool,
         ca: bool = True) -> tuple[Path, Path, Path]:
    """root -> leaf (localhost, 127.0.0.1), P-256: the root's keyUsage as given (None:
    none, as `openssl req -x509` makes it), authorityKeyIdentifier on the leaf only when
    `aki`, basicConstraints CA:`ca` on the root. (root PEM, leaf PEM, leaf key PEM)."""
    root_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), \
        ec.generate_private_key(ec.SECP256R1())
    start, end = NOW - datetime.timedelta(hours=1), NOW + datetime.timedelta(days=2)
    rb = (x509.CertificateBuilder().subject_name(_name("Private Root"))
          .issuer_name(_name("Private Root")).public_key(root_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start)
          .not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()),
                         critical=False))
    if ca_key_usage is not None:
        rb = rb.add_extension(ca_key_usage, critical=True)
    root = rb.sign(root_key, hashes.SHA256())
    lb = (x509.CertificateBuilder().subject_name(_name("localhost"))
          .issuer_name(root.subject).public_key(leaf_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(start)
          .not_valid_after(end)
          .add_extension(x509.SubjectAlternativeName([
              x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
              critical=False))
    if aki:
        lb = lb.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()),
            critical=False)
    leaf = lb.sign(root_key, hashes.SHA256())
    paths = folder / "root.pem", folder / "leaf.pem", folder / "leaf.key"
    paths[0].write_bytes(root.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM,
                                                serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return paths


def _openssl_code(port: int, cafile: Path) -> int:
    proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile",
                           str(cafile), "-verify_hostname", "localhost"], input="",
                          capture_output=True, text=True, timeout=30, check=False)
    found = re.findall(r"Verify return code: (\d+)", proc.stdout)
    assert found, proc.stdout + proc.stderr
    return int(found[-1])


SIGNS = x509.KeyUsage(digital_signature=False, content_commitment=False,
                      key_encipherment=False, data_encipherment=False, key_agreement=False,
                      key_cert_sign=True, crl_sign=True, encipher_only=False,
                      decipher_only=False)
NO_CERT_SIGN = x509.KeyUsage(digital_signature=True, content_commitment=False,
                             key_encipherment=False, data_encipherment=False,
                             key_agreement=False, key_cert_sign=False, crl_sign=False,
                             encipher_only=False, decipher_only=False)


@pytest.mark.parametrize("case,key_usage,aki,ca,trusted", [
    ("openssl-req-defaults", None, True, True, True),     # root without keyUsage
    ("no-aki", SIGNS, False, True, True),                 # leaf without AKI
    ("neither", None, False, True, True),
    ("no-keycertsign", NO_CERT_SIGN, True, True, False),  # refused by OpenSSL too
    ("root-not-ca", None, True, False, False),
])
def test_chain_trusted_as_openssl_trusts_it(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path,
        case: str, key_usage: x509.KeyUsage | None, aki: bool, ca: bool,
        trusted: bool) -> None:
    root, leaf, key = _pki(tmp_path, ca_key_usage=key_usage, aki=aki, ca=ca)
    srv = tls_server("pyssl", extra=["--chain-file", str(leaf), "--key-file", str(key)])
    assert (_openssl_code(srv.port, root) == 0) is trusted, case   # the real tool first
    for sni in ("localhost", None):   # the name checked, and the chain alone (IP target)
        args = ["--sni", sni] if sni else []
        res = run_cli("127.0.0.1:" + str(srv.port), "--cafile", root, "--json", *args)
        assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
        ver = json.loads(res.stdout)["verification"]
        assert (ver["code"] == 0) is trusted, (case, sni, ver)
