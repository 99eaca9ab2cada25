"""`survey diff OLD NEW`: per target, the changes between two survey output folders.

The per-target scan documents are read from each survey's JSON lines files (`shard-*.jsonl`,
written beside the Parquet files; searched one folder deep as well, in case they move): the
scan JSON is the stable contract, the Parquet rows are not. Targets are matched by host:port.
Memory is bounded by the number of targets, not their documents: the old survey is indexed as
host:port -> (file, byte offset) and each old document is read back when its new one comes.

The summary counts targets once each; shares are of the targets each survey could audit
(unreachable targets are counted apart): "X25519MLKEM768 now on 12.0 % of targets (120), +3.0
points (was 9.0 %)".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tlsprobe.errors import UsageError, os_error_text
from tlsprobe.model.changes import (
    Change,
    Direction,
    Share,
    SurveyDiffSummary,
    TargetChanges,
    TargetStatus,
)
from tlsprobe.model.encode import JsonObject
from tlsprobe.policy.changes import (
    DocumentError,
    check_document,
    diff_reports,
    other_record,
    target_key,
)
from tlsprobe.survey.rows import Known, known_groups, known_versions
from tlsprobe.survey.store import ROWS_DIR, SurveyDir

__all__ = ["Population", "SurveyDiff", "diff_surveys", "jsonl_files"]

Key = tuple[str, int]


def jsonl_files(directory: str) -> list[Path]:
    """The survey's JSON lines files (a usage error when there are none)."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"{directory}: not a folder (survey diff OLD NEW takes two survey "
                         "output folders)")
    # one folder deep too (`_jsonl/`, or moved there), but never the rows a stopped
    # survey's shards wait in (`_rows/`: Parquet rows, no scan documents)
    files = sorted(root.glob("*.jsonl")) or sorted(
        p for p in root.glob("*/*.jsonl") if p.parent.name != ROWS_DIR)
    if not files and SurveyDir(directory).manifest() is not None:
        raise UsageError(f"{directory}: no shard of this survey is done yet (a run stopped "
                         "before its first shard): resume it with the same command")
    if not files:
        raise UsageError(f"{directory}: no survey JSON lines (shard-*.jsonl) there: not the "
                         "output folder of tlsprobe survey")
    return files


#: a line longer than this is no scan document (they are tens of kilobytes)
MAX_LINE = 64 << 20


def _lines(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset, line) of one file, each line bounded by MAX_LINE."""
    try:
        with open(path, "rb") as fh:
            number, offset = 0, 0
            while line := fh.readline(MAX_LINE + 1):
                number += 1
                if len(line) > MAX_LINE:
                    raise UsageError(f"{path}:{number}: a line over {MAX_LINE >> 20} MiB: "
                                     "not a survey file")
                yield number, offset, line
                offset += len(line)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({os_error_text(exc)})") from None


def _documents(files: list[Path]) -> Iterator[tuple[JsonObject, Path, int]]:
    """Each scan document with its file and byte offset; a line that is not one is a
    usage error naming FILE:LINE."""
    for path in files:
        for number, offset, line in _lines(path):
            doc = _parse(line, f"{path}:{number}") if line.strip() else None
            if doc is not None:
                yield doc, path, offset


def _parse(line: bytes, where: str) -> JsonObject | None:
    """The scan document of one line (None: another tlsprobe record, skipped)."""
    try:
        value = json.loads(line)
        return None if other_record(value) else check_document(value, where)
    except DocumentError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(f"{where}: not JSON ({exc}): a damaged survey file") from None


def _items(value: object) -> list[JsonObject]:
    """The objects of a JSON array (anything else: none)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _groups(doc: JsonObject) -> Known:
    """The groups a scan document established (rows.py known_groups)."""
    def names(entry: JsonObject, key: str) -> list[str]:
        return [str(g.get("name")) for g in _items(entry.get(key))]
    def spoken(entry: JsonObject) -> bool | None:
        said = entry.get("spoken")
        return said if isinstance(said, bool) else None
    return known_groups((spoken(e), names(e, "supported"), names(e, "not_supported"),
                         names(e, "inconclusive")) for e in _items(doc.get("groups")))


def _versions(doc: JsonObject) -> Known:
    """The versions the versions phase and the group audits established (rows.py
    known_versions, as `survey summary` counts them): without either, none; an
    inconclusive one is not established."""
    facts: list[tuple[str, bool | None]] = []
    for v in _items(doc.get("versions")):
        version = v.get("version")
        if isinstance(version, dict):
            facts.append((str(version.get("name")),
                          {"supported": True, "not_supported": False}.get(str(v.get("status")))))
    for g in _items(doc.get("groups")):
        version, spoken = g.get("version"), g.get("spoken")
        if isinstance(version, dict):
            facts.append((str(version.get("name")), spoken if isinstance(spoken, bool) else None))
    return known_versions(facts)


def _grade(doc: JsonObject) -> str | None:
    rating = doc.get("rating")
    grade = rating.get("grade") if isinstance(rating, dict) else None
    return grade if isinstance(grade, str) else None


@dataclass
class Population:
    """Counts over one survey's targets (each target once)."""

    targets: int = 0
    unreachable: int = 0
    versions: Counter[str] = field(default_factory=Counter)
    groups: Counter[str] = field(default_factory=Counter)
    grades: Counter[str] = field(default_factory=Counter)
    #: per category and name the audited targets that did not establish it; per category
    #: those that established nothing of it (a grade: those not rated)
    unknown: Counter[tuple[str, str]] = field(default_factory=Counter)
    blind: Counter[str] = field(default_factory=Counter)

    def add(self, doc: JsonObject) -> None:
        self.targets += 1
        if doc.get("error"):
            self.unreachable += 1
            return
        for category, counter, (yes, unknown) in (("version", self.versions, _versions(doc)),
                                                  ("group", self.groups, _groups(doc))):
            counter.update(yes)
            self.unknown.update((category, name) for name in unknown or ())
            self.blind[category] += unknown is None
        grade = _grade(doc)
        if grade:
            self.grades[grade] += 1
        else:
            self.blind["grade"] += 1

    @property
    def audited(self) -> int:
        return self.targets - self.unreachable

    def known(self, category: str, key: str) -> int:
        """The audited targets that established whether `key` holds (a grade: those rated)."""
        return self.audited - self.unknown[category, key] - self.blind[category]

    def share(self, category: str, counter: Counter[str], key: str) -> float | None:
        """Percent of the audited targets that established it (None when none did): a
        target that did not establish it is no evidence either way, and moves no share."""
        known = self.known(category, key)
        return round(100.0 * counter[key] / known, 1) if known else None


@dataclass
class SurveyDiff:
    """What `diff_surveys` found: the two populations, the targets added and removed, and
    counts of the compared targets' changes by kind and direction."""

    old: Population
    new: Population
    added: int = 0
    removed: int = 0
    compared: int = 0
    unaudited: int = 0
    #: shards each survey's manifest lists without their scan documents (stopped early)
    missing: tuple[int, int] = (0, 0)
    changed: int = 0
    regressed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    def summary(self) -> SurveyDiffSummary:
        """The frozen counts, with the shares of every version, group and grade seen."""
        shares = []
        for category, old, new in (("version", self.old.versions, self.new.versions),
                                   ("group", self.old.groups, self.new.groups),
                                   ("grade", self.old.grades, self.new.grades)):
            for name in sorted(set(old) | set(new)):
                shares.append(Share(category, name, old[name], new[name],
                                    self.old.share(category, old, name),
                                    self.new.share(category, new, name),
                                    self.old.audited - self.old.known(category, name),
                                    self.new.audited - self.new.known(category, name)))
        return SurveyDiffSummary(self.old.targets, self.new.targets, self.old.unreachable,
                                 self.new.unreachable, self.added, self.removed,
                                 self.compared, self.changed, self.regressed,
                                 dict(sorted(self.kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
                                 tuple(shares), self.unaudited, *self.missing)


def _time(files: list[Path]) -> datetime:
    """When a survey ran, for documents without `started_at`: its newest file's time."""
    return datetime.fromtimestamp(max(p.stat().st_mtime for p in files), UTC)


def diff_surveys(old_dir: str, new_dir: str,
                 emit: Callable[[TargetChanges], None]) -> SurveyDiff:
    """Compare two survey folders; `emit` gets each target that changed, was added or was
    removed (in the new survey's order, the removed ones last)."""
    old_files, new_files = jsonl_files(old_dir), jsonl_files(new_dir)
    result = SurveyDiff(Population(), Population(), missing=(
        shards_missing(old_dir, old_files), shards_missing(new_dir, new_files)))
    index: dict[Key, tuple[Path, int]] = {}
    for doc, path, offset in _documents(old_files):
        if target_key(doc) not in index:    # each target once (the first document of it)
            index[target_key(doc)] = (path, offset)
            result.old.add(doc)
    at = _time(new_files)
    seen: set[Key] = set()
    for doc, _path, _offset in _documents(new_files):
        key = target_key(doc)
        if key in seen:
            continue
        seen.add(key)
        result.new.add(doc)
        place = index.get(key)
        if place is None:
            _only_in_one(result, key, TargetStatus.added, bool(result.missing[0]), emit)
            continue
        changes = diff_reports(_read_at(*place), doc, at=at)
        result.compared += 1
        _count(result, changes)
        if changes:
            emit(TargetChanges(key[0], key[1], TargetStatus.compared, changes))
    for key in index:
        if key not in seen:
            _only_in_one(result, key, TargetStatus.removed, bool(result.missing[1]), emit)
    return result


def shards_missing(directory: str, files: list[Path]) -> int:
    """The shards the survey's manifest lists without a scan documents file among `files`
    (a survey stopped early, to be resumed); 0 without a manifest (nothing says what is
    missing)."""
    manifest = SurveyDir(directory).manifest()
    shards = manifest.get("shards") if manifest else None
    there = {p.stem for p in files}
    return sum(1 for s in _items(shards) if str(s.get("name")) not in there)


def _only_in_one(result: SurveyDiff, key: Key, status: TargetStatus, other_incomplete: bool,
                 emit: Callable[[TargetChanges], None]) -> None:
    """A target in one survey only: added or removed, unless the other survey is incomplete
    (the target may be in a shard it did not audit yet: not established)."""
    if other_incomplete:
        status = TargetStatus.unaudited
        result.unaudited += 1
    elif status is TargetStatus.added:
        result.added += 1
    else:
        result.removed += 1
    emit(TargetChanges(key[0], key[1], status))


def _count(result: SurveyDiff, changes: tuple[Change, ...]) -> None:
    if changes:
        result.changed += 1
    if any(c.direction is Direction.regression for c in changes):
        result.regressed += 1
    for kind in sorted({c.kind.value for c in changes}):
        result.kinds[kind] += 1


def _read_at(path: Path, offset: int) -> JsonObject:
    with open(path, "rb") as fh:
        fh.seek(offset)
        doc = _parse(fh.readline(MAX_LINE + 1), f"{path}@{offset}")
    if doc is None:
        raise UsageError(f"{path} changed while it was read")
    return doc
