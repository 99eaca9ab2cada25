"""The rating of one audited target: an overall grade after the SSL Labs SSL Server Rating
Guide, as testssl.sh's `--rating` computes it (docs/RATING.md: each rule, its source, and
where tlsprobe deviates). Pure: an AuditReport (its phases, check results and findings) in,
a `model.rating.Rating` out, no I/O.

The steps of the guide: the three category scores (policy/rating_scores.py) give a numeric
score (a zero in any category makes it zero) and a letter (80 A, 65 B, 50 C, 35 D, 20 E,
else F); the caps (policy/rating_rules.py) lower it; with no cap, A becomes A- when there
are warnings and A+ with long HSTS; an untrusted or expired certificate gives T, a name
mismatch M (with the grade the configuration would have otherwise). A rule whose input was
not established (a check inconclusive or not run) is listed as unknown; one that could
lower the grade makes it provisional.
"""

from __future__ import annotations

from dataclasses import replace

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.rating import (
    GRADE_ORDER,
    Grade,
    Rating,
    RatingCap,
    RatingUnknown,
    grade_rank,
)
from tlsprobe.policy.rating_rules import (
    certificate_rules,
    check_rules,
    hsts_rule,
    suite_rules,
    version_rules,
)
from tlsprobe.policy.rating_scores import (
    Notes,
    cipher_strength,
    key_exchange,
    protocol_support,
)

__all__ = ["letter", "rate", "rated"]

#: the guide's table 1: lowest score of each letter
_LETTERS = ((80, Grade.A), (65, Grade.B), (50, Grade.C), (35, Grade.D), (20, Grade.E))


def letter(score: int) -> Grade:
    """The guide's letter for a numeric score."""
    return next((g for limit, g in _LETTERS if score >= limit), Grade.F)


def _capped(grade: Grade, caps: list[RatingCap]) -> Grade:
    """`grade` lowered to the worst A-F cap."""
    worst = max((grade_rank(c.cap) for c in caps if c.cap in GRADE_ORDER), default=0)
    return GRADE_ORDER[max(grade_rank(grade), worst)]


def rate(report: AuditReport) -> Rating | None:
    """The report's rating; None for a report with an error (nothing to rate)."""
    if report.error is not None:
        return None
    notes = Notes()
    protocol = protocol_support(report, notes)
    kx = key_exchange(report, notes)
    cipher = cipher_strength(report, notes)
    if protocol.score is None:
        why = "versions not run" if "versions" not in report.checks else \
            "no protocol version established"
        first = RatingUnknown("protocol_support", why, Grade.F)
        return Rating(None, None, None, protocol, kx, cipher,
                      unknowns=(first, *notes.unknowns))
    version_rules(report, notes)
    suite_rules(report, notes)
    check_rules(report, notes)
    certificate_rules(report, notes)
    hsts = hsts_rule(report, notes)
    parts = (protocol, kx, cipher)
    score: int | None = None
    if any(p.score == 0 for p in parts):
        score = 0
    elif all(p.weighted is not None for p in parts):
        score = sum(p.weighted or 0 for p in parts)
    score_grade = letter(score) if score is not None else None
    # a category not established: the grade is what the caps allow, provisional (its
    # unknown is listed with the F a zero score would bring), never A+; an established
    # warning still lowers an A it allows to A- (it said A beside "Warning (A-)")
    grade = _capped(score_grade or Grade.A, notes.caps)
    if not any(c.cap in GRADE_ORDER for c in notes.caps):
        if score_grade is Grade.A:
            grade = Grade.A_MINUS if notes.warnings else Grade.A_PLUS if hsts else Grade.A
        elif score_grade is None and notes.warnings:
            grade = Grade.A_MINUS
    trust = [c for c in notes.caps if c.cap in (Grade.T, Grade.M)]
    ignoring: Grade | None = None
    if trust:
        ignoring = grade
        grade = Grade.T if any(c.cap is Grade.T for c in trust) else Grade.M
    rating = Rating(grade, score, score_grade, protocol, kx, cipher, tuple(notes.caps),
                    tuple(notes.warnings), _dedup(notes), grade_ignoring_trust=ignoring)
    return _with_provisional(rating)


def _dedup(notes: Notes) -> tuple[RatingUnknown, ...]:
    return tuple(dict.fromkeys(notes.unknowns))


def _with_provisional(rating: Rating) -> Rating:
    return replace(rating, provisional=bool(rating.lowering_unknowns()))


def rated(report: AuditReport) -> AuditReport:
    """The report with its rating (`AuditReport.rating`)."""
    return replace(report, rating=rate(report))
