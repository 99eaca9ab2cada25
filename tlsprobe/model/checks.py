"""Result model of the checks of `tlsprobe scan` beyond the key-exchange audit: vulnerability
checks (POODLE, Heartbleed, ROBOT, ...), hygiene (renegotiation, resumption, stapling, ...),
tolerance (large and split ClientHellos, GREASE, ...), HTTP and certificate checks.

One `CheckResult` per check asked for with `scan --checks`. The verdict keeps the states
apart: vulnerable, not vulnerable (established: every space the check rests on was
enumerated conclusively), not applicable (the server does not use what the check is about,
e.g. no DHE at all), inconclusive (`reason` says what could not be established); tolerance
checks answer tolerated / not tolerated, feature checks supported / not supported. The
evidence names what the verdict rests on: the suites, versions or parameters the audit
enumerated, or what was sent and what came back. A verdict that is a problem carries the
finding it gives (`code`, `severity`); tlsprobe/policy/checks.py turns it into a Finding.
Beside the prose, `details`: what the check established as typed values (ROBOT's oracle,
resumption's counts, a leaked byte count ...), one frozen dataclass per check
(model/check_details.py), in JSON under `details` (null when the check established nothing
it could state: not applicable, or inconclusive before its question was answered).
Field names are part of the JSON schema (the one encoding of tlsprobe/model/encode.py): add
fields, never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING

from tlsprobe.model.check_catalog import Category
from tlsprobe.model.severity import Severity

if TYPE_CHECKING:
    # imported on first use (`__getattr__` below): its ~50 dataclasses cost a scan that
    # runs no check (`scan --groups-only`) a fifth of its start-up
    from tlsprobe.model.check_details import CheckDetails

__all__ = ["CATEGORIES", "Category", "ChainVerdict", "CheckDetails", "CheckResult", "Method",
           "Severity", "Verdict"]


def __getattr__(name: str) -> object:
    """`CheckDetails`, re-exported here, imported when first asked for (and kept)."""
    if name == "CheckDetails":
        from tlsprobe.model.check_details import CheckDetails
        globals()[name] = CheckDetails
        return CheckDetails
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Verdict(StrEnum):
    """A check's answer; the JSON spelling is the value."""

    vulnerable = "vulnerable"
    not_vulnerable = "not vulnerable"
    not_applicable = "not applicable"
    inconclusive = "inconclusive"
    tolerated = "tolerated"
    not_tolerated = "not tolerated"
    supported = "supported"
    not_supported = "not supported"


class Method(StrEnum):
    """How a check reached its verdict: read off the audit, or connections of its own."""

    derived = "derived"
    active = "active"


#: the report sections, in order: a check's `category`
CATEGORIES = tuple(Category)


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict and what it rests on.

    `name` is the `scan --checks` name ("poodle"), `title` what it is about for people
    ("SSL 3.0 with CBC suites (POODLE, CVE-2014-3566)"); `reason` says in one sentence why
    the verdict is what it is; `evidence` lists the facts (suite names with their version,
    DH parameters, version answers). `connections` is the number of connections the check
    made itself: 0 for a check derived from what the audit already enumerated (`method`
    "derived"), whose connections are counted under the audit phases it rests on; an active
    check's `method` is "active" and its connections are counted under its own phase.
    `category` is its report section (CATEGORIES). `code` and `severity` are set when the
    verdict is a problem the report lists as a finding (e.g. "check.heartbleed",
    "critical"); None otherwise. `details` is the check's own typed record of what it
    established (its class is the check's declared details type), or None. A certificate
    check of a server with several certificate chains (an RSA and an ECDSA one) judges each:
    `chains` holds one verdict per chain, the default one's first (its `details` are the
    result's own), and the result is the worst of them (empty with one chain: not in JSON)."""

    name: str
    title: str
    verdict: Verdict
    reason: str
    evidence: tuple[str, ...] = ()
    method: Method = Method.derived
    connections: int = 0
    category: Category = Category.vulnerability
    code: str | None = None
    severity: Severity | None = None
    details: CheckDetails | None = None
    chains: tuple[ChainVerdict, ...] = ()

    def json_shape(self) -> dict[str, object]:
        """The fields in declaration order, without "chains" when there are none (a server
        with one certificate chain, a check about no certificate): their JSON unchanged."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "chains" or self.chains}


@dataclass(frozen=True)
class ChainVerdict:
    """A certificate check's verdict on one certificate chain of a server with several:
    `key_type` its leaf's key ("RSA", "ECDSA", ... as `ServerCertificate.key_type`; "other"
    for the chains a search left unfinished could not find), the rest as `CheckResult`'s."""

    key_type: str
    verdict: Verdict
    reason: str
    evidence: tuple[str, ...] = ()
    severity: Severity | None = None
    details: CheckDetails | None = None
