"""Certificate findings of an audit, whatever the policy: the leaf's dates and key, weak
signature hashes (a root's own signature excepted), a missing subjectAltName, and the
outcome of the chain and host name check (`AuditReport.trust`, made with engine/chain.py
as the probe's Verify return code is)."""

from __future__ import annotations

from datetime import datetime, timedelta

from tlsprobe.model.audit import AuditReport, Finding
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
    subject = (leaf.subject,)
    out: list[Finding] = []

    def add(severity: Severity, code: str, message: str, items: tuple[str, ...] = subject) -> None:
        out.append(Finding(severity, code, message, items=items))

    not_before: datetime | None
    not_after: datetime | None
    try:
        not_before = datetime.fromisoformat(leaf.not_before)
        not_after = datetime.fromisoformat(leaf.not_after)
    except ValueError:
        not_before = not_after = None
    if not_after is not None and not_before is not None:
        left = not_after - now
        if left < timedelta(0):
            add(Severity.high, "certificate.expired", f"certificate expired {leaf.not_after}")
        elif left < timedelta(days=30):
            when = f"{left.days} day(s)" if left.days else \
                f"{max(1, int(left.total_seconds() // 3600))} hour(s)"
            soon = Severity.medium if left < timedelta(days=7) else Severity.low
            add(soon, "certificate.expires_soon",
                f"certificate expires in {when} ({leaf.not_after})")
        if not_before > now:
            add(Severity.high, "certificate.not_yet_valid", f"certificate valid only from "
                f"{leaf.not_before}")
    if leaf.key_type == "RSA" and (leaf.key_bits or 0) < 2048:
        add(Severity.high, "certificate.weak_key", f"RSA key of {leaf.key_bits} bits")
    # A root's own signature is never checked (it is trusted as is): skip a self-issued
    # last certificate of a longer chain.
    signed = [c for i, c in enumerate(chain)
              if not (i and i == len(chain) - 1 and c.issuer == c.subject)]
    for weak, severity, code in (("md5", Severity.critical, "certificate.md5_signature"),
                                 ("sha1", Severity.medium, "certificate.sha1_signature")):
        bad = [c for c in signed if weak in c.signature_algorithm.lower().replace("-", "")]
        if bad:
            add(severity, code, f"{len(bad)} certificate(s) signed "
                f"with {weak.upper()}: " + names([f"{c.subject} ({c.signature_algorithm})"
                                                   for c in bad], 3),
                tuple(c.subject for c in bad))
    if not leaf.san:
        add(Severity.medium, "certificate.no_san", "the certificate has no subjectAltName "
            "(clients that check host names, browsers among them, refuse it)")
    out += _trust_findings(report, {f.code for f in out})
    return out


def _trust_findings(report: AuditReport, found: set[str]) -> list[Finding]:
    t = report.trust
    if t is None:
        return []
    subject = (report.certificates[0].subject,) if report.certificates else ()
    if t.status == "not_checked":
        return [Finding(Severity.info, "certificate.not_verified",
                        f"chain not verified: {t.detail}")]
    if t.status == "trusted":
        return []
    if t.code in (18, 19):
        return [Finding(Severity.high, "certificate.self_signed",
                        f"certificate chain not trusted: {t.reason}", items=subject)]
    if t.code == 62:
        return [Finding(Severity.high, "certificate.hostname_mismatch",
                        f"the certificate is not valid for {t.hostname}",
                        items=(t.hostname or "",))]
    if t.code in (9, 10) and found & {"certificate.expired", "certificate.not_yet_valid"}:
        return []   # the leaf's dates are already reported
    detail = f": {t.detail}" if t.detail else ""
    return [Finding(Severity.high, "certificate.untrusted", f"certificate chain not trusted: "
                    f"{t.reason}{detail}", items=subject)]
