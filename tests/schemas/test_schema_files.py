"""The shipped JSON Schemas: generated from the model (the committed files are what
tools/gen_schemas.py writes), valid draft 2020-12, strict (no member a schema does not name,
enums equal to the model's StrEnums), packaged, and the goldens (real outputs) valid."""

from __future__ import annotations

import copy
import enum
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.schemas.validate import assert_valid, errors, validator
from tlsprobe import errors as tlsprobe_errors
from tlsprobe.data import schemas
from tlsprobe.model import (
    audit,
    check_catalog,
    check_details,
    checks,
    clients,
    rating,
    severity,
    vocab,
)

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "tools" / "gen_schemas.py"
SHIPPED = REPO / "tlsprobe" / "data" / "schemas"
GOLDEN = REPO / "tests" / "golden" / "data"


def test_committed_schemas_are_what_the_generator_writes(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(GENERATOR), "-o", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f"{n}.schema.json" for n in schemas.NAMES)
    assert sorted(p.name for p in SHIPPED.glob("*.json")) == written
    stale = [n for n in written if (tmp_path / n).read_bytes() != (SHIPPED / n).read_bytes()]
    assert stale == [], f"stale schemas {stale}: run python tools/gen_schemas.py"


@pytest.mark.parametrize("name", schemas.NAMES)
def test_each_schema_is_reachable_and_a_valid_draft_2020_12_schema(name: str) -> None:
    assert schemas.path(name).is_file()
    assert schemas.load(name)["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    validator(name)   # check_schema raises on an invalid schema
    with pytest.raises(ValueError, match="no schema named"):
        schemas.path("nope")


def test_the_docs_name_every_schema_and_how_to_reach_it() -> None:
    """docs/SCHEMAS.md points at the packaged files (no copy to drift): each is listed."""
    text = (REPO / "docs" / "SCHEMAS.md").read_text()
    assert [n for n in schemas.NAMES if f"`{n}.schema.json`" not in text] == []
    assert "tlsprobe/data/schemas/" in text and "schemas.path(" in text
    assert "docs/SCHEMAS.md" in (REPO / "README.md").read_text()


def _objects(node: Any) -> list[dict[str, Any]]:
    """Every object schema (type "object" with "properties") inside `node` (not the
    if/then parts that constrain one member by another's value)."""
    found = []
    if isinstance(node, dict):
        if "properties" in node and node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found.extend(_objects(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_objects(value))
    return found


@pytest.mark.parametrize("name", schemas.NAMES)
def test_every_object_is_closed_and_every_member_typed(name: str) -> None:
    schema = schemas.load(name)
    objects = _objects(schema)
    assert objects
    assert [o.get("title", o.get("description", "?")) for o in objects
            if o.get("additionalProperties") is not False] == []
    untyped = [(member, o.get("description", "")[:40]) for o in objects
               for member, sub in o["properties"].items() if not sub]
    # nothing is left as an empty (anything goes) schema, nor as a bare "object"
    assert untyped == []
    bare = [o for o in _all_dicts(schema) if o.get("type") == "object" and not
            {"properties", "additionalProperties", "maxProperties"} & set(o)]
    assert bare == []


def _all_dicts(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        return [node, *(d for v in node.values() for d in _all_dicts(v))]
    if isinstance(node, list):
        return [d for v in node for d in _all_dicts(v)]
    return []


def _strenums() -> list[type[enum.StrEnum]]:
    modules = (audit, check_catalog, check_details, checks, clients, rating, severity, vocab,
               tlsprobe_errors)
    return [v for m in modules for v in vars(m).values()
            if isinstance(v, type) and issubclass(v, enum.StrEnum) and v is not enum.StrEnum
            and v.__module__ == m.__name__]


def test_schema_enums_equal_the_model_strenums() -> None:
    """The vocabularies (verdicts, statuses, severities, error kinds ...) the scan schema
    names are exactly the model's StrEnum values."""
    defs = schemas.load("scan")["$defs"]
    named = {cls.__name__: cls for cls in _strenums()}
    for must in ("Verdict", "Severity", "FailureKind", "SimStatus", "VersionStatus", "Grade"):
        assert must in defs, must
    checked = 0
    for name, cls in named.items():
        if name in defs:
            assert defs[name]["enum"] == [m.value for m in cls], name
            checked += 1
    assert checked >= 15


#: the placeholders of tests/golden/conftest.py normalize that stand for a non-string value,
#: and a value of that type; the others (dates, digests, paths) replace strings
PLACEHOLDERS: dict[str, Any] = {"<port>": 443, "<ms>": 1.5, "<s>": 1.5,
                                "<random>": [1597114897]}   # ServerHello.random's first bytes


#: placeholders that stand for a value of a set form under one member name
BY_MEMBER: dict[tuple[str, str], Any] = {("started_at", "<date>"): "2026-12-06T10:20:31Z"}


def _typed(doc: Any, member: str = "") -> Any:
    """A golden's live document with its placeholders back to values of their type."""
    if isinstance(doc, dict):
        return {k: _typed(v, k) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_typed(v, member) for v in doc]
    if not isinstance(doc, str):
        return doc
    return BY_MEMBER.get((member, doc), PLACEHOLDERS.get(doc, doc))


def _golden(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text())


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*pcap_*.json")) + sorted(
    GOLDEN.glob("shared_*.json")), ids=lambda p: p.stem)
def test_pcap_goldens_match_the_pcap_schema(path: Path) -> None:
    doc = _typed(json.loads(path.read_text()))
    assert doc["connections"]
    assert_valid("pcap", doc, path.name)
    for record in doc["connections"] + [_as_jsonl(c) for c in doc["captures"]]:
        assert_valid("pcap-connection", record, f"{path.name} record {record.get('id')}")


#: what `pcap --jsonl` adds to a capture record that `pcap --json` holds in its head
RUN = {"tlsprobe_version": "1.2.3", "started_at": "2026-12-06T10:20:31Z", "duration_s": 0.5}


def _as_jsonl(capture: dict[str, Any]) -> dict[str, Any]:
    """A capture item of `pcap --json` as `pcap --jsonl` writes it: with the run members
    (required there; the document carries them once, not each capture in it)."""
    return {**capture, **RUN}


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("probe_*.json")) + sorted(
    GOLDEN.glob("scan_*.json")), ids=lambda p: p.stem)
def test_probe_and_scan_goldens_match_their_schema(path: Path) -> None:
    out = _typed(_golden(path.name)["stdout"])
    if path.name.startswith("probe_"):
        assert_valid("probe", out, path.name)
    else:
        assert out
        for line in out:
            assert_valid("scan", line, path.name)


# -- the schemas refuse what the model does not write --------------------------------------
def _scan() -> dict[str, Any]:
    return _typed(_golden("scan_openssl_rsa.json")["stdout"])[0]


def test_an_extra_member_anywhere_fails() -> None:
    doc = _scan()
    assert errors("scan", doc) == []
    top = copy.deepcopy(doc)
    top["surprise"] = 1
    assert any("surprise" in e for e in errors("scan", top))
    nested = copy.deepcopy(doc)
    nested["versions"][0]["surprise"] = True
    assert any("surprise" in e for e in errors("scan", nested))
    assert doc["check_results"], "the golden scan has check results"
    in_check = copy.deepcopy(doc)
    in_check["check_results"][0]["surprise"] = "x"
    assert errors("scan", in_check)


def test_a_wrong_enum_value_a_wrong_type_or_a_missing_member_fails() -> None:
    doc = _scan()
    bad_verdict = copy.deepcopy(doc)
    bad_verdict["check_results"][0]["verdict"] = "vulnerable-ish"
    assert errors("scan", bad_verdict)
    bad_status = copy.deepcopy(doc)
    bad_status["versions"][0]["status"] = "maybe"
    assert errors("scan", bad_status)
    bad_kind = copy.deepcopy(doc)
    bad_kind["error_kind"] = "oops"
    assert errors("scan", bad_kind)
    bad_type = copy.deepcopy(doc)
    bad_type["port"] = "443"
    assert errors("scan", bad_type)
    missing = copy.deepcopy(doc)
    del missing["host"]
    assert errors("scan", missing)
    bad_time = copy.deepcopy(doc)
    bad_time["started_at"] = "yesterday"
    assert errors("scan", bad_time)


def test_a_check_result_has_a_known_name_and_its_own_details_type() -> None:
    doc = _scan()
    results = {r["name"]: i for i, r in enumerate(doc["check_results"])}
    with_details = [n for n, i in results.items() if doc["check_results"][i]["details"]]
    assert "poodle" in with_details and "resumption" in with_details
    swapped = copy.deepcopy(doc)
    swapped["check_results"][results["poodle"]]["details"] = \
        doc["check_results"][results["resumption"]]["details"]
    assert errors("scan", swapped)
    unknown = copy.deepcopy(doc)
    unknown["check_results"][0]["name"] = "no_such_check"
    assert errors("scan", unknown)
    no_details = copy.deepcopy(doc)
    no_details["check_results"][results["poodle"]]["details"] = None
    assert errors("scan", no_details) == []


def test_the_run_members_of_every_document_validate_when_present() -> None:
    """tlsprobe_version, started_at and duration_s (issue 33): named in every document
    schema, required in each document that always carries them (not in a pcap connection
    record, whose times are the capture's)."""
    doc = _scan()
    doc.update({"tlsprobe_version": "1.2.3", "started_at": "2026-12-06T10:20:31Z",
                "duration_s": 2.5})
    assert errors("scan", doc) == []
    probe = _typed(_golden("probe_openssl_rsa.json")["stdout"])
    probe.update({"tlsprobe_version": "1.2.3", "started_at": "2026-12-06T10:20:31Z",
                  "duration_s": 0.25})
    assert errors("probe", probe) == []
    record = _golden("pcap_tls13_hrr.json")["connections"][0]
    assert errors("pcap-connection", {**record, "tlsprobe_version": "1"}) == []
    assert errors("pcap-connection", {**record, "kind": "capture"})
    for name, document in (("scan", doc), ("probe", probe)):
        for member in RUN:
            assert errors(name, {k: v for k, v in document.items() if k != member}), member


def _generator() -> Any:
    """tools/gen_schemas.py as a module (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("gen_schemas", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_schemas", module)   # its dataclass looks itself up there
    spec.loader.exec_module(sys.modules["gen_schemas"])
    module = sys.modules["gen_schemas"]
    return module


def test_the_survey_row_schema_follows_any_parquet_columns() -> None:
    """Rows with list, struct and timestamp columns (the one-row-per-target shape) get a
    schema from their pyarrow schema alone, and a real row of such a table validates."""
    import datetime

    import jsonschema
    import pyarrow as pa
    gen = _generator()
    columns = pa.schema([
        ("host", pa.string()), ("port", pa.int32()),
        ("versions", pa.list_(pa.struct([("name", pa.string()), ("groups",
                                                                  pa.list_(pa.string()))]))),
        ("started_at", pa.timestamp("us", tz="UTC")), ("duration_s", pa.float64())])
    schema = gen._arrow(gen.columns_struct(columns), nullable=False)
    table = pa.Table.from_pylist([{
        "host": "a", "port": 443, "versions": [{"name": "TLS 1.3", "groups": ["x25519"]}],
        "started_at": datetime.datetime(2026, 12, 6, 10, 20, 31, tzinfo=datetime.UTC),
        "duration_s": 1.5}], schema=columns)
    (row,) = table.to_pylist()
    row["started_at"] = row["started_at"].isoformat()
    checker = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert list(checker.iter_errors(row)) == []
    row["versions"][0]["extra"] = 1
    assert list(checker.iter_errors(row))
    with pytest.raises(TypeError, match="Parquet type"):
        gen._arrow(pa.binary())


def test_a_capture_records_counters_are_closed_too() -> None:
    """`capture` (the capture layer's counters, a plain dict in the model) is written out in
    the generator: a new counter without the schema fails."""
    record = _as_jsonl(_golden("pcap_tls12_rsa.json")["captures"][0])
    assert errors("pcap-connection", record) == []
    changed = copy.deepcopy(record)
    changed["capture"]["tcp"]["surprise"] = 1
    assert errors("pcap-connection", changed)
    changed = copy.deepcopy(record)
    changed["capture"]["new_counter"] = 1
    assert errors("pcap-connection", changed)
    assert errors("pcap-connection", {**record, "capture": {}}) == []   # an unreadable file
