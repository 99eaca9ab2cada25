"""OpenSSL's checks of a certificate path, stated from the certificates' own facts, each
with its X509_V_ERR code: what `openssl s_client -verify_return_error` stops at.

`path` is the leaf first and the trust store's certificate last. OpenSSL checks, in this
order: the leaf's key (66), the chain's building (engine/chain.py), each certificate's
extensions from the leaf up (34 an unhandled critical extension, 79 not a CA, 94 an EC
key of explicit curve parameters in a path of two or more, 26 no server purpose, 25 path
length; the trust store's certificate included), the CA
keys and signature digests (67, 68), the host name (62), signatures and dates from the
root down (9, 10), then name constraints (47, 48, 49, 51, 53: nameconstraints.py). Keys are judged at security level 2,
the default of Debian's OpenSSL and of OpenSSL 3.2 and later (112 bits: RSA and DSA of
2048 bits, EC of 224). Each function returns the first problem as (code, detail) or None.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID

from tlsprobe.engine.chainpath import self_signed
from tlsprobe.engine.nameconstraints import (
    V_EXCLUDED,
    V_PERMITTED,
    V_SUBTREE_MINMAX,
    V_UNSUPPORTED_CONSTRAINT_TYPE,
    V_UNSUPPORTED_NAME_SYNTAX,
    extension_of,
    same_name,
    subject_text,
)
from tlsprobe.engine.verify import key_kind
from tlsprobe.model.pubkey import is_dsa_key, public_key
from tlsprobe.wire.spki import ec_explicit_parameters

V_PATH_LENGTH = 25
V_UNHANDLED_CRITICAL = 34
V_PURPOSE = 26
V_EE_KEY_WEAK = 66
V_CA_KEY_WEAK = 67
V_CA_MD_TOO_WEAK = 68
V_INVALID_CA = 79
V_EC_KEY_EXPLICIT_PARAMS = 94

REASONS = {V_PATH_LENGTH: "path length constraint exceeded",
           V_UNHANDLED_CRITICAL: "unhandled critical extension",
           V_PURPOSE: "unsuitable certificate purpose",
           V_PERMITTED: "permitted subtree violation",
           V_EXCLUDED: "excluded subtree violation",
           V_UNSUPPORTED_NAME_SYNTAX: "unsupported or invalid name syntax",
           V_SUBTREE_MINMAX: "name constraints minimum and maximum not supported",
           V_UNSUPPORTED_CONSTRAINT_TYPE: "unsupported name constraint type",
           V_EE_KEY_WEAK: "EE certificate key too weak",
           V_CA_KEY_WEAK: "CA certificate key too weak",
           V_CA_MD_TOO_WEAK: "CA signature digest algorithm too weak",
           V_INVALID_CA: "invalid CA certificate",
           V_EC_KEY_EXPLICIT_PARAMS: "Certificate public key has explicit ECC parameters"}

Problem = tuple[int, str]

#: the smallest RSA modulus OpenSSL rates at 112 bits or more: its estimate (NIST SP
#: 800-56B's formula in fixed point) of 1962 bits is 104, of 1963 bits 112 (measured with
#: `openssl verify -auth_level 2`)
RSA_MIN_BITS = 1963


#: the extensions OpenSSL handles (X509_supported_extension): any other one marked critical
#: is 34. Measured with `openssl verify` (3.0): a critical authority or subject key
#: identifier, authorityInfoAccess, TLS feature or SCT list is 34
HANDLED_EXTENSIONS = frozenset({
    "2.16.840.1.113730.1.1",   # Netscape certificate type
    "2.5.29.15", "2.5.29.17", "2.5.29.19",   # keyUsage, subjectAltName, basicConstraints
    "2.5.29.30", "2.5.29.31", "2.5.29.32",   # name constraints, CRL DPs, policies
    "2.5.29.33", "2.5.29.36", "2.5.29.37",   # policy mappings, policy constraints, EKU
    "2.5.29.54",                             # inhibitAnyPolicy
    "1.3.6.1.5.5.7.1.7", "1.3.6.1.5.5.7.1.8",   # RFC 3779 addresses and AS numbers
    "1.3.6.1.5.5.7.1.14", "1.3.6.1.5.5.7.48.1.5",   # proxyCertInfo, OCSP no check
})


_NETSCAPE_TYPE = x509.ObjectIdentifier("2.16.840.1.113730.1.1")
#: the extendedKeyUsage purposes OpenSSL's sslserver purpose accepts (XKU_SSL_SERVER and
#: XKU_SGC: Microsoft's and Netscape's Server Gated Crypto), measured with `openssl verify`
SERVER_USAGES = frozenset({ExtendedKeyUsageOID.SERVER_AUTH,
                           x509.ObjectIdentifier("1.3.6.1.4.1.311.10.3.3"),
                           x509.ObjectIdentifier("2.16.840.1.113730.4.1")})


def weak_key(cert: x509.Certificate) -> str | None:
    """How the key falls short of 112 bits of security, or None (strong enough, or of a
    kind judged elsewhere)."""
    try:
        key = public_key(cert)
    except (ValueError, UnsupportedAlgorithm):
        return None
    if isinstance(key, rsa.RSAPublicKey):
        weak = key.key_size < RSA_MIN_BITS
    elif isinstance(key, ec.EllipticCurvePublicKey):
        weak = key.curve.key_size < 224
    elif is_dsa_key(key):
        weak = key.key_size < 2048 or key.parameters().parameter_numbers().q.bit_length() < 224
    else:
        return None
    if not weak:
        return None
    return f"{subject_text(cert)} has an {key_kind(key)} key, under 112 bits of security " \
        "(OpenSSL's security level 2)"


def _netscape_type(cert: x509.Certificate) -> int | None:
    """The first byte of the Netscape certificate type bits (sslServer 0x40, SSL CA 0x04,
    S/MIME CA 0x02, object signing CA 0x01), as OpenSSL reads it; None when absent."""
    try:
        found = cert.extensions.get_extension_for_oid(_NETSCAPE_TYPE).value
    except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError, TypeError):
        return None
    value = found.value if isinstance(found, x509.UnrecognizedExtension) else b""
    if len(value) < 3 or value[0] != 0x03:   # not a BIT STRING: OpenSSL would not read it
        return None
    return value[3] if len(value) > 3 else 0


def _netscape_ca(cert: x509.Certificate) -> bool:
    return bool((_netscape_type(cert) or 0) & 0x07)


def _not_ca(cert: x509.Certificate, top: bool) -> str | None:
    """Why an issuing certificate is no CA certificate for OpenSSL (X509_check_ca), or
    None. The top of the path (the trust store's certificate) may also be a CA without
    basicConstraints, as OpenSSL allows there only: a version 1 self-signed certificate,
    one with a keyUsage (allowing keyCertSign), or one of a Netscape CA type."""
    bc = extension_of(cert, x509.BasicConstraints)
    ku = extension_of(cert, x509.KeyUsage)
    if isinstance(ku, x509.KeyUsage) and not ku.key_cert_sign:
        return "its keyUsage does not allow keyCertSign"
    if isinstance(bc, x509.BasicConstraints):
        return None if bc.ca else "its basicConstraints say CA:FALSE"
    if top and ((cert.version == x509.Version.v1 and self_signed(cert)) or ku is not None
                or _netscape_ca(cert)):
        return None
    return "it has no basicConstraints"


def _not_server(cert: x509.Certificate, leaf: bool) -> str | None:
    """Why `cert` may not serve a TLS server (OpenSSL's purpose sslserver), or None: an
    extendedKeyUsage without serverAuth; a leaf's keyUsage for none of the TLS uses, or
    Netscape certificate type without SSL server; a CA by its Netscape type alone (at the
    top of the path) that is no SSL CA."""
    eku = extension_of(cert, x509.ExtendedKeyUsage)
    if isinstance(eku, x509.ExtendedKeyUsage) and not SERVER_USAGES & set(eku):
        return "its extendedKeyUsage does not include serverAuth (nor Server Gated Crypto)"
    ku = extension_of(cert, x509.KeyUsage)
    if leaf and isinstance(ku, x509.KeyUsage) and not (
            ku.digital_signature or ku.key_encipherment or ku.key_agreement):
        return "its keyUsage has none of digitalSignature, keyEncipherment, keyAgreement"
    netscape = _netscape_type(cert)
    if leaf and netscape is not None and not netscape & 0x40:
        return "its Netscape certificate type does not include SSL server"
    if not leaf and netscape is not None and ku is None and \
            extension_of(cert, x509.BasicConstraints) is None and not netscape & 0x04:
        return "its Netscape certificate type makes it a CA, but not an SSL CA"
    return None


def _explicit_curve(cert: x509.Certificate) -> bool:
    """`cert`'s EC key has explicit curve parameters (OpenSSL's check_curve)."""
    try:
        return ec_explicit_parameters(cert.public_bytes(Encoding.DER))
    except ValueError:
        return False


def unhandled_critical(cert: x509.Certificate) -> str | None:
    """The OID of `cert`'s first critical extension OpenSSL does not handle, or None (an
    unreadable extension list included: not judged here)."""
    try:
        return next((e.oid.dotted_string for e in cert.extensions
                     if e.critical and e.oid.dotted_string not in HANDLED_EXTENSIONS), None)
    except (x509.DuplicateExtension, ValueError, TypeError):
        return None


def extension_problem(path: list[x509.Certificate]) -> Problem | None:
    """Each certificate from the leaf up: a critical extension OpenSSL does not handle
    (34), an issuer that is no CA (79), a certificate not for a TLS server (26), a CA with
    more CA certificates below it than its pathLenConstraint allows (25)."""
    below = 0   # certificates below the current one that count for pathLenConstraint
    for depth, cert in enumerate(path):
        critical = unhandled_critical(cert)
        if critical is not None:
            return V_UNHANDLED_CRITICAL, (f"{subject_text(cert)} has a critical extension OpenSSL "
                                          f"does not handle ({critical})")
        not_ca = _not_ca(cert, depth == len(path) - 1) if depth else None
        if not_ca is not None:
            return V_INVALID_CA, f"{subject_text(cert)} issues a certificate, but {not_ca}"
        if len(path) > 1 and _explicit_curve(cert):
            return V_EC_KEY_EXPLICIT_PARAMS, (f"{subject_text(cert)} has an EC key whose curve is "
                                              "given by explicit parameters, not by name")
        not_server = _not_server(cert, depth == 0)
        if not_server is not None:
            return V_PURPOSE, f"{subject_text(cert)} is not for a TLS server: {not_server}"
        bc = extension_of(cert, x509.BasicConstraints)
        if depth > 1 and isinstance(bc, x509.BasicConstraints) and \
                bc.path_length is not None and below > bc.path_length + 1:
            return V_PATH_LENGTH, (f"{subject_text(cert)} allows {bc.path_length} CA "
                                   f"certificate(s) below it, the path has {below - 1}")
        if depth == 0 or not same_name(cert.subject, cert.issuer):
            below += 1
    return None


def _weak_digest(cert: x509.Certificate) -> str | None:
    try:
        algorithm = cert.signature_hash_algorithm
    except UnsupportedAlgorithm:
        return None
    if isinstance(algorithm, (hashes.MD5, hashes.SHA1)):
        name = "MD5" if isinstance(algorithm, hashes.MD5) else "SHA-1"
        return f"{subject_text(cert)} is signed with {name}, which the verifier refuses"
    return None


def auth_level_problem(path: list[x509.Certificate], keys: bool = True) -> Problem | None:
    """The CA keys under 112 bits (67; not without `keys`) and MD5 or SHA-1 signatures
    (68) from the leaf up; the last certificate's own signature does not count (it is
    trusted as it is), nor a self-signed one's."""
    for depth, cert in enumerate(path):
        weak = weak_key(cert) if depth and keys else None
        if weak is not None:
            return V_CA_KEY_WEAK, weak
        digest = None if depth == len(path) - 1 or self_signed(cert) else _weak_digest(cert)
        if digest is not None:
            return V_CA_MD_TOO_WEAK, digest
    return None
