"""The second opinion on a chain: `cryptography.x509.verification`'s verifier (RFC 5280
path building with the CA/Browser Forum profile, relaxed where OpenSSL accepts what it
refuses: `_chain_policies`).

engine/chain.py states OpenSSL's verdict from the facts it checks itself (chaincodes.py,
chainpath.py, hostname.py) and asks this verifier too. The verifier is stricter than
OpenSSL in ways no policy setting relaxes (RSA keys of 1963 to 2047 bits, Ed25519,
brainpool and secp256k1 CA keys, SHA-224 signatures, a name constraint with a leading
dot, a version 1 certificate, a negative serial number, ...), so a refusal that none of those facts
explains is no verdict: chain.py reports it as not established, never as "untrusted".
"""

from __future__ import annotations

import datetime
from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509 import verification as xv
from cryptography.x509.oid import ExtendedKeyUsageOID, SignatureAlgorithmOID

from tlsprobe.engine.certtwin import original_of, readable_twin
from tlsprobe.engine.chaincodes import SERVER_USAGES
from tlsprobe.engine.chainpath import MAX_PATH, issued, self_signed
from tlsprobe.engine.nameconstraints import subject_text
from tlsprobe.wire.ber import der_children, der_element

__all__ = ["library_refusal", "plain_link", "second_opinion"]

_EKU_REFUSED = "required EKU not found"
#: signature algorithms and keys every verifier accepts (the library's web PKI policy
#: among them): RSA of 2048 bits or more, the NIST curves, SHA-2 signatures
_PLAIN_SIGNATURES = frozenset({
    SignatureAlgorithmOID.RSA_WITH_SHA256, SignatureAlgorithmOID.RSA_WITH_SHA384,
    SignatureAlgorithmOID.RSA_WITH_SHA512, SignatureAlgorithmOID.ECDSA_WITH_SHA256,
    SignatureAlgorithmOID.ECDSA_WITH_SHA384, SignatureAlgorithmOID.ECDSA_WITH_SHA512})
_PLAIN_CURVES = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)


def _plain_key(cert: x509.Certificate) -> bool:
    try:
        key = cert.public_key()
    except (ValueError, UnsupportedAlgorithm):
        return False
    if isinstance(key, rsa.RSAPublicKey):
        return key.key_size >= 2048
    return isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, _PLAIN_CURVES)


def plain_link(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """`cert` and its issuer have keys, and `cert` a signature algorithm, of the kinds the
    library accepts (and OpenSSL): what it would check of them needs no second opinion."""
    return cert.signature_algorithm_oid in _PLAIN_SIGNATURES and _plain_key(cert) and \
        _plain_key(issuer)


def _server_eku(policy: xv.Policy, cert: x509.Certificate,
                ext: x509.ExtendedKeyUsage | None) -> None:
    """A leaf's extendedKeyUsage, when present, must allow serverAuth (as the server
    verifier requires), or Server Gated Crypto (OpenSSL's sslserver purpose accepts it)."""
    if ext is not None and not SERVER_USAGES & set(ext) \
            and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in ext:
        raise ValueError(_EKU_REFUSED)


def _is_ca(policy: xv.Policy, cert: x509.Certificate,
           ext: x509.BasicConstraints | None) -> None:
    """A CA certificate's basicConstraints must say CA:TRUE, critical or not (OpenSSL does
    not ask it to be critical, RFC 5280 4.2.1.9 asks the CA that issues it)."""
    if ext is None or not ext.ca:
        raise ValueError("basicConstraints of a CA certificate without CA:TRUE")


def _signs_certificates(policy: xv.Policy, cert: x509.Certificate,
                        ext: x509.KeyUsage | None) -> None:
    """A CA certificate's keyUsage, when present, must allow keyCertSign (RFC 5280
    4.2.1.3); absent, it allows every use, as OpenSSL reads it."""
    if ext is not None and not ext.key_cert_sign:
        raise ValueError("keyUsage of a CA certificate without keyCertSign")


def _chain_policies(ca_leaf: bool = False) -> tuple[xv.ExtensionPolicy, xv.ExtensionPolicy]:
    """The server verifier's rules (CA certificates, leaf), as OpenSSL and the clients
    built on it apply them: a CA certificate needs basicConstraints CA:TRUE (critical or
    not), but neither a keyUsage (when present it must allow keyCertSign) nor an authorityKeyIdentifier, and
    a leaf no authorityKeyIdentifier (the CA/Browser Forum profile the library defaults to
    asks all three: a private CA made by `openssl req -x509`, which OpenSSL, curl and
    browsers accept, was 'untrusted'), and a leaf may say CA:TRUE (OpenSSL accepts it).
    An EKU, in the leaf or a CA certificate, must allow serverAuth (the client verifier's
    own rule asks clientAuth). The leaf's subjectAltName may hold anything (or be absent):
    names are matched by engine/hostname.py. `ca_leaf`: the certificate verified is a CA
    certificate (its keyUsage may allow keyCertSign)."""
    agnostic = xv.Criticality.AGNOSTIC
    ca = (xv.ExtensionPolicy.webpki_defaults_ca()
          .may_be_present(x509.ExtendedKeyUsage, agnostic, _server_eku)
          .may_be_present(x509.KeyUsage, agnostic, _signs_certificates)
          .may_be_present(x509.AuthorityKeyIdentifier, agnostic, None)
          .require_present(x509.BasicConstraints, agnostic, _is_ca))
    ee = (xv.ExtensionPolicy.webpki_defaults_ee()
          .may_be_present(x509.ExtendedKeyUsage, agnostic, _server_eku)
          .may_be_present(x509.AuthorityKeyIdentifier, agnostic, None)
          .may_be_present(x509.SubjectAlternativeName, agnostic, None)
          .may_be_present(x509.BasicConstraints, agnostic, None))
    if ca_leaf:   # its name constraints are judged here (nameconstraints.py)
        ee = ee.may_be_present(x509.KeyUsage, agnostic, None) \
            .may_be_present(x509.NameConstraints, agnostic, None)
    return ca, ee


def library_refusal(anchors: tuple[x509.Certificate, ...], now: datetime.datetime,
                    leaf: x509.Certificate, rest: list[x509.Certificate], *,
                    ca_leaf: bool = False) -> str | None:
    """None when the library verifies the chain against `anchors`, else its reason
    (`ca_leaf`: `leaf` is a CA certificate, the path above a leaf checked apart).

    The chain alone is checked: the path to an anchor, signatures, dates, the CA
    certificates and the leaf's extensions as for a server, but not its names (which
    need not be names the library can parse or match: a partial wildcard, an address
    written as a DNS name, an underscore)."""
    try:
        ca, ee = _chain_policies(ca_leaf)
        (xv.PolicyBuilder().store(xv.Store(list(anchors))).time(now)
         .max_chain_depth(MAX_PATH).extension_policies(ca_policy=ca, ee_policy=ee)
         .build_client_verifier().verify(leaf, rest))
    except (xv.VerificationError, ValueError) as exc:
        text = str(exc) or exc.__class__.__name__
        # The library appends a repr of the certificate it was processing: drop it; and says
        # our validator's refusal in its own words: say it as the server verifier does.
        text = text.split(" (encountered processing", 1)[0]
        return "validation failed: " + _EKU_REFUSED if text.endswith(_EKU_REFUSED) else text
    return None


def _named_apart(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """`cert` names `issuer` (chainpath.py compares as OpenSSL does) in another encoding
    than `issuer`'s subject: the library, which compares the two exactly, links them not."""
    try:
        return cert.issuer.public_bytes() != issuer.subject.public_bytes()
    except ValueError:
        return True


def _generalized_before_2050(cert: x509.Certificate) -> bool:
    """`cert`'s validity holds a GeneralizedTime of a year before 2050."""
    try:
        der = cert.public_bytes(Encoding.DER)
        tbs = der_children(der, *der_element(der, 0, len(der))[1:])[0]
        fields = der_children(der, tbs[1], tbs[2])
    except ValueError:
        return False
    at = 4 if fields and fields[0][0] == 0xA0 else 3
    try:
        times = der_children(der, fields[at][1], fields[at][2]) if len(fields) > at else []
    except ValueError:
        return False
    return any(tag == 0x18 and der[start:start + 4] < b"2050" for tag, start, _ in times)


@lru_cache(maxsize=8)
def _roots(anchors: tuple[x509.Certificate, ...]) -> tuple[x509.Certificate, ...]:
    """The self-signed certificates of the trust store: the only ones OpenSSL anchors a
    path at (without -partial_chain), and so the library's store."""
    return tuple(a for a in anchors if self_signed(a))


def second_opinion(path: list[x509.Certificate], rest: list[x509.Certificate],
                   anchors: tuple[x509.Certificate, ...], now: datetime.datetime
                   ) -> str | None:
    """The library's refusal of the path (leaf first, the trust store's certificate
    last; `rest`: the sent certificates but the leaf), or None. Certificates it cannot
    read in a form OpenSSL reads (certtwin.readable_twin), those whose issuer's name is
    written in another form than their own issuer name (another case, other spaces,
    another string type: X509_NAME_cmp finds that issuer, the library compares names
    exactly and finds none), and those with a GeneralizedTime before 2050 (RFC 5280
    4.1.2.5 asks a UTCTime, the library refuses it, OpenSSL reads it), are judged here alone, their signatures checked, their links
    of kinds the library accepts: it checks the path above the last of them."""
    twins = [i for i, cert in enumerate(path)
             if readable_twin(cert) is not cert or original_of(cert) is not None
             or i + 1 < len(path) and _named_apart(cert, path[i + 1])
             or _generalized_before_2050(cert)]
    if not twins:   # the path's own intermediates, a trust store's among them
        return library_refusal(_roots(anchors), now, path[0], _intermediates(path, rest))
    if any(issued(path[i], path[i + 1]) is not True for i in range(len(path) - 1)):
        return (f"the signatures of the path from {subject_text(path[0])} cannot all be "
                "checked here")
    odd = next((path[i] for i in range(min(twins[-1] + 1, len(path) - 1))
                if not plain_link(path[i], path[i + 1])), None)
    if odd is not None:
        return (f"it cannot check {subject_text(odd)} as OpenSSL does (a form it does not "
                "read, or its issuer named in another form), and would judge its key, "
                "signature or issuer's key in its own way")
    if twins[-1] + 2 >= len(path):   # above the last one: the trust store's certificate
        return None
    above = path[twins[-1] + 1]
    return library_refusal(_roots(anchors), now, above,
                           [c for c in _intermediates(path, rest) if c is not above],
                           ca_leaf=True)


def _intermediates(path: list[x509.Certificate], rest: list[x509.Certificate]
                   ) -> list[x509.Certificate]:
    """The certificates the library may build with: the path's own (its trust store ones
    that are not self-signed included: OpenSSL takes issuers from the store first), then
    the rest the server sent."""
    own = [c for c in path[1:] if not self_signed(c)]
    return own + [c for c in rest if all(c is not o for o in own)]
