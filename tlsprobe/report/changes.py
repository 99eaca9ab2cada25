"""Text of the changes between two scans of a target (`scan --baseline`, `survey diff`).

One line per change, regressions first: `- [regression] TLS 1.3 version lost (TLS 1.3):
supported -> not supported (clients of this version lose access)`. Every value may come
from a server or a file: it is shown escaped.
"""

from __future__ import annotations

from typing import IO

from tlsprobe.model.changes import (
    Change,
    Direction,
    Share,
    SurveyDiffSummary,
    TargetChanges,
    TargetStatus,
)
from tlsprobe.model.units import host_port
from tlsprobe.report.escape import shown

_ORDER = {Direction.regression: 0, Direction.improvement: 1, Direction.neutral: 2}
_MARK = {Direction.regression: "[regression]", Direction.improvement: "[improvement]",
         Direction.neutral: "[changed]"}


def change_line(c: Change) -> str:
    """One change as one line of text (escaped)."""
    kind = c.kind.value.replace("_", " ")
    where = f" ({c.version})" if c.version else ""
    values = f": {c.old or '-'} -> {c.new or '-'}" if (c.old or c.new) else ""
    why = f" ({c.reason})" if c.reason else ""
    return shown(f"{_MARK[c.direction]} {c.what}: {kind}{where}{values}{why}")


def ordered(changes: tuple[Change, ...]) -> list[Change]:
    """Regressions first, then improvements, then neutral changes (stable otherwise)."""
    return sorted(changes, key=lambda c: _ORDER[c.direction])


def counts(changes: tuple[Change, ...]) -> str:
    """"2 regressions, 1 improvement, 3 other changes" (only the non-zero parts)."""
    parts = []
    for d, word in ((Direction.regression, "regression"), (Direction.improvement,
                    "improvement"), (Direction.neutral, "other change")):
        n = sum(1 for c in changes if c.direction is d)
        if n:
            parts.append(f"{n} {word}{'s' if n > 1 else ''}")
    return ", ".join(parts) or "no change"


def render_changes(title: str, changes: tuple[Change, ...] | None, out: IO[str],
                   note: str = "") -> None:
    """The section `title` (escaped) with one line per change; `changes` None: `note`
    says why nothing was compared."""
    print(shown(title), file=out)
    if changes is None:
        print(f"  {shown(note)}", file=out)
    elif not changes:
        print("  no change", file=out)
    else:
        print(f"  {counts(changes)}", file=out)
        for c in ordered(changes):
            print(f"  {change_line(c)}", file=out)
    print(file=out)


def render_target_changes(t: TargetChanges, out: IO[str]) -> None:
    """One target of `survey diff`: added, removed, or its changes."""
    name = shown(host_port(t.host, t.port))
    if t.status is TargetStatus.added:
        print(f"{name}: new target (only in the new survey)", file=out)
    elif t.status is TargetStatus.removed:
        print(f"{name}: gone (only in the old survey)", file=out)
    elif t.status is TargetStatus.unaudited:
        print(f"{name}: in one survey only, the other incomplete: not established whether "
              "it was added or removed", file=out)
    else:
        print(f"{name}: {counts(t.changes)}", file=out)
        for c in ordered(t.changes):
            print(f"  {change_line(c)}", file=out)


def _share_line(s: Share) -> str:
    unknown = (f"; not established on {s.old_not_established} -> {s.new_not_established}"
               if s.old_not_established or s.new_not_established else "")
    if s.new_percent is None or s.old_percent is None:
        def side(percent: float | None, targets: int) -> str:
            return "not established" if percent is None else f"{percent:.1f} % ({targets})"
        return shown(f"  {s.name}: {side(s.new_percent, s.new_targets)} (was "
                     f"{side(s.old_percent, s.old_targets)}): no share to compare{unknown}")
    if s.points == 0:
        return shown(f"  {s.name} on {s.new_percent:.1f} % of targets ({s.new_targets}), "
                     f"unchanged{unknown}")
    return shown(f"  {s.name} now on {s.new_percent:.1f} % of targets ({s.new_targets}), "
                 f"{s.points:+.1f} points (was {s.old_percent:.1f} %){unknown}")


_TITLES = {"version": "Versions", "group": "Groups (any version)", "grade": "Ratings"}


def render_survey_summary(old: str, new: str, s: SurveyDiffSummary, out: IO[str]) -> None:
    """The summary of `survey diff`: targets, changes by kind, and the shares of versions,
    groups and grades among the targets each survey audited."""
    print(shown(f"Survey diff: {old} -> {new}"), file=out)
    print(f"Targets: {s.old_targets} -> {s.new_targets} ({s.added} added, {s.removed} "
          f"removed, {s.compared} compared); unreachable {s.old_unreachable} -> "
          f"{s.new_unreachable}", file=out)
    print(f"Targets with changes: {s.changed} ({s.regressed} with regressions)", file=out)
    for which, missing in (("old", s.old_shards_missing), ("new", s.new_shards_missing)):
        if missing:
            print(f"The {which} survey is incomplete: {missing} shard(s) not done (resume it "
                  "with the same tlsprobe survey command); targets in one survey only: "
                  f"{s.unaudited}, not established whether added or removed", file=out)
    if s.kinds:
        print("Targets per change: " + ", ".join(
            f"{k.replace('_', ' ')} {n}" for k, n in s.kinds.items()), file=out)
    for category, title in _TITLES.items():
        rows = [x for x in s.shares if x.category == category]
        if rows:
            print(f"{title} (shares of the targets audited, unreachable ones apart):", file=out)
            for row in rows:
                print(_share_line(row), file=out)
