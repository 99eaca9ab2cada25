"""The population answers of a survey, from its Parquet files (pyarrow, one file at a time
so memory stays bounded by one shard): shares of targets per TLS version spoken, per
preferred group, per post-quantum verdict, per supported group, servers that enforce their
own group order, and failures by kind. Every share is of all targets in the files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tlsprobe.errors import UsageError
from tlsprobe.survey.store import SurveyDir

COLUMNS = ["index", "version", "spoken", "groups", "preferred_group", "group_order",
           "pq_verdict", "error_kind"]


def _counts(counter: Counter[str], total: int) -> dict[str, dict[str, float]]:
    return {key: {"targets": n, "share": round(n / total, 6) if total else 0.0}
            for key, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))}


def summarize(directory: str) -> dict[str, Any]:
    """The summary of the survey in `directory` as a JSON-shaped dict."""
    from tlsprobe.survey.extra import parquet
    pq = parquet()
    survey = SurveyDir(directory)
    manifest = survey.manifest()
    files = sorted(Path(directory).glob("shard-*.parquet"))
    if manifest is None and not files:
        raise UsageError(f"{directory}: no survey there (no manifest.json, no shard files)")
    targets: set[int] = set()
    versions: Counter[str] = Counter()
    preferred: dict[str, Counter[str]] = {}
    supported: Counter[str] = Counter()
    server_order: Counter[str] = Counter()
    pq_verdicts: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    for path in files:
        try:
            rows = pq.read_table(path, columns=COLUMNS).to_pylist()
        except Exception as exc:  # noqa: BLE001 -- pyarrow raises its own types for damaged files
            raise UsageError(f"{path}: not a survey Parquet file ({exc})") from None
        groups_of: dict[int, set[str]] = {}
        for row in rows:
            index = row["index"]
            if index not in targets:
                targets.add(index)
                pq_verdicts[row["pq_verdict"] or "not_tested"] += 1
                if row["error_kind"]:
                    failures[row["error_kind"]] += 1
            version = row["version"]
            if version is None or not row["spoken"]:
                continue
            versions[version] += 1
            if row["preferred_group"]:
                preferred.setdefault(version, Counter())[row["preferred_group"]] += 1
            if row["group_order"] == "server":
                server_order[version] += 1
            groups_of.setdefault(index, set()).update(row["groups"] or ())
        for names in groups_of.values():
            supported.update(names)
    total = len(targets)
    shards = manifest.get("shards", []) if manifest else []
    return {"tool": "tlsprobe", "kind": "survey_summary", "schema": 1, "targets": total,
            "shards_total": len(shards) if manifest else len(files),
            "shards_done": len(files),
            "versions": _counts(versions, total),
            "preferred_group": {v: _counts(c, total) for v, c in sorted(preferred.items())},
            "pq_verdict": _counts(pq_verdicts, total),
            "supported_groups": _counts(supported, total),
            "server_order": _counts(server_order, total),
            "failures": _counts(failures, total)}


def render_text(summary: dict[str, Any]) -> str:
    """The summary as plain text, one section per question."""
    lines = [(f"survey: {summary['targets']} targets, {summary['shards_done']} of "
             f"{summary['shards_total']} shards done")]

    def section(title: str, counts: dict[str, dict[str, float]], indent: str = "") -> None:
        lines.append(f"{indent}{title}:")
        if not counts:
            lines.append(f"{indent}  (none)")
        for key, value in counts.items():
            lines.append(f"{indent}  {key:28} {int(value['targets']):>8}  "
                         f"{100 * value['share']:6.2f}%")

    section("TLS versions spoken", summary["versions"])
    lines.append("preferred group (server's first choice):")
    for version, counts in summary["preferred_group"].items():
        section(version, counts, "  ")
    if not summary["preferred_group"]:
        lines.append("  (none)")
    section("post-quantum verdict", summary["pq_verdict"])
    section("supported groups (any version)", summary["supported_groups"])
    section("servers enforcing their group order", summary["server_order"])
    section("failures by kind", summary["failures"])
    return "\n".join(lines) + "\n"
