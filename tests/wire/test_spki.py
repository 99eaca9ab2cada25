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

from tests.helpers.bercert import (
    EDITS,
    WHOLE_EDITS,
    children,
    indefinite,
    issued,
    mangled,
    tlv,
)
from tlsprobe.model.pubkey import certificate_key
from tlsprobe.probes.audit.groups import _CERT_CURVES
from tlsprobe.wire.ber import ber_element
from tlsprobe.wire.spki import (
    EC_PUBLIC_KEY,
    certificate_shape,
    der_certificate,
    ec_named_curve,
    extension_oids,
    spki_algorithm,
    subject_public_key_info,
)


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


# -- certificates cryptography refuses as a whole (BER lengths OpenSSL reads) -------------
@pytest.mark.parametrize("edit", [*EDITS, *WHOLE_EDITS])
def test_the_key_of_a_ber_certificate_is_cryptographys_key_of_the_der_one(edit: str) -> None:
    """The edited certificate (tests/helpers/bercert.py) does not load in cryptography; its
    outline is a certificate's, and its subjectPublicKeyInfo, in DER, is the very key of
    the certificate before the edit."""
    chain = issued(rsa.generate_private_key(65537, 2048) if edit.startswith("rsa") else None,
                   ca_name="BER@Test CA" if "printable" in edit else "BER Test CA")
    der = mangled(chain, edit)
    with pytest.raises((ValueError, x509.InvalidVersion)):   # (v2, v4: no ValueError)
        x509.load_der_x509_certificate(der)
    certificate_shape(der)
    expected = x509.load_der_x509_certificate(chain.leaf_der).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert subject_public_key_info(der, key_too=True) == expected
    loads = edit != "rsa-key-long-lengths"   # the key's own lengths need key_too
    assert (subject_public_key_info(der) == expected) is loads
    assert spki_algorithm(der) == ("1.2.840.113549.1.1.1" if edit.startswith("rsa")
                                   else EC_PUBLIC_KEY)
    assert certificate_key(der)[0].public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) == expected


def test_an_ec_point_is_taken_as_it_is() -> None:
    """An EC point is no DER element, though its bytes may look like one: it is never
    rewritten unless key_too is asked (a key that did not load as it was)."""
    der = _certificate(ec.generate_private_key(ec.SECP256R1()))
    spki = x509.load_der_x509_certificate(der).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert subject_public_key_info(der) == spki


@pytest.mark.parametrize("der", [b"", b"\x30\x00", b"\x30\x03\x02\x01\x00", b"garbage" * 10,
                                 b"\x30\x80\x30\x00\x30\x00\x03\x01\x00\x00\x00"])
def test_what_has_no_certificates_outline_is_a_value_error(der: bytes) -> None:
    with pytest.raises(ValueError):
        certificate_shape(der)
    with pytest.raises(ValueError):
        subject_public_key_info(der)


def test_trailing_bytes_or_a_fourth_field_are_no_certificate() -> None:
    der = _certificate(ec.generate_private_key(ec.SECP256R1()))
    certificate_shape(der)
    with pytest.raises(ValueError, match="after the certificate"):
        certificate_shape(der + b"\x00")
    body = children(der)
    with pytest.raises(ValueError, match="more than three"):
        certificate_shape(tlv(0x30, b"".join(body) + b"\x05\x00"))
    for cut in (10, len(der) // 2, len(der) - 1):
        with pytest.raises(ValueError):
            certificate_shape(der[:cut])


def _tbs_field_replaced(index: int, field: bytes) -> bytes:
    der = _certificate(ec.generate_private_key(ec.SECP256R1()))
    tbs, algorithm, signature = children(der)
    fields = children(tbs)
    fields[index] = field
    return tlv(0x30, tlv(0x30, b"".join(fields)) + algorithm + signature)


@pytest.mark.parametrize("index, field", [
    (1, tlv(0x04, b"\x01")),                                   # serial not an INTEGER
    (2, tlv(0x30, tlv(0x02, b"\x01"))),                        # algorithm without its OID
    (3, tlv(0x30, tlv(0x30, b""))),                            # issuer: a SEQUENCE, no SET
    (4, tlv(0x30, tlv(0x02, b"\x01") * 2)),                    # validity of two INTEGERs
    (4, tlv(0x30, tlv(0x17, b"260101000000Z") * 3)),           # three times
    (6, tlv(0x30, tlv(0x30, tlv(0x06, b"\x2a\x03")))),         # key without its BIT STRING
    (7, tlv(0xA3, tlv(0x30, tlv(0x30, tlv(0x06, b"\x2a\x03"))))),   # extension, no value
    (7, tlv(0xA3, tlv(0x04, b""))),                            # extensions not a SEQUENCE
])
def test_a_tbs_field_of_another_type_is_no_certificate(index: int, field: bytes) -> None:
    """OpenSSL's decoder refuses these (the fields' ASN.1 types), so the engine's guard
    still refuses them as unparsable: only lengths and values may be what DER forbids."""
    with pytest.raises(ValueError):
        certificate_shape(_tbs_field_replaced(index, field))
    certificate_shape(_tbs_field_replaced(7, tlv(0xA3, tlv(0x30, tlv(0x30, tlv(
        0x06, b"\x2a\x03") + tlv(0x01, b"\x00") + tlv(0x04, b"")))))) # a known-good control


def test_indefinite_lengths_as_openssl_reads_them() -> None:
    """Constructed elements only (a primitive one is refused, as ASN1_get_object refuses
    it), nested at most 30 deep, each ended by its end-of-contents within its container."""
    nested = b"\x05\x00"
    for _ in range(30):
        nested = indefinite(tlv(0x30, nested))
    assert ber_element(nested, 0, len(nested))[3] == len(nested)
    deeper = indefinite(tlv(0x30, nested))
    with pytest.raises(ValueError, match="too deep"):
        ber_element(deeper, 0, len(deeper))
    with pytest.raises(ValueError, match="primitive"):
        ber_element(b"\x04\x80\x00\x00", 0, 4)
    with pytest.raises(ValueError, match="end-of-contents"):
        ber_element(b"\x30\x80\x05\x00\x00\x00", 0, 5)   # its end past the container
    # a long form of nine bytes whose value fits eight (leading zeros skipped)
    assert ber_element(b"\x04\x89" + bytes(8) + b"\x01\xaa", 0, 12)[1:3] == (11, 12)


@pytest.mark.parametrize("edit", ["serial-long-length", "tbs-indefinite-length"])
def test_the_extension_oids_are_cryptographys(edit: str) -> None:
    chain = issued()
    want = [e.oid.dotted_string for e in x509.load_der_x509_certificate(chain.leaf_der).extensions]
    assert want == ["2.5.29.17"]
    assert extension_oids(mangled(chain, edit)) == want
    assert extension_oids(chain.ca_der) == ["2.5.29.19"]


@pytest.mark.parametrize("edit", [e for e in [*EDITS, *WHOLE_EDITS] if "length" in e])
def test_a_certificate_in_ber_lengths_is_the_der_one_in_der(edit: str) -> None:
    """der_certificate writes each length as DER does, nothing else: the tbsCertificate of
    a certificate edited in its lengths alone is the one before the edit, byte for byte
    (its signature, over the bytes as sent, is the edited one's)."""
    chain = issued(rsa.generate_private_key(65537, 2048) if edit.startswith("rsa") else None)
    der = mangled(chain, edit)
    twin = der_certificate(der)
    assert children(twin)[0] == children(chain.leaf_der)[0]
    x509.load_der_x509_certificate(twin)
    with pytest.raises(ValueError):
        der_certificate(der[:-1])
