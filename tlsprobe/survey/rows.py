"""An AuditReport as one Parquet row per target (the one schema of every shard).

Schema (column: type, meaning). Lists and structs hold the per-version facts; every column is
in every row, null where the target did not establish it (an unreachable target: nulls and
empty lists, with `error_kind` set), so shards concatenate and `value_counts()` counts targets.

- shard: int32, the shard the target was audited in; index: int64, the target's place in
  the input (from 1); host: string; port: int32; address: string (null: not resolved)
- started_at: string, when the target's audit started (ISO 8601 UTC, its end less its
  duration); duration_s: float64; connections: int32 (the target's total);
  tlsprobe_version: string
- versions: list<string>, the versions the server speaks, newest first;
  version_results: list<struct<version, version_id, status, detail>> per version tried
  (status: supported, not_supported, inconclusive)
- group_results: list<struct<version, version_id, spoken, method, groups, group_ids, order,
  preferred, not_supported, inconclusive>> per version (groups in the server's order when
  order is "server"; preferred: its first choice, null when the server follows the client)
- groups: list<string>, every group supported in any version (newest version's order
  first); preferred_group, group_order: string, of the newest version spoken
  (group_order: server, client, single, unknown)
- suite_results: list<struct<version, suites, order, complete>>;
  signature_schemes: list<struct<version, status, schemes, order>>
- pq_verdict: string: yes (a post-quantum group is accepted), no (all refused),
  inconclusive, not_tested; null when the target was not reached (see error_kind);
  pq_groups: list<string>, the accepted ones
- check_<name> (one per check of `--checks all`, "-" spelled "_"): string, the verdict
  ("vulnerable", "not vulnerable", ...), null: not run; check_<name>_details: string, a JSON
  object {"reason", "evidence", "details" (the check's typed record), "code", "severity"}
- findings: list<struct<code, severity, message>>
- cert_subject, cert_issuer, cert_key_type, cert_signature_algorithm, cert_not_before,
  cert_not_after, cert_sha256: string; cert_key_bits: int32; cert_san: list<string> (the
  leaf); chain_length: int32; trust_status: string; hostname_ok: bool (the default chain)
- other_certs: list<struct<key_type, subject, sha256, not_after, trust_status>>, the leaf
  of each other key type's chain (a server with an RSA and an ECDSA certificate), empty
  when it has one; other_certs_note: string, why the search for them is not complete
  (null: complete, or the cert phase not run). The certificate checks judge every chain:
  their verdict is the worst, and check_<name>_details has "chains" (one verdict per
  chain, each with its key_type; empty with one chain)
- clients: list<string>, with --clients, per client profile simulated "id=status" (status:
  connected, failed, inconclusive); client_results: list<string>, in the same order, what
  it negotiated ("TLS 1.3 TLS_AES_128_GCM_SHA256 X25519MLKEM768", "via HRR" added) or why
  it failed (the reason); both empty without --clients
- error: string (null: none); error_kind: string (network, not_tls, alert, protocol,
  internal, usage)
- rating: string, the grade (A+ .. F, T, M; null: not rated, e.g. an error or no version
  established); rating_score: int32, the numeric score before the caps (null: a category
  not established); rating_provisional: bool, a rule not applied could lower the grade
  (null: not rated); rating_label: string, the one-line label ("B (capped: TLS 1.0
  offered)"). A survey runs the phases and checks it is given: the rules whose input it did
  not establish are listed in the label as provisional.

Plain Python values only here: the pyarrow schema is built in `schema()`, imported lazily.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from types import ModuleType
from typing import Any, TypeAlias

from tlsprobe import registry
from tlsprobe._version import __version__
from tlsprobe.model.audit import ORDER_SERVER, ORDER_SINGLE, AuditReport, GroupAudit
from tlsprobe.model.check_catalog import ALIASES
from tlsprobe.model.encode import to_jsonable
from tlsprobe.model.vocab import VersionStatus

Row = dict[str, Any]
#: a column's type: a name ("string"), ("list", type) or a struct {field: type, ...}
Kind: TypeAlias = str | tuple[str, "Kind"] | dict[str, "Kind"]

STRS: Kind = ("list", "string")
_VERSION_RESULT: Kind = {"version": "string", "version_id": "int32", "status": "string",
                         "detail": "string"}
_GROUP_RESULT: Kind = {
    "version": "string", "version_id": "int32", "spoken": "bool", "method": "string",
    "groups": STRS, "group_ids": ("list", "int32"), "order": "string",
    "preferred": "string", "not_supported": STRS, "inconclusive": STRS}
_SUITE_RESULT: Kind = {"version": "string", "suites": STRS, "order": "string",
                       "complete": "bool"}
_SIGALG_RESULT: Kind = {"version": "string", "status": "string", "schemes": STRS,
                        "order": "string"}
_FINDING: Kind = {"code": "string", "severity": "string", "message": "string"}
_OTHER_CERT: Kind = {"key_type": "string", "subject": "string", "sha256": "string",
                     "not_after": "string", "trust_status": "string"}


def check_column(name: str) -> str:
    """The verdict column of check `name` (its details: the same plus "_details")."""
    return "check_" + name.replace("-", "_")


CHECKS: tuple[str, ...] = ALIASES["all"]

COLUMNS: tuple[tuple[str, Kind], ...] = (
    ("shard", "int32"), ("index", "int64"), ("host", "string"), ("port", "int32"),
    ("address", "string"), ("started_at", "string"), ("duration_s", "float64"),
    ("connections", "int32"), ("tlsprobe_version", "string"),
    ("versions", STRS), ("version_results", ("list", _VERSION_RESULT)),
    ("groups", STRS), ("preferred_group", "string"), ("group_order", "string"),
    ("group_results", ("list", _GROUP_RESULT)),
    ("suite_results", ("list", _SUITE_RESULT)),
    ("signature_schemes", ("list", _SIGALG_RESULT)),
    ("pq_verdict", "string"), ("pq_groups", STRS),
    *((column, "string") for name in CHECKS
      for column in (check_column(name), check_column(name) + "_details")),
    ("findings", ("list", _FINDING)),
    ("cert_subject", "string"), ("cert_issuer", "string"), ("cert_key_type", "string"),
    ("cert_key_bits", "int32"), ("cert_signature_algorithm", "string"),
    ("cert_not_before", "string"), ("cert_not_after", "string"), ("cert_sha256", "string"),
    ("cert_san", STRS), ("chain_length", "int32"), ("trust_status", "string"),
    ("hostname_ok", "bool"), ("other_certs", ("list", _OTHER_CERT)),
    ("other_certs_note", "string"),
    ("clients", STRS), ("client_results", STRS),
    ("error", "string"), ("error_kind", "string"),
    # the rating (policy/rating.py, docs/RATING.md)
    ("rating", "string"), ("rating_score", "int32"), ("rating_provisional", "bool"),
    ("rating_label", "string"),
)


def _arrow_type(pa: ModuleType, kind: Kind) -> object:
    if isinstance(kind, str):
        return {"int32": pa.int32(), "int64": pa.int64(), "string": pa.string(),
                "bool": pa.bool_(), "float64": pa.float64()}[kind]
    if isinstance(kind, dict):
        return pa.struct([(name, _arrow_type(pa, sub)) for name, sub in kind.items()])
    return pa.list_(_arrow_type(pa, kind[1]))


def schema() -> Any:
    """The pyarrow schema of the rows (pyarrow needed)."""
    from tlsprobe.survey.extra import pyarrow
    pa = pyarrow()
    return pa.schema([(name, _arrow_type(pa, kind)) for name, kind in COLUMNS])


def pq_summary(report: AuditReport) -> tuple[str | None, list[str]]:
    """The target's post-quantum verdict from its capability checks, and the groups accepted
    (None: the target was not reached, so nothing was tested)."""
    verdicts = [p for p in report.post_quantum if p.check == "capability"]
    yes = [p.subject for p in verdicts if p.verdict == "yes"]
    if yes:
        return "yes", yes
    if report.error_kind is not None:
        return None, []
    seen = {p.verdict for p in verdicts}
    if not seen or seen == {"not_tested"}:
        return "not_tested", []
    if seen <= {"no", "not_tested"}:
        return "no", []
    return "inconclusive", []


#: what one target established of a family of facts (versions, groups): those that hold,
#: and those not established (None: none at all); every other one was refused
Known: TypeAlias = tuple[set[str], set[str] | None]


def known_versions(entries: Iterable[tuple[str, bool | None]]) -> Known:
    """What one target established of the versions from its (version, spoken) facts
    (spoken None: not established; a version any fact says spoken is spoken); no fact at
    all establishes none. A share must not count a version not established as refused."""
    facts = list(entries)
    spoken = {name for name, said in facts if said}
    refused = {name for name, said in facts if said is False}
    unknown = {name for name, _ in facts} - spoken - refused
    return spoken, unknown if facts else None


def known_groups(entries: Iterable[tuple[bool | None, Iterable[str], Iterable[str],
                                         Iterable[str]]]) -> Known:
    """What one target established of the groups from its group audits, each (spoken,
    supported, not_supported, inconclusive): supported in any version; not established
    where inconclusive and supported nowhere; none at all without an audit, or when a
    version the server may speak was not audited (no group in any list: not run, or no
    answer). A version it does not speak has nothing to refuse."""
    supported: set[str] = set()
    unsure: set[str] = set()
    audited, blind = False, False
    for spoken, yes, no, maybe in entries:
        yes, maybe = set(yes), set(maybe)
        supported |= yes
        unsure |= maybe
        audited = True
        blind = blind or spoken is not False and not (yes or maybe or list(no))
    return supported, None if blind or not audited else unsure - supported


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


def preferred(audit: GroupAudit) -> str | None:
    """The server's first choice among its groups (None: it follows the client's order)."""
    names = [g.name for g in audit.supported]
    return names[0] if names and audit.order in (ORDER_SERVER, ORDER_SINGLE) else None


def _group_columns(report: AuditReport) -> Row:
    audits = sorted(report.groups, key=lambda g: -g.version.id)
    results = [{"version": a.version.name, "version_id": a.version.id, "spoken": a.spoken,
                "method": str(a.method), "groups": [g.name for g in a.supported],
                "group_ids": [g.id for g in a.supported], "order": str(a.order),
                "preferred": preferred(a), "not_supported": [g.name for g in a.not_supported],
                "inconclusive": [g.name for g in a.inconclusive]} for a in audits]
    names: list[str] = []
    for a in audits:
        names += [g.name for g in a.supported if g.name not in names]
    newest = next((a for a in audits if a.spoken and a.supported), None)
    return {"group_results": results, "groups": names,
            "preferred_group": preferred(newest) if newest else None,
            "group_order": str(newest.order) if newest else None}


def _version_columns(report: AuditReport) -> Row:
    results = [{"version": v.version.name, "version_id": v.version.id,
                "status": str(v.status), "detail": v.detail}
               for v in sorted(report.versions, key=lambda v: -v.version.id)]
    spoken = {v.version.id: v.version.name for v in report.versions
              if v.status == VersionStatus.SUPPORTED}
    spoken.update({g.version.id: g.version.name for g in report.groups if g.spoken})
    return {"version_results": results,
            "versions": [spoken[i] for i in sorted(spoken, reverse=True)]}


def _suite_columns(report: AuditReport) -> Row:
    return {"suite_results": [
        {"version": s.version.name, "suites": [c.iana_name for c in s.supported],
         "order": str(s.order), "complete": s.complete}
        for s in sorted(report.suites, key=lambda s: -s.version.id)],
        "signature_schemes": [
        {"version": s.version.name, "status": str(s.status),
         "schemes": [c.name for c in s.supported], "order": str(s.order)}
        for s in sorted(report.signature_schemes, key=lambda s: -s.version.id)]}


def _check_columns(report: AuditReport) -> Row:
    row: Row = {}
    for name in CHECKS:
        row[check_column(name)] = row[check_column(name) + "_details"] = None
    for result in report.check_results:
        column = check_column(result.name)
        if column not in row:
            continue        # a check of a newer catalog: its JSON line has it
        row[column] = str(result.verdict)
        row[column + "_details"] = json.dumps(
            {"reason": result.reason, "evidence": list(result.evidence),
             "details": to_jsonable(result.details), "code": result.code,
             "severity": None if result.severity is None else str(result.severity),
             "chains": to_jsonable(result.chains)},
            sort_keys=True)
    row["findings"] = [{"code": f.code, "severity": str(f.severity), "message": f.message}
                       for f in report.findings]
    return row


def _certificate_columns(report: AuditReport) -> Row:
    leaf = report.certificates[0] if report.certificates else None
    trust = report.trust
    return {"cert_subject": leaf and leaf.subject, "cert_issuer": leaf and leaf.issuer,
            "cert_key_type": leaf and leaf.key_type, "cert_key_bits": leaf and leaf.key_bits,
            "cert_signature_algorithm": leaf and leaf.signature_algorithm,
            "cert_not_before": leaf and leaf.not_before,
            "cert_not_after": leaf and leaf.not_after, "cert_sha256": leaf and leaf.sha256,
            "cert_san": list(leaf.san) if leaf else [],
            "chain_length": len(report.certificates) if report.certificates else None,
            "trust_status": None if trust is None else str(trust.status),
            "hostname_ok": None if trust is None else trust.hostname_ok,
            "other_certs": [
                {"key_type": o.key_type, "subject": o.certificates[0].subject,
                 "sha256": o.certificates[0].sha256,
                 "not_after": o.certificates[0].not_after,
                 "trust_status": None if o.trust is None else str(o.trust.status)}
                for o in report.other_certificates if o.certificates],
            "other_certs_note": report.other_certificates_note}


def _rating_columns(report: AuditReport) -> Row:
    rating = report.rating
    if rating is None:
        return {"rating": None, "rating_score": None, "rating_provisional": None,
                "rating_label": None}
    return {"rating": rating.grade.value if rating.grade else None,
            "rating_score": rating.score, "rating_provisional": rating.provisional,
            "rating_label": rating.label()}


def iso_utc(epoch: float) -> str:
    """Seconds since the epoch as ISO 8601 UTC to the second ("2026-12-06T10:20:31Z")."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def row_for(report: AuditReport, shard: int, started: float | None = None) -> Row:
    """The one row of a target; `started`: when its audit started (epoch seconds)."""
    verdict, pq_groups = pq_summary(report)
    clients, results = client_summary(report)
    return {"shard": shard, "index": report.index, "host": report.host, "port": report.port,
            "address": report.address,
            "started_at": None if started is None else iso_utc(started),
            "duration_s": report.duration_s, "connections": report.total_connections,
            "tlsprobe_version": __version__, **_version_columns(report),
            **_group_columns(report), **_suite_columns(report),
            "pq_verdict": verdict, "pq_groups": pq_groups, **_check_columns(report),
            **_certificate_columns(report), "clients": clients, "client_results": results,
            "error": report.error,
            "error_kind": None if report.error_kind is None else str(report.error_kind),
            **_rating_columns(report)}


def rows_for(report: AuditReport, shard: int, started: float | None = None) -> list[Row]:
    """The rows of one target: one (a list for the callers that concatenate)."""
    return [row_for(report, shard, started)]
