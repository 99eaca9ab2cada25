"""The rating in the text, HTML, CSV and summary outputs: one line ("Rating: B (capped: TLS
1.0 offered)") that opens each target's report, and the section with the scores, the caps
and the facts they rest on, the warnings and the rules that could not be applied. Plain
strings here (what a server wrote, quoted in a check's reason, is escaped by the caller's
renderer); the rules: tlsprobe/policy/rating.py, docs/RATING.md.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tlsprobe.model.rating import GRADE_ORDER, Grade, Rating, SubScore
from tlsprobe.report.escape import shown
from tlsprobe.report.tones import Tone

if TYPE_CHECKING:
    from tlsprobe.model.audit import AuditReport

__all__ = ["GRADE_TONE", "grade_tone", "grades_line", "rating_detail_lines", "rating_html",
           "rating_line", "rating_rows"]

#: a grade's tone for the terminal and HTML (report/tones.py TONE_STYLE)
GRADE_TONE: dict[Grade, Tone] = {Grade.A_PLUS: "good", Grade.A: "good", Grade.A_MINUS: "good", Grade.B: "unsure",
              Grade.C: "unsure", Grade.D: "bad", Grade.E: "bad", Grade.F: "bad", Grade.T: "bad",
              Grade.M: "bad"}


def rating_line(rating: Rating) -> str:
    """"Rating: LABEL", the first line of a target's report."""
    return f"Rating: {rating.label()}"


def _score(s: SubScore) -> str:
    name = s.category.replace("_", " ")
    if s.score is None:
        return f"{name}: not established ({s.detail})"
    return f"{name}: {s.score} (weighted {s.weighted}; {s.detail})"


def rating_detail_lines(rating: Rating) -> list[str]:
    """The section under the findings: the score and its three categories, each cap with
    what it rests on, each warning and each rule not applied."""
    total = "not established" if rating.score is None else \
        f"{rating.score} ({rating.score_grade.value if rating.score_grade else '?'} before " \
        "the caps)"
    out = [f"Score: {total}"]
    out += [f"  {_score(s)}" for s in (rating.protocol_support, rating.key_exchange,
                                       rating.cipher_strength)]
    if rating.grade_ignoring_trust is not None:
        out.append(f"Grade if the certificate were trusted: {rating.grade_ignoring_trust}")
    for cap in rating.caps:
        rests = f" [{'; '.join(cap.evidence)}]" if cap.evidence else ""
        out.append(f"Cap {cap.cap}: {cap.reason} ({cap.source}){rests}")
    for warning in rating.warnings:
        rests = f" [{'; '.join(warning.evidence)}]" if warning.evidence else ""
        out.append(f"Warning (A-): {warning.reason} ({warning.source}){rests}")
    for unknown in rating.unknowns:
        could = f"could cap at {unknown.cap}" if unknown.cap else "could only change A+"
        said = f": {unknown.detail}" if unknown.detail else ""
        out.append(f"Not applied: {unknown.reason}{said} ({could})")
    out.append(f"Rules: {rating.spec}; tlsprobe's deviations in docs/RATING.md")
    return out


def rating_rows(rating: Rating) -> list[tuple[str, str, str, str]]:
    """CSV rows (item, status, detail, evidence): the grade, the score, each cap, warning
    and unknown."""
    rows = [("grade", rating.grade.value if rating.grade else "not rated", rating.label(),
             ""),
            ("score", "" if rating.score is None else str(rating.score),
             "; ".join(_score(s) for s in (rating.protocol_support, rating.key_exchange,
                                           rating.cipher_strength)), "")]
    rows += [(f"cap {c.rule}", c.cap.value, f"{c.reason} ({c.source})", "; ".join(c.evidence))
             for c in rating.caps]
    rows += [(f"warning {w.rule}", "A-", f"{w.reason} ({w.source})", "; ".join(w.evidence))
             for w in rating.warnings]
    rows += [(f"unknown {u.rule}", u.cap.value if u.cap else "", u.reason, u.detail)
             for u in rating.unknowns]
    return rows


def grades_line(reports: Sequence[AuditReport]) -> str:
    """The summary of a run: targets per grade, best first ("Ratings: A 2, B 1 (1
    provisional)"); "" when no target was rated."""
    rated = [r.rating for r in reports if r.rating is not None and r.rating.grade is not None]
    if not rated:
        return ""
    order = (*GRADE_ORDER, Grade.T, Grade.M)
    counts = {g: sum(1 for x in rated if x.grade is g) for g in order}
    provisional = sum(1 for x in rated if x.provisional)
    unsure = f" ({provisional} provisional)" if provisional else ""
    return "Ratings: " + ", ".join(f"{g.value} {n}" for g, n in counts.items() if n) + unsure


def grade_tone(rating: Rating) -> Tone:
    """Good, unsure or bad news: a provisional grade or none at all is unsure."""
    return GRADE_TONE[rating.grade] if rating.grade and not rating.provisional else "unsure"


def rating_html(rating: Rating, tone_class: Mapping[str, str]) -> tuple[str, str]:
    """For the HTML page: the "Rating: ..." line that opens a target's section (in its
    grade's colour, `tone_class` the page's CSS class per tone) and the rating section
    (escaped: a check's reason may quote the server)."""
    def esc(text: str) -> str:
        return html.escape(shown(text), quote=True)
    line = (f'<p class="rating"><span class="{tone_class[grade_tone(rating)]}">'
            f"{esc(rating_line(rating))}</span></p>\n")
    section = "<h3>Rating</h3>\n" + "".join(f"<p>{esc(t)}</p>\n"
                                             for t in rating_detail_lines(rating))
    return line, section
