"""The path through the certificates a server sends: from the leaf, each next certificate
is a sent one whose subject is the current one's issuer, that the current one's
authorityKeyIdentifier does not rule out and whose key is of its signature's family
(OpenSSL's issuer check, which reads no signature), the first within its dates (OpenSSL's
find_issuer), until a self-signed certificate, none, or MAX_PATH certificates; a link whose
signature fails is OpenSSL's 7.

One walk for everything that judges a chain: the trust verdict (engine/chain.py) names the
problem of the path, not of a certificate the server sent besides it, and the chain check
(probes/checks/chain.py) reports the path, its order and the certificates off it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm

from tlsprobe.engine.certext import invalid_extension
from tlsprobe.engine.certtwin import original_of
from tlsprobe.engine.nameconstraints import same_name
from tlsprobe.model.pubkey import public_key, verify_issued, verify_signed
from tlsprobe.wire.spki import signed_parts

__all__ = [
    "MAX_PATH",
    "ChainPath",
    "akid_fits",
    "anchored",
    "anchors_of",
    "by_names",
    "follow",
    "issued",
    "key_fits",
    "may_issue",
    "openssl_pick",
    "same_key",
    "self_signed",
    "store_issuer",
]

#: the longest path followed (real ones have 2 to 5 certificates; a hostile server's chain
#: of hundreds that certify one another would otherwise cost a signature check per pair)
MAX_PATH = 16


#: the key family of each public key algorithm (OID), and of each signature algorithm
#: (OID, or the arc its algorithms share): OpenSSL's issuer check (ossl_x509_likely_issued)
#: refuses an issuer whose key cannot make the certificate's signature
_KEY_FAMILY = {"1.2.840.113549.1.1.1": "RSA", "1.2.840.113549.1.1.10": "RSA",
               "1.2.840.10045.2.1": "EC", "1.2.840.10040.4.1": "DSA",
               "1.3.101.112": "Ed25519", "1.3.101.113": "Ed448"}
_SIGNATURE_ARCS = (("1.2.840.113549.1.1.", "RSA"), ("1.2.840.10045.4.", "EC"),
                   ("1.2.840.10040.4.3", "DSA"), ("1.3.101.112", "Ed25519"),
                   ("1.3.101.113", "Ed448"))
#: NIST's signature arc 2.16.840.1.101.3.4.3: DSA (1-8), ECDSA (9-12), RSA (13-16) with SHA-2/3
_NIST_SIGNATURES = "2.16.840.1.101.3.4.3."


def _signature_family(dotted: str) -> str | None:
    if dotted.startswith(_NIST_SIGNATURES):
        last = dotted[len(_NIST_SIGNATURES):]
        number = int(last) if last.isdigit() else 0
        if not 1 <= number <= 16:   # ML-DSA, SLH-DSA, ...: not judged here
            return None
        return "DSA" if number <= 8 else "EC" if number <= 12 else "RSA"
    return next((family for arc, family in _SIGNATURE_ARCS
                 if dotted == arc or arc.endswith(".") and dotted.startswith(arc)), None)


def key_fits(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """False when `issuer`'s key is of another family than `cert`'s signature algorithm
    needs (an ECDSA signature and an RSA key); True otherwise, an unknown algorithm
    included."""
    try:
        signed_with = _signature_family(cert.signature_algorithm_oid.dotted_string)
        key = _KEY_FAMILY.get(issuer.public_key_algorithm_oid.dotted_string)
    except ValueError:
        return True
    return signed_with is None or key is None or signed_with == key


def akid_fits(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """`cert`'s authorityKeyIdentifier does not contradict `issuer`, as OpenSSL's
    X509_check_akid reads it: its keyIdentifier is the issuer's subjectKeyIdentifier, its
    authorityCertSerialNumber the issuer's serial number, and its first directory name of
    authorityCertIssuer the issuer's own issuer (each when present)."""
    try:
        aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError, TypeError):
        return True
    if aki.key_identifier is not None:
        try:
            ski = issuer.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError, TypeError):
            ski = None
        if ski is not None and ski.digest != aki.key_identifier:
            return False
    if aki.authority_cert_serial_number is not None and \
            aki.authority_cert_serial_number != issuer.serial_number:
        return False
    names = [g.value for g in aki.authority_cert_issuer or () if isinstance(g, x509.DirectoryName)]
    return not names or names[0] == issuer.issuer


def issued(cert: x509.Certificate, issuer: x509.Certificate) -> bool | None:
    """True: `issuer`'s name is `cert`'s issuer and its key verifies `cert`'s signature;
    None: the names match but the signature cannot be checked here (an algorithm this
    OpenSSL refuses, such as SHA-1 or MD5 signatures); False otherwise, an issuer whose
    key is of another family than the signature's, or that `cert`'s authorityKeyIdentifier
    names another (OpenSSL's issuer check refuses both), and a certificate on either side
    whose extensions OpenSSL cannot cache (certext.py), included."""
    if not may_issue(cert, issuer):
        return False
    original = original_of(cert)
    try:
        if original is not None:   # read through a twin: the signature is over the bytes as sent
            verify_signed(cert, issuer, *signed_parts(original))
        elif cert.issuer.public_bytes() != issuer.subject.public_bytes():
            # named in another form (X509_NAME_cmp's match): the library's check of a
            # direct issue asks the very same name
            verify_signed(cert, issuer, cert.tbs_certificate_bytes, cert.signature)
        else:
            verify_issued(cert, issuer)
    except InvalidSignature:
        return False
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return None
    return True


def self_signed(cert: x509.Certificate) -> bool:
    """Issuer is subject and the certificate's own key signed it (or, when the signature
    cannot be checked here, the names alone say so)."""
    return issued(cert, cert) is not False


def same_key(a: x509.Certificate, b: x509.Certificate) -> bool:
    """`a` and `b` hold the same public key (False when one cannot be read)."""
    try:
        return bool(public_key(a) == public_key(b))
    except (ValueError, TypeError, UnsupportedAlgorithm):   # a key type that cannot be read
        return False


def anchors_of(cert: x509.Certificate, anchors: tuple[x509.Certificate, ...]
               ) -> list[x509.Certificate]:
    """The trust store's certificates that are `cert` (same subject and key, as OpenSSL
    looks it up) or issued it."""
    if invalid_extension(cert) is not None:
        return []
    return [a for a in anchors if invalid_extension(a) is None and (
        (same_name(a.subject, cert.subject) and same_key(a, cert)) or
        (same_name(a.subject, cert.issuer) and issued(cert, a) is not False))]


def anchored(cert: x509.Certificate, anchors: tuple[x509.Certificate, ...]) -> bool:
    """`cert` is in the trust store or issued by a certificate there."""
    return bool(anchors_of(cert, anchors))


@dataclass(frozen=True)
class ChainPath:
    """`indexes`: the path's certificates as positions in the sent chain, leaf (0) first;
    `unchecked`: (certificate, issuer) pairs of the path linked by names only (their
    signature could not be checked here); `unsigned`: such pairs whose signature fails
    (OpenSSL takes that issuer all the same, and says 7); `cut`: the walk stopped at
    MAX_PATH."""

    indexes: tuple[int, ...]
    unchecked: tuple[tuple[int, int], ...] = ()
    cut: bool = False
    unsigned: tuple[tuple[int, int], ...] = ()


def _current(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_before_utc <= now <= cert.not_valid_after_utc


def openssl_pick(candidates: list[int], chain: list[x509.Certificate],
                 now: datetime.datetime) -> int | None:
    """Of the positions of `candidates` (in the sent order), the one OpenSSL's find_issuer
    takes: the first within its dates, else the one that expires last (the first of
    equals); None for none."""
    current = next((j for j in candidates if _current(chain[j], now)), None)
    if current is not None or not candidates:
        return current
    return max(candidates, key=lambda j: chain[j].not_valid_after_utc)


def follow(chain: list[x509.Certificate]) -> ChainPath:
    """The path through `chain` (leaf first; at least one certificate), as OpenSSL's
    find_issuer builds it from the sent certificates: at each step, of those its issuer
    check accepts (`may_issue`: names, key identifier, key family; not the signature),
    the one `openssl_pick` takes (an expired copy of an intermediate sent before a valid
    one is passed over), whether or not its key signed the current one."""
    now = datetime.datetime.now(datetime.UTC)
    path: list[int] = [0]
    unchecked: list[tuple[int, int]] = []
    unsigned: list[tuple[int, int]] = []
    while not self_signed(chain[path[-1]]) and len(path) < MAX_PATH:
        current, taken = chain[path[-1]], [chain[p] for p in path]
        found = openssl_pick([j for j, c in enumerate(chain)   # (a copy of one taken: no)
                              if c not in taken and may_issue(current, c)], chain, now)
        if found is None:
            break
        verdict = issued(current, chain[found])
        if verdict is None:
            unchecked.append((path[-1], found))
        elif verdict is False:
            unsigned.append((path[-1], found))
        path.append(found)
    cut = len(path) == MAX_PATH and not self_signed(chain[path[-1]])
    return ChainPath(tuple(path), tuple(unchecked), cut, tuple(unsigned))


def may_issue(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    """`issuer` is named as `cert`'s issuer, `cert`'s authorityKeyIdentifier does not
    contradict it, its key is of the signature's family (the signature itself is not
    looked at), and OpenSSL can cache the extensions of both."""
    return same_name(cert.issuer, issuer.subject) and key_fits(cert, issuer) and \
        akid_fits(cert, issuer) and invalid_extension(cert) is None and \
        invalid_extension(issuer) is None


def store_issuer(cert: x509.Certificate, anchors: tuple[x509.Certificate, ...],
                 now: datetime.datetime) -> x509.Certificate | None:
    """The trust store's certificate OpenSSL takes for `cert`'s issuer
    (X509_STORE_CTX_get1_issuer): of those its issuer check accepts (names, key identifier,
    key family: not the signature), in the store's order, the first within its dates, else
    the one that expired last; None when there is none (a copy of `cert` itself is none)."""
    found = [a for a in anchors if may_issue(cert, a)
             and not (same_name(a.subject, cert.subject) and same_key(a, cert))]
    current = next((a for a in found if a.not_valid_before_utc <= now <= a.not_valid_after_utc),
                   None)
    if current is not None or not found:
        return current
    return max(found, key=lambda a: a.not_valid_after_utc)   # the first of equals


def by_names(chain: list[x509.Certificate], anchors: tuple[x509.Certificate, ...],
             now: datetime.datetime) -> tuple[list[x509.Certificate], int] | None:
    """The path OpenSSL builds by names (its issuer check reads names and key identifiers,
    not signatures): from the leaf, each next certificate a trust store one that may have
    issued the current one, else a sent one, until a trust store certificate (a
    self-issued one ends the path: the store must hold that very certificate). Returned
    with the position of the first certificate its next one did not sign; None when no
    trust store certificate is reached or every signature holds."""
    path = [chain[0]]
    while len(path) < MAX_PATH:
        current = path[-1]
        if same_name(current.issuer, current.subject):   # self-issued: only as itself
            return None
        anchor = store_issuer(current, anchors, now)
        if anchor is not None:
            path.append(anchor)
            broken = [i for i in range(len(path) - 1) if issued(path[i], path[i + 1]) is False]
            return (path, broken[0]) if broken else None
        picked = openssl_pick([j for j, c in enumerate(chain)
                               if c not in path and may_issue(current, c)], chain, now)
        if picked is None:
            return None
        path.append(chain[picked])
    return None
