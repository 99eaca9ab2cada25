"""The policy's rules: what an audit shows against a policy (`evaluate`). Each rule is a
small function of (report, policy) giving the findings of one kind; POLICY_RULES lists them
in the order their findings are reported (SUITE_RULES: those about one version's suites).
A rule whose data the audit lacks, or that the policy does not ask for, finds nothing. DH
sizes are read from the DH parameters and the group table (registry.ffdhe_bits), never
from a group's name. Model values in, findings out; policy/findings.py adds the built-in
findings and rates, waives and orders them all.
"""

from __future__ import annotations

from collections.abc import Callable

from tlsprobe import registry
from tlsprobe.model.audit import (
    ORDER_CLIENT,
    AuditReport,
    DheAudit,
    DhParameters,
    Finding,
    SuiteAudit,
)
from tlsprobe.model.probe import CertificateInfo
from tlsprobe.model.severity import Severity
from tlsprobe.policy.certificate import names
from tlsprobe.policy.load import Policy

__all__ = ["POLICY_RULES", "SUITE_RULES", "PolicyRule", "SuiteRule", "dh_modulus_word",
           "evaluate"]


#: a rule: the findings of one kind that `report` shows against `policy` (none when the
#: policy does not ask, or the audit has no data for it)
PolicyRule = Callable[[AuditReport, Policy], list[Finding]]
#: a rule about one protocol version's cipher suites
SuiteRule = Callable[[SuiteAudit, Policy], list[Finding]]


def _version_severity(version: int) -> Severity:
    """A version outside the policy: SSL 3.0 critical, TLS 1.0/1.1 high (RFC 8996), else
    medium (the policy is what the user asked to be held to)."""
    return {0x0300: Severity.critical, 0x0301: Severity.high,
            0x0302: Severity.high}.get(version, Severity.medium)


def _finding(policy: Policy, code: str, message: str, items: list[str] | tuple[str, ...],
             version: str | None, severity: Severity | None = None) -> Finding:
    """A finding of `policy`, at `severity` or the policy's own for `code`."""
    return Finding(severity or policy.sev(code), code, message, policy.name, tuple(items),
                   version)


def _versions_not_allowed(report: AuditReport, policy: Policy) -> list[Finding]:
    if not report.versions or policy.versions is None:
        return []
    names = [(v, registry.version_name(v)) for v in report.spoken_versions()
             if v not in policy.versions]
    return [_finding(policy, "version.not_allowed", f"{name} is enabled", [name], name,
                     policy.rated("version.not_allowed") or _version_severity(v))
            for v, name in names]


def _versions_missing(report: AuditReport, policy: Policy) -> list[Finding]:
    """A required version not spoken, when its absence was established (not_supported);
    asked by `required_versions`, with or without a `versions` list."""
    if not report.versions or not policy.required_versions:
        return []
    spoken = report.spoken_versions()
    refused = {s.version.id for s in report.versions if s.status == "not_supported"}
    names = [registry.version_name(v) for v in policy.required_versions
             if v not in spoken and v in refused]
    return [_finding(policy, "version.missing", f"{name} is not supported", [name], name)
            for name in names]


def _suites_not_allowed(audit: SuiteAudit, policy: Policy) -> list[Finding]:
    allowed = policy.tls13_cipher_suites if audit.version.id == 0x0304 \
        else policy.cipher_suites
    if allowed is None:
        return []
    extra = [c.iana_name for c in audit.supported if c.id not in allowed]
    if not extra:
        return []
    return [_finding(policy, "suite.not_allowed", f"{audit.version.name}: {len(extra)} cipher "
                     f"suite(s) outside the policy: {names(extra)}", extra, audit.version.name)]


def _order_not_server(audit: SuiteAudit, policy: Policy) -> list[Finding]:
    if not (policy.server_preferred_order and audit.order == ORDER_CLIENT):
        return []
    return [_finding(policy, "order.not_server", f"{audit.version.name}: the server follows "
                     "the client's cipher suite order", [], audit.version.name)]


#: per protocol version's suites, in this order
SUITE_RULES: tuple[SuiteRule, ...] = (_suites_not_allowed, _order_not_server)


def _suites(report: AuditReport, policy: Policy) -> list[Finding]:
    """SUITE_RULES for each version's suites, a version at a time. The policy's suite
    rules apply only to a version whose suite list the policy names."""
    out: list[Finding] = []
    for audit in report.suites:
        if (policy.tls13_cipher_suites if audit.version.id == 0x0304
                else policy.cipher_suites) is None:
            continue
        for rule in SUITE_RULES:
            out += rule(audit, policy)
    return out


def _groups_not_allowed(report: AuditReport, policy: Policy) -> list[Finding]:
    if policy.groups is None:
        return []
    out: list[Finding] = []
    for g in report.groups:
        extra = [c.name for c in g.supported if c.id not in policy.groups]
        if extra:
            out.append(_finding(policy, "group.not_allowed", f"{g.version.name}: {len(extra)} "
                                f"group(s) outside the policy: {names(extra)}", extra,
                                g.version.name))
    return out


def _groups_missing(report: AuditReport, policy: Policy) -> list[Finding]:
    """A recommended group TLS 1.3's group audit asked for and found refused (not when it was
    not asked, or its answer was inconclusive)."""
    g13 = report.group_audit(0x0304)
    if g13 is None or not g13.spoken:
        return []
    refused = {g.id for g in g13.not_supported}
    missing = [registry.group_name(code) for code in policy.required_groups if code in refused]
    return [_finding(policy, "group.missing", f"{name} is recommended but not supported in "
                     "TLS 1.3", [name], "TLS 1.3") for name in missing]


def _dh_sizes(dh: DheAudit) -> list[tuple[str, int]]:
    """(name, prime bits) of the DH parameters a group audit saw (TLS 1.2, or the older
    version of a server without it): the fixed ones, and each negotiated RFC 7919 group,
    its size from the group table."""
    sizes = [(dh.fixed.name, dh.fixed.bits)] if dh.fixed else []
    return sizes + [(g.name, bits) for g in dh.negotiated
                    if (bits := registry.ffdhe_bits(g.id)) is not None]


def _dh_too_small(report: AuditReport, policy: Policy) -> list[Finding]:
    """DH parameters under the policy's minimum, per version a group audit read them in."""
    floor = policy.dh_min_bits
    if not floor:
        return []
    out: list[Finding] = []
    for g in report.ske_group_audits():
        dh = g.dhe
        small = [(n, b) for n, b in _dh_sizes(dh) if b < floor] if dh is not None else []
        if dh is None or not small:
            continue
        least = min(b for _, b in small)
        word = dh_modulus_word(dh.fixed) if dh.fixed and dh.fixed.bits == least else "prime"
        out.append(_finding(policy, "dh.too_small", f"DHE with a {least}-bit {word} (policy "
                            f"minimum {floor})", [n for n, _ in small], g.version.name))
    return out


def _leaf_kind(leaf: CertificateInfo) -> str:
    """The leaf's key type as policies name it: rsa, ecdsa, ed25519..."""
    return "rsa" if leaf.rsa_key else "ecdsa" if leaf.key_type.startswith("EC") \
        else leaf.key_type.lower()


def _leaves(report: AuditReport) -> list[tuple[str, CertificateInfo]]:
    """Each chain's leaf with the words its findings begin with: none for the default
    chain, "ECDSA certificate: " for the chain of another key type (each judged alone)."""
    out = [("", report.certificates[0])] if report.certificates else []
    return out + [(f"{c.key_type} certificate: ", c.certificates[0])
                  for c in report.other_certificates if c.certificates]


def _certificate_type(report: AuditReport, policy: Policy) -> list[Finding]:
    if policy.certificate_types is None:
        return []
    return [_finding(policy, "certificate.type_not_allowed", f"{label}certificate key "
                     f"{leaf.key_type} (policy: {', '.join(policy.certificate_types)})",
                     [leaf.subject], None)
            for label, leaf in _leaves(report) if _leaf_kind(leaf) not in policy.certificate_types]


def _certificate_curve(report: AuditReport, policy: Policy) -> list[Finding]:
    """An ECDSA leaf key on a curve the policy does not list (Mozilla's certificate_curves:
    P-256 and P-384). The curve is the one the certificate names (model/describe.py's key
    type, "EC secp521r1"), looked up as a group."""
    if policy.certificate_curves is None:
        return []
    allowed = ", ".join(sorted(registry.group_name(c) for c in policy.certificate_curves))
    out: list[Finding] = []
    for label, leaf in _leaves(report):
        kind, _, curve = leaf.key_type.partition(" ")
        if kind != "EC" or not curve:
            continue
        try:
            code: int | None = registry.parse_group(curve)
        except ValueError:
            code = None
        if code not in policy.certificate_curves:
            out.append(_finding(policy, "certificate.curve_not_allowed", f"{label}certificate "
                                f"key on {curve} (policy: {allowed or 'none'})", [leaf.subject],
                                None))
    return out


def _certificate_key_size(report: AuditReport, policy: Policy) -> list[Finding]:
    if not policy.rsa_min_bits:
        return []
    return [_finding(policy, "certificate.key_too_small", f"{label}RSA key of {leaf.key_bits} "
                     f"bits (policy minimum {policy.rsa_min_bits})", [leaf.subject], None)
            for label, leaf in _leaves(report)
            if _leaf_kind(leaf) == "rsa" and (leaf.key_bits or 0) < policy.rsa_min_bits]


#: the policy's rules, in the order of their findings (policy/codes.py lists their codes)
POLICY_RULES: tuple[PolicyRule, ...] = (
    _versions_not_allowed, _versions_missing, _suites, _groups_not_allowed, _groups_missing,
    _dh_too_small, _certificate_type, _certificate_curve, _certificate_key_size)


def evaluate(report: AuditReport, policy: Policy) -> list[Finding]:
    """Findings of `report` against `policy`: POLICY_RULES in order (a rule whose data
    the audit lacks, or that the policy does not ask for, finds nothing)."""
    return [finding for rule in POLICY_RULES for finding in rule(report, policy)]



def dh_modulus_word(fixed: DhParameters) -> str:
    """'prime' when the check found (or the table knows) p prime, else 'modulus'."""
    return "modulus" if fixed.prime in ("composite", "unchecked") else "prime"
