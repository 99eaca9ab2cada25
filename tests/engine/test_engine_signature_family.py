"""engine/chainpath.py's issuer check by key family (OpenSSL's ossl_x509_likely_issued):
the family a signature algorithm needs, read from its OID; an algorithm it does not know
(ML-DSA, SLH-DSA, a malformed arc) is not judged, so no issuer is refused for it."""

from __future__ import annotations

import pytest

from tlsprobe.engine.chainpath import _signature_family


@pytest.mark.parametrize(("oid", "family"), [
    ("1.2.840.113549.1.1.11", "RSA"),        # sha256WithRSAEncryption
    ("1.2.840.113549.1.1.10", "RSA"),        # RSASSA-PSS
    ("1.2.840.10045.4.3.2", "EC"),           # ecdsa-with-SHA256
    ("1.2.840.10040.4.3", "DSA"),            # dsa-with-sha1
    ("2.16.840.1.101.3.4.3.2", "DSA"),       # id-dsa-with-sha256
    ("2.16.840.1.101.3.4.3.10", "EC"),       # id-ecdsa-with-sha3-256
    ("2.16.840.1.101.3.4.3.14", "RSA"),      # id-rsassa-pkcs1-v1_5-with-sha3-256
    ("1.3.101.112", "Ed25519"),
    ("1.3.101.113", "Ed448"),
    ("2.16.840.1.101.3.4.3.17", None),       # id-ml-dsa-44
    ("2.16.840.1.101.3.4.3.20", None),       # SLH-DSA
    ("2.16.840.1.101.3.4.3.9.1", None),      # not an algorithm of the arc
    ("2.16.840.1.101.3.4.3.", None),
    ("1.3.101.1120", None),
    ("1.2.3.4", None),
])
def test_the_family_a_signature_needs(oid: str, family: str | None) -> None:
    assert _signature_family(oid) == family
