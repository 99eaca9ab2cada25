"""Certificate findings of an audit, whatever the policy: the leaf's dates and key, weak
signature hashes (a root's own signature excepted), a missing subjectAltName, and the
outcome of the chain and host name check (`AuditReport.trust`, made with engine/chain.py
as the probe's Verify return code is)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tlsprobe.model.audit import AuditReport, Finding
from tlsprobe.model.probe import CertificateInfo
from tlsprobe.model.severity import Severity


def names(items: list[str], limit: int = 6) -> str:
    """The first `limit` items, then "and N more"."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def certificate_findings(report: AuditReport, now: datetime) -> list[Finding]:
    """Leaf dates and key, signature hashes, subjectAltName, and the chain/host name check."""
    if not report.certificates:   # the cert phase found none: its Trust says why
        return _trust_findings(report, set())
    chain, leaf = report.certificates, report.certificates[0]
    out = _date_findings(leaf, now) + _key_findings(leaf) + _signature_findings(chain) + \
        _san_findings(leaf)
    return out + _trust_findings(report, {f.code for f in out})


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


def _trust_findings(report: AuditReport, found: set[str]) -> list[Finding]:
    t = report.trust
    if t is None:
        return []
    subject = (report.certificates[0].subject,) if report.certificates else ()
    if t.status == "not_checked":
        return [Finding(Severity.info, "certificate.not_verified", f"chain not verified: {t.detail}",
                        inconclusive=True)]   # what was not established: no gate
    if t.status == "trusted":
        return []
    if t.code in (18, 19):
        return [Finding(Severity.high, "certificate.self_signed", f"certificate chain not trusted: "
                        f"{t.reason}", items=subject)]
    if t.code == 62:
        return [Finding(Severity.high, "certificate.hostname_mismatch", f"the certificate is not "
                        f"valid for {t.hostname}", items=(t.hostname or "",))]
    if t.code in (9, 10) and found & {"certificate.expired", "certificate.not_yet_valid"}:
        return []   # the leaf's dates are already reported
    detail = f": {t.detail}" if t.detail else ""
    return [Finding(Severity.high, "certificate.untrusted", f"certificate chain not trusted: "
                    f"{t.reason}{detail}", items=subject)]
