"""A target's verdict against the run's gates (scan --fail-on SEVERITY, --fail-under GRADE):
whether it passes and, when not, why, in words a CI log reader acts on. The exit code is
decided by commands/scan.py `exit_reason` over all targets; this names each target's part in
it, for the summary of a multi-target run and for the target's JSON (`gate`). A target with
an error fails the run too (its error kind sets the exit code when no gate fails). A waived
or inconclusive finding fails no gate (policy/findings.py `at_or_above`)."""

from __future__ import annotations

from collections.abc import Iterable

from tlsprobe.errors import exit_code_for
from tlsprobe.model.audit import AuditReport, GateVerdict, severity_rank
from tlsprobe.policy.findings import at_or_above

__all__ = ["gate_verdict"]

#: finding codes named in a reason before "and N more code(s)"
_NAMED = 5


def gate_verdict(report: AuditReport, fail_on: str | None, fail_under: str | None,
                 more: Iterable[str] = ()) -> GateVerdict:
    """`report` against --fail-on and --fail-under; `more`: reasons of other gates (a
    change since a baseline) to add."""
    reasons: list[str] = []
    if report.error:
        kind = str(report.error_kind or "error").replace("_", " ")
        reasons.append(f"error ({kind}, exit {exit_code_for(report.error_kind)}): "
                       f"{report.error}")
    if fail_on:
        hit = sorted(at_or_above(report.findings, fail_on),
                     key=lambda f: -severity_rank(f.severity))
        if hit:
            codes: dict[str, list[str]] = {}   # code -> its severities, worst code first
            for f in hit:
                codes.setdefault(f.code, []).append(str(f.severity))
            named = ", ".join(f"{code} ({sev[0]}{f' x{len(sev)}' if len(sev) > 1 else ''})"
                              for code, sev in list(codes.items())[:_NAMED])
            rest = f" and {len(codes) - _NAMED} more code(s)" if len(codes) > _NAMED else ""
            reasons.append(f"{len(hit)} finding(s) at or above --fail-on {fail_on}: "
                           f"{named}{rest}")
    if fail_under and report.rating is not None:
        from tlsprobe.model.rating import parse_grade
        if report.rating.below(parse_grade(fail_under)):
            grade = f"rated {report.rating.grade.value}" if report.rating.grade else \
                report.rating.label()
            reasons.append(f"{grade}, below --fail-under {fail_under}")
    reasons += more
    return GateVerdict(passed=not reasons, reasons=tuple(reasons))
