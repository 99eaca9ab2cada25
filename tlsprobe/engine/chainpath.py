"""The path through the certificates a server sends: from the leaf, each next certificate
is a sent one whose subject is the current one's issuer and whose key verifies its
signature, until a self-signed certificate, none, or MAX_PATH certificates.

One walk for everything that judges a chain: the trust verdict (engine/chain.py) names the
problem of the path, not of a certificate the server sent besides it, and the chain check
(probes/checks/chain.py) reports the path, its order and the certificates off it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm

from tlsprobe.model.pubkey import public_key

__all__ = ["MAX_PATH", "ChainPath", "anchored", "anchors_of", "follow", "issued", "same_key",
           "self_signed"]

#: the longest path followed (real ones have 2 to 5 certificates; a hostile server's chain
#: of hundreds that certify one another would otherwise cost a signature check per pair)
MAX_PATH = 16


def issued(cert: x509.Certificate, issuer: x509.Certificate) -> bool | None:
    """True: `issuer`'s name is `cert`'s issuer and its key verifies `cert`'s signature;
    None: the names match but the signature cannot be checked here (an algorithm this
    OpenSSL refuses, such as SHA-1 or MD5 signatures); False otherwise."""
    if cert.issuer != issuer.subject:
        return False
    try:
        cert.verify_directly_issued_by(issuer)
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
    return [a for a in anchors if (a.subject == cert.subject and same_key(a, cert)) or
            (a.subject == cert.issuer and issued(cert, a) is not False)]


def anchored(cert: x509.Certificate, anchors: tuple[x509.Certificate, ...]) -> bool:
    """`cert` is in the trust store or issued by a certificate there."""
    return bool(anchors_of(cert, anchors))


@dataclass(frozen=True)
class ChainPath:
    """`indexes`: the path's certificates as positions in the sent chain, leaf (0) first;
    `unchecked`: (certificate, issuer) pairs of the path linked by names only (their
    signature could not be checked here); `cut`: the walk stopped at MAX_PATH."""

    indexes: tuple[int, ...]
    unchecked: tuple[tuple[int, int], ...] = ()
    cut: bool = False


def follow(chain: list[x509.Certificate]) -> ChainPath:
    """The path through `chain` (leaf first; at least one certificate)."""
    path: list[int] = [0]
    unchecked: list[tuple[int, int]] = []
    while not self_signed(chain[path[-1]]) and len(path) < MAX_PATH:
        current, found, verified = chain[path[-1]], None, False
        for j, candidate in enumerate(chain):
            if j in path:
                continue
            verdict = issued(current, candidate)
            if verdict is True or (verdict is None and found is None):
                found, verified = j, verdict is True
                if verified:
                    break
        if found is None:
            break
        if not verified:
            unchecked.append((path[-1], found))
        path.append(found)
    cut = len(path) == MAX_PATH and not self_signed(chain[path[-1]])
    return ChainPath(tuple(path), tuple(unchecked), cut)
