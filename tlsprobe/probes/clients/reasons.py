"""Why a server refused a client's hello, where the audit of the same target establishes it.

A refusal (an alert or a close) says only "no"; the reason is stated when what the audit
enumerated (scan with the audit phases) shows it, checked in this order, each with its
evidence:
  - no shared version: none of the versions the client offers is spoken (every one of them
    established as spoken or not: an unknown one leaves the reason open);
  - no shared cipher suite: for each offered version the server speaks, none of the client's
    suites of that version is among the server's (suite phase complete for those versions);
  - no shared group: TLS 1.3 is the only shared version and none of the client's groups is
    among those the group phase found (complete: nothing inconclusive);
  - version intolerance: the tls13_intolerance check found the server refusing a hello that
    offers TLS 1.3 and the client offers it, or unknown_version found it refusing an unknown
    version and the client offers one (GREASE);
  - hello too large: the large_hello check found a hello of at most the client's size
    refused (confirmed) where the plain hello is answered.
Else "refused" (the alert or close is the detail). Nothing here sends anything.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.check_details import ReplyKind, ToleranceDetails
from tlsprobe.model.checks import Verdict
from tlsprobe.model.clients import ClientProfile, FailureReason
from tlsprobe.probes.clients.fresh import ProfileError, derived_config, recorded_hello

__all__ = ["established_reason", "reset_reason"]

TLS13 = 0x0304
_REFUSED = (ReplyKind.alert, ReplyKind.closed, ReplyKind.reset, ReplyKind.silent)


def established_reason(profile: ClientProfile, report: AuditReport | None
                       ) -> tuple[FailureReason, str]:
    """(the reason, its evidence) of a refusal of `profile`'s hello; (refused, "") when
    the audit does not show one."""
    if report is None:
        return FailureReason.refused, ""
    try:
        config = derived_config(profile.hello, None)
        hello = recorded_hello(profile.hello)
    except ProfileError:
        return FailureReason.refused, ""
    offered = [v for v in config.versions if v in (0x0300, 0x0301, 0x0302, 0x0303, TLS13)]
    known = {v.version.id: v.status == "supported" for v in report.versions}
    if offered and all(v in known for v in offered):
        shared = [v for v in offered if known[v]]
        if not shared:
            spoken = ", ".join(registry.version_name(v) for v in report.spoken_versions())
            return FailureReason.no_shared_version, \
                f"the server speaks {spoken or 'no version tlsprobe tried'}"
        for check in (_suites, _groups):
            found = check(config.cipher_suites(), config.groups, shared, report)
            if found is not None:
                return found
    for check_tol in (_intolerance, _too_large):
        found = check_tol(report, offered, hello.supported_versions, len(profile.hello))
        if found is not None:
            return found
    return FailureReason.refused, ""


def reset_reason(profile: ClientProfile, report: AuditReport | None
                 ) -> tuple[FailureReason, str] | None:
    """The reason of a reset or silence (a network failure) the audit explains: the
    large_hello check found hellos of the client's size reset or dropped (the middlebox
    behaviour it looks for); None otherwise (the failure stays inconclusive)."""
    if report is None:
        return None
    return _too_large(report, [], [], len(profile.hello))


def _suites(suites: tuple[int, ...], groups: tuple[int, ...], shared: list[int],
            report: AuditReport) -> tuple[FailureReason, str] | None:
    audits = [report.suite_audit(v) for v in shared]
    if any(a is None or not a.complete for a in audits):
        return None
    if any({c.id for c in a.supported} & set(suites) for a in audits if a is not None):
        return None
    return FailureReason.no_shared_suite, ("none of the client's suites is among the "
        f"server's for {', '.join(registry.version_name(v) for v in shared)}")


def _groups(suites: tuple[int, ...], groups: tuple[int, ...], shared: list[int],
            report: AuditReport) -> tuple[FailureReason, str] | None:
    if shared != [TLS13]:
        return None
    audit = report.group_audit(TLS13)
    if audit is None or audit.inconclusive or not audit.supported:
        return None
    theirs = {c.id for c in audit.supported}
    if theirs & set(groups):
        return None
    names = ", ".join(registry.group_name(g) for g in sorted(theirs))
    return FailureReason.no_shared_group, f"the server's TLS 1.3 groups: {names}"


def _finding(report: AuditReport, name: str) -> ToleranceDetails | None:
    for result in report.check_results:
        if result.name == name and result.verdict == Verdict.not_tolerated and \
                isinstance(result.details, ToleranceDetails):
            return result.details
    return None


def _intolerance(report: AuditReport, offered: list[int], versions: list[int],
                 size: int) -> tuple[FailureReason, str] | None:
    if TLS13 in offered and _finding(report, "tls13_intolerance") is not None:
        return FailureReason.version_intolerance, ("tls13_intolerance: the server refuses "
            "a hello offering TLS 1.3")
    unknown = [v for v in versions if registry.is_grease(v) or v > TLS13 and v >> 8 == 3]
    if unknown and _finding(report, "unknown_version") is not None:
        return FailureReason.version_intolerance, ("unknown_version: the server refuses a "
            "hello offering an unknown version, which this client offers (GREASE)")
    return None


def _too_large(report: AuditReport, offered: list[int], versions: list[int],
               size: int) -> tuple[FailureReason, str] | None:
    details = _finding(report, "large_hello")
    if details is None:
        return None
    refused = [v for v in details.variants if v.answer in _REFUSED and v.confirmed
               and v.size <= size]
    if not refused:
        return None
    smallest = min(refused, key=lambda v: v.size)
    return FailureReason.hello_too_large, (f"large_hello: a {smallest.size}-byte hello is "
        f"refused ({smallest.answer.value}); this client's is {size} bytes")
