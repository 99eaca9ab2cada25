"""Findings of the checks' verdicts (model CheckResults in, Findings out).

An active check (tlsprobe/probes/checks/) carries its finding on its result: `code`
(always `check.` + its name) and `severity`, set only when the verdict is a problem; its
items are the evidence. A derived check (probes/checks/derived.py) gives a finding only
where no other finding covers the facts (OWN_FINDINGS): the accepted NULL, anonymous,
export, RC4, DES and 3DES suites are `suite.weak`, DH parameters under 2048 bits `dh.weak`;
POODLE and BEAST, which no other finding covers, add `check.poodle` and `check.beast`, whose
items are the suites' IANA names (each once); LUCKY13's "potentially vulnerable" (CBC suites
accepted, stated as inconclusive: no timing is measured) adds `check.lucky13` (info), the
one derived finding whose verdict is not `vulnerable` (the result carries its code). A
finding of a check whose verdict is inconclusive is an inconclusive finding (it counts
toward no gate: model/audit.py Finding.inconclusive).
"""

from __future__ import annotations

from tlsprobe.model.audit import Finding
from tlsprobe.model.checks import CheckResult, Method, Severity, Verdict
from tlsprobe.policy.certificate import names

__all__ = ["COVERED_BY", "OWN_FINDINGS", "check_findings"]

#: the findings of a derived check's vulnerable verdict no other finding covers: code,
#: severity
OWN_FINDINGS: dict[str, tuple[str, Severity]] = {
    "poodle": ("check.poodle", Severity.high), "beast": ("check.beast", Severity.low),
    "lucky13": ("check.lucky13", Severity.info)}


#: the derived checks whose vulnerable verdict other findings state (the facts they read):
#: the check -> those findings' codes. policy/findings.py reports them for the check when
#: their phase is only read (`--checks sweet32`); a JUnit check case reads their waivers
COVERED_BY: dict[str, tuple[str, ...]] = {
    **{name: ("suite.weak",) for name in ("freak", "logjam", "rc4", "sweet32", "null", "anon")},
    "dh": ("dh.weak", "dh.not_prime")}


def check_findings(results: tuple[CheckResult, ...]) -> list[Finding]:
    """Findings of check verdicts. Derived checks: those no other finding covers (see the
    module docstring), `check.poodle` and `check.beast`, whose `items` are the suites' IANA
    names (each once) and `version` the one version they were accepted in (None when
    several). Active checks (tlsprobe/probes/checks/) carry their finding on the result
    (`code`, `severity`, set only when the verdict is a problem); its items are the
    evidence."""
    out = []
    for r in results:
        own = OWN_FINDINGS.get(r.name) if r.method is Method.derived else None
        if own is None and r.code is not None and r.severity is not None:
            out.append(Finding(r.severity, r.code, f"{r.title}: {r.reason}",
                               items=r.evidence,
                               inconclusive=r.verdict is Verdict.inconclusive))
            continue
        if own is None or r.verdict is not Verdict.vulnerable and r.code != own[0]:
            continue
        pairs = [e[:-1].rsplit(" (", 1) for e in r.evidence]   # "SUITE (VERSION)"
        suites = list(dict.fromkeys(p[0] for p in pairs))
        versions = {p[1] for p in pairs if len(p) == 2}
        out.append(Finding(own[1], own[0], f"{r.title}: {names(suites, 4)}",
                           items=tuple(suites),
                           version=versions.pop() if len(versions) == 1 else None,
                           inconclusive=r.verdict is Verdict.inconclusive))
    return out
