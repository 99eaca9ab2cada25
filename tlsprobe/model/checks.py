"""Result model of the vulnerability checks of `tlsprobe scan` (POODLE, FREAK, Logjam, ...).

One `CheckResult` per check asked for with `scan --checks`. The verdict keeps four states
apart: vulnerable, not vulnerable (established: every space the check rests on was
enumerated conclusively), not applicable (the server does not use what the check is about,
e.g. no DHE at all), and inconclusive (`reason` says what could not be established). The
evidence names what the verdict rests on: the suites, versions or parameters the audit
enumerated, or what was sent and what came back. Field names are part of the JSON schema
(the one encoding of tlsprobe/model/encode.py): add fields, never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CheckResult", "Verdict"]


class Verdict(StrEnum):
    """A check's answer; the JSON spelling is the value."""

    vulnerable = "vulnerable"
    not_vulnerable = "not vulnerable"
    not_applicable = "not applicable"
    inconclusive = "inconclusive"


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict and what it rests on.

    `name` is the `scan --checks` name ("poodle"), `title` what it is about for people
    ("SSL 3.0 with CBC suites (POODLE, CVE-2014-3566)"); `reason` says in one sentence why
    the verdict is what it is; `evidence` lists the facts (suite names with their version,
    DH parameters, version answers). `connections` is the number of connections the check
    made itself: 0 for a check derived from what the audit already enumerated (`method`
    "derived"), whose connections are counted under the audit phases it rests on."""

    name: str
    title: str
    verdict: Verdict
    reason: str
    evidence: tuple[str, ...] = ()
    method: str = "derived"
    connections: int = 0
