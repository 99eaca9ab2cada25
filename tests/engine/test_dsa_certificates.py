"""A DSA certificate is recognised, checked and shown without a warning on any cryptography
release: cryptography 51 deprecates DSA (naming `dsa.DSAPublicKey` and loading a DSA key
both warn), and tlsprobe's own code must never let that warning reach the user.

The unit part turns every warning into an error around tlsprobe's calls; the loopback part
probes and scans an `openssl s_server` with a DSA certificate (DHE-DSS, TLS 1.2), in this
process, where pyproject's `filterwarnings` makes a warning from tlsprobe's code an error."""
from __future__ import annotations

import datetime
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from tlsprobe.engine.verify import (SignatureError, certificate_verify_input, key_kind,
                                    leaf_key, verify_legacy, verify_scheme)
from tlsprobe.kex.base import InvalidShare
from tlsprobe.kex.rsa import rsa_encrypt_premaster
from tlsprobe.model.describe import certificate_info
from tlsprobe.model.pubkey import is_dsa_key

DATA = certificate_verify_input(bytes(32))


class DsaIdentity:
    def __init__(self, directory: Path) -> None:
        # the test's own DSA key: cryptography 51 warns here (the test's line, not tlsprobe's)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from cryptography.hazmat.primitives.asymmetric import dsa
            self.key = dsa.generate_private_key(2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(4242)
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=3))
                     .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]),
                                    critical=False)
                     .sign(self.key, hashes.SHA256()))
        self.der = self.cert.public_bytes(serialization.Encoding.DER)
        self.cert_path, self.key_path = directory / "dsa.crt", directory / "dsa.key"
        self.cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.key_path.write_bytes(self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))


@pytest.fixture(scope="module")
def dsa_identity(tmp_path_factory: pytest.TempPathFactory) -> DsaIdentity:
    return DsaIdentity(tmp_path_factory.mktemp("dsa"))


def test_dsa_key_recognised_and_checked_without_a_warning(dsa_identity: DsaIdentity) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        key, _ = leaf_key(dsa_identity.der)
        assert is_dsa_key(key) and key_kind(key) == "DSA"
        verify_scheme(key, 0x0402, dsa_identity.key.sign(DATA, hashes.SHA256()), DATA)
        with pytest.raises(SignatureError, match="does not fit the certificate's DSA key"):
            verify_scheme(key, 0x0403, b"\x30\x00", DATA)  # ecdsa_secp256r1_sha256
        with pytest.raises(SignatureError, match="not allowed in TLS 1.3"):
            verify_scheme(key, 0x0402, b"", DATA, tls13=True)
        assert verify_legacy(key, dsa_identity.key.sign(DATA, hashes.SHA1()), DATA) == \
            "DSA SHA1"
        info = certificate_info(dsa_identity.der)
        assert (info.key_type, info.key_bits) == ("DSA", 2048)
        with pytest.raises(InvalidShare, match="the server's is DSA"):
            rsa_encrypt_premaster(dsa_identity.cert, 0x0303)


def test_a_dsa_chain_is_trust_checked_without_a_warning(dsa_identity: DsaIdentity) -> None:
    """The trust check of a DSA chain (a scan shows each chain the server has, a DSA one
    too) checks its self-signature quietly: `verify_directly_issued_by` loads the DSA key,
    which cryptography 51 warns about."""
    from tlsprobe.probes.audit.certs import trust_check
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check = trust_check([dsa_identity.der], "localhost", None)
    assert check.status == "untrusted" and check.code == 18, check   # self-signed


SUITES = "DHE-DSS-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:@SECLEVEL=0"


@pytest.mark.needs_impl("openssl")
def test_probe_and_scan_print_no_warning(tls_server: Callable[..., Any], certs: Any,
                                         dsa_identity: DsaIdentity, run_cli: Any) -> None:
    # RSA certificate (the lab CA's) for ECDHE-RSA, DSA certificate for DHE-DSS
    server = tls_server("openssl", proto="tls1_2", ciphers=SUITES, dhparam="ffdhe2048",
                        extra=["-dcert", str(dsa_identity.cert_path),
                               "-dkey", str(dsa_identity.key_path)])
    target = f"127.0.0.1:{server.port}"
    code, out, err = run_cli(target, "--tls1_2", "--no-verify", "--ciphers",
                             "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256", "--sigalgs", "dsa_sha256")
    assert (code, err) == (0, ""), out
    assert "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256" in out and "DSA 2048 bits" in out
    assert "Server signature   verified (dsa_sha256" in out
    # a default scan: every TLS 1.2 handshake checks the ServerKeyExchange signature
    code, out, err = run_cli("scan", target, "--cafile", str(certs.ca), timeout=90)
    assert (code, err) == (0, ""), out
    assert "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" in out
    # both chains are shown and checked quietly: the DSA one too (the hellos offer the DSA
    # schemes; without them the server refused each hello it answered with DHE_DSS), the
    # first met, and the RSA one
    assert "\nCertificate chain (DSA)\n" in out
    assert "Certificate chain (RSA; TLS 1.2, ECDHE_RSA and DHE_RSA suites)" in out
    # the TLS 1.2 signature schemes of each certificate (was: not established, "the server
    # accepted no (EC)DHE offer with any signature scheme": it chose DHE_DSS and refused)
    code, out, err = run_cli("scan", target, "--cafile", str(certs.ca), "--checks",
                             "sigalgs,cert", "--json", "--no-progress", timeout=90)
    assert (code, err) == (0, ""), out
    (tls12,) = json.loads(out)["signature_schemes"]
    assert tls12["status"] == "established", tls12
    kinds = {k["key_type"]: [c["name"] for c in k["supported"]] for k in tls12["by_key_type"]}
    assert set(kinds) == {"DSA", "RSA"} and "dsa_sha256" in kinds["DSA"], kinds
    assert all(n.startswith("dsa_") for n in kinds["DSA"]) and "rsa_pkcs1_sha256" in kinds["RSA"]
