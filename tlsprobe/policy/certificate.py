"""Certificate findings of an audit, whatever the policy: the leaf's dates and key, weak
signature hashes (a root's own signature excepted), a missing subjectAltName, and the
outcome of the chain and host name check (`AuditReport.trust`, made with engine/chain.py
as the probe's Verify return code is); the same of each chain the server presents for
another key type (`AuditReport.other_certificates`), from that chain alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from tlsprobe.model.audit import AuditReport, Finding
from tlsprobe.model.probe import CertificateInfo, TrustCheck
from tlsprobe.model.severity import Severity


def names(items: list[str], limit: int = 6) -> str:
    """The first `limit` items, then "and N more"."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def certificate_findings(report: AuditReport, now: datetime) -> list[Finding]:
    """Leaf dates and key, signature hashes, subjectAltName, and the chain/host name check,
    of the default chain, then of each other key type's chain (its messages begin with its
    key type: "ECDSA certificate: ..."), each judged from its own certificates."""
    out = _chain_findings(report.certificates, report.trust, now)
    for other in report.other_certificates:
        label = f"{other.key_type} certificate: "
        out += [replace(f, message=label + f.message)
                for f in _chain_findings(other.certificates, other.trust, now)]
    return out


def _chain_findings(chain: tuple[CertificateInfo, ...], trust: TrustCheck | None,
                    now: datetime) -> list[Finding]:
    if not chain:   # the cert phase found none: its Trust says why
        return _trust_findings(chain, trust, set())
    leaf = chain[0]
    out = _date_findings(leaf, now) + _key_findings(leaf) + _signature_findings(chain) + \
        _san_findings(leaf)
    return out + _trust_findings(chain, trust, {f.code for f in out})


def _date_findings(leaf: CertificateInfo, now: datetime) -> list[Finding]:
    """Expired, expiring within 30 days (medium within 7), not yet valid."""
    try:
        not_before = datetime.fromisoformat(leaf.not_before)
        not_after = datetime.fromisoformat(leaf.not_after)
    except ValueError:
        return []
    out: list[Finding] = []
    left = not_after - now
    if left < timedelta(0):
        out.append(Finding(Severity.high, "certificate.expired", f"certificate expired {leaf.not_after}",
                           items=(leaf.subject,)))
    elif left < timedelta(days=30):
        when = f"{left.days} day(s)" if left.days else \
            f"{max(1, int(left.total_seconds() // 3600))} hour(s)"
        out.append(Finding(Severity.medium if left < timedelta(days=7) else Severity.low,
                           "certificate.expires_soon",
                           f"certificate expires in {when} ({leaf.not_after})",
                           items=(leaf.subject,)))
    if not_before > now:
        out.append(Finding(Severity.high, "certificate.not_yet_valid", "certificate valid only from "
                           f"{leaf.not_before}", items=(leaf.subject,)))
    return out


def _key_findings(leaf: CertificateInfo) -> list[Finding]:
    if leaf.rsa_key and (leaf.key_bits or 0) < 2048:
        return [Finding(Severity.high, "certificate.weak_key",
                        f"{leaf.key_type} key of {leaf.key_bits} bits",
                        items=(leaf.subject,))]
    return []


def _signature_findings(chain: tuple[CertificateInfo, ...]) -> list[Finding]:
    """MD5 and SHA-1 signatures. A root's own signature is never checked (it is trusted as
    is): a self-issued certificate after the leaf is skipped, wherever the server sends it
    (a root sent before its intermediate is still a root)."""
    signed = [c for i, c in enumerate(chain) if not (i and c.issuer == c.subject)]
    out: list[Finding] = []
    for weak, severity, code in (("md5", Severity.critical, "certificate.md5_signature"),
                                 ("sha1", Severity.medium, "certificate.sha1_signature")):
        bad = [c for c in signed if weak in c.signature_algorithm.lower().replace("-", "")]
        if bad:
            out.append(Finding(severity, code, f"{len(bad)} certificate(s) signed with "
                               f"{weak.upper()}: " + names([f"{c.subject} "
                                                            f"({c.signature_algorithm})"
                                                            for c in bad], 3),
                               items=tuple(c.subject for c in bad)))
    return out


def _san_findings(leaf: CertificateInfo) -> list[Finding]:
    if leaf.san:
        return []
    return [Finding(Severity.medium, "certificate.no_san", "the certificate has no subjectAltName "
                    "(clients that check host names, browsers among them, refuse it)",
                    items=(leaf.subject,))]


def _trust_findings(chain: tuple[CertificateInfo, ...], t: TrustCheck | None,
                    found: set[str]) -> list[Finding]:
    if t is None:
        return []
    subject = (chain[0].subject,) if chain else ()
    if t.status == "not_checked":
        return [Finding(Severity.info, "certificate.not_verified", f"chain not verified: {t.detail}",
                        inconclusive=True)]   # what was not established: no gate
    if t.status == "trusted":
        return []
    if t.code in (18, 19):
        return [Finding(Severity.high, "certificate.self_signed", f"certificate chain not trusted: "
                        f"{t.reason}", items=subject)]
    if t.code in (62, 64):   # a host name; an address (as -verify_ip says)
        return [Finding(Severity.high, "certificate.hostname_mismatch", f"the certificate is not "
                        f"valid for {t.hostname}", items=(t.hostname or "",))]
    if t.code in (9, 10) and found & {"certificate.expired", "certificate.not_yet_valid"}:
        return []   # the leaf's dates are already reported
    detail = f": {t.detail}" if t.detail else ""
    return [Finding(Severity.high, "certificate.untrusted", f"certificate chain not trusted: "
                    f"{t.reason}{detail}", items=subject)]
