"""`scan --junit FILE`: the audit as JUnit XML, the test report every CI system shows (Jenkins,
GitLab, GitHub Actions' test reporters, Azure Pipelines).

One `testsuite` per target (named HOST:PORT, with its start time and duration), holding:
- one `testcase` per check run (classname `tlsprobe.check.CATEGORY`, name the check). It
  FAILS when the server is vulnerable or does not tolerate what the check sends (whatever
  --fail-on says: the test asks "is the server affected?"), or when the check's own
  finding is at or above the threshold (a hygiene check's "not supported"); a finding a
  policy waives passes, the waiver in its `system-out` (for a derived check without a
  finding of its own, such as sweet32, the findings that state its facts: suite.weak,
  policy/checks.py COVERED_BY). A check that does not apply is
  `skipped` ("not applicable: why"); an INCONCLUSIVE check is `skipped` too, with
  "inconclusive: why" as its message: never a silent pass, and never a failure, since a
  verdict tlsprobe could not establish fails no gate (the scan's exit code ignores it too),
  unless a policy's `severity` table names its finding's code (then it fails as --fail-on);
- one `testcase` per finding code of the audit itself (classname `tlsprobe.finding.AREA`,
  name the code: version.not_allowed, certificate.expires_soon ...), failing when one of
  its findings is at or above the threshold, passing with the findings in `system-out`
  when they are below it or waived; a code whose findings are all inconclusive (what could
  not be established: audit.inconclusive, certificate.not_verified) is `skipped`
  ("inconclusive: ..."), whatever the threshold, unless a policy's `severity` table names
  the code (model/audit.py Finding.inconclusive);
- a `rating` testcase when the target was rated: failing below --fail-under (with
  --fail-under also for a target not rated, below every gate);
- with --fail-on-change, a `changes` testcase (classname `tlsprobe.baseline`), failing
  when the target changed since the baseline in a way that gate fails on;
- a target that could not be audited: one `audit` testcase with an `error` element (the
  error kind as its type).
The threshold is --fail-on, or `low` without it (info findings never fail a test case).
Text from the network (a finding quoting a banner) is escaped as on the terminal.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tlsprobe.model.checks import Verdict
from tlsprobe.model.severity import Severity
from tlsprobe.model.units import host_port
from tlsprobe.policy.checks import COVERED_BY
from tlsprobe.report.escape import shown
from tlsprobe.report.tones import check_severity

if TYPE_CHECKING:
    from tlsprobe.model.audit import AuditReport, Finding
    from tlsprobe.model.checks import CheckResult

__all__ = ["DEFAULT_THRESHOLD", "junit_tree", "write_junit"]

#: --fail-on-change: why a target fails that gate (empty: it passes)
ChangeGate = Callable[["AuditReport"], list[str]]
#: the threshold without --fail-on
DEFAULT_THRESHOLD = Severity.low
_PROBLEMS = (Verdict.vulnerable, Verdict.not_tolerated)


def _target(r: AuditReport) -> str:
    return host_port(r.host, r.port)


def _text(f: Finding) -> str:
    items = f" ({', '.join(f.items)})" if f.items else ""
    return shown(f"[{f.severity}] {f.code}: {f.message}{items}")


def _case(suite: ET.Element, classname: str, name: str, seconds: float = 0.0) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name,
                         time=f"{seconds:.3f}")


def _out(case: ET.Element, lines: list[str]) -> None:
    if lines:
        ET.SubElement(case, "system-out").text = "\n".join(lines)


def _check_case(suite: ET.Element, r: AuditReport, c: CheckResult,
                threshold: Severity) -> str:
    """The check's test case; returns its outcome (passed, failure, skipped)."""
    case = _case(suite, f"tlsprobe.check.{c.category}", c.name)
    why = shown(f"{c.title}: {c.verdict}: {c.reason}")
    evidence = [shown(e) for e in c.evidence]
    # the check's own finding code, or the codes of the findings that state its facts
    codes = (c.code,) if c.code is not None else COVERED_BY.get(c.name, ())
    waived = [f for f in r.waived if f.code in codes]
    own = [f for f in r.findings if f.code in codes]
    failing = [f for f in own if f.gates and Severity(f.severity).rank >= threshold.rank]
    # an inconclusive check's finding gates only when a policy named its code (it then
    # fails --fail-on: the case says so, not "skipped")
    if c.verdict in (Verdict.not_applicable, Verdict.inconclusive) and not failing:
        ET.SubElement(case, "skipped", message=f"{c.verdict}: {shown(c.reason)}")
        _out(case, evidence)
        return "skipped"
    if failing or (c.verdict in _PROBLEMS and (own or not waived)):
        kind = str(check_severity(r, c) or c.verdict)   # as the policies rate it
        node = ET.SubElement(case, "failure", message=why, type=kind)
        node.text = "\n".join([_text(f) for f in own] + evidence)
        return "failure"
    _out(case, [why] + [f"waived: {_text(f)} ({shown(f.waiver or '')})" for f in waived]
         + [_text(f) for f in own] + evidence)
    return "passed"


def _finding_cases(suite: ET.Element, r: AuditReport, threshold: Severity) -> list[str]:
    """One test case per finding code the audit itself made (not a check's)."""
    codes: dict[str, list[tuple[Finding, bool]]] = {}
    checks = {c.code for c in r.check_results if c.code}
    for f in r.findings:
        if f.code not in checks:
            codes.setdefault(f.code, []).append((f, False))
    for f in r.waived:
        if f.code not in checks:
            codes.setdefault(f.code, []).append((f, True))
    outcomes = []
    for code, found in codes.items():
        case = _case(suite, f"tlsprobe.finding.{code.partition('.')[0]}", code)
        failing = [f for f, _ in found
                   if f.gates and Severity(f.severity).rank >= threshold.rank]
        if not failing and all(f.inconclusive for f, _ in found):
            # what could not be established: no pass, no failure (as an inconclusive check)
            ET.SubElement(case, "skipped", message=shown(
                f"inconclusive: {found[0][0].message}"
                + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")))
            _out(case, [("waived: " if w else "") + _text(f) for f, w in found])
            outcomes.append("skipped")
            continue
        if failing:
            node = ET.SubElement(case, "failure", message=_text(failing[0]),
                                 type=str(max((Severity(f.severity) for f in failing),
                                              key=lambda s: s.rank)))
            node.text = "\n".join(_text(f) for f, _ in found)
            outcomes.append("failure")
        else:
            _out(case, [("waived: " if w else "inconclusive: " if f.inconclusive else
                         "below the threshold: ") + _text(f) for f, w in found])
            outcomes.append("passed")
    return outcomes


def _rating_case(suite: ET.Element, r: AuditReport, fail_under: str | None) -> list[str]:
    """The rating's test case: for a rated target, and for one that could not be rated when
    --fail-under is given (below every gate, docs/RATING.md: the exit code fails on it, so
    the report shows why)."""
    if r.rating is None or (r.rating.grade is None and fail_under is None):
        return []
    case = _case(suite, "tlsprobe.rating", "rating")
    grade = r.rating.grade.value if r.rating.grade is not None else "not rated"
    if fail_under is not None:
        from tlsprobe.model.rating import parse_grade
        if r.rating.below(parse_grade(fail_under)):
            why = f"rated {grade}" if r.rating.grade is not None else r.rating.label()
            ET.SubElement(case, "failure", message=shown(f"{why}, below --fail-under "
                                                         f"{fail_under}"), type="rating")
            return ["failure"]
    _out(case, [f"rated {grade}"])
    return ["passed"]


def _changes_case(suite: ET.Element, r: AuditReport, changes: ChangeGate | None) -> list[str]:
    """With --fail-on-change: a `changes` test case, failing when the target has a change
    the gate fails on (the exit code's 1: the report shows why)."""
    if changes is None:
        return []
    case = _case(suite, "tlsprobe.baseline", "changes")
    reasons = changes(r)
    if reasons:
        ET.SubElement(case, "failure", message=shown("; ".join(reasons)), type="baseline")
        return ["failure"]
    _out(case, ["no change since the baseline that --fail-on-change fails on"])
    return ["passed"]


def _suite(root: ET.Element, r: AuditReport, threshold: Severity,
           fail_under: str | None, changes: ChangeGate | None = None) -> None:
    quic = " (QUIC)" if r.transport == "quic" else ""   # scan --quic --compare-tcp: both
    suite = ET.SubElement(root, "testsuite", name=shown(_target(r)) + quic)
    if r.started_at:
        suite.set("timestamp", r.started_at.removesuffix("Z"))
    outcomes: list[str] = []
    if r.error:
        case = _case(suite, "tlsprobe.audit", "audit", r.duration_s)
        ET.SubElement(case, "error", message=shown(r.error), type=str(r.error_kind or "error"))
        outcomes.append("error")
    else:
        outcomes += [_check_case(suite, r, c, threshold) for c in r.check_results]
        outcomes += _finding_cases(suite, r, threshold)
        outcomes += _rating_case(suite, r, fail_under)
        outcomes += _changes_case(suite, r, changes)
    _counts(suite, outcomes, r.duration_s)


def _counts(node: ET.Element, outcomes: list[str], seconds: float) -> None:
    node.set("tests", str(len(outcomes)))
    for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        node.set(attr, str(outcomes.count(kind)))
    node.set("time", f"{seconds:.3f}")


def junit_tree(reports: Sequence[AuditReport], fail_on: str | None,
               fail_under: str | None = None,
               changes: ChangeGate | None = None,
               compared: Sequence[AuditReport] | None = None) -> ET.ElementTree:
    """The JUnit XML of a scan (see the module docstring); `changes`: with
    --fail-on-change, why a target fails that gate (empty: it passes), for the reports
    `compared` with the baseline (default all; not the audits of --compare-tcp)."""
    threshold = Severity(fail_on) if fail_on else DEFAULT_THRESHOLD
    root = ET.Element("testsuites", name="tlsprobe scan")
    for r in reports:
        gated = compared is None or any(r is c for c in compared)
        _suite(root, r, threshold, fail_under, changes if gated else None)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in root:
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{sum(r.duration_s for r in reports):.3f}")
    return ET.ElementTree(root)


def write_junit(path: str, reports: Sequence[AuditReport], fail_on: str | None,
                fail_under: str | None = None, changes: ChangeGate | None = None,
                compared: Sequence[AuditReport] | None = None) -> None:
    """`scan --junit FILE` (the path was checked before the audit)."""
    tree = junit_tree(reports, fail_on, fail_under, changes, compared)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
