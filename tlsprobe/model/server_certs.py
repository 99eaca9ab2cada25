"""What an audit (`tlsprobe scan`) says per certificate of a server with several (an RSA and
an ECDSA one, such as `openssl s_server -cert ... -dcert ...` or nginx with two
ssl_certificate lines): the TLS 1.2 signature schemes of each, and the key type names
(`key_family`) of model/audit.py's `ServerCertificate`. Imported by model/audit.py for type
checkers only (a group audit never loads it); field names are part of the JSON schema."""

from __future__ import annotations

from dataclasses import dataclass

from tlsprobe.model.probe import CertificateInfo, Codepoint
from tlsprobe.model.vocab import Order, SigalgStatus

__all__ = ["AUTH_OF", "SEARCH", "KeyTypeSigalgs", "key_family", "key_family_of", "scheme_key_type"]

#: the TLS 1.2 authentication whose suites a certificate of each key type serves (the
#: audit's search for each chain, probes/audit/certs.py; the chains two scans compare,
#: policy/cert_changes.py): the suites alone cannot tell apart two key types of one
#: authentication (RSA and RSA-PSS; ECDSA, Ed25519 and Ed448): their signature schemes do
#: (`scheme_key_type`)
AUTH_OF = {"RSA": "RSA", "RSA-PSS": "RSA", "ECDSA": "ECDSA", "Ed25519": "ECDSA",
           "Ed448": "ECDSA", "DSA": "DSS"}
#: how the audit's search tells apart the key types of one TLS 1.2 authentication (the
#: report's `other_certificates_search`): policy/cert_changes.py trusts the absence of a
#: chain of such a key type only in documents that say so
SEARCH = "signature schemes"


@dataclass(frozen=True)
class KeyTypeSigalgs:
    """TLS 1.2: the signature schemes the server signs its ServerKeyExchange with when the
    hello offers only the (EC)DHE suites of one authentication (`suites`: RSA, ECDSA or
    DSS), which select its certificate of that kind (`key_type`: the leaf's key, as
    `ServerCertificate.key_type`). Fields as `SigalgAudit`'s."""

    key_type: str
    suites: str
    status: SigalgStatus
    supported: tuple[Codepoint, ...] = ()
    order: Order = Order.UNKNOWN
    reason: str = ""
    connections: int = 0


def key_family(info: CertificateInfo) -> str:
    """The key type of a described certificate, as `ServerCertificate.key_type` names it:
    "ECDSA" for an EC key on any curve, else `CertificateInfo.key_type` ("RSA", "RSA-PSS",
    "Ed25519", "Ed448", "DSA"; "unknown" for a key that could not be read)."""
    return key_family_of(info.key_type)


def key_family_of(key_type: str) -> str:
    """`key_family` of a `CertificateInfo.key_type` string (as a scan document has it)."""
    if key_type.startswith("EC "):
        return "ECDSA"
    if key_type in ("RSA", "RSA-PSS", "Ed25519", "Ed448", "DSA"):
        return key_type
    return "unknown"


def scheme_key_type(code: int) -> str | None:
    """The key type (as `key_family` names it) of the certificate that can sign with a
    signature scheme: RSA (PKCS #1 v1.5 and rsa_pss_rsae_*), RSA-PSS (rsa_pss_pss_*),
    ECDSA, Ed25519, Ed448, DSA; None for any other scheme (GOST, SM2, ML-DSA, ...)."""
    named = {0x0807: "Ed25519", 0x0808: "Ed448"}
    if code in named:
        return named[code]
    if 0x0804 <= code <= 0x0806:
        return "RSA"
    if 0x0809 <= code <= 0x080B:
        return "RSA-PSS"
    if 0x081A <= code <= 0x081C:   # ecdsa_brainpool*tls13
        return "ECDSA"
    if 1 <= code >> 8 <= 6 and code & 0xFF in (1, 2, 3):
        return ("RSA", "DSA", "ECDSA")[(code & 0xFF) - 1]
    return None
