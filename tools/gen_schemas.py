#!/usr/bin/env python3
"""Generate the JSON Schemas (draft 2020-12) of tlsprobe's JSON outputs from the model.

Each output's schema is read off the frozen dataclasses that `tlsprobe.model.encode`
encodes (type hints -> JSON types; StrEnums -> enums of their values; a dataclass -> an
object with `additionalProperties: false`, every field required). What the type hints
cannot say is written here once: the document heads ("schema", "tool", "kind"), the
members a class's `json_shape()` adds or leaves out (`_shapes()`; a class with a `json_shape`
not listed there stops the generator), and the survey's Parquet rows (from
`tlsprobe.survey.rows.schema()`, pyarrow). So a new field, a new enum value or a new details class
is in the schema as soon as this is re-run; tests/schemas/ fails when the committed files
differ from what this writes, and validates real outputs against them.

Usage: python tools/gen_schemas.py [-o DIR]   (default: tlsprobe/data/schemas/)
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import json
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = REPO_ROOT / "tlsprobe" / "data" / "schemas"
BASE_URI = "https://tlsprobe.invalid/schemas/"
DRAFT = "https://json-schema.org/draft/2020-12/schema"

#: members every JSON document carries (issue 33; optional until every output has them)
RUN_MEMBERS: dict[str, Any] = {
    "tlsprobe_version": {"type": "string"},
    "started_at": {"type": "string", "format": "date-time",
                   "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$"},
    "duration_s": {"type": "number", "minimum": 0},
}
#: whether RUN_MEMBERS are required: False while outputs without them are current (the
#: members are being added in parallel); set True, re-run, and the live tests say which
#: output still lacks one
RUN_MEMBERS_REQUIRED = True


def _run_members(props: dict[str, Any], required: list[str], own: bool = True) -> None:
    """Add the run's members to an object's `props` (their schema, also over a model field
    of the same name: `started_at` is a `str | None` field, always written as a timestamp),
    to `required` too when RUN_MEMBERS_REQUIRED and the object is a run's `own` record (not
    a pcap connection record: its times are the capture's, docs/POLICY.md)."""
    for name, schema in RUN_MEMBERS.items():
        props[name] = schema
        if RUN_MEMBERS_REQUIRED and own and name not in required:
            required.append(name)


@dataclasses.dataclass(frozen=True)
class Shape:
    """What a class's `json_shape()` (or its document's `to_dict`) changes: members it adds
    (name -> schema) and fields it may leave out (not required)."""

    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    optional: tuple[str, ...] = ()
    #: fields its JSON does not have (a `json_shape` that renames or nests them)
    omit: tuple[str, ...] = ()
    #: more constraints on the object than its members' types (e.g. one member's type
    #: chosen by another's value): (builder, object schema) -> the schema
    constrain: Callable[[Builder, dict[str, Any]], dict[str, Any]] | None = None


class _JsonObject:
    """Stands for model.encode.JsonObject (any JSON object: e.g. a capture's counters)."""


class _JsonValue:
    """Stands for model.encode.JsonValue (any JSON value)."""


#: the JSON aliases (strings at run time) as types the builder knows
_OPAQUE: dict[str, Any] = {"JsonObject": _JsonObject, "JsonValue": _JsonValue}

_NULLABLE_STR = {"type": ["string", "null"]}


@functools.lru_cache(maxsize=1)
def _model_classes() -> dict[str, type]:
    """Every class defined in a tlsprobe.model module, by name."""
    import importlib
    import pkgutil

    import tlsprobe.model
    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(tlsprobe.model.__path__):
        module = importlib.import_module(f"tlsprobe.model.{info.name}")
        found.update({name: value for name, value in vars(module).items()
                      if isinstance(value, type) and value.__module__ == module.__name__})
    return found


def _names_for(cls: type) -> dict[str, Any]:
    """The names `cls`'s annotations may use beyond its module's globals: the JSON aliases
    and the model classes a model module imports for type checkers only (kept out of the
    imports of a scan's start-up: model/checks.py CheckDetails, model/audit.py
    ClientSimulation, ...). Its module's own names win (get_type_hints prefers localns)."""
    own = vars(sys.modules[cls.__module__])
    return {**{n: c for n, c in _model_classes().items() if n not in own}, **_OPAQUE}


def _closed(members: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": members, "required": list(members),
            "additionalProperties": False}


def _capture_counters() -> dict[str, Any]:
    """A capture record's `capture` member: the capture layer's counters
    (capture/events.py `CaptureStats.to_dict`, a plain dict the type hints cannot describe:
    written out here, checked on real records by tests/schemas); empty for a file nothing
    could be read from."""
    count = {"type": "integer", "minimum": 0}
    counts = {"type": "object", "additionalProperties": count}

    def counters(*names: str) -> dict[str, Any]:
        return {n: count for n in names}
    tcp = _closed({**counters("connections", "segments", "retransmissions", "overlaps",
                              "overlap_conflicts", "out_of_order", "gaps", "gap_bytes",
                              "after_close", "evicted"),
                   "evicted_by": _closed(counters("idle", "limit", "limit_in_progress")),
                   **counters("pending_flushes", "resyncs")})
    full = _closed({
        "file_format": {"type": "string"}, "packets": count, "link_types": counts,
        "skipped": counts, "snaplen_cut": count, "ip_first_fragments": count,
        "ip_fragments": _closed(counters("fragments", "reassembled", "incomplete",
                                         "bytes_lost", "duplicates")),
        "ip_length_exceeds_packet": count, "tcp": tcp, "udp_datagrams": count,
        "secrets_blocks": count,
        "warnings": {"type": "array", "items": _closed({"offset": count,
                                                        "message": {"type": "string"}})}})
    # only when a pcapng file's statistics blocks record drops
    full["properties"]["recorded_dropped"] = count
    # only for a live capture (pcap -i): its interfaces' pcap_stats (events.py LiveCounts)
    dropped = counters("received", "dropped", "interface_dropped")
    full["properties"]["live"] = _closed({
        "interfaces": {"type": "array", "items": {"type": "string"}},
        "filter": {"type": "string"}, **dropped,
        "per_interface": {"type": "array", "items": _closed({
            "interface": {"type": "string"}, **dropped})}})
    return {"anyOf": [full, {"type": "object", "maxProperties": 0}]}


def _shapes() -> dict[type, Shape]:
    """The classes whose JSON is not simply their fields (their `json_shape` docstrings)."""
    from tlsprobe.model.audit import AuditReport, Finding
    from tlsprobe.model.changes import Change
    from tlsprobe.model.checks import CheckResult
    from tlsprobe.model.clients import ClientSimulation
    from tlsprobe.model.rating import Rating
    from tlsprobe.model.speed import (
        SCHEMA,
        Comparison,
        ComparisonRow,
        Figure,
        SpeedReport,
    )
    library = {"type": "object", "properties": {n: {"type": "string"} for n in (
        "cryptography", "openssl")}, "required": ["cryptography", "openssl"],
        "additionalProperties": False}
    from tlsprobe.model.capture import CaptureSummary
    return {
        CheckResult: Shape(constrain=_details_by_check, optional=("chains",)),
        # the field typed JsonObject, its members written out
        CaptureSummary: Shape(extra={"capture": _capture_counters()}),
        # speed (model/speed.py): computed figures, and the versions renamed and nested
        Figure: Shape(extra={"bytes_per_second": float | None}),
        ComparisonRow: Shape(extra={"ratio": float | None}),
        Comparison: Shape(),   # its fields, reordered
        SpeedReport: Shape(omit=("tlsprobe_version", "cryptography_version",
                                 "openssl_version", "comparison"),
                           extra={"schema": _const(SCHEMA), "tlsprobe": str,
                                  "library": library,
                                  "openssl_comparison": Comparison | None}),
        # gate: only with --fail-on / --fail-under / --fail-on-change; changes and baseline:
        # only with scan --baseline (commands/scan_baseline.py json_text; changes null: the
        # target is not in the baseline)
        AuditReport: Shape(optional=("check_results", "read_only", "starttls", "transport",
                                     "one_at_a_time",
                                     "clients", "rating", "gate", "changes", "baseline",
                                     "policy_extends"),
                           extra={"changes": tuple[Change, ...] | None,
                                  "baseline": {"type": "object", "additionalProperties": False,
                                               "required": ["file", "saved"],
                                               "properties": {"file": {"type": "string"},
                                                              "saved": {"type": "string"}}}}),
        Finding: Shape(optional=("waiver", "waived_by", "inconclusive")),
        Rating: Shape(extra={"label": {"type": "string"}}),
        ClientSimulation: Shape(extra={n: _NULLABLE_STR for n in (
            "version_name", "cipher_suite_name", "group_name", "signature_scheme_name")}),
    }


def _details_by_check(builder: Builder, schema: dict[str, Any]) -> dict[str, Any]:
    """A check result: `name` one of the checks `scan --checks` knows, and its `details`
    that check's declared details type (probes/checks active.CHECKS, derived.CHECKS) or
    null."""
    from tlsprobe.probes.checks import active, derived
    declared = {**derived.CHECKS, **active.CHECKS}
    schema["properties"]["name"] = {"enum": list(declared)}
    rules = []
    for name, check in declared.items():
        details = builder.of(check.details)
        rules.append({"if": {"properties": {"name": {"const": name}}, "required": ["name"]},
                      "then": {"properties": {"details": {"anyOf": [details,
                                                                    {"type": "null"}]}}}})
    schema["allOf"] = rules
    return schema


class Builder:
    """Schemas of model types, each class once under `$defs` (referenced by name)."""

    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}
        self.shapes = _shapes()

    def ref(self, name: str) -> dict[str, Any]:
        return {"$ref": f"#/$defs/{name}"}

    def of(self, hint: Any) -> dict[str, Any]:
        """The schema of a value of type `hint` as `to_jsonable` encodes it."""
        if hint is _JsonObject:
            return {"type": "object"}
        if hint is _JsonValue:
            return {}
        origin = typing.get_origin(hint)
        if origin in (typing.Union, types.UnionType):
            return self._union(typing.get_args(hint))
        if origin in (tuple, list):
            args = typing.get_args(hint)
            if origin is tuple and args and (len(args) != 2 or args[1] is not Ellipsis):
                return {"type": "array", "prefixItems": [self.of(a) for a in args],
                        "items": False}
            return {"type": "array", "items": self.of(args[0]) if args else {}}
        if origin is dict:
            _key, value = typing.get_args(hint)
            return {"type": "object", "additionalProperties": self.of(value)}
        if origin is typing.Literal:
            return {"enum": list(typing.get_args(hint))}
        if hint is typing.Any or hint is object:
            return {}
        if isinstance(hint, type):
            return self._class(hint)
        raise TypeError(f"no JSON schema for the type {hint!r}")

    def _union(self, args: tuple[Any, ...]) -> dict[str, Any]:
        parts = [self.of(a) for a in args if a is not type(None)]
        nullable = type(None) in args
        if len(parts) == 1 and set(parts[0]) == {"type"} and isinstance(parts[0]["type"], str):
            return {"type": [parts[0]["type"], "null"] if nullable else parts[0]["type"]}
        if nullable:
            parts.append({"type": "null"})
        return {"anyOf": parts}

    def _class(self, cls: type) -> dict[str, Any]:
        scalar = {bool: "boolean", int: "integer", float: "number", str: "string"}
        for base, name in scalar.items():
            if cls is base:
                return {"type": name}
        if cls in (bytes, bytearray):
            return {"type": "string", "pattern": "^([0-9a-f]{2})*$"}
        if issubclass(cls, enum.Enum):
            return self._enum(cls)
        if dataclasses.is_dataclass(cls):
            return self._dataclass(cls)
        raise TypeError(f"no JSON schema for the class {cls.__qualname__}")

    def _enum(self, cls: type[enum.Enum]) -> dict[str, Any]:
        if cls.__name__ not in self.defs:
            values = [m.value for m in cls]
            kind = "string" if all(isinstance(v, str) for v in values) else "integer"
            self.defs[cls.__name__] = {"type": kind, "enum": values}
        return self.ref(cls.__name__)

    def _dataclass(self, cls: type) -> dict[str, Any]:
        """A dataclass: its own definition, or (a base with subclasses, e.g. a check's
        details) any of its subclasses."""
        subs = [c for c in _subclasses(cls) if dataclasses.is_dataclass(c)]
        if not subs:
            return self._object(cls)
        own = [cls] if dataclasses.fields(cls) else []   # a base without fields: never alone
        return {"anyOf": [self._object(c) for c in own + subs]}

    def _object(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name in self.defs:
            return self.ref(name)
        self.defs[name] = {}   # a placeholder while its fields are built (recursion)
        schema = self.members(cls)
        shape = self.shapes.get(cls)
        self.defs[name] = shape.constrain(self, schema) if shape and shape.constrain else schema
        return self.ref(name)

    def members(self, cls: type, shape: Shape | None = None) -> dict[str, Any]:
        """The object schema of a dataclass's fields (and its json_shape's changes)."""
        if shape is None:
            shape = self.shapes.get(cls)
            if shape is None and hasattr(cls, "json_shape"):
                raise TypeError(f"{cls.__qualname__} has a json_shape(): describe it in "
                                "tools/gen_schemas.py _shapes()")
            shape = shape or Shape()
        hints = typing.get_type_hints(cls, localns=_names_for(cls))
        props = {f.name: self.of(hints[f.name]) for f in dataclasses.fields(cls)
                 if f.name not in shape.omit}
        props.update({n: v if isinstance(v, dict) else self.of(v)
                      for n, v in shape.extra.items()})
        required = [n for n in props if n not in shape.optional]
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        out: dict[str, Any] = {"type": "object"}
        if doc and not doc.startswith(cls.__name__ + "("):
            out["description"] = " ".join(doc.split())
        out.update({"properties": props, "required": required, "additionalProperties": False})
        return out


def _subclasses(cls: type) -> list[type]:
    """Every subclass of `cls`, depth first, in definition order."""
    out: list[type] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def _document(builder: Builder, cls: type, head: dict[str, Any], title: str,
              optional: tuple[str, ...] = (), own: bool = True) -> dict[str, Any]:
    """A document: `head` members first, then the class's fields, the run's members
    (required unless not `own`: see `_run_members`)."""
    shape = builder.shapes.get(cls, Shape())
    body = builder.members(cls, dataclasses.replace(shape, optional=shape.optional + optional))
    props = {**head, **body["properties"]}
    required = list(head) + body["required"]
    _run_members(props, required, own)
    out = {"title": title, "type": "object", "properties": props, "required": required,
           "additionalProperties": False}
    return out


def _const(value: object) -> dict[str, Any]:
    return {"const": value}


def _finish(name: str, builder: Builder, root: dict[str, Any], about: str) -> dict[str, Any]:
    return {"$schema": DRAFT, "$id": f"{BASE_URI}{name}.schema.json", "description": about,
            **root, "$defs": dict(sorted(builder.defs.items()))}


def probe_schema() -> dict[str, Any]:
    from tlsprobe.model.probe import SCHEMA_VERSION, ProbeResult
    b = Builder()
    root = _document(b, ProbeResult, {"schema": _const(SCHEMA_VERSION),
                                      "tool": _const("tlsprobe")},
                     "tlsprobe HOST --json", optional=("starttls", "quic"))
    return _finish("probe", b, root, "One probe of one target: `tlsprobe HOST --json`.")


def scan_schema() -> dict[str, Any]:
    from tlsprobe.model.audit import AUDIT_SCHEMA_VERSION, AuditReport
    b = Builder()
    root = _document(b, AuditReport, {"schema": _const(AUDIT_SCHEMA_VERSION),
                                      "tool": _const("tlsprobe"), "kind": _const("audit")},
                     "tlsprobe scan --json (one line per target)")
    return _finish("scan", b, root, "One target's audit: each line of `tlsprobe scan --json` "
                   "and of a survey's shard-NNNNN.jsonl.")


def clients_schema() -> dict[str, Any]:
    from tlsprobe.model.clients import CLIENTS_SCHEMA_VERSION, ClientsReport
    b = Builder()
    root = _document(b, ClientsReport, {"schema": _const(CLIENTS_SCHEMA_VERSION),
                                        "tool": _const("tlsprobe"), "kind": _const("clients")},
                     "tlsprobe clients --json (one line per target)")
    return _finish("clients", b, root, "The client simulation of one target: each line of "
                   "`tlsprobe clients HOST --json`.")


def pcap_schema() -> dict[str, Any]:
    from tlsprobe.model.capture import CaptureSummary, ConnectionReport
    b = Builder()
    connection = _document(b, ConnectionReport, {"kind": _const("connection")},
                           "one connection", own=False)
    connection["properties"]["trace"] = {"type": "array", "items": {"type": "string"},
                                         "description": "with --msg: the message trace"}
    capture = _document(b, CaptureSummary, {"kind": _const("capture")}, "one capture file")
    b.defs["connection"] = connection
    b.defs["capture"] = capture
    b.defs["stats"] = _stats_record()
    root = {"title": "tlsprobe pcap --jsonl (one line per record)",
            "oneOf": [b.ref("connection"), b.ref("capture"), b.ref("stats")]}
    return _finish("pcap-connection", b, root, "A record of `tlsprobe pcap --jsonl`: a "
                   "connection (kind \"connection\", also each item of `pcap --json`'s "
                   "\"connections\"), a capture file (kind \"capture\", each item of its "
                   "\"captures\") or, last with --stats, the statistics (kind \"stats\").")


def _stats_record(kind: bool = True) -> dict[str, Any]:
    """`pcap --jsonl --stats`'s last record (offline/stats.py `Statistics.to_dict`, not a
    model dataclass: written out here; the live tests validate a real one); without `kind`,
    `pcap --json --stats`' "stats" member."""
    count = {"type": "integer", "minimum": 0}
    table = {"type": "array", "items": {
        "type": "object", "properties": {"name": {"type": "string"}, "connections": count},
        "required": ["name", "connections"], "additionalProperties": False}}
    props: dict[str, Any] = {"kind": _const("stats")} if kind else {}
    props.update({n: count for n in ("connections", "handshakes", "client_hello_only",
                                     "hello_retry_requests", "resumed")})
    props["protocols"] = {"type": "object", "additionalProperties": count}
    props.update({n: table for n in ("versions", "cipher_suites", "groups", "alerts")})
    required = list(props)
    if kind:   # a record of its own (--jsonl), not a member of the --json document
        _run_members(props, required)
    return {"title": "the statistics (--stats)", "type": "object", "properties": props,
            "required": required, "additionalProperties": False}


def pcap_document_schema() -> dict[str, Any]:
    """`pcap --json`: one document holding every connection and capture record."""
    from tlsprobe.model.capture import CaptureSummary, ConnectionReport
    b = Builder()
    connection = _document(b, ConnectionReport, {"kind": _const("connection")},
                           "one connection", own=False)
    connection["properties"]["trace"] = {"type": "array", "items": {"type": "string"},
                                         "description": "with --msg: the message trace"}
    b.defs["connection"] = connection
    # the document carries the run's members, not each capture in it (pcap_output.py)
    b.defs["capture"] = _document(b, CaptureSummary, {"kind": _const("capture")},
                                  "one capture file", own=False)
    b.defs["stats"] = _stats_record(kind=False)
    props: dict[str, Any] = {"schema": _const(1), "tool": _const("tlsprobe"),
                             "command": _const("pcap"),
                             "connections": {"type": "array", "items": b.ref("connection")},
                             "captures": {"type": "array", "items": b.ref("capture")},
                             "stats": b.ref("stats")}
    required = ["schema", "tool", "command", "connections", "captures"]
    _run_members(props, required)
    root = {"title": "tlsprobe pcap --json", "type": "object", "properties": props,
            "required": required, "additionalProperties": False}
    return _finish("pcap", b, root, "`tlsprobe pcap FILE... --json`: the connections, the "
                   "capture files and, with --stats, the statistics.")


def timing_schema() -> dict[str, Any]:
    from tlsprobe.model.timing import TIMING_SCHEMA, TimingReport
    b = Builder()
    root = _document(b, TimingReport, {"schema": _const(TIMING_SCHEMA),
                                       "tool": _const("tlsprobe")}, "tlsprobe timing --json")
    return _finish("timing", b, root, "Handshake cost per group: `tlsprobe timing HOST "
                   "--json` (and `tlsprobe HOST --timing --json`).")


def speed_schema() -> dict[str, Any]:
    from tlsprobe.model.speed import SpeedReport
    b = Builder()
    root = _document(b, SpeedReport, {}, "tlsprobe speed --json")
    return _finish("speed", b, root, "`openssl speed`-like figures: `tlsprobe speed --json` "
                   "(not --list).")


def comparison_schema() -> dict[str, Any]:
    """`scan --quic --compare-tcp --json`'s last line (commands/scan_quic.py compare_json, a
    plain dict: written out here, checked on a real run by tests/quic)."""
    text = {"type": "string"}
    same = {"type": ["boolean", "null"]}   # null: not compared (one side has no answer)
    row = _closed({"what": text, "tcp": text, "quic": text, "same": same})
    port = {"type": "integer", "minimum": 0, "maximum": 65535}
    props = {"schema": _const(1), "tool": _const("tlsprobe"), "kind": _const("comparison"),
             "host": text, "tcp_port": port, "quic_port": port,
             "rows": {"type": "array", "items": row}, "same": same}
    root = {"title": "tlsprobe scan --quic --compare-tcp --json (the comparison line)",
            **_closed(props)}
    _run_members(root["properties"], root["required"])
    return {"$schema": DRAFT, "$id": f"{BASE_URI}scan-comparison.schema.json",
            "description": "The TCP and QUIC answers side by side: the line `scan --quic "
            "--compare-tcp --json` writes after the two audits (each a `scan` document).",
            **root}


def _arrow(kind: Any, nullable: bool = True) -> dict[str, Any]:
    """The JSON schema of a pyarrow type's values as `Table.to_pylist()` gives them
    (timestamps as ISO 8601 strings, the form JSON can hold)."""
    import pyarrow as pa
    t = pa.types
    if t.is_dictionary(kind):
        return _arrow(kind.value_type, nullable)
    if t.is_list(kind) or t.is_large_list(kind):
        out: dict[str, Any] = {"type": "array", "items": _arrow(kind.value_type,
                                                                 kind.value_field.nullable)}
    elif t.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        out = {"type": "object",
               "properties": {f.name: _arrow(f.type, f.nullable) for f in fields},
               "required": [f.name for f in fields], "additionalProperties": False}
    elif t.is_timestamp(kind) or t.is_date(kind):
        out = {"type": "string", "format": "date-time" if t.is_timestamp(kind) else "date"}
    else:
        names = [("boolean", t.is_boolean), ("integer", t.is_integer),
                 ("number", t.is_floating), ("string", t.is_string),
                 ("string", t.is_large_string)]
        found = next((n for n, test in names if test(kind)), None)
        if found is None:
            raise TypeError(f"no JSON schema for the Parquet type {kind}")
        out = {"type": found}
    if nullable:
        out["type"] = [out["type"], "null"]
    return out


def survey_row_schema() -> dict[str, Any]:
    """A survey's Parquet row, read off the pyarrow schema the survey writes with
    (survey/rows.py `schema()`): whatever its columns, lists and structs become."""
    from tlsprobe.survey.rows import schema
    columns = schema()
    root = _arrow(columns_struct(columns), nullable=False)
    return {"$schema": DRAFT, "$id": f"{BASE_URI}survey-row.schema.json",
            "description": "One row of a survey's shard-NNNNN.parquet as a JSON object "
            "(pyarrow's Table.to_pylist(), timestamps as ISO 8601 strings); a column may "
            "be null where the Parquet schema lets it.",
            "title": "a survey's Parquet row", **root}


def columns_struct(columns: Any) -> Any:
    """A pyarrow schema as the struct type of one row."""
    import pyarrow as pa
    return pa.struct(list(columns))


def _counts(known: bool = False) -> dict[str, Any]:
    """A summary's counts: category -> its targets and their share (0..1); `known`: the
    share is of the targets that established the category, `not_established` the others
    reached."""
    count = {"type": "integer", "minimum": 0}
    member: dict[str, Any] = {"targets": count,
                              "share": {"type": "number", "minimum": 0, "maximum": 1}}
    if known:       # no target that established it: no share
        member["share"] = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
        member["not_established"] = count
    return {"type": "object", "additionalProperties": _closed(member)}


def survey_summary_schema() -> dict[str, Any]:
    """`survey summary DIR --json` (survey/summary.py `summarize`, a plain dict: written out
    here, checked on a real survey by tests/schemas)."""
    count = {"type": "integer", "minimum": 0}
    props: dict[str, Any] = {
        "tool": _const("tlsprobe"), "kind": _const("survey_summary"), "schema": _const(2),
        **{n: count for n in ("targets", "reached", "unreachable", "shards_total",
                              "shards_done")},
        "versions": _counts(known=True), "supported_groups": _counts(known=True),
        "preferred_group": {"type": "object", "additionalProperties": _counts()},
        **{n: _counts() for n in ("pq_verdict", "server_order", "vulnerable", "failures")}}
    root = {"title": "tlsprobe survey summary DIR --json", **_closed(props)}
    _run_members(root["properties"], root["required"])
    return {"$schema": DRAFT, "$id": f"{BASE_URI}survey-summary.schema.json",
            "description": "The population answers of a survey: `tlsprobe survey summary "
            "DIR --json` (shares of the targets reached; of versions and supported groups, of "
            "those that established each, `not_established` the others; `started_at` and `duration_s` are "
            "the summary's reading, not the survey's run).", **root}


def survey_diff_schema() -> dict[str, Any]:
    """`survey diff OLD NEW --json/--jsonl`: a record per target that changed
    (model/changes.py TargetChanges) and a last one with the summary (SurveyDiffSummary and
    the run's members)."""
    from tlsprobe.model.changes import SurveyDiffSummary, TargetChanges
    b = Builder()
    b.defs["target_changes"] = _document(b, TargetChanges,
                                         {"kind": _const("target_changes")},
                                         "one target that changed, was added or removed",
                                         own=False)
    for name in RUN_MEMBERS:     # the summary record carries the diff's run members
        del b.defs["target_changes"]["properties"][name]
    b.defs["survey_diff_summary"] = _document(b, SurveyDiffSummary,
                                              {"kind": _const("survey_diff_summary")},
                                              "the summary counts (the last record)")
    root = {"title": "tlsprobe survey diff OLD NEW --jsonl (one line per record)",
            "oneOf": [b.ref("target_changes"), b.ref("survey_diff_summary")]}
    return _finish("survey-diff", b, root, "A record of `tlsprobe survey diff OLD NEW "
                   "--jsonl FILE` (and of --json on stdout): a target that changed (kind "
                   "\"target_changes\") or, last, the summary (kind \"survey_diff_summary\", "
                   "with the diff's run members).")


def speed_list_schema() -> dict[str, Any]:
    """`speed --list --json` (commands/speed.py `list_json`, a plain dict: written out here,
    checked on a real listing by tests/schemas) with the run's members."""
    from tlsprobe.commands.speed import LIST_SCHEMA
    text, texts = {"type": "string"}, {"type": "array", "items": {"type": "string"}}
    entry = _closed({"name": text, "kind": text, "description": text, "operations": texts,
                     "aliases": texts, "groups": texts,
                     "openssl_speed": {"anyOf": [texts, {"type": "null"}]},
                     "needs": _closed({"openssl_speed": _NULLABLE_STR})})
    root = {"title": "tlsprobe speed --list --json",
            **_closed({"schema": _const(LIST_SCHEMA),
                       "algorithms": {"type": "array", "items": entry},
                       "groups": {"type": "object", "additionalProperties": texts}})}
    _run_members(root["properties"], root["required"])
    return {"$schema": DRAFT, "$id": f"{BASE_URI}speed-list.schema.json",
            "description": "The algorithms `tlsprobe speed` measures: `tlsprobe speed --list "
            "--json [ALGORITHM...]` (what each measures and needs, and every group word).",
            **root}


def client_profile_schema() -> dict[str, Any]:
    """`clients --list --json`: each line is a client profile file (probes/clients/profiles.py
    `profile_to_json`, the fields of model/clients.py ClientProfile, the hello as hex). A
    profile is data, not a run's result: no run members (a line saved as a file is a
    profile `--profiles-dir` loads)."""
    from tlsprobe.model.clients import ClientProfile
    b = Builder()
    root = {"title": "tlsprobe clients --list --json (one profile per line)",
            **b.members(ClientProfile)}
    return _finish("client-profile", b, root, "A client profile, as `tlsprobe clients "
                   "--list --json` prints it (one per line) and as the profile files of "
                   "tlsprobe/data/clients and --profiles-dir hold it.")


def policy_list_schema() -> dict[str, Any]:
    """`scan --list-policies --json`: each line a built-in policy, then each --policy given
    (commands/scan.py `_list_policies`: its name, title, source, the built-in policy it
    extends and the aliases naming it). Data, not a run's result: no run members."""
    text = {"type": "string"}
    root = {"title": "tlsprobe scan --list-policies --json (one policy per line)",
            **_closed({"name": text, "title": text, "source": text,
                       "extends": {"type": ["string", "null"]},
                       "aliases": {"type": "array", "items": text}})}
    return {"$schema": DRAFT, "$id": f"{BASE_URI}policy-list.schema.json",
            "description": "A policy, as `tlsprobe scan --list-policies --json` prints it "
            "(one per line: the built-in ones, then each `--policy` given): the name "
            "`--policy` takes (a file's `name`), its title and source, the built-in policy "
            "a file extends (null: none), and the aliases that name it too.", **root}


SCHEMAS = {"probe": probe_schema, "scan": scan_schema, "clients": clients_schema,
           "pcap-connection": pcap_schema, "survey-row": survey_row_schema,
           "pcap": pcap_document_schema, "timing": timing_schema, "speed": speed_schema,
           "scan-comparison": comparison_schema, "survey-summary": survey_summary_schema,
           "survey-diff": survey_diff_schema, "speed-list": speed_list_schema,
           "client-profile": client_profile_schema, "policy-list": policy_list_schema}


def text_of(schema: dict[str, Any]) -> str:
    """The committed text: indented, ASCII, a final newline (reviewable in a diff)."""
    return json.dumps(schema, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT,
                        help="the folder to write NAME.schema.json into")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT))   # this checkout's tlsprobe, whatever is installed
    args.output.mkdir(parents=True, exist_ok=True)
    for name, make in SCHEMAS.items():
        (args.output / f"{name}.schema.json").write_text(text_of(make()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
