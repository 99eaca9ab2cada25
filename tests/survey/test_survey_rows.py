"""The survey's rows become a pyarrow table through pyarrow's JSON reader (store.arrow_table,
which spares the survey pyarrow's pandas import): the same table as Table.from_pylist,
value for value, for every column type and the awkward values (floats, int bounds, text
beyond ASCII, nulls inside lists and structs)."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow not installed (pip install '.[cluster]')")

from tlsprobe.survey.rows import COLUMNS, Kind, schema  # noqa: E402
from tlsprobe.survey.store import arrow_table  # noqa: E402

TEXT = ["", "a", "é\U0001F600\"\\\n\t\x00\x7f", "x" * 300, None]


def _value(kind: Kind, rnd: random.Random) -> Any:
    if rnd.random() < 0.15:
        return None
    if isinstance(kind, dict):
        return {name: _value(sub, rnd) for name, sub in kind.items()}
    if isinstance(kind, tuple):
        return [_value(kind[1], rnd) for _ in range(rnd.randrange(4))]
    return {"string": lambda: rnd.choice(TEXT),
            "int32": lambda: rnd.choice([0, -1, 2**31 - 1, -2**31, rnd.randrange(65536)]),
            "int64": lambda: rnd.choice([0, 2**63 - 1, -2**63, rnd.randrange(10**12)]),
            "bool": lambda: rnd.random() < 0.5,
            "float64": lambda: rnd.choice([0.0, 0.1, 2.675, 1e-300, 1.7976931348623157e308,
                                           round(rnd.random() * 100, 3),
                                           rnd.random() * 10 ** rnd.randrange(-8, 9)])}[kind]()


def test_arrow_table_is_from_pylist_value_for_value():
    rnd = random.Random(35)
    rows = [{name: _value(kind, rnd) for name, kind in COLUMNS} for _ in range(300)]
    rows.append({"index": 1})       # a row of nulls but one
    got = arrow_table(rows)
    want = pa.Table.from_pylist(rows, schema=schema())
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.num_rows == len(rows)
    assert got.to_pylist() == want.to_pylist()
    assert got.equals(want)


def test_arrow_table_of_no_rows_is_empty_with_the_schema():
    got = arrow_table([])
    assert got.num_rows == 0 and got.schema.equals(schema())


class _Audited:
    """What SurveyDir.write_shard reads of a report (its row comes from `row_for`, patched)."""

    def __init__(self, index: int, row: dict[str, Any]) -> None:
        self.index, self.row = index, row

    def to_json(self) -> str:
        return json.dumps({"index": self.index})


def test_rows_wait_in_rows_files_until_the_parquet_files_are_written(tmp_path, monkeypatch):
    """A shard done is its `_rows` file (no pyarrow while the workers run): counted done by
    a resumed run and by `survey summary`, then written as the Parquet file the rows make
    through Table.from_pylist, byte for byte."""
    import pyarrow.parquet as pq

    from tlsprobe.net.tcp import Target
    from tlsprobe.survey import store
    from tlsprobe.survey.summary import summarize
    from tlsprobe.survey.targets import Shard
    rnd = random.Random(36)
    rows = [{name: _value(kind, rnd) for name, kind in COLUMNS} for _ in range(40)]
    for i, row in enumerate(rows, 1):
        row.update(index=i, error_kind="network", host=None)    # host: null in every row
    monkeypatch.setattr(store, "row_for", lambda report, shard, started: report.row)
    target = Target("127.0.0.1", 443)
    shards = [Shard(0, tuple((i, target) for i in range(1, 41))), Shard(1, ((41, target),))]
    out = store.SurveyDir(str(tmp_path))
    out.prepare()
    identity = {"targets": 41}
    assert out.start(identity, {}, shards) == set()
    out.write_shard(shards[0], [(_Audited(i, row), 0.0) for i, row in enumerate(rows, 1)])
    assert list(tmp_path.glob("*.parquet")) == []
    assert [p.name for p in (tmp_path / store.ROWS_DIR).iterdir()] == ["shard-00000.jsonl"]
    resumed = store.SurveyDir(str(tmp_path))
    assert resumed.start(identity, {}, shards) == {"shard-00000"}
    summary = summarize(str(tmp_path))
    assert (summary["shards_done"], summary["targets"]) == (1, 40)

    assert resumed.pending() == 1 and resumed.write_parquet() == 1
    assert resumed.pending() == 0 and list((tmp_path / store.ROWS_DIR).iterdir()) == []
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema()), sink)
    assert (tmp_path / "shard-00000.parquet").read_bytes() == sink.getvalue().to_pybytes()
    assert pq.read_table(tmp_path / "shard-00000.parquet").to_pylist() == rows
    assert summarize(str(tmp_path))["shards_done"] == 1
    assert resumed.write_parquet() == 0


def test_a_rows_file_of_another_schema_is_one_usage_error(tmp_path):
    """A `_rows` file the schema does not read (left by a killed run of another tlsprobe
    version) stops the conversion with one line naming it, never a pyarrow traceback."""
    from tlsprobe.errors import UsageError
    from tlsprobe.survey import store
    (tmp_path / store.ROWS_DIR).mkdir()
    (tmp_path / store.ROWS_DIR / "shard-00003.jsonl").write_text('{"index": 1, "gone": 2}\n')
    with pytest.raises(UsageError, match=r"shard-00003\.jsonl: not a survey rows file of "
                       r"this tlsprobe .*remove it to survey its shard again"):
        store.SurveyDir(str(tmp_path)).write_parquet()


def test_no_temporary_file_outlives_a_stop_or_a_resume(tmp_path: Path, monkeypatch) -> None:
    """A write interrupted (Ctrl-C raises KeyboardInterrupt wherever the main thread is)
    leaves no temporary file; one a killed run left (SIGKILL: nothing runs) is removed when
    the survey resumes, in every folder the survey writes (CI once found
    `._manifest.json.XXXX.tmp` after a Ctrl-C: the temporary file was made inside
    tempfile.mkstemp, which the interruption left before its name came back, and `start`
    removed only the shards' leftovers)."""
    from tlsprobe.net.tcp import Target
    from tlsprobe.survey import store
    from tlsprobe.survey.targets import Shard
    shards = [Shard(0, ((1, Target("127.0.0.1", 443)),))]
    out = store.SurveyDir(str(tmp_path))
    out.prepare()
    for folder in (tmp_path, tmp_path / store.ROWS_DIR, tmp_path / store.JSONL_DIR):
        folder.mkdir(exist_ok=True)
        (folder / ".shard-00000.jsonl.4242-1.tmp").write_bytes(b"half")
        (folder / "._manifest.json.k7x2q9.tmp").write_bytes(b"half")   # mkstemp's naming
    assert out.start({"targets": 1}, {}, shards) == set()
    assert sorted(p.name for p in tmp_path.rglob(".*.tmp")) == []

    def stopped(fd: int) -> None:
        raise KeyboardInterrupt
    monkeypatch.setattr(store.os, "fsync", stopped)
    with pytest.raises(KeyboardInterrupt):
        out.start({"targets": 1}, {}, shards)      # rewrites the manifest
    assert sorted(p.name for p in tmp_path.rglob(".*.tmp")) == []
    assert json.loads((tmp_path / store.MANIFEST).read_text())["kind"] == "survey_manifest"
