"""Signature checks (engine.verify) for every key family, and certificate chain outcomes
(engine.chain) as OpenSSL's "Verify return code" values, on certificates made here."""

from __future__ import annotations

import datetime
import ipaddress
import warnings

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import (
    dsa,
    ec,
    ed448,
    ed25519,
    mldsa,
    padding,
    rsa,
)
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509.oid import NameOID

from tlsprobe.engine.chain import ChainResult, verify_chain
from tlsprobe.engine.verify import (
    SignatureError,
    certificate_verify_input,
    verify_legacy,
    verify_scheme,
)

DATA = certificate_verify_input(bytes(32))
NOW = datetime.datetime.now(datetime.timezone.utc)


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pss(h: hashes.HashAlgorithm) -> padding.PSS:
    return padding.PSS(padding.MGF1(h), h.digest_size)


@pytest.mark.parametrize("scheme, h, pss", [
    (0x0401, hashes.SHA256(), False), (0x0501, hashes.SHA384(), False),
    (0x0601, hashes.SHA512(), False), (0x0201, hashes.SHA1(), False),
    (0x0804, hashes.SHA256(), True), (0x0805, hashes.SHA384(), True),
    (0x0806, hashes.SHA512(), True)])
def test_rsa_schemes(rsa_key, scheme, h, pss) -> None:
    sig = rsa_key.sign(DATA, _pss(h) if pss else padding.PKCS1v15(), h)
    verify_scheme(rsa_key.public_key(), scheme, sig, DATA)
    with pytest.raises(SignatureError, match="does not verify"):
        verify_scheme(rsa_key.public_key(), scheme, sig, DATA + b"x")
    if not pss:
        with pytest.raises(SignatureError, match="not allowed in TLS 1.3"):
            verify_scheme(rsa_key.public_key(), scheme, sig, DATA, tls13=True)


@pytest.mark.parametrize("scheme, curve, h", [
    (0x0403, ec.SECP256R1(), hashes.SHA256()), (0x0503, ec.SECP384R1(), hashes.SHA384()),
    (0x0603, ec.SECP521R1(), hashes.SHA512()),
    (0x081A, ec.BrainpoolP256R1(), hashes.SHA256()),
    (0x081B, ec.BrainpoolP384R1(), hashes.SHA384()),
    (0x081C, ec.BrainpoolP512R1(), hashes.SHA512())])
def test_ecdsa_schemes_and_tls13_curve_binding(scheme, curve, h) -> None:
    key = ec.generate_private_key(curve)
    sig = key.sign(DATA, ec.ECDSA(h))
    verify_scheme(key.public_key(), scheme, sig, DATA, tls13=True)
    other = ec.generate_private_key(ec.SECP256R1() if curve.name != "secp256r1"
                                    else ec.SECP384R1())
    sig2 = other.sign(DATA, ec.ECDSA(h))
    verify_scheme(other.public_key(), scheme, sig2, DATA)  # TLS 1.2: any curve
    with pytest.raises(SignatureError, match="needs a"):
        verify_scheme(other.public_key(), scheme, sig2, DATA, tls13=True)


def test_eddsa_mldsa_dsa() -> None:
    for scheme, key in ((0x0807, ed25519.Ed25519PrivateKey.generate()),
                        (0x0808, ed448.Ed448PrivateKey.generate()),
                        (0x0904, mldsa.MLDSA44PrivateKey.generate()),
                        (0x0905, mldsa.MLDSA65PrivateKey.generate()),
                        (0x0906, mldsa.MLDSA87PrivateKey.generate())):
        sig = key.sign(DATA)
        verify_scheme(key.public_key(), scheme, sig, DATA, tls13=True)
        with pytest.raises(SignatureError):
            verify_scheme(key.public_key(), scheme, sig[:-1] + bytes([sig[-1] ^ 1]), DATA)
    with warnings.catch_warnings():  # cryptography 51 deprecates DSA; servers still use it
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        d = dsa.generate_private_key(2048)
    verify_scheme(d.public_key(), 0x0402, d.sign(DATA, hashes.SHA256()), DATA)
    assert verify_legacy(d.public_key(), d.sign(DATA, hashes.SHA1()), DATA) == "DSA SHA1"


def test_scheme_must_fit_the_key(rsa_key) -> None:
    ed = ed25519.Ed25519PrivateKey.generate()
    with pytest.raises(SignatureError, match="does not fit the certificate's RSA 2048 key"):
        verify_scheme(rsa_key.public_key(), 0x0807, ed.sign(DATA), DATA)
    with pytest.raises(SignatureError, match="cannot check signature scheme"):
        verify_scheme(rsa_key.public_key(), 0x0708, b"sig", DATA)  # SM2: not implemented
    with pytest.raises(SignatureError):
        verify_scheme(rsa_key.public_key(), 0x0804, b"", DATA)


def test_legacy_ecdsa_sha1() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    assert verify_legacy(key.public_key(), key.sign(DATA, ec.ECDSA(hashes.SHA1())),
                         DATA) == "ECDSA SHA1"
    with pytest.raises(SignatureError, match="TLS 1.0/1.1 signature does not verify"):
        verify_legacy(key.public_key(), key.sign(DATA, ec.ECDSA(hashes.SHA256())), DATA)


# -- chains --------------------------------------------------------------------------------
def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, issuer: str, key: ec.EllipticCurvePrivateKey,
          signer: ec.EllipticCurvePrivateKey, *, ca: bool, san: list[x509.GeneralName],
          start: datetime.datetime = NOW - datetime.timedelta(days=1),
          end: datetime.datetime = NOW + datetime.timedelta(days=30)) -> x509.Certificate:
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(start).not_valid_after(end)
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                          False), critical=True)
    else:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                            critical=False)
    b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                        critical=False)
    b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
        signer.public_key()), critical=False)
    return b.sign(signer, hashes.SHA256())


def _der(c: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding
    return c.public_bytes(Encoding.DER)


@pytest.fixture(scope="module")
def pki() -> dict[str, x509.Certificate]:
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    san = [x509.DNSName("*.example.test"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    ca = _cert("Test CA", "Test CA", ca_key, ca_key, ca=True, san=[])
    return {
        "ca": ca,
        "leaf": _cert("leaf", "Test CA", leaf_key, ca_key, ca=False, san=san),
        "expired": _cert("leaf", "Test CA", leaf_key, ca_key, ca=False, san=san,
                         start=NOW - datetime.timedelta(days=30),
                         end=NOW - datetime.timedelta(days=1)),
        "future": _cert("leaf", "Test CA", leaf_key, ca_key, ca=False, san=san,
                        start=NOW + datetime.timedelta(days=1)),
        "self": _cert("self", "self", leaf_key, leaf_key, ca=False, san=san),
    }


@pytest.mark.parametrize("which, host, code, hostname_ok", [
    ("leaf", "www.example.test", 0, True), ("leaf", "127.0.0.1", 0, True),
    ("leaf", "other.test", 62, False), ("leaf", None, 0, None),
    ("expired", "www.example.test", 10, None), ("future", "www.example.test", 9, None),
    ("self", "www.example.test", 18, None)])
def test_chain_outcomes(pki, which, host, code, hostname_ok) -> None:
    result = verify_chain([_der(pki[which])], host, (pki["ca"],))
    assert isinstance(result, ChainResult)
    assert (result.code, result.hostname_ok) == (code, hostname_ok), result.message
    assert result.ok == (code == 0)


def test_chain_without_anchor_or_certificate(pki) -> None:
    other_ca_key = ec.generate_private_key(ec.SECP256R1())
    other_ca = _cert("Other CA", "Other CA", other_ca_key, other_ca_key, ca=True, san=[])
    assert verify_chain([_der(pki["leaf"])], "www.example.test", (other_ca,)).code == 20
    assert verify_chain([_der(pki["leaf"]), _der(pki["ca"])], "www.example.test",
                        (other_ca,)).code == 19
    assert verify_chain([], "x", (pki["ca"],)).message.startswith("1 (")
    assert verify_chain([b"\x30\x03junk"], "x", (pki["ca"],)).code == 1
    assert "no trust store" in verify_chain([_der(pki["leaf"])], "x", ()).message
