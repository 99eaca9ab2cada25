"""Result model of the rating (`tlsprobe scan`): one overall grade per target, A+ to F (and
SSL Labs' T and M), after the SSL Labs SSL Server Rating Guide as testssl.sh rates.

A `Rating` keeps what the grade rests on apart: the three category scores (protocol support
30 %, key exchange 30 %, cipher strength 40 %) and the numeric score, the caps that lowered
the grade (each with the rule, its reason, and the facts or finding it rests on), the
warnings (A- instead of A+), and the rules whose input could not be established (a check
inconclusive, a phase or check not run): such a rule never counts as passed. An unknown that
could lower the grade makes the grade provisional ("A (provisional: ...)"). The rules and
their sources: docs/RATING.md; the rules themselves: tlsprobe/policy/rating.py.
Field names are part of the JSON schema (model/encode.py): add fields, never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum

__all__ = ["GRADE_ORDER", "SPEC", "Grade", "Rating", "RatingCap", "RatingUnknown",
           "RatingWarning", "SubScore", "grade_rank", "parse_grade"]

#: the rating specification followed (docs/RATING.md says where tlsprobe deviates)
SPEC = "SSL Labs SSL Server Rating Guide 2009r, as testssl.sh 3.x rates"


class Grade(StrEnum):
    """A letter grade; the JSON spelling is the value. T: the certificate is not trusted
    (or expired); M: it does not match the host name (SSL Labs' out-of-scope grades)."""

    A_PLUS = "A+"
    A = "A"
    A_MINUS = "A-"
    B = "B"
    C = "C"
    D = "D"
    E = "E"
    F = "F"
    T = "T"
    M = "M"


#: best first; T and M rank below F (no --fail-under gate passes them)
GRADE_ORDER: tuple[Grade, ...] = (Grade.A_PLUS, Grade.A, Grade.A_MINUS, Grade.B, Grade.C,
                                  Grade.D, Grade.E, Grade.F)


def grade_rank(grade: Grade) -> int:
    """0 (A+) .. 7 (F), 8 for T and M (below F): higher is worse."""
    return GRADE_ORDER.index(grade) if grade in GRADE_ORDER else len(GRADE_ORDER)


def parse_grade(text: str) -> Grade:
    """A grade as a user writes it ("a+", "B", " c "); ValueError naming the known ones."""
    spelled = text.strip().upper()
    for grade in Grade:
        if grade.value == spelled:
            return grade
    raise ValueError(f"unknown grade {text!r} (known: {', '.join(g.value for g in Grade)})")


@dataclass(frozen=True)
class SubScore:
    """One category: `score` 0-100, `weighted` its share of the total (30, 30 or 40 %),
    `detail` what it rests on ("best TLS 1.3 (100), worst TLS 1.2 (100)"); `score` None
    when its input was not established (then the total is None too)."""

    category: str                  # "protocol_support", "key_exchange", "cipher_strength"
    score: int | None
    weighted: int | None
    detail: str


@dataclass(frozen=True)
class RatingCap:
    """A rule that caps the grade: the `cap`, a stable `rule` name ("tls10_offered"), the
    `reason` for people ("TLS 1.0 offered"), the `source` (the guide's revision or
    testssl.sh), and `evidence`: the facts or the finding code it rests on."""

    cap: Grade
    rule: str
    reason: str
    source: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class RatingWarning:
    """A rule that turns A+ into A- (a warning of the guide): rule, reason, source,
    evidence."""

    rule: str
    reason: str
    source: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class RatingUnknown:
    """A rule whose input could not be established: the check was inconclusive or not run.
    `cap`: the grade it would bring if it applied (None: it could only change A+/A-, e.g.
    HSTS not checked); `reason` says why it is unknown in a few words ("robot
    inconclusive", "heartbleed not run"), `detail` what the check said ("" when nothing)."""

    rule: str
    reason: str
    cap: Grade | None = None
    detail: str = ""


@dataclass(frozen=True)
class Rating:
    """The grade of one target (see the module docstring). `grade` None: nothing to rate
    (the versions or suites were not established); `score` the numeric score (0-100) before
    the caps; `grade_ignoring_trust`: for T and M, the grade the configuration would have
    with a trusted, matching certificate (as SSL Labs shows it). `provisional`: an unknown
    rule could lower the grade."""

    grade: Grade | None
    score: int | None
    score_grade: Grade | None
    protocol_support: SubScore
    key_exchange: SubScore
    cipher_strength: SubScore
    caps: tuple[RatingCap, ...] = ()
    warnings: tuple[RatingWarning, ...] = ()
    unknowns: tuple[RatingUnknown, ...] = ()
    provisional: bool = False
    grade_ignoring_trust: Grade | None = None
    spec: str = SPEC

    def json_shape(self) -> dict[str, object]:
        """The fields, then `label` (the one-line text the reports open with)."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "label": self.label()}

    def label(self) -> str:
        """The grade with what qualifies it, one line: "B (capped: TLS 1.0 offered; ...)",
        "A (provisional: robot inconclusive, could cap at F)", "T (if trusted: A)",
        "not rated (...)"."""
        if self.grade is None:
            why = "; ".join(u.reason for u in self.unknowns[:3])
            return f"not rated ({why})" if why else "not rated"
        parts: list[str] = []
        if self.grade_ignoring_trust is not None:
            parts.append(f"if trusted: {self.grade_ignoring_trust.value}")
        earned = self.grade_ignoring_trust or self.grade     # T, M: and what set the rest
        binding = [c for c in self.caps if grade_rank(c.cap) >= grade_rank(earned)
                   or c.cap in (Grade.T, Grade.M)]
        if binding:
            parts.append("capped: " + "; ".join(dict.fromkeys(c.reason for c in binding)))
        if self.grade is Grade.A_MINUS and self.warnings:
            parts.append("warnings: " + "; ".join(w.reason for w in self.warnings))
        lowering = self.lowering_unknowns()
        if lowering:
            shown = [f"{u.reason}, could cap at {u.cap.value if u.cap else '?'}"
                     for u in lowering[:3]]
            more = f"; and {len(lowering) - 3} more" if len(lowering) > 3 else ""
            parts.append("provisional: " + "; ".join(shown) + more)
        return f"{self.grade.value} ({'; '.join(parts)})" if parts else self.grade.value

    def lowering_unknowns(self) -> tuple[RatingUnknown, ...]:
        """The unknown rules that could lower the grade (their cap is below it)."""
        if self.grade is None:
            return self.unknowns
        return tuple(u for u in self.unknowns
                     if u.cap is not None and grade_rank(u.cap) > grade_rank(self.grade))

    def below(self, gate: Grade) -> bool:
        """Whether the established grade is worse than `gate` (--fail-under); no grade at
        all counts as below (nothing was rated)."""
        if self.grade is None:
            return True
        return grade_rank(self.grade) > grade_rank(gate)
