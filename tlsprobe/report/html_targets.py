"""The opening table of `scan --html` with several targets: one row per target (its
address with a link to its section, the rating, whether it answered, its findings by
severity), so that a reader of a ten-target page sees at once which target to read; and
the page's layout rules that keep a page of many wide tables inside the window (a table
wider than the window scrolls in its own box, long words wrap: no sideways scroll of the
page at 800 pixels)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.severity import Severity
from tlsprobe.model.units import host_port
from tlsprobe.report.escape import shown

#: added to report.html.STYLE: tables scroll inside their own box, long words wrap
LAYOUT_CSS = """
table{display:block;max-width:100%;overflow-x:auto}
body{overflow-wrap:break-word}pre{white-space:pre-wrap}
"""
SEVERITIES = (Severity.critical, Severity.high, Severity.medium, Severity.low, Severity.info)


def _e(text: object) -> str:
    """Untrusted text for the page, as report.html._e: non-printable characters escaped,
    then HTML."""
    return html.escape(shown(str(text)), quote=True)


def anchor(index: int) -> str:
    """The id of the `index`th target's section (0-based, in input order)."""
    return f"target-{index + 1}"


def where(r: AuditReport) -> str:
    return host_port(r.host, r.port)


def _rating(r: AuditReport) -> str:
    if r.rating is None or r.rating.grade is None:
        return "not rated"
    return r.rating.grade.value + (" (provisional)" if r.rating.provisional else "")


def _findings(r: AuditReport) -> str:
    counts: dict[str, int] = {}
    for f in r.findings:
        counts[f.severity] = counts.get(f.severity, 0) + 1
    return ", ".join(f'<span class="sev sev-{_e(s)}">{counts[s]} {_e(s)}</span>'
                     for s in SEVERITIES if s in counts) or "none"


def targets_html(reports: Sequence[AuditReport]) -> str:
    """The per-target table ("Targets"), one row per report in input order."""
    rows = []
    for i, r in enumerate(reports):
        reached = "yes" if not r.error else f"no: {_e(r.error_kind or 'error')}"
        tone = "v-good" if not r.error else "v-bad"
        rows.append(f'<tr><td><a href="#{anchor(i)}">{_e(where(r))}</a></td>'
                    f"<td>{_e(_rating(r))}</td><td class=\"{tone}\">{reached}</td>"
                    f"<td>{_findings(r)}</td></tr>")
    return ('<h2>Targets</h2>\n<table class="targets"><tr><th>Target</th><th>Rating</th>'
            "<th>Reachable</th><th>Findings</th></tr>" + "".join(rows) + "</table>\n")


__all__ = ["LAYOUT_CSS", "anchor", "targets_html"]
