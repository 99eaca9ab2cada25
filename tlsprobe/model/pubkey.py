"""Certificates and their public keys without `cryptography`'s deprecation warnings.

cryptography 51 deprecates DSA: naming `dsa.DSAPublicKey` and loading a DSA key
(`Certificate.public_key()` of a DSA certificate) each emit a
`CryptographyDeprecationWarning`. A server may still present a DSA certificate (DHE-DSS
suites, old appliances), and tlsprobe must recognise it and check its signatures without a
warning reaching the user. Every place that takes a certificate's key or asks whether a key
is DSA goes through here: the warning is silenced for exactly those two operations (its
message and category), nothing else. Loading a certificate whose serial number is not
positive (0 or negative: test CAs, appliances) warns too, on stderr by default: every DER
certificate from the network is loaded with `load_certificate`, quiet for that warning.
"""
from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from cryptography.utils import CryptographyDeprecationWarning

if TYPE_CHECKING:   # X.509 (0.01 s of imports) with the first certificate, not at start-up
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import (
        CertificatePublicKeyTypes,
        PublicKeyTypes,
    )

__all__ = ["RSASSA_PSS", "certificate_key", "distinguished_name", "is_dsa_key",
           "load_certificate", "load_public_key", "pss_only", "public_key", "verify_issued",
           "verify_signed"]

# catch_warnings swaps process-wide state: one thread at a time (the resolver threads of
# net/ never get here, but an API user may run probes in threads)
_LOCK = threading.Lock()


@contextmanager
def _quiet(message: str) -> Iterator[None]:
    """`cryptography`'s deprecation warning whose text starts with `message` is not shown."""
    with _LOCK, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=message,
                                category=CryptographyDeprecationWarning)
        yield


_DSA = "DSA is deprecated"


with _quiet(_DSA):
    from cryptography.hazmat.primitives.asymmetric import dsa
    _DSA_PUBLIC_KEY: type[Any] = dsa.DSAPublicKey


def is_dsa_key(key: object) -> TypeGuard[dsa.DSAPublicKey]:
    """True for a DSA public key (on every cryptography release, without a warning)."""
    return isinstance(key, _DSA_PUBLIC_KEY)


def pss_only(cert: x509.Certificate) -> bool:
    """The certificate's key is an RSASSA-PSS key (id-RSASSA-PSS, RFC 4055), which signs
    only with PSS (TLS rsa_pss_pss_*), not an rsaEncryption one (rsa_pkcs1_*,
    rsa_pss_rsae_*): `cryptography` loads both as an RSAPublicKey."""
    from cryptography.x509.oid import PublicKeyAlgorithmOID
    try:
        return cert.public_key_algorithm_oid == PublicKeyAlgorithmOID.RSASSA_PSS
    except ValueError:
        return False


def public_key(cert: x509.Certificate) -> Any:
    """`cert.public_key()`, quiet for a DSA key. Raises what `public_key()` raises
    (ValueError, UnsupportedAlgorithm) for a key cryptography cannot load."""
    from cryptography.x509.oid import PublicKeyAlgorithmOID
    try:
        is_dsa = cert.public_key_algorithm_oid == PublicKeyAlgorithmOID.DSA
    except ValueError:
        is_dsa = True  # cannot tell from the OID: load it quietly
    if not is_dsa:
        return cert.public_key()
    with _quiet(_DSA):
        return cert.public_key()


def verify_issued(cert: x509.Certificate, issuer: x509.Certificate) -> None:
    """`cert.verify_directly_issued_by(issuer)`, quiet for a DSA issuer key (which that
    loads: the trust check of a DSA chain). Raises what it raises."""
    from cryptography.x509.oid import PublicKeyAlgorithmOID
    try:
        is_dsa = issuer.public_key_algorithm_oid == PublicKeyAlgorithmOID.DSA
    except ValueError:
        is_dsa = True
    if not is_dsa:
        cert.verify_directly_issued_by(issuer)
        return
    with _quiet(_DSA):
        cert.verify_directly_issued_by(issuer)


def verify_signed(cert: x509.Certificate, issuer: x509.Certificate, tbs: bytes,
                  signature: bytes) -> None:
    """`issuer`'s key verifies `signature` over `tbs` with `cert`'s signature algorithm
    (its hash and padding, as `verify_directly_issued_by` takes them): the signature of a
    certificate read through a copy (engine/certtwin.py), over the bytes as sent. Raises
    InvalidSignature, or what the key's `verify` raises; UnsupportedAlgorithm for a key
    that signs nothing."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import (
        ec,
        ed448,
        ed25519,
        padding,
        rsa,
    )
    key = public_key(issuer)
    params = cert.signature_algorithm_parameters
    digest = cert.signature_hash_algorithm
    if isinstance(key, rsa.RSAPublicKey) and isinstance(params, (padding.PKCS1v15, padding.PSS)) \
            and digest is not None:
        key.verify(signature, tbs, params, digest)
    elif isinstance(key, ec.EllipticCurvePublicKey) and isinstance(params, ec.ECDSA):
        key.verify(signature, tbs, params)
    elif isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        key.verify(signature, tbs)
    elif is_dsa_key(key) and digest is not None:
        with _quiet(_DSA):
            key.verify(signature, tbs, digest)
    else:
        raise UnsupportedAlgorithm("a signature this key does not make")


def load_public_key(spki: bytes) -> PublicKeyTypes:
    """`serialization.load_der_public_key(spki)` of a DER SubjectPublicKeyInfo, quiet for a
    DSA key. Raises what that raises (ValueError, UnsupportedAlgorithm)."""
    from cryptography.hazmat.primitives import serialization
    with _quiet(_DSA):
        return serialization.load_der_public_key(spki)


#: id-RSASSA-PSS (RFC 4055): a key that signs with PSS only (`pss_only`)
RSASSA_PSS = "1.2.840.113549.1.1.10"
#: dhpublicnumber (RFC 3279 2.3.3) and PKCS #3 dhKeyAgreement: keys that sign nothing
_DH_KEYS = frozenset({"1.2.840.10046.2.1", "1.2.840.113549.1.3.1"})


def certificate_key(der: bytes) -> tuple[CertificatePublicKeyTypes, bool]:
    """The public key of a DER certificate and whether it is an RSASSA-PSS key (`pss_only`).
    A certificate `cryptography` refuses as a whole (lengths in BER's longer forms, a time
    without seconds: OpenSSL reads it, and a server's handshake with it is valid) gives its
    key from its subjectPublicKeyInfo, read by wire/spki.py, loaded by `load_public_key`.
    Raises ValueError when neither reads it (the text is `cryptography`'s reason for the
    certificate, or the key's own), UnsupportedAlgorithm for a key it cannot load."""
    try:
        cert = load_certificate(der)
    except ValueError as refused:
        return _outlined_key(der, refused)
    return public_key(cert), pss_only(cert)


def _outlined_key(der: bytes, refused: ValueError) -> tuple[CertificatePublicKeyTypes, bool]:
    """`certificate_key` of a certificate `cryptography` does not load."""
    from tlsprobe.wire import spki
    try:
        spki.certificate_shape(der)
        algorithm = spki.spki_algorithm(der)
        found = spki.subject_public_key_info(der)
        deep = spki.subject_public_key_info(der, key_too=True)
    except ValueError:   # not a certificate by its outline either
        raise refused from None
    if algorithm in _DH_KEYS:   # no certificate key (nor a DH class named: it warns)
        from cryptography.exceptions import UnsupportedAlgorithm
        raise UnsupportedAlgorithm("a Diffie-Hellman key signs nothing")
    try:
        key = load_public_key(found)
    except ValueError:   # its key's own lengths in a longer form too
        key = load_public_key(deep)
    return cast("CertificatePublicKeyTypes", key), algorithm == RSASSA_PSS


def load_certificate(der: bytes) -> x509.Certificate:
    """`x509.load_der_x509_certificate(der)`, quiet for a serial number that is not
    positive (the warning says a future cryptography will refuse it). Raises ValueError for
    DER that is not a certificate, and for a version other than v1 and v3 (cryptography's
    InvalidVersion, which is no ValueError: OpenSSL reads a v2 or v4 certificate, and
    wire/dertwin.py reads it so too)."""
    from cryptography import x509
    with _quiet("Parsed a serial number which wasn't positive"):
        try:
            return x509.load_der_x509_certificate(der)
        except x509.InvalidVersion as exc:
            raise ValueError(str(exc)) from None


def distinguished_name(der: bytes) -> str:
    """A DER distinguished name from the network (a CertificateRequest's certificate
    authorities) as RFC 4514 text, as `openssl s_client` lists "Acceptable client
    certificate CA names" (the text is the server's: shown escaped, as all network text);
    one that does not parse says so with its bytes in hex."""
    from cryptography import x509
    try:
        return x509.Name.from_bytes(der).rfc4514_string() or "(empty name)"
    except ValueError:
        return f"(unparsable name {der.hex()})"
