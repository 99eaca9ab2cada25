"""Findings: what an audit shows against a policy (policy/rules.py `evaluate`), and what
is weak under any policy (`builtin_findings`: NULL/export/RC4 suites, small DH primes,
expired certificates, inconclusive results, post-quantum intolerance, certificate trust,
signature hash, names and dates), each a list of small rules (POLICY_RULES, BUILTIN_RULES).
Model values in, findings out; `findings_for` is what an audit reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime

from tlsprobe import registry
from tlsprobe.model.audit import (
    ORDER_SERVER,
    ORDER_SINGLE,
    AuditReport,
    DhParameters,
    Finding,
    SuiteAudit,
    severity_rank,
)
from tlsprobe.model.checks import Verdict
from tlsprobe.model.severity import Severity
from tlsprobe.policy.certificate import certificate_findings, names
from tlsprobe.policy.checks import COVERED_BY, check_findings
from tlsprobe.policy.codes import UNDETERMINED, check_of
from tlsprobe.policy.load import Policy
from tlsprobe.policy.rules import POLICY_RULES, dh_modulus_word, evaluate

__all__ = ["BUILTIN_RULES", "POLICY_RULES", "at_or_above", "builtin_findings",
           "dh_modulus_word", "evaluate", "findings_for", "judge", "rate", "with_findings"]

#: a built-in rule: findings of one kind whatever the policy, given the time to judge
#: certificate dates by
BuiltinRule = Callable[[AuditReport, datetime], list[Finding]]


def _suite_findings(audit: SuiteAudit) -> list[Finding]:
    """Weak suites (NULL/anon/export critical; RC4, DES, 3DES and the like high) and suites
    without forward secrecy (static RSA or DH key exchange: medium)."""
    out: list[Finding] = []
    name = audit.version.name
    by_sev: dict[Severity, list[tuple[str, str]]] = {}
    no_fs: list[str] = []
    for c in audit.supported:
        suite = registry.cipher_suite(c.id)
        if suite is None or suite.is_scsv:
            continue
        tags = suite.weaknesses
        if tags:
            sev = Severity.critical if {"NULL", "anon", "export"} & set(tags) else Severity.high
            by_sev.setdefault(sev, []).append((c.iana_name, ", ".join(tags)))
        if audit.version.id < 0x0304 and not suite.forward_secret and not suite.is_anon:
            no_fs.append(c.iana_name)
    for sev, pairs in by_sev.items():
        out.append(Finding(sev, "suite.weak", f"{name}: weak cipher suite(s): "
                           f"{names([f'{n} ({t})' for n, t in pairs], 4)}",
                           items=tuple(n for n, _ in pairs), version=name))
    if no_fs:
        # "the most preferred" only where the server's order is established (not a list
        # that follows the client's, nor one left incomplete or with its order unknown)
        top = audit.order in (ORDER_SERVER, ORDER_SINGLE) and \
            audit.supported[0].iana_name == no_fs[0]
        out.append(Finding(Severity.medium, "suite.no_forward_secrecy", f"{name}: {len(no_fs)} "
                           "cipher suite(s) without forward secrecy (static RSA or DH key "
                           f"exchange){', the most preferred among them' if top else ''}: "
                           f"{names(no_fs, 4)}", items=tuple(no_fs), version=name))
    return out


def _weak_suites(report: AuditReport, now: datetime) -> list[Finding]:
    return [f for audit in report.suites for f in _suite_findings(audit)]


def _no_modern_version(report: AuditReport, now: datetime) -> list[Finding]:
    """An absence fails CI only when established: both versions refused (and confirmed)."""
    spoken = report.spoken_versions()
    refused = {v.version.id for v in report.versions if v.status == "not_supported"}
    if not (report.versions and {0x0303, 0x0304} <= refused and spoken):
        return []
    return [Finding(Severity.high, "version.no_modern", "neither TLS 1.2 nor TLS 1.3 is spoken",
                    items=tuple(registry.version_name(v) for v in spoken))]


def _fixed_dh(report: AuditReport, now: datetime) -> list[Finding]:
    """The fixed DH parameters a group audit read (TLS 1.2's, or the older version's on a
    server without TLS 1.2): small (Logjam), and what the primality check established."""
    out = _suite_dh(report)
    for g in report.ske_group_audits():
        fixed = g.dhe.fixed if g.dhe is not None else None
        if fixed is None:
            continue
        version = g.version.name
        if fixed.bits < 2048:   # Logjam: 1024-bit primes are within reach of a state
            out.append(Finding(Severity.high if fixed.bits < 1024 else Severity.medium,
                               "dh.weak", f"DHE with a {fixed.bits}-bit "
                               f"{dh_modulus_word(fixed)} (under 2048 bits)",
                               items=(fixed.name,), version=version))
        out += _dh_prime_findings(fixed, version)
    return out


def _suite_dh(report: AuditReport) -> list[Finding]:
    """DH moduli under 2048 bits that only the suite audit read (a version without a group
    audit of its DH parameters, AuditReport.suite_kx_rows): one finding per version, naming
    its DHE suites."""
    small: dict[str, list[tuple[str, int]]] = {}
    for audit, row, bits in report.suite_dh_rows():
        if bits < 2048:
            small.setdefault(audit.version.name, []).append((row.suite.iana_name, bits))
    out = []
    for version, rows in small.items():
        least = min(bits for _, bits in rows)
        out.append(Finding(Severity.high if least < 1024 else Severity.medium, "dh.weak",
                           f"{version}: DHE with a {least}-bit modulus (under 2048 bits) in "
                           f"the ServerKeyExchange of {len(rows)} suite(s)",
                           items=tuple(name for name, _ in rows), version=version))
    return out


def _inconsistent_target(report: AuditReport, now: datetime) -> list[Finding]:
    """Not an absence: two different answers to one hello were seen."""
    c = report.consistency
    if c is None or c.status != "inconsistent":
        return []
    return [Finding(Severity.medium, "target.inconsistent", "the target answered the same hello "
                    "differently (likely several servers or configurations behind one name); "
                    "results built from many connections may merge them ("
                    + "; ".join(_distinct(c.answers) + list(c.notes)) + ")", items=c.affected)]


def _post_quantum(report: AuditReport, now: datetime) -> list[Finding]:
    return _pq_findings(report)


def _distinct(answers: tuple[str, ...]) -> list[str]:
    """'answer (after versions, suites)' per distinct answer of 'phase: answer' lines."""
    seen: dict[str, list[str]] = {}
    for line in answers:
        phase, _, answer = line.partition(": ")
        seen.setdefault(answer, []).append(phase)
    return [f"{answer} (after {', '.join(phases)})" for answer, phases in seen.items()]


def _dh_prime_findings(fixed: DhParameters, version: str) -> list[Finding]:
    """What the one primality check (kex/dhprime.py) established about custom parameters:
    a composite modulus is high (no security: the discrete logarithm splits over its
    factors); a modulus is called a prime only when the check said so."""
    if fixed.standard is not None:
        return []
    if fixed.prime == "composite":
        severity, code = Severity.high, "dh.not_prime"
        text = f"DHE with a {fixed.bits}-bit modulus that is not prime ({fixed.prime_detail})"
    elif fixed.prime == "unchecked":
        severity, code = Severity.info, "dh.custom"
        text = (f"DHE with a custom {fixed.bits}-bit modulus, primality not checked "
                f"({fixed.prime_detail})")
    else:
        severity, code = Severity.info, "dh.custom"
        safe = f" (not a safe prime: {fixed.prime_detail})" if fixed.prime == "not_safe" else ""
        text = f"DHE with a custom {fixed.bits}-bit prime{safe}"
    return [Finding(severity, code, text, items=(fixed.name,), version=version)]


def _pq_findings(report: AuditReport) -> list[Finding]:
    out = []
    g13 = report.group_audit(0x0304)
    pq = [g for g in (g13.supported if g13 else ()) if g.id in (0x11EB, 0x11EC, 0x11ED, 0x11EE,
                                                                 0x0200, 0x0201, 0x0202, 0x6399)]
    if g13 is not None and g13.spoken and not pq and not g13.inconclusive:
        out.append(Finding(Severity.info, "pq.none", "no post-quantum key exchange in TLS 1.3",
                           version="TLS 1.3"))
    for v in report.post_quantum:
        if v.check == "tolerance" and v.verdict == "no":
            out.append(Finding(Severity.medium, "pq.intolerant", f"a hello with {v.subject} is "
                               f"refused: {v.detail}", items=(v.subject,), version="TLS 1.3"))
        if v.check == "browser_like" and v.verdict == "no" and "although" in v.detail:
            out.append(Finding(Severity.low, "pq.classic_preferred", v.detail, items=(v.subject,),
                               version="TLS 1.3"))
    return out


def _inconclusive(message: str, items: tuple[str, ...] = (),
                  version: str | None = None) -> Finding:
    """An audit.inconclusive finding: what could not be established (counts toward no
    gate: Finding.inconclusive)."""
    return Finding(Severity.info, "audit.inconclusive", message, items=items, version=version,
                   inconclusive=True)


def _versions_unknown(report: AuditReport, now: datetime) -> list[Finding]:
    return [_inconclusive(f"{v.version.name} support not established: {v.detail}",
                          version=v.version.name)
            for v in report.versions if v.status == "inconclusive"]


def _groups_unknown(report: AuditReport, now: datetime) -> list[Finding]:
    return [_inconclusive(f"{g.version.name}: {len(g.inconclusive)} group(s) not established",
                          items=tuple(c.name for c in g.inconclusive), version=g.version.name)
            for g in report.groups if g.inconclusive]


def _suites_unknown(report: AuditReport, now: datetime) -> list[Finding]:
    return [_inconclusive(f"{s.version.name}: " + (
                "cipher suite list may be incomplete" if s.supported else
                "cipher suites not established"), version=s.version.name)
            for s in report.suites if not s.complete]


def _sigalgs_unknown(report: AuditReport, now: datetime) -> list[Finding]:
    return [_inconclusive(f"{a.version.name}: signature schemes not established: {a.reason}",
                          version=a.version.name)
            for a in report.signature_schemes if a.status == "inconclusive"]


def _pq_tolerance_unknown(report: AuditReport, now: datetime) -> list[Finding]:
    return [_inconclusive(f"post-quantum tolerance (a hello with {v.subject}) not established: "
                          f"{v.detail}", items=(v.subject,), version="TLS 1.3")
            for v in report.post_quantum if v.check == "tolerance" and v.verdict == "inconclusive"]


def _certificates_unknown(report: AuditReport, now: datetime) -> list[Finding]:
    """The search for the certificates of other key types stopped without an answer."""
    note = report.other_certificates_note
    return [] if note is None else [Finding(
        Severity.info, "audit.inconclusive", "certificates of other key types not established: "
        f"{note}")]


#: the built-in rules, in the order of their findings
BUILTIN_RULES: tuple[BuiltinRule, ...] = (
    _weak_suites, _no_modern_version, _fixed_dh, _inconsistent_target, _post_quantum,
    certificate_findings,
    # what could not be established
    _versions_unknown, _groups_unknown, _suites_unknown, _sigalgs_unknown, _pq_tolerance_unknown,
    _certificates_unknown)


def builtin_findings(report: AuditReport, now: datetime | None = None) -> list[Finding]:
    """What is weak whatever the policy, plus what could not be established: BUILTIN_RULES
    in order (certificate dates judged at `now`, default the current time)."""
    when = now or datetime.now(UTC)
    return [finding for rule in BUILTIN_RULES for finding in rule(report, when)]


def findings_for(report: AuditReport, policies: list[Policy]) -> tuple[Finding, ...]:
    """The findings `report` shows (see `judge`), the waived ones left out."""
    return judge(report, policies)[0]


def with_findings(report: AuditReport, policies: list[Policy]) -> AuditReport:
    """`report` with its findings and its waived findings (see `judge`)."""
    found, waived = judge(report, policies)
    return dataclasses.replace(report, findings=found, waived=waived)


def judge(report: AuditReport, policies: list[Policy]) -> tuple[tuple[Finding, ...],
                                                                tuple[Finding, ...]]:
    """Built-in and policy findings of the checks the report was asked for (`checks`; all
    when empty): phases run only for other checks (`read_only`: the versions probed to plan
    them, the suites ROBOT reads) yield none of their own. Each
    finding rated by the policies' `severity` tables and split off when a policy waives it
    (`rate`): (findings, waived), each worst first."""
    asked = set(report.checks) - set(report.read_only)
    if asked and "versions" not in asked:
        report = dataclasses.replace(report, versions=())
    found = builtin_findings(report)
    for policy in policies:
        found += evaluate(report, policy)
    if asked:
        found = [f for f in found if check_of(f.code) in asked | {""}]
        found += [f for f in _covering(report, asked) if check_of(f.code) not in asked]
    # a check's findings go with the check's name, whatever their codes
    found += check_findings(tuple(r for r in report.check_results
                                  if not asked or r.name in asked))
    found = [dataclasses.replace(f, inconclusive=True) if f.code in UNDETERMINED else f
             for f in found]
    rated = [rate(f, policies) for f in dict.fromkeys(found)]
    unique = list(dict.fromkeys(rated))

    def ordered(items: list[Finding]) -> tuple[Finding, ...]:
        return tuple(sorted(items, key=lambda f: -severity_rank(f.severity)))
    return (ordered([f for f in unique if f.waiver is None]),
            ordered([f for f in unique if f.waiver is not None]))


def _covering(report: AuditReport, asked: set[str]) -> list[Finding]:
    """The findings that state what an asked derived check found (COVERED_BY: `--checks
    sweet32` reads the suites phase, whose own findings are not reported): suite.weak for
    the check's suites only, the DH parameters' findings whole. Without them a vulnerable
    verdict had no finding and passed every --fail-on."""
    out: list[Finding] = []
    for r in report.check_results:
        codes = COVERED_BY.get(r.name, ())
        if r.name not in asked or r.verdict is not Verdict.vulnerable or not codes:
            continue
        pairs = {tuple(e[:-1].rsplit(" (", 1)) for e in r.evidence}   # "SUITE (VERSION)"
        for audit in report.suites:
            mine = tuple(c for c in audit.supported if (c.iana_name, audit.version.name)
                         in pairs)
            if mine:
                out += [f for f in _suite_findings(dataclasses.replace(audit, supported=mine))
                        if f.code in codes]
        if "dh.weak" in codes:
            out += [f for f in _fixed_dh(report, datetime.now(UTC)) if f.code in codes]
    return out


def rate(finding: Finding, policies: list[Policy]) -> Finding:
    """`finding` as the policies have it. A policy's own finding already has the policy's
    severity; a built-in finding (or a check's) takes the severity the policies' `severity`
    tables give its code (the highest, when several name it). An inconclusive finding (what
    could not be established) is re-rated only by its own code, never by an `AREA.*` key:
    a policy naming it asks to be held to it, and it then counts toward the gates as any
    finding. A finding is waived by its own policy's `waive` table, a built-in one by any
    policy's (the first that names it)."""
    mine = [p for p in policies if p.name == finding.policy] if finding.policy != "builtin" \
        else policies
    if finding.policy == "builtin":
        ratings = [r for p in mine
                   if (r := p.rated(finding.code, exact=finding.inconclusive)) is not None]
        if ratings:
            finding = dataclasses.replace(finding, severity=max(ratings, key=severity_rank),
                                          inconclusive=False)
    for policy in mine:
        reason = policy.waiver(finding.code)
        if reason is not None:
            return dataclasses.replace(finding, waiver=reason, waived_by=policy.name)
    return finding


def at_or_above(findings: tuple[Finding, ...], threshold: str) -> list[Finding]:
    """The findings that fail --fail-on `threshold` (and a JUnit test case): at or above
    it, neither waived nor inconclusive (Finding.gates)."""
    limit = severity_rank(threshold)
    return [f for f in findings if f.gates and severity_rank(f.severity) >= limit]
