"""The population answers of a survey, from its Parquet files (pyarrow, one file at a time
so memory stays bounded by one shard; one row per target): shares of targets per TLS
version spoken, per preferred group (servers that follow the client's order named as such),
per post-quantum verdict, per supported group, servers that enforce their own group order,
checks found vulnerable, and failures by kind.

The shares are of the targets reached (no `error_kind`): an unreachable target has no
version, group or verdict to count, so it is counted on its own line (`unreachable`, and by
kind under `failures`, whose shares are of all targets). A version's and a supported
group's share is of the targets reached that established it (rows.py known_versions,
known_groups), the others counted as `not_established`: a fact not established is no
refusal.

A running survey's shards not yet in Parquet (store.py: their rows wait in `_rows/` until
the audits are over) are read from their `_rows` files, through the same reader that makes
the Parquet files: the summary counts every shard done."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from types import ModuleType

from tlsprobe.errors import UsageError, os_error_text
from tlsprobe.model.encode import run_head, utc_stamp
from tlsprobe.survey.rows import CHECKS, Row, check_column, known_groups, known_versions
from tlsprobe.survey.store import ROWS_DIR, SurveyDir, rows_table

#: the key under "preferred_group" of the servers that pick by the client's order
FOLLOWS_CLIENT = "(follows the client's order)"
COLUMNS = ["index", "versions", "version_results", "groups", "group_results", "pq_verdict",
           "error_kind",
           *(check_column(name) for name in CHECKS)]


def _counts(counter: Counter[str], total: int) -> dict[str, dict[str, float]]:
    return {key: {"targets": n, "share": round(n / total, 6) if total else 0.0}
            for key, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))}


def _known_counts(yes: Counter[str], unknown: Counter[str], blind: int, reached: int,
                  unknown_too: bool = False) -> dict[str, dict[str, float | None]]:
    """Per key the targets where it holds, their share of the targets that established it
    (None: none did; `not_established`: the targets reached that did not, `blind` of them
    establishing nothing of the kind; counted as refused, they would move the share with
    nothing observed). The keys held somewhere; with `unknown_too` also those never
    established."""
    keys = set(yes) | (set(unknown) if unknown_too else set())
    out: dict[str, dict[str, float | None]] = {}
    for key in keys:
        known = reached - unknown[key] - blind
        out[key] = {"targets": yes[key], "share": round(yes[key] / known, 6) if known else None,
                    "not_established": reached - known}
    return dict(sorted(out.items(), key=lambda kv: (-yes[kv[0]], kv[0])))


class _Tally:
    """The counters, fed one target row at a time."""

    def __init__(self) -> None:
        self.targets: set[int] = set()
        self.reached = 0
        self.versions: Counter[str] = Counter()
        self.versions_unknown: Counter[str] = Counter()
        self.versions_blind = 0
        self.preferred: dict[str, Counter[str]] = {}
        self.supported: Counter[str] = Counter()
        self.groups_unknown: Counter[str] = Counter()
        self.groups_blind = 0
        self.server_order: Counter[str] = Counter()
        self.pq_verdicts: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.vulnerable: Counter[str] = Counter()

    def add(self, row: Row) -> None:
        if row["index"] in self.targets:     # a target is counted once, whatever its rows
            return
        self.targets.add(row["index"])
        if row["error_kind"]:
            self.failures[row["error_kind"]] += 1
            return
        self.reached += 1
        self.pq_verdicts[row["pq_verdict"] or "not_tested"] += 1
        statuses = {"supported": True, "not_supported": False}
        spoken, unknown = known_versions(
            [(v["version"], statuses.get(v["status"])) for v in row.get("version_results") or ()]
            + [(g["version"], g["spoken"]) for g in row["group_results"] or ()])
        self.versions.update(spoken | set(row["versions"] or ()))
        self.versions_unknown.update(unknown or ())
        self.versions_blind += unknown is None
        supported, unsure = known_groups(
            (g["spoken"], g["groups"] or (), g["not_supported"] or (), g["inconclusive"] or ())
            for g in row["group_results"] or ())
        self.supported.update(supported | set(row["groups"] or ()))
        self.groups_unknown.update(unsure or ())
        self.groups_blind += unsure is None
        for result in row["group_results"] or ():
            if not result["spoken"] or not result["groups"]:
                continue
            version = result["version"]
            if result["preferred"]:
                self.preferred.setdefault(version, Counter())[result["preferred"]] += 1
            elif result["order"] == "client":
                self.preferred.setdefault(version, Counter())[FOLLOWS_CLIENT] += 1
            if result["order"] == "server":
                self.server_order[version] += 1
        for name in CHECKS:
            if row.get(check_column(name)) == "vulnerable":
                self.vulnerable[name] += 1


def _read(path: Path, pq: ModuleType) -> list[Row]:
    if path.parent.name == ROWS_DIR:    # a shard done, its Parquet file not written yet
        try:
            table = rows_table(path.read_bytes())
            return list(table.select(COLUMNS).to_pylist())
        except Exception as exc:  # noqa: BLE001 -- pyarrow raises its own types
            _unreadable(path, exc)
            raise UsageError(f"{path}: not a survey rows file ({exc})") from None
    try:
        names = set(pq.read_schema(path).names)
        if "group_results" not in names:
            raise UsageError(f"{path}: a survey file of an older tlsprobe (one row per "
                             "version): run the survey again with this version to summarize it")
        # ParquetFile.read, not read_table: read_table goes through pyarrow.dataset, whose
        # import imports pandas (0.2 s and 50 MB at the end of every survey run)
        return list(pq.ParquetFile(path).read(columns=[c for c in COLUMNS if c in names],
                                              use_threads=False).to_pylist())
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 -- pyarrow raises its own types for damaged files
        _unreadable(path, exc)
        raise UsageError(f"{path}: not a survey Parquet file ({exc})") from None


def _unreadable(path: Path, exc: Exception) -> None:
    """A usage error for a file the system would not read (an OSError with its errno, as
    pyarrow's are too), not 'not a survey file': a damaged file's OSError has none."""
    if isinstance(exc, OSError) and exc.errno:
        raise UsageError(f"{path}: cannot read it ({os_error_text(exc)})") from None


def summarize(directory: str) -> Row:
    """The summary of the survey in `directory` as a JSON-shaped dict, with the run members
    every JSON document carries (`tlsprobe_version`, and `started_at` and `duration_s` of
    this summary's reading, not of the survey's run)."""
    from tlsprobe.survey.extra import parquet
    began, clock = time.time(), time.monotonic()
    pq = parquet()
    manifest = SurveyDir(directory).manifest()
    files = sorted(Path(directory).glob("shard-*.parquet"))
    converted = {p.stem for p in files}
    files += sorted(p for p in Path(directory).glob(f"{ROWS_DIR}/shard-*.jsonl")
                    if p.stem not in converted)
    if manifest is None and not files:
        raise UsageError(f"{directory}: no survey there (no _manifest.json, no shard files)")
    tally = _Tally()
    for path in files:
        for row in _read(path, pq):
            tally.add(row)
    total, reached = len(tally.targets), tally.reached
    shards = manifest.get("shards", []) if manifest else []
    return {"tool": "tlsprobe", "kind": "survey_summary", "schema": 2, "targets": total,
            "reached": reached, "unreachable": total - reached,
            "shards_total": len(shards) if manifest else len(files),
            "shards_done": len(files),
            "versions": _known_counts(tally.versions, tally.versions_unknown,
                                      tally.versions_blind, reached, unknown_too=True),
            "preferred_group": {v: _counts(c, reached)
                                for v, c in sorted(tally.preferred.items())},
            "pq_verdict": _counts(tally.pq_verdicts, reached),
            "supported_groups": _known_counts(tally.supported, tally.groups_unknown,
                                              tally.groups_blind, reached),
            "server_order": _counts(tally.server_order, reached),
            "vulnerable": _counts(tally.vulnerable, reached),
            "failures": _counts(tally.failures, total),
            **run_head(), "started_at": utc_stamp(began),
            "duration_s": round(time.monotonic() - clock, 6)}


def render_text(summary: Row) -> str:
    """The summary as plain text, one section per question."""
    lines = [(f"survey: {summary['targets']} targets, {summary['shards_done']} of "
              f"{summary['shards_total']} shards done"),
             f"reached: {summary['reached']} targets (the shares below are of these)",
             f"unreachable: {summary['unreachable']} targets (by kind under failures)"]

    def section(title: str, counts: dict[str, dict[str, float]], indent: str = "") -> None:
        lines.append(f"{indent}{title}:")
        if not counts:
            lines.append(f"{indent}  (none)")
        for key, value in counts.items():
            unknown = int(value.get("not_established", 0))
            share = value["share"]
            lines.append(f"{indent}  {key:28} {int(value['targets']):>8}  "
                         + ("     -" if share is None else f"{100 * share:6.2f}%")
                         + (f"  (not established on {unknown})" if unknown else ""))

    section("TLS versions spoken", summary["versions"])
    lines.append("preferred group (server's first choice):")
    for version, counts in summary["preferred_group"].items():
        section(version, counts, "  ")
    if not summary["preferred_group"]:
        lines.append("  (none)")
    section("post-quantum verdict", summary["pq_verdict"])
    section("supported groups (any version)", summary["supported_groups"])
    section("servers enforcing their group order", summary["server_order"])
    section("checks found vulnerable", summary["vulnerable"])
    section("failures by kind (share of all targets)", summary["failures"])
    return "\n".join(lines) + "\n"


def paragraph(summary: Row, directory: str, seconds: float) -> str:
    """The one paragraph a finished run prints: where the output is and what it found."""
    def pct(section: dict[str, dict[str, float]], key: str) -> str:
        value = section.get(key, {})
        unknown = int(value.get("not_established", 0))
        share = value.get("share", 0.0)
        if share is None:
            return "not established"
        return f"{100 * share:.1f}%" + (f" (not established on {unknown})" if unknown else "")

    def version(name: str) -> str:
        text = pct(summary["versions"], name)
        return f"{name} {text}" if text == "not established" else f"{name} on {text}"

    versions = ", ".join(version(v) for v in summary["versions"])
    kinds = ", ".join(f"{k} {int(v['targets'])}" for k, v in summary["failures"].items())
    return (f"tlsprobe survey: {summary['targets']} targets in {directory} "
            f"({summary['shards_done']} of {summary['shards_total']} shards; this run "
            f"{seconds:.1f} s): {summary['reached']} reached, {summary['unreachable']} "
            f"unreachable{f' ({kinds})' if kinds else ''}. Of the targets reached: "
            f"{versions or 'no version established'}; a post-quantum group accepted by "
            f"{pct(summary['pq_verdict'], 'yes')}. One Parquet row per target: "
            f"pandas.read_parquet('{directory}'); shares: tlsprobe survey summary {directory}\n")
