"""A self-signed server certificate is trusted by OpenSSL only when the trust store holds that
very certificate: another store certificate of its name and key (issued again, another
serial number or validity) is a mimic build_chain refuses (X509_cmp), and s_client says 18
(read first here). tlsprobe took the store's certificate of the same name and key as the
anchor: 10 when that copy had expired, "not established" (cryptography's verifier) when
not. The very copy stays trusted (0)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.probes.test_probe_verify_openssl_codes import _openssl_verdict

NOW = datetime.datetime.now(datetime.timezone.utc)
DAY = datetime.timedelta(days=1)


def _self_signed(key: ec.EllipticCurvePrivateKey, days: tuple[int, int]) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW + days[0] * DAY).not_valid_after(NOW + days[1] * DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(key, hashes.SHA256()))


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize(("store", "expected"), [("another-copy", 18),
                                                 ("another-copy-expired", 18),
                                                 ("the-very-copy", 0)])
def test_self_signed_certificate_is_trusted_only_as_itself(
        tls_server: Callable[..., Any], run_cli: Callable[..., Any], tmp_path: Path,
        store: str, expected: int) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    served = _self_signed(key, (-1, 30))
    stored = served if store == "the-very-copy" else \
        _self_signed(key, (-30, -1) if store.endswith("expired") else (-2, 60))
    pem = serialization.Encoding.PEM
    (tmp_path / "leaf.pem").write_bytes(served.public_bytes(pem))
    (tmp_path / "leaf.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    (tmp_path / "store.pem").write_bytes(stored.public_bytes(pem))
    srv = tls_server("openssl", extra=["-cert", str(tmp_path / "leaf.pem"),
                                       "-key", str(tmp_path / "leaf.key")])
    code, text = _openssl_verdict(srv.port, tmp_path / "store.pem", "localhost")
    assert code == expected, (code, text)
    res = run_cli(f"127.0.0.1:{srv.port}", "--sni", "localhost", "--cafile",
                  tmp_path / "store.pem", "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    ver = json.loads(res.stdout)["verification"]
    assert ver["code"] == code and ver["message"].startswith(f"{code} ({text})"), ver
    if code:
        assert "another certificate of its name and key" in ver["message"], ver
