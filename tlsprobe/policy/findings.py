"""Findings: what an audit shows against a policy (`evaluate`), and what is weak under any
policy (`builtin_findings`: NULL/export/RC4 suites, small DH primes, expired certificates,
inconclusive results, post-quantum intolerance, certificate trust, signature hash, names
and dates). Model values in, findings out; `findings_for` is what an audit reports.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

from tlsprobe import registry
from tlsprobe.model.audit import (ORDER_CLIENT, AuditReport, DhParameters, Finding, SuiteAudit,
                                  severity_rank)
from tlsprobe.policy.certificate import certificate_findings, names
from tlsprobe.policy.checks import check_findings
from tlsprobe.policy.codes import check_of
from tlsprobe.policy.load import Policy


# -- evaluation ------------------------------------------------------------------------------
def _version_severity(version: int) -> str:
    """A version outside the policy: SSL 3.0 critical, TLS 1.0/1.1 high (RFC 8996), else
    medium (the policy is what the user asked to be held to)."""
    return {0x0300: "critical", 0x0301: "high", 0x0302: "high"}.get(version, "medium")


def evaluate(report: AuditReport, policy: Policy) -> list[Finding]:
    """Findings of `report` against `policy` (checks with no data are skipped)."""
    out: list[Finding] = []

    def add(code: str, message: str, items: list[str], version: str | None,
            severity: str | None = None) -> None:
        out.append(Finding(severity or policy.sev(code), code, message, policy.name,
                           tuple(items), version))

    spoken = report.spoken_versions()
    if report.versions and policy.versions is not None:
        for v in spoken:
            name = registry.version_name(v)
            if v not in policy.versions:
                add("version.not_allowed", f"{name} is enabled", [name], name,
                    policy.rated("version.not_allowed") or _version_severity(v))
        for v in policy.required_versions:
            name = registry.version_name(v)
            if v not in spoken and any(s.version.id == v and s.status == "not_supported"
                                       for s in report.versions):
                add("version.missing", f"{name} is not supported", [name], name)
    for audit in report.suites:
        allowed = policy.tls13_cipher_suites if audit.version.id == 0x0304 \
            else policy.cipher_suites
        if allowed is None:
            continue
        extra = [c.iana_name for c in audit.supported if c.id not in allowed]
        if extra:
            add("suite.not_allowed", f"{audit.version.name}: {len(extra)} cipher suite(s) "
                f"outside the policy: {names(extra)}", extra, audit.version.name)
        if policy.server_preferred_order and audit.order == ORDER_CLIENT:
            add("order.not_server", f"{audit.version.name}: the server follows the client's "
                "cipher suite order", [], audit.version.name)
    if policy.groups is not None:
        for g in report.groups:
            extra = [c.name for c in g.supported if c.id not in policy.groups]
            if extra:
                add("group.not_allowed", f"{g.version.name}: {len(extra)} group(s) outside "
                    f"the policy: {names(extra)}", extra, g.version.name)
    supported_groups = {g.id for a in report.groups for g in a.supported}
    g13 = report.group_audit(0x0304)
    for code in policy.required_groups:
        if g13 is not None and g13.spoken and code not in supported_groups and \
                code not in {g.id for g in g13.inconclusive}:
            name = registry.group_name(code)
            add("group.missing", f"{name} is recommended but not supported in TLS 1.3",
                [name], "TLS 1.3")
    g12 = report.group_audit(0x0303)
    dh = g12.dhe if g12 is not None else None
    if dh is not None and policy.dh_min_bits:
        sizes = [(dh.fixed.name, dh.fixed.bits)] if dh.fixed else []
        sizes += [(g.name, int(g.name[5:])) for g in dh.negotiated if g.name[5:].isdigit()]
        small = [(n, b) for n, b in sizes if b < policy.dh_min_bits]
        if small:
            least = min(b for _, b in small)
            word = dh_modulus_word(dh.fixed) if dh.fixed and dh.fixed.bits == least else "prime"
            add("dh.too_small", f"DHE with a {least}-bit {word} (policy "
                f"minimum {policy.dh_min_bits})", [n for n, _ in small], "TLS 1.2")
    if report.certificates:
        leaf = report.certificates[0]
        kind = "rsa" if leaf.key_type == "RSA" else "ecdsa" if leaf.key_type.startswith("EC") \
            else leaf.key_type.lower()
        if policy.certificate_types is not None and kind not in policy.certificate_types:
            add("certificate.type_not_allowed", f"certificate key {leaf.key_type} (policy: "
                f"{', '.join(policy.certificate_types)})", [leaf.subject], None)
        if kind == "rsa" and policy.rsa_min_bits and (leaf.key_bits or 0) < policy.rsa_min_bits:
            add("certificate.key_too_small", f"RSA key of {leaf.key_bits} bits (policy minimum "
                f"{policy.rsa_min_bits})", [leaf.subject], None)
    return out


def _suite_findings(audit: SuiteAudit) -> list[Finding]:
    """Weak suites (NULL/anon/export critical; RC4, DES, 3DES and the like high) and suites
    without forward secrecy (static RSA or DH key exchange: medium)."""
    out: list[Finding] = []
    name = audit.version.name
    by_sev: dict[str, list[tuple[str, str]]] = {}
    no_fs: list[str] = []
    for c in audit.supported:
        suite = registry.cipher_suite(c.id)
        if suite is None or suite.is_scsv:
            continue
        tags = suite.weaknesses
        if tags:
            sev = "critical" if {"NULL", "anon", "export"} & set(tags) else "high"
            by_sev.setdefault(sev, []).append((c.iana_name, ", ".join(tags)))
        if audit.version.id < 0x0304 and not suite.forward_secret and not suite.is_anon:
            no_fs.append(c.iana_name)
    for sev, pairs in by_sev.items():
        out.append(Finding(sev, "suite.weak", f"{name}: weak cipher suite(s): "
                           f"{names([f'{n} ({t})' for n, t in pairs], 4)}",
                           items=tuple(n for n, _ in pairs), version=name))
    if no_fs:
        top = audit.order != ORDER_CLIENT and audit.supported[0].iana_name == no_fs[0]
        out.append(Finding("medium", "suite.no_forward_secrecy", f"{name}: {len(no_fs)} "
                           "cipher suite(s) without forward secrecy (static RSA or DH key "
                           f"exchange){', the most preferred among them' if top else ''}: "
                           f"{names(no_fs, 4)}", items=tuple(no_fs), version=name))
    return out


def builtin_findings(report: AuditReport, now: datetime | None = None) -> list[Finding]:
    """What is weak whatever the policy, plus what could not be established."""
    out: list[Finding] = []
    for audit in report.suites:
        out += _suite_findings(audit)
    spoken = report.spoken_versions()
    refused = {v.version.id for v in report.versions if v.status == "not_supported"}
    # An absence fails CI only when established: both versions refused (and confirmed).
    if report.versions and {0x0303, 0x0304} <= refused and spoken:
        names = [registry.version_name(v) for v in spoken]
        out.append(Finding("high", "version.no_modern", "neither TLS 1.2 nor TLS 1.3 is spoken",
                           items=tuple(names)))
    g12 = report.group_audit(0x0303)
    if g12 is not None and g12.dhe is not None and g12.dhe.fixed is not None:
        fixed = g12.dhe.fixed
        if fixed.bits < 2048:   # Logjam: 1024-bit primes are within reach of a state
            out.append(Finding("high" if fixed.bits < 1024 else "medium", "dh.weak",
                               f"DHE with a {fixed.bits}-bit {dh_modulus_word(fixed)} (under "
                               "2048 bits)",
                               items=(fixed.name,), version="TLS 1.2"))
        out += _dh_prime_findings(fixed)
    c = report.consistency
    if c is not None and c.status == "inconsistent":
        # Not an absence: two different answers to one hello were seen.
        out.append(Finding("medium", "target.inconsistent", "the target answered the same "
                           "hello differently (likely several servers or configurations "
                           "behind one name); results built from many connections may merge "
                           "them (" + "; ".join(_distinct(c.answers) + list(c.notes)) + ")",
                           items=c.affected))
    out += _pq_findings(report)
    out += certificate_findings(report, now or datetime.now(timezone.utc))
    out += _inconclusive_findings(report)
    return out


def _distinct(answers: tuple[str, ...]) -> list[str]:
    """'answer (after versions, suites)' per distinct answer of 'phase: answer' lines."""
    seen: dict[str, list[str]] = {}
    for line in answers:
        phase, _, answer = line.partition(": ")
        seen.setdefault(answer, []).append(phase)
    return [f"{answer} (after {', '.join(phases)})" for answer, phases in seen.items()]


def dh_modulus_word(fixed: DhParameters) -> str:
    """'prime' when the check found (or the table knows) p prime, else 'modulus'."""
    return "modulus" if fixed.prime in ("composite", "unchecked") else "prime"


def _dh_prime_findings(fixed: DhParameters) -> list[Finding]:
    """What the one primality check (kex/dhprime.py) established about custom parameters:
    a composite modulus is high (no security: the discrete logarithm splits over its
    factors); a modulus is called a prime only when the check said so."""
    if fixed.standard is not None:
        return []
    if fixed.prime == "composite":
        severity, code = "high", "dh.not_prime"
        text = f"DHE with a {fixed.bits}-bit modulus that is not prime ({fixed.prime_detail})"
    elif fixed.prime == "unchecked":
        severity, code = "info", "dh.custom"
        text = (f"DHE with a custom {fixed.bits}-bit modulus, primality not checked "
                f"({fixed.prime_detail})")
    else:
        severity, code = "info", "dh.custom"
        safe = f" (not a safe prime: {fixed.prime_detail})" if fixed.prime == "not_safe" else ""
        text = f"DHE with a custom {fixed.bits}-bit prime{safe}"
    return [Finding(severity, code, text, items=(fixed.name,), version="TLS 1.2")]


def _pq_findings(report: AuditReport) -> list[Finding]:
    out = []
    g13 = report.group_audit(0x0304)
    pq = [g for g in (g13.supported if g13 else ()) if g.id in (0x11EB, 0x11EC, 0x11ED, 0x11EE,
                                                                 0x0200, 0x0201, 0x0202, 0x6399)]
    if g13 is not None and g13.spoken and not pq and not g13.inconclusive:
        out.append(Finding("info", "pq.none", "no post-quantum key exchange in TLS 1.3",
                           version="TLS 1.3"))
    for v in report.post_quantum:
        if v.check == "tolerance" and v.verdict == "no":
            out.append(Finding("medium", "pq.intolerant", f"a hello with {v.subject} is "
                               f"refused: {v.detail}", items=(v.subject,), version="TLS 1.3"))
        if v.check == "browser_like" and v.verdict == "no" and "although" in v.detail:
            out.append(Finding("low", "pq.classic_preferred", v.detail, items=(v.subject,),
                               version="TLS 1.3"))
    return out


def _inconclusive_findings(report: AuditReport) -> list[Finding]:
    out = []
    for v in report.versions:
        if v.status == "inconclusive":
            out.append(Finding("info", "audit.inconclusive", f"{v.version.name} support not "
                               f"established: {v.detail}", version=v.version.name))
    for g in report.groups:
        if g.inconclusive:
            out.append(Finding("info", "audit.inconclusive", f"{g.version.name}: "
                               f"{len(g.inconclusive)} group(s) not established",
                               items=tuple(c.name for c in g.inconclusive),
                               version=g.version.name))
    for s in report.suites:
        if not s.complete:
            what = "cipher suite list may be incomplete" if s.supported else \
                "cipher suites not established"
            out.append(Finding("info", "audit.inconclusive", f"{s.version.name}: {what}",
                               version=s.version.name))
    for a in report.signature_schemes:
        if a.status == "inconclusive":
            out.append(Finding("info", "audit.inconclusive", f"{a.version.name}: signature "
                               f"schemes not established: {a.reason}", version=a.version.name))
    for pqv in report.post_quantum:
        if pqv.check == "tolerance" and pqv.verdict == "inconclusive":
            out.append(Finding("info", "audit.inconclusive", "post-quantum tolerance (a hello "
                               f"with {pqv.subject}) not established: {pqv.detail}",
                               items=(pqv.subject,), version="TLS 1.3"))
    return out


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
    when empty): versions probed only to plan other checks yield none of their own. Each
    finding rated by the policies' `severity` tables and split off when a policy waives it
    (`rate`): (findings, waived), each worst first."""
    asked = set(report.checks)
    if asked and "versions" not in asked:
        report = dataclasses.replace(report, versions=())
    found = builtin_findings(report)
    for policy in policies:
        found += evaluate(report, policy)
    if asked:
        found = [f for f in found if check_of(f.code) in asked | {""}]
    # a check's findings go with the check's name, whatever their codes
    found += check_findings(tuple(r for r in report.check_results
                                  if not asked or r.name in asked))
    rated = [rate(f, policies) for f in dict.fromkeys(found)]
    unique = list(dict.fromkeys(rated))

    def ordered(items: list[Finding]) -> tuple[Finding, ...]:
        return tuple(sorted(items, key=lambda f: -severity_rank(f.severity)))
    return (ordered([f for f in unique if f.waiver is None]),
            ordered([f for f in unique if f.waiver is not None]))


def rate(finding: Finding, policies: list[Policy]) -> Finding:
    """`finding` as the policies have it. A policy's own finding already has the policy's
    severity; a built-in finding (or a check's) takes the severity the policies' `severity`
    tables give its code (the highest, when several name it). A finding is waived by its
    own policy's `waive` table, a built-in one by any policy's (the first that names it)."""
    mine = [p for p in policies if p.name == finding.policy] if finding.policy != "builtin" \
        else policies
    if finding.policy == "builtin":
        ratings = [r for p in mine if (r := p.rated(finding.code)) is not None]
        if ratings:
            finding = dataclasses.replace(finding, severity=max(ratings, key=severity_rank))
    for policy in mine:
        reason = policy.waiver(finding.code)
        if reason is not None:
            return dataclasses.replace(finding, waiver=reason, waived_by=policy.name)
    return finding


def at_or_above(findings: tuple[Finding, ...], threshold: str) -> list[Finding]:
    limit = severity_rank(threshold)
    return [f for f in findings if severity_rank(f.severity) >= limit]
