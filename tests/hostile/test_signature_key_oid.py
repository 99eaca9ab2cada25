"""A TLS 1.3 CertificateVerify whose RSA-PSS scheme does not fit the kind of RSA key the
certificate holds (RFC 8446 4.2.3): rsa_pss_rsae_* needs an rsaEncryption key,
rsa_pss_pss_* an RSASSA-PSS key (id-RSASSA-PSS). The PSS signature itself is the same
mathematics, so it verifies either way; OpenSSL's client refuses the mismatch ("wrong
signature type"), and the probe must not report it as a verified signature. The fitting
pairs complete (controls).

The scripted server signs with the real keys: a `cryptography` rsaEncryption key, and an
RSASSA-PSS key and certificate made by the openssl command line (tests/lab_servers/certs).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from tests.lab_servers.certs import CertSet, rsa_pss_set

from tlsprobe.engine.verify import certificate_verify_input
from tlsprobe.wire import frame

from .catalog import HOLD
from .server import Conn, HostileServer, Script
from .tls import Tls13Server, self_signed

RSAE_SHA256, PSS_SHA256 = 0x0804, 0x0809


def _flight(key: rsa.RSAPrivateKey, der: bytes, scheme: int) -> Script:
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        tls = Tls13Server(ch, conn.hello_raw[-1])
        messages = [tls.encrypted_extensions(), tls.certificate([der])]
        signature = key.sign(certificate_verify_input(tls.hash()),
                             padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256())
        messages.append(tls.add(frame(15, scheme.to_bytes(2, "big") +
                                      len(signature).to_bytes(2, "big") + signature)))
        messages.append(tls.finished())
        await conn.send(tls.hello_and_flight(messages))
        await conn.hold(HOLD)
    return script


@pytest.fixture(scope="module")
def keys(certs: CertSet, tmp_path_factory: pytest.TempPathFactory
         ) -> dict[str, tuple[rsa.RSAPrivateKey, bytes]]:
    """'rsae': an rsaEncryption key and its certificate; 'pss': an RSASSA-PSS one."""
    rsae = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = rsa_pss_set(certs, tmp_path_factory.mktemp("pss"))["rsa-pss"]
    pss = serialization.load_pem_private_key(files.key.read_bytes(), None)
    assert isinstance(pss, rsa.RSAPrivateKey)
    from cryptography import x509
    pss_der = x509.load_pem_x509_certificate(files.cert.read_bytes()).public_bytes(
        serialization.Encoding.DER)
    return {"rsae": (rsae, self_signed(rsae)), "pss": (pss, pss_der)}


@pytest.mark.parametrize("kind, scheme, fits", [
    ("rsae", PSS_SHA256, False), ("pss", RSAE_SHA256, False),
    ("rsae", RSAE_SHA256, True), ("pss", PSS_SHA256, True)])
def test_pss_scheme_must_fit_the_key_oid(run_cli, hostile_server: HostileServer, tmp_path: Path,
                                         keys: dict[str, tuple[rsa.RSAPrivateKey, bytes]],
                                         kind: str, scheme: int, fits: bool) -> None:
    key, der = keys[kind]
    listener = hostile_server.serve(_flight(key, der, scheme))
    res = run_cli(f"127.0.0.1:{listener.port}", "--tls1_3", "--no-verify", "--json",
                  "--first-flight-only", "--timeout", "5")
    data = json.loads(res.stdout)
    if fits:
        assert res.returncode == 0, res.stderr
        assert data["signature_verified"] is True, data
        return
    assert res.returncode == 6, res.stderr
    assert data["signature_verified"] is False, data
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "does not fit" in lines[0], res.stderr
    needs = "RSASSA-PSS" if scheme == PSS_SHA256 else "rsaEncryption"
    assert needs in lines[0] and "RFC 8446 4.2.3" in lines[0], lines[0]
