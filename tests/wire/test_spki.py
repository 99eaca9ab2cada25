"""wire/spki.py: an EC certificate's named curve read from the DER, as cryptography reads it.

The group audit takes the curve of an ECDSA certificate (TLS 1.2 needs it in the client's
list) from the DER alone, so that it imports no `cryptography` (scan start-up, issue 35);
these certificates, made by cryptography, must give the curve cryptography gives, and no
curve for any other key.
"""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from tlsprobe.probes.audit.groups import _CERT_CURVES
from tlsprobe.wire.spki import ec_named_curve


def _certificate(key: object, *, v1: bool = False) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "spki.test")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    builder = x509.CertificateBuilder().subject_name(name).issuer_name(name) \
        .public_key(key.public_key()).serial_number(x509.random_serial_number()) \
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
    if not v1:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                        critical=True)
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(key, algorithm).public_bytes(serialization.Encoding.DER)


@pytest.mark.parametrize("curve", [ec.SECP256R1(), ec.SECP384R1(), ec.SECP521R1(),
                                   ec.SECP256K1(), ec.BrainpoolP256R1()])
def test_the_curve_of_an_ec_certificate_is_cryptographys(curve: ec.EllipticCurve) -> None:
    der = _certificate(ec.generate_private_key(curve))
    key = x509.load_der_x509_certificate(der).public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    oid = ec_named_curve(der)
    assert oid is not None
    # the group audit's table names the curve cryptography names
    names = {0x17: "secp256r1", 0x18: "secp384r1", 0x19: "secp521r1"}
    assert names.get(_CERT_CURVES.get(oid, 0)) == (key.curve.name if key.curve.name in
                                                    names.values() else None)


def test_other_keys_have_no_curve() -> None:
    assert ec_named_curve(_certificate(rsa.generate_private_key(65537, 2048))) is None
    assert ec_named_curve(_certificate(ed25519.Ed25519PrivateKey.generate())) is None
    # a version 1 certificate (no [0] version field) is walked the same way
    assert ec_named_curve(_certificate(ec.generate_private_key(ec.SECP384R1()), v1=True)) \
        == "1.3.132.0.34"


@pytest.mark.parametrize("der", [b"", b"\x30", b"\x30\x05\x30\x03\x02\x01", b"\x02\x01\x00",
                                 b"\x30\x84\xff\xff\xff\xff", b"garbage" * 10])
def test_what_is_not_a_certificate_is_a_value_error(der: bytes) -> None:
    with pytest.raises(ValueError):
        ec_named_curve(der)


def test_a_truncated_certificate_is_a_value_error() -> None:
    der = _certificate(ec.generate_private_key(ec.SECP256R1()))
    for cut in (10, len(der) // 2, len(der) - 1):
        with pytest.raises(ValueError):
            ec_named_curve(der[:cut])
