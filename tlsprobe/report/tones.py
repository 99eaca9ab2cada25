"""Good or bad: the tone a report gives a row, from the verdict and severity model.

A displayed "yes" or "no" says nothing by itself about whether it is good news: "TLS 1.0
spoken: yes" is bad, "SSL 3.0: no" is good, "OCSP stapling: not supported" is a finding of
severity info. The renderers colour a row by its tone, never by its words:

- a check: bad when its verdict is a problem (vulnerable, not tolerated) or carries a
  finding above info; unsure when inconclusive; neutral when not applicable or when its
  finding is only informational; good otherwise;
- a protocol version: spoken is bad for the versions the IETF deprecated (SSL 3.0 by RFC
  7568, TLS 1.0 and 1.1 by RFC 8996) or a version a finding names, good otherwise; not
  spoken is good for a deprecated version, bad when a finding says it is missing (neither
  TLS 1.2 nor TLS 1.3), neutral otherwise;
- a post-quantum answer: "yes" is good, "no" bad when a finding is about it (and then with
  that finding's severity), else neutral.

The severity of a check row is its finding's, as a policy re-rates it (the check's own,
`CheckResult.severity`, when a policy waives the finding) or, for a problem
whose facts are findings of their own (RC4, SWEET32, NULL, anonymous and export suites are
`suite.weak`; small DH parameters `dh.weak`), the highest severity of the findings that
name the same suites or parameters in the same version: the badge follows any re-rating
by a policy, as the findings list does.
"""

from __future__ import annotations

from typing import Literal

from tlsprobe.model.audit import AuditReport, Finding, PqVerdict, VersionSupport
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.model.severity import Severity

Tone = Literal["good", "bad", "unsure", "neutral"]

SEVERITIES = (Severity.info, Severity.low, Severity.medium, Severity.high, Severity.critical)
#: versions the IETF deprecated: id -> the RFC that says so
DEPRECATED = {0x0002: "RFC 6176", 0x0300: "RFC 7568", 0x0301: "RFC 8996", 0x0302: "RFC 8996"}
_PROBLEMS = (Verdict.vulnerable, Verdict.not_tolerated)


def _evidence_names(c: CheckResult) -> list[tuple[str, str | None]]:
    """(name, version) of each evidence item ("SUITE (TLS 1.2)" -> ("SUITE", "TLS 1.2"))."""
    out: list[tuple[str, str | None]] = []
    for item in c.evidence:
        head, sep, tail = item.rpartition(" (")
        if sep and tail.endswith(")") and tail[:-1].split(" ")[0] in ("TLS", "SSL", "DTLS"):
            out.append((head, tail[:-1]))
        else:
            out.append((item, None))
    return out


def _names_same(evidence: str, item: str) -> bool:
    """An evidence item is about a finding's item: the same name, or the name followed by
    its description ("dh_1024_160 (RFC 5114), 1024 bits" is about "dh_1024_160")."""
    return evidence == item or evidence.startswith(item) and evidence[len(item)] in " ,("


def covering(r: AuditReport, c: CheckResult) -> list[Finding]:
    """The findings of `r` that state the facts a problem verdict of `c` rests on."""
    if c.verdict not in _PROBLEMS and c.code is None:
        return []
    named = _evidence_names(c)
    out = []
    for f in r.findings:
        if c.code is not None and f.code == c.code:
            out.append(f)
            continue
        if any(_names_same(name, item) and (version is None or f.version in (None, version))
               for name, version in named for item in f.items):
            out.append(f)
    return out


def highest(severities: list[str]) -> str | None:
    known = [s for s in severities if s in SEVERITIES]
    return max(known, key=SEVERITIES.index) if known else None


def check_severity(r: AuditReport, c: CheckResult) -> str | None:
    """The severity badge of a check row (see the module docstring): its finding's as the
    policies rate it (the check's own severity when the finding is waived)."""
    if c.code is not None:
        return highest([f.severity for f in r.findings if f.code == c.code]) or c.severity
    return highest([f.severity for f in covering(r, c)])


def check_tone(r: AuditReport, c: CheckResult) -> Tone:
    if c.verdict is Verdict.inconclusive:
        return "unsure"
    if c.verdict is Verdict.not_applicable:
        return "neutral"
    severity = check_severity(r, c)
    if c.verdict in _PROBLEMS or severity not in (None, Severity.info):
        return "bad"
    return "neutral" if severity == Severity.info else "good"


def version_findings(r: AuditReport, v: VersionSupport) -> list[Finding]:
    """Findings about one protocol version: spoken, a policy's version.not_allowed; not
    spoken, a policy's version.missing or the built-in version.no_modern (for TLS 1.2 and
    1.3)."""
    name = v.version.name
    out = []
    for f in r.findings:
        if not f.code.startswith("version."):
            continue
        about = f.version == name or name in f.items
        if v.status == "supported" and about and f.code != "version.missing" or v.status == "not_supported" and (about and f.code == "version.missing" or
                                              f.code == "version.no_modern" and
                                              v.version.id in (0x0303, 0x0304)):
            out.append(f)
    return out


def version_tone(r: AuditReport, v: VersionSupport) -> Tone:
    if v.status not in ("supported", "not_supported"):
        return "unsure"
    if version_findings(r, v):
        return "bad"
    deprecated = v.version.id in DEPRECATED
    if v.status == "supported":
        return "bad" if deprecated else "good"
    return "good" if deprecated else "neutral"


def pq_findings(r: AuditReport, v: PqVerdict) -> list[Finding]:
    """The post-quantum findings about a "no" answer (pq.intolerant, pq.classic_preferred
    name its subject)."""
    if v.verdict != "no":
        return []
    return [f for f in r.findings if f.code.startswith("pq.") and v.subject in f.items]


def pq_tone(r: AuditReport, v: PqVerdict) -> Tone:
    if v.verdict == "yes":
        return "good"
    if v.verdict == "inconclusive":
        return "unsure"
    return "bad" if pq_findings(r, v) else "neutral"


#: a tone's style on a terminal (rich)
TONE_STYLE: dict[str, str] = {"good": "green", "bad": "bold red", "unsure": "yellow",
                              "neutral": "dim"}

__all__ = ["DEPRECATED", "SEVERITIES", "TONE_STYLE", "Tone", "check_severity", "check_tone",
           "covering", "highest", "pq_findings", "pq_tone", "version_findings",
           "version_tone"]
