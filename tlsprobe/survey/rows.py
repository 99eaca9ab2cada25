"""An AuditReport as Parquet rows: one row per target and protocol version.

Schema (column: type, meaning); every row also carries the target-level columns:

- shard: int32, the shard the target was audited in; index: int64, the target's place in
  the input (from 1); host: string; port: int32; address: string (null: not resolved)
- version: string ("TLS 1.3"; null on the one row of a target without group results);
  version_id: int32
- spoken: bool (null: could not be told); method: string (how groups were enumerated)
- groups: list<string>, the supported groups in the server's order when `group_order` is
  "server" (else as found); group_ids: list<int32>, the same as codepoints
- preferred_group: string, the first of `groups` when the server picks by its own order or
  supports one group (null otherwise: a client-ordered server has no preference)
- group_order: string (server, client, single, unknown)
- not_supported, inconclusive: list<string>, groups refused / not decided
- pq_verdict: string for the target: yes (a post-quantum group is accepted), no (all
  refused), inconclusive, not_tested; pq_groups: list<string>, the accepted ones
- clients: list<string>, with --clients, per client profile simulated "id=status" (status:
  connected, failed, inconclusive); client_results: list<string>, in the same order, what
  it negotiated ("TLS 1.3 TLS_AES_128_GCM_SHA256 X25519MLKEM768", "via HRR" added) or why
  it failed (the reason); both empty without --clients
- error: string (null: none); error_kind: string (network, not_tls, alert, protocol,
  internal, usage); connections: int32 (the target's total); duration_s: float64
- rating: string, the grade (A+ .. F, T, M; null: not rated, e.g. an error or no version
  established); rating_score: int32, the numeric score before the caps (null: a category
  not established); rating_provisional: bool, a rule not applied could lower the grade
  (null: not rated); rating_label: string, the one-line label ("B (capped: TLS 1.0
  offered)"). A survey runs the phases and checks it is given: the rules whose input it did
  not establish are listed in the label as provisional.

Plain Python values only here: the pyarrow schema is built in `schema()`, imported lazily.
"""

from __future__ import annotations

from typing import Any

from tlsprobe import registry
from tlsprobe.model.audit import ORDER_SERVER, ORDER_SINGLE, AuditReport, GroupAudit

Row = dict[str, Any]

COLUMNS: tuple[tuple[str, str], ...] = (
    ("shard", "int32"), ("index", "int64"), ("host", "string"), ("port", "int32"),
    ("address", "string"), ("version", "string"), ("version_id", "int32"),
    ("spoken", "bool"), ("method", "string"), ("groups", "list<string>"),
    ("group_ids", "list<int32>"), ("preferred_group", "string"), ("group_order", "string"),
    ("not_supported", "list<string>"), ("inconclusive", "list<string>"),
    ("pq_verdict", "string"), ("pq_groups", "list<string>"), ("clients", "list<string>"),
    ("client_results", "list<string>"), ("error", "string"),
    ("error_kind", "string"), ("connections", "int32"), ("duration_s", "float64"),
    # the rating (policy/rating.py, docs/RATING.md)
    ("rating", "string"), ("rating_score", "int32"), ("rating_provisional", "bool"),
    ("rating_label", "string"),
)


def schema() -> Any:
    """The pyarrow schema of the rows (pyarrow needed)."""
    from tlsprobe.survey.extra import pyarrow
    pa = pyarrow()
    kinds = {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string(),
             "bool": pa.bool_(), "float64": pa.float64(),
             "list<string>": pa.list_(pa.string()), "list<int32>": pa.list_(pa.int32())}
    return pa.schema([(name, kinds[kind]) for name, kind in COLUMNS])


def pq_summary(report: AuditReport) -> tuple[str, list[str]]:
    """The target's post-quantum verdict from its capability checks, and the groups accepted."""
    verdicts = [p for p in report.post_quantum if p.check == "capability"]
    yes = [p.subject for p in verdicts if p.verdict == "yes"]
    if yes:
        return "yes", yes
    seen = {p.verdict for p in verdicts}
    if not seen or seen == {"not_tested"}:
        return "not_tested", []
    if seen <= {"no", "not_tested"}:
        return "no", []
    return "inconclusive", []


def client_summary(report: AuditReport) -> tuple[list[str], list[str]]:
    """The clients and client_results columns: "id=status" and what each negotiated (or
    the reason of its failure, or the detail of an inconclusive result)."""
    ids, results = [], []
    for s in report.clients:
        ids.append(f"{s.profile}={s.status.value}")
        if s.version is not None and s.cipher_suite is not None:
            text = " ".join([registry.version_name(s.version),
                             registry.suite_name(s.cipher_suite)] +
                            ([registry.group_name(s.group)] if s.group is not None else []) +
                            (["via HRR"] if s.hello_retry else []))
            results.append(text + (f"; {s.reason.value}" if s.reason is not None else ""))
        else:
            results.append(s.reason.value if s.reason is not None else s.detail)
    return ids, results


def _group_row(audit: GroupAudit) -> Row:
    names = [g.name for g in audit.supported]
    preferred = names[0] if names and audit.order in (ORDER_SERVER, ORDER_SINGLE) else None
    return {"version": audit.version.name, "version_id": audit.version.id,
            "spoken": audit.spoken, "method": audit.method, "groups": names,
            "group_ids": [g.id for g in audit.supported], "preferred_group": preferred,
            "group_order": audit.order, "not_supported": [g.name for g in audit.not_supported],
            "inconclusive": [g.name for g in audit.inconclusive]}


def _empty_row() -> Row:
    return {"version": None, "version_id": None, "spoken": None, "method": None, "groups": [],
            "group_ids": [], "preferred_group": None, "group_order": None,
            "not_supported": [], "inconclusive": []}


def _rating_columns(report: AuditReport) -> Row:
    rating = report.rating
    if rating is None:
        return {"rating": None, "rating_score": None, "rating_provisional": None,
                "rating_label": None}
    return {"rating": rating.grade.value if rating.grade else None,
            "rating_score": rating.score, "rating_provisional": rating.provisional,
            "rating_label": rating.label()}


def rows_for(report: AuditReport, shard: int) -> list[Row]:
    """The rows of one target, in version order as the report lists them."""
    verdict, pq_groups = pq_summary(report)
    head: Row = {"shard": shard, "index": report.index, "host": report.host,
                 "port": report.port, "address": report.address}
    clients, results = client_summary(report)
    tail: Row = {"pq_verdict": verdict, "pq_groups": pq_groups, "clients": clients,
                 "client_results": results, "error": report.error,
                 "error_kind": None if report.error_kind is None else str(report.error_kind),
                 "connections": report.total_connections, "duration_s": report.duration_s,
                 **_rating_columns(report)}
    parts = [_group_row(g) for g in report.groups] or [_empty_row()]
    return [{**head, **part, **tail} for part in parts]
