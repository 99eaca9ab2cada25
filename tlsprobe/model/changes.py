"""What changed between two scans of one target: typed change records.

`policy/changes.py diff_reports` compares two scan documents (the `scan --json` objects, the
stable contract) and returns these records; `scan --baseline` and `survey diff` render them.
Each change says what moved (`kind`, `what`, `old` -> `new`) and whether a CI gate must catch
it (`direction`: regression), welcome it (improvement) or only note it (neutral); `reason`
names the rule that set the direction (docs/CHANGES.md lists the rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Change", "ChangeKind", "Direction", "Share", "SurveyDiffSummary", "TargetChanges",
           "TargetStatus"]


class ChangeKind(StrEnum):
    """What kind of fact changed; the JSON spelling is the value."""

    version_gained = "version_gained"
    version_lost = "version_lost"
    group_added = "group_added"
    group_removed = "group_removed"
    group_order_changed = "group_order_changed"
    suite_added = "suite_added"
    suite_removed = "suite_removed"
    sigscheme_added = "sigscheme_added"
    sigscheme_removed = "sigscheme_removed"
    pq_changed = "pq_changed"
    check_changed = "check_changed"
    certificate_renewed = "certificate_renewed"
    certificate_expiring = "certificate_expiring"
    certificate_added = "certificate_added"
    certificate_removed = "certificate_removed"
    trust_changed = "trust_changed"
    rating_changed = "rating_changed"
    unreachable = "unreachable"
    reachable = "reachable"


class Direction(StrEnum):
    """Whether a change makes the target worse (what `--fail-on-change` fails on), better,
    or neither."""

    regression = "regression"
    improvement = "improvement"
    neutral = "neutral"


#: how `reason` starts for a change one of whose sides is not established (a check's verdict
#: to or from inconclusive, a move to or from a provisional grade): listed, never a gate
UNESTABLISHED = "not established on one side"


@dataclass(frozen=True)
class Change:
    """One change: `what` is its subject ("TLS 1.0", "X25519MLKEM768", "heartbleed"),
    `version` the protocol version it is about (None when it is about the target), `old` and
    `new` the two values as shown (None: absent on that side), `reason` why `direction`."""

    kind: ChangeKind
    what: str
    old: str | None
    new: str | None
    direction: Direction
    version: str | None = None
    reason: str = ""

    @property
    def established(self) -> bool:
        """Whether both sides are established (see UNESTABLISHED): only such a change can
        fail `--fail-on-change=any` (a regression never rests on an unestablished side)."""
        return not self.reason.startswith(UNESTABLISHED)


class TargetStatus(StrEnum):
    """A target in two surveys: in both (compared), only in the new one, only in the old;
    unaudited: only in one, the other survey being incomplete (stopped before all its
    shards were audited), so whether it was added or removed is not established."""

    compared = "compared"
    added = "added"
    removed = "removed"
    unaudited = "unaudited"


@dataclass(frozen=True)
class TargetChanges:
    """The changes of one target between two surveys (host:port as in the scan documents)."""

    host: str
    port: int
    status: TargetStatus
    changes: tuple[Change, ...] = ()

    @property
    def regressions(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.direction is Direction.regression)


@dataclass(frozen=True)
class Share:
    """One fact's share of the audited targets in two surveys (`category`: "version",
    "group" or "grade"; percents of the targets each survey could audit and that
    established it: a target that neither confirmed nor refused it is left out)."""

    category: str
    name: str
    old_targets: int
    new_targets: int
    old_percent: float | None       # None: no audited target of that survey established it
    new_percent: float | None
    #: the audited targets of each survey that did not establish the fact (not in the
    #: percents: a fact not established is no change)
    old_not_established: int = 0
    new_not_established: int = 0

    @property
    def points(self) -> float | None:
        """The change in percentage points (None: one survey established it nowhere)."""
        if self.new_percent is None or self.old_percent is None:
            return None
        return round(self.new_percent - self.old_percent, 1)


@dataclass(frozen=True)
class SurveyDiffSummary:
    """The counts of `survey diff`: targets in each survey (unreachable apart), added,
    removed, compared, with changes, with regressions; targets per change kind; shares."""

    old_targets: int
    new_targets: int
    old_unreachable: int
    new_unreachable: int
    added: int
    removed: int
    compared: int
    changed: int
    regressed: int
    kinds: dict[str, int]
    shares: tuple[Share, ...]
    #: targets only in one survey while the other is incomplete (TargetStatus.unaudited),
    #: and the shards of each survey its manifest lists that were not done
    unaudited: int = 0
    old_shards_missing: int = 0
    new_shards_missing: int = 0
