"""Fixtures of the rating tests: the check tests' `script_server` (the small vulnerable
servers of tests/checks), and leaves made here with `cryptography` for the certificate
rules (expired, SHA-1, a small RSA key), signed by the test CA."""
from __future__ import annotations

import datetime
import ipaddress
import subprocess
from datetime import timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.checks.conftest import script_server
from tests.lab_servers.certs import CertFiles, CertSet

__all__ = ["make_leaf", "openssl_signed", "script_server"]


def _rsa_key(bits: int, path: Path) -> rsa.RSAPrivateKey:
    """An RSA key of `bits`; under 1024 (which `cryptography` no longer generates) from
    `openssl genrsa`."""
    if bits >= 1024:
        return rsa.generate_private_key(public_exponent=65537, key_size=bits)
    subprocess.run(["openssl", "genrsa", "-out", str(path), str(bits)], check=True,
                   capture_output=True, timeout=30)
    key = serialization.load_pem_private_key(path.read_bytes(), None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def make_leaf(certs: CertSet, out: Path, name: str, *, days: tuple[int, int] = (-1, 90),
              bits: int = 2048, digest: hashes.HashAlgorithm | None = None) -> CertSet:
    """A CertSet whose `name` leaf (localhost, 127.0.0.1) is valid from days[0] to days[1]
    from now, with an RSA key of `bits`, signed with `digest` (SHA-256 by default)."""
    ca_key = serialization.load_pem_private_key((certs.directory / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    key = _rsa_key(bits, out / f"{name}.gen.key")
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + timedelta(days=days[0]))
            .not_valid_after(now + timedelta(days=days[1]))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                False)
            .sign(ca_key, digest or hashes.SHA256()))   # type: ignore[arg-type]
    files = CertFiles(out / f"{name}.crt", out / f"{name}.key", out / f"{name}_chain.crt")
    pem = cert.public_bytes(serialization.Encoding.PEM)
    files.cert.write_bytes(pem)
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    files.chain.write_bytes(pem + certs.ca.read_bytes())
    return CertSet(certs.directory, certs.ca, {name: files})


def openssl_signed(certs: CertSet, out: Path, name: str, digest: str) -> CertSet:
    """A CertSet whose `name` leaf (localhost, 127.0.0.1, 30 days) the test CA signed with
    `digest` ("sha1", "md5") through the openssl command line (`cryptography`'s OpenSSL no
    longer signs with either)."""
    key, csr = out / f"{name}.key", out / f"{name}.csr"
    files = CertFiles(out / f"{name}.crt", key, out / f"{name}_chain.crt")
    run = [["openssl", "genrsa", "-out", str(key), "2048"],
           ["openssl", "req", "-new", "-key", str(key), "-subj", "/CN=localhost", "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1", "-addext",
            "extendedKeyUsage=serverAuth", "-out", str(csr)],
           ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(certs.ca), "-CAkey",
            str(certs.directory / "ca.key"), "-set_serial", "7", "-days", "30", f"-{digest}",
            "-copy_extensions", "copy", "-out", str(files.cert)]]
    for argv in run:
        subprocess.run(argv, check=True, capture_output=True, timeout=30)
    files.chain.write_bytes(files.cert.read_bytes() + certs.ca.read_bytes())
    return CertSet(certs.directory, certs.ca, {name: files})
