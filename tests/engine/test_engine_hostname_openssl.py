"""Host names are matched as OpenSSL's X509_check_host matches them (what `openssl s_client
-verify_hostname` uses): for each pattern, `openssl x509 -checkhost` on the same
certificate is the reference, then the trust verdict on that self-signed certificate,
itself in the trust store, must be 0 exactly when OpenSSL matches and 62 otherwise.
Before, a partial wildcard (`f*.`, `*f.`, `*-f.`) and a CN-only certificate were 62
where OpenSSL matches them, and a host name's final dot was dropped (`localhost.` matched
`localhost`, which OpenSSL does not)."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tlsprobe.engine.chain import verify_chain

NOW = datetime.datetime.now(datetime.timezone.utc)

PAIRS = [  # (pattern in the subjectAltName, or CN= for a certificate without one; host)
    ("f*.example.test", "foo.example.test"), ("f*.example.test", "f.example.test"),
    ("*f.example.test", "oof.example.test"), ("*-f.example.test", "a-f.example.test"),
    ("F*.EXAMPLE.test", "foo.example.test"), ("f-*.example.test", "f-a.example.test"),
    ("f*o.example.test", "foo.example.test"), ("f*.example.test", "xn--f-ida.example.test"),
    ("xn--*.example.test", "xn--a.example.test"), ("*.example.test", "xn--a.example.test"),
    ("*x.example.test", "xn--x.example.test"), ("*.example.test", "*.example.test"),
    ("*.example.test", "a_b.example.test"), ("*.ex_ample.test", "a.ex_ample.test"),
    ("*.*.example.test", "a.b.example.test"), ("*.test", "a.test"),
    ("*.example.test", "example.test"), ("under_score.test", "under_score.test"),
    ("CN=localhost", "localhost"), ("CN=*.example.test", "a.example.test"),
    ("CN=other.test", "localhost"),
    # a final dot is compared as it is (tlsprobe stripped the host name's: 0 for the first,
    # second and fourth, where OpenSSL says no match)
    ("localhost", "localhost."), ("*.example.test", "a.example.test."),
    ("localhost.", "localhost."), ("CN=localhost", "localhost."), ("localhost.", "localhost"),
    ("*.example.test.", "a.example.test."),
]


def _certificate(pattern: str) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    cn = pattern[3:] if pattern.startswith("CN=") else "names"
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(NOW - datetime.timedelta(hours=1))
         .not_valid_after(NOW + datetime.timedelta(days=2)))
    if not pattern.startswith("CN="):
        dns = x509.DNSName.__new__(x509.DNSName)
        dns._value = pattern   # the constructor refuses some names a server's may hold
        b = b.add_extension(x509.SubjectAlternativeName([dns]), critical=False)
    return b.sign(key, hashes.SHA256())


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
@pytest.mark.parametrize("pattern,host", PAIRS)
def test_host_matched_as_openssl_matches_it(tmp_path: Path, pattern: str, host: str) -> None:
    cert = _certificate(pattern)
    pem = tmp_path / "cert.pem"
    pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    out = subprocess.run(["openssl", "x509", "-in", str(pem), "-noout", "-checkhost", host],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert "does match" in out or "does NOT match" in out, out
    matches = "does NOT match" not in out
    result = verify_chain([cert.public_bytes(serialization.Encoding.DER)], host, (cert,))
    assert result.code == (0 if matches else 62), (pattern, host, result.message)
    assert result.hostname_ok is matches, result
