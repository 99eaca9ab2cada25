"""`scan --baseline FILE` and `--fail-on-change`: what changed since a saved scan.

FILE is what `scan --json` wrote (JSON lines, one scan document per target; a single
pretty-printed document works too). Each audited target is matched to the baseline's
document of the same host:port and compared with `policy/changes.py diff_reports`; the text
report gets a section "Changes since FILE (date)" per target, `--json` a member `changes`.
`--fail-on-change` (= `regression`) exits 1 when a target regressed, `--fail-on-change=any`
on any change: exit code 1, as for --fail-on and --fail-under (1 wins over error codes).
A baseline that cannot be read, is no scan JSON, or holds none of the targets scanned is a
usage error (exit 2) before any connection.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

from tlsprobe.errors import EXIT_FINDINGS, UsageError, os_error_text
from tlsprobe.model.units import host_port

if TYPE_CHECKING:
    from tlsprobe.model.audit import AuditReport
    from tlsprobe.model.changes import Change
    from tlsprobe.model.encode import JsonObject
    from tlsprobe.net.tcp import Target

#: a baseline larger than this is refused (a scan document is tens of kilobytes)
MAX_BASELINE_BYTES = 64 << 20
GATES = ("regression", "any")


def add_baseline_arguments(group: argparse._ArgumentGroup) -> None:
    """--baseline FILE and --fail-on-change[=regression|any] (policies and exit codes)."""
    group.add_argument("--baseline", metavar="FILE", help="a saved `scan --json` output: "
                       "after the scan, show what changed since it per target (text section "
                       "'Changes since FILE', JSON member 'changes'; docs/CHANGES.md)")
    group.add_argument("--fail-on-change", nargs="?", const="regression", choices=GATES,
                       metavar="regression|any", help="with --baseline: exit 1 when a target "
                       "regressed since the baseline (default), or on any change ('any')")


def _documents(text: str, path: str) -> list[JsonObject]:
    from tlsprobe.policy.changes import DocumentError, check_document, other_record
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"--baseline {path}: empty file (expected the output of tlsprobe "
                         "scan --json)")
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    lines: list[tuple[str, object]] = []
    if whole is not None:
        items = whole if isinstance(whole, list) else [whole]
        lines = [(f"--baseline {path}", item) for item in items]
    else:
        for n, line in enumerate(stripped.splitlines(), 1):
            if line.strip():
                try:
                    lines.append((f"--baseline {path}:{n}", json.loads(line)))
                except ValueError as exc:
                    raise UsageError(f"--baseline {path}:{n}: not JSON ({exc}); expected "
                                     "the output of tlsprobe scan --json") from None
    try:
        docs = [check_document(item, where) for where, item in lines
                if not other_record(item)]
    except DocumentError as exc:
        raise UsageError(str(exc)) from None
    if not docs:
        raise UsageError(f"--baseline {path}: no scan document in it (expected the output of "
                         "tlsprobe scan --json)")
    return docs


@dataclass
class Baseline:
    """The documents of a baseline file by host:port, and the changes found so far."""

    path: str
    docs: dict[tuple[str, int], JsonObject]
    saved: str
    gate: str | None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    changes: dict[tuple[str, int], tuple[Change, ...]] = field(default_factory=dict)

    def changes_of(self, report: AuditReport) -> tuple[Change, ...] | None:
        """The changes of one audited target (None: not in the baseline)."""
        from tlsprobe.policy.changes import diff_reports
        key = (report.host.lower(), report.port)
        if key not in self.changes:
            old = self.docs.get(key)
            if old is None:
                return None
            new = report.to_dict()
            self.changes[key] = diff_reports(old, new, at=self.at)
        return self.changes[key]

    def json_text(self, report: AuditReport) -> str:
        """The report's JSON line with the member `changes` (null: not in the baseline)."""
        from tlsprobe.model.encode import to_jsonable
        doc = report.to_dict()
        changes = self.changes_of(report)
        doc["changes"] = None if changes is None else to_jsonable(list(changes))
        doc["baseline"] = {"file": self.path, "saved": self.saved}
        return json.dumps(doc)

    def render(self, report: AuditReport, out: TextIO) -> None:
        """The text section of one target."""
        from tlsprobe.report.changes import render_changes
        if report.port == 0:       # a bad line of -f FILE: nothing was audited
            return
        render_changes(f"Changes since {self.path} ({self.saved}) for "
                       f"{host_port(report.host, report.port)}", self.changes_of(report), out,
                       note="not in the baseline: nothing to compare")

    def _fails(self, change: Change) -> bool:
        """Whether `change` fails the gate: a regression, or with `any` every change whose
        two sides were established (a move to or from inconclusive is listed, not gated)."""
        from tlsprobe.model.changes import Direction
        if self.gate == "any":
            return change.established
        return change.direction is Direction.regression

    def gate_reasons(self, report: AuditReport) -> list[str]:
        """Why `report` fails --fail-on-change (empty: it passes, or no such gate), for the
        summary's and the JSON's per-target gate verdict."""
        if self.gate is None or report.port == 0:
            return []
        hit = [c for c in (self.changes_of(report) or ()) if self._fails(c)]
        if not hit:
            return []
        kinds = ", ".join(dict.fromkeys(str(c.kind) for c in hit))
        word = "change(s)" if self.gate == "any" else "regression(s)"
        return [f"{len(hit)} {word} since the baseline (--fail-on-change {self.gate}): {kinds}"]

    def exit_gate(self, reports: list[AuditReport], code: int, reason: str
                  ) -> tuple[int, str]:
        """The exit code and reason with --fail-on-change applied (1 wins)."""
        if self.gate is None:
            return code, reason
        hit = [r for r in reports if any(self._fails(c) for c in (self.changes_of(r) or ()))]
        if not hit:
            return code, reason + (f"; no {'change' if self.gate == 'any' else 'regression'}"
                                   " since the baseline")
        why = (f"{len(hit)} target(s) with "
               f"{'changes' if self.gate == 'any' else 'regressions'} since the baseline "
               f"(--fail-on-change {self.gate})")
        return EXIT_FINDINGS, why if code != EXIT_FINDINGS else f"{reason}; {why}"


def load_baseline(args: argparse.Namespace, targets: list[Target]) -> Baseline | None:
    """The --baseline of the command line, checked against the targets to scan (a usage
    error when it cannot be read, is not scan JSON or holds none of them); None without."""
    path = getattr(args, "baseline", None)
    gate = getattr(args, "fail_on_change", None)
    if path is None:
        if gate is not None:
            raise UsageError("--fail-on-change needs --baseline FILE (a saved scan --json)")
        return None
    from tlsprobe.files import read_bounded_text
    from tlsprobe.policy.changes import doc_time, target_key
    text = read_bounded_text(path, MAX_BASELINE_BYTES, "a scan --json output",
                             f"--baseline {path}")
    try:
        mtime = datetime.fromtimestamp(os.path.getmtime(path), UTC)
    except OSError as exc:      # gone since it was read
        raise UsageError(f"--baseline {path}: cannot read it ({os_error_text(exc)})"
                         ) from None
    docs = {target_key(d): d for d in _documents(text, path)}
    wanted = {(t.host.lower(), t.port) for t in targets}
    if wanted and not wanted & set(docs):
        have = ", ".join(f"{h}:{p}" for h, p in list(docs)[:3])
        raise UsageError(f"--baseline {path} holds {have}{' ...' if len(docs) > 3 else ''}"
                         f", none of the targets scanned: use the baseline of this target")
    times = [t for d in docs.values() if (t := doc_time(d)) is not None]
    when = min(times) if times else mtime
    return Baseline(path, docs, when.strftime("%Y-%m-%d %H:%M UTC"), gate)
