"""Result types of the certificates an audit establishes (`tlsprobe scan`): the
certificates a server presents beside its default one (a server
with an RSA and an ECDSA certificate, such as `openssl s_server -cert ... -dcert ...` or
nginx with two ssl_certificate lines), and the TLS 1.2 signature schemes per certificate.
Imported by model/audit.py for type checkers only (a group audit never loads it); field
names are part of the JSON schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tlsprobe.model.probe import CertificateInfo, Codepoint
from tlsprobe.model.vocab import Order, SigalgStatus

if TYPE_CHECKING:   # a field type only (model/audit.py loads this module for none either)
    from tlsprobe.model.audit import TrustCheck

__all__ = ["KeyTypeSigalgs", "ServerCertificate", "key_family"]


@dataclass(frozen=True)
class ServerCertificate:
    """A certificate chain the server presents for another key type than its default one
    (`AuditReport.certificates`), read from a connection whose hello asked for that key
    type only: `key_type` is its leaf's key ("RSA", "RSA-PSS", "ECDSA", "Ed25519", "Ed448",
    "DSA"), `version` the connection's protocol version and `offer` what its hello offered
    (the TLS 1.2 suites, or the TLS 1.3 signature schemes); `trust` is its own chain and
    host name check (None: not asked, `--no-verify` says not_checked)."""

    key_type: str
    version: Codepoint
    offer: str
    certificates: tuple[CertificateInfo, ...]
    trust: TrustCheck | None = None


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
    if info.key_type.startswith("EC "):
        return "ECDSA"
    if info.key_type in ("RSA", "RSA-PSS", "Ed25519", "Ed448", "DSA"):
        return info.key_type
    return "unknown"
