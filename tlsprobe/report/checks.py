"""Rich rendering of the checks of an audit (`AuditReport.check_results`).

One table per section (vulnerability, hygiene, tolerance, HTTP, certificate): check, verdict, and why (the reason; for a vulnerable verdict, the evidence: the
suites or parameters found, which the JSON lists for every verdict). Verdicts
are coloured by good or bad news (report.tones), so that a problem and "inconclusive" stand
out whatever the words; text that came from the
server (suite names are registry names, but notes quote answers) is shown escaped.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.checks import CATEGORIES, CheckResult, Verdict
from tlsprobe.report.escape import shown
from tlsprobe.report.fit import FitTable
from tlsprobe.report.tones import TONE_STYLE, check_tone

SECTION = {"vulnerability": "Vulnerability checks", "hygiene": "Hygiene checks",
           "tolerance": "Tolerance checks", "http": "HTTP checks",
           "certificate": "Certificate checks"}


def _evidence(items: tuple[str, ...], full: bool) -> str:
    """The evidence joined; past 6 items (unless `full`) cut with "and N more"."""
    if full or len(items) <= 6:
        return ", ".join(items)
    return ", ".join(items[:6]) + f" and {len(items) - 6} more"


def checks_section(r: AuditReport, full: bool = False) -> RenderableType:
    """One section per category of the checks asked for ('Vulnerability checks',
    'Tolerance checks', ...), one row per check. A problem (a verdict with a finding) shows
    its evidence under the reason, as a vulnerable derived check does."""
    parts: list[RenderableType] = []
    for category in CATEGORIES:
        results = [c for c in r.check_results if c.category == category]
        if results:
            parts.append(_section(r, SECTION.get(category, category), results, full))
    return Group(*parts)


def _section(r: AuditReport, title: str, results: list[CheckResult],
             full: bool) -> RenderableType:
    table = FitTable("Check", "Verdict", "Why", pad_edge=False, padding=(0, 1))
    for c in results:
        why = Text(shown(c.reason))
        if c.evidence and (c.verdict is Verdict.vulnerable or c.code is not None):
            why.append("\n" + shown(_evidence(c.evidence, full)), style="dim")
        table.add_row(Text(shown(c.title)),
                      Text(str(c.verdict), style=TONE_STYLE[check_tone(r, c)]), why)
    used = sum(c.connections for c in results)
    derived = any(c.method == "derived" for c in results)
    how = f"{used} connection{'' if used == 1 else 's'} of their own" if used else \
        "read from the audit above, no connection of their own"
    if used and derived:
        how += "; the others read from the audit above"
    return Group(Text(f"{title} ({how})", style="bold"), table, Text(""))
