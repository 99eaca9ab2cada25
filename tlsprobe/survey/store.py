"""The survey directory: per shard `shard-NNNNN.parquet`, and beside them `_manifest.json`
and `_jsonl/shard-NNNNN.jsonl` (the scan's JSON object per target, in input order).

Only Parquet files are visible at the top level: `pd.read_parquet(DIR)`, `pyarrow.dataset`
(which skip names starting with "_" or ".") and DuckDB's `read_parquet('DIR/*.parquet')`
read the folder as written. A folder of an older tlsprobe (`manifest.json`, the JSON lines
beside the Parquet files) is read and resumed: the first run moves its files to the new names.

A shard's files are written to temporary names and renamed into place as the shard
completes: its JSON lines, then its Parquet rows as JSON lines in `_rows/shard-NNNNN.jsonl`
(the exact input of pyarrow's JSON reader). A shard is done exactly when one of its
`_rows` file or Parquet file exists, so a run stopped or crashed at any point leaves whole
shards only, and a resumed run redoes the others (no target twice). The Parquet files are
made from the `_rows` files once the audits are over (`write_parquet`: at the end of the
run, also one that is interrupted or fails, and of a resumed run, which converts what a
killed run left): pyarrow, 34 to 38 MB in a process, is then never in memory beside the
workers (issue 35: a survey within 50 MB of `scan -f`'s memory). `survey summary` reads
the `_rows` files of the shards not yet converted (`rows_table`), so a running survey's
summary counts every shard done.
The manifest holds the arguments, the shard list, the shards done and the tool version; a
resumed run must have the same identity (targets, checks and the options that shape results).
The manifest's `done` list is rewritten at most once a second and after the last shard (a
survey of a million targets has thousands of shards: one rewrite per shard would write
gigabytes), so it may lag the files when the run stopped; a resumed run rebuilds it from the
files.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tlsprobe._version import __version__
from tlsprobe.errors import UsageError, os_error_text
from tlsprobe.files import read_bounded
from tlsprobe.model.audit import AuditReport
from tlsprobe.survey.rows import Row, row_for, schema
from tlsprobe.survey.targets import Shard

MANIFEST = "_manifest.json"
#: the manifest's name in folders of an older tlsprobe (read, then replaced by MANIFEST)
OLD_MANIFEST = "manifest.json"
#: the folder of the JSON lines files (a name the Parquet readers skip)
JSONL_DIR = "_jsonl"
#: the folder of the shards' Parquet rows as JSON lines, until `write_parquet` converts them
ROWS_DIR = "_rows"
#: 2: the `_manifest.json` layout with one Parquet row per target (1: `manifest.json`, one
#: row per target and version)
MANIFEST_SCHEMA = 2
#: seconds between two rewrites of the manifest's done list while shards complete
MANIFEST_EVERY = 1.0
#: the largest manifest read (one names each shard in some 80 bytes: a million shards)
MAX_MANIFEST_BYTES = 64 << 20


def _atomic_write(path: Path, data: bytes) -> None:
    """`data` into `path` by a rename. The temporary file's name (this process and thread's
    own) is known before it exists, so that an interruption (Ctrl-C) anywhere, even inside
    the call that creates it, leaves nothing behind: with `tempfile.mkstemp` a
    KeyboardInterrupt after the file was made but before its name was returned left
    `._manifest.json.XXXX.tmp` in a stopped survey's folder. A run killed outright leaves
    it to the next `start` (STALE)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: the temporary files a killed run may leave (`_atomic_write`'s), by folder
STALE = (".*.tmp", f"{ROWS_DIR}/.*.tmp", f"{JSONL_DIR}/.*.tmp")


def rows_data(rows: list[Row]) -> bytes:
    """The rows as JSON lines: what `_rows` files hold and pyarrow's JSON reader reads. A
    column whose value is null is left out (the reader, given the schema, makes it null):
    most columns of a row are null (checks not run), and the file is a third of the size
    (1.7 against 4.9 KB a target with `--checks groups,pq`)."""
    return "".join(json.dumps({k: v for k, v in row.items() if v is not None}) + "\n"
                   for row in rows).encode()


def arrow_table(rows: list[Row]) -> Any:
    """The rows as a pyarrow Table of the survey's schema (`rows_table` of their JSON lines)."""
    return rows_table(rows_data(rows))


def rows_table(data: bytes) -> Any:
    """JSON lines of rows (`rows_data`) as a pyarrow Table of the survey's schema, through
    pyarrow's JSON reader: `Table.from_pylist` imports pandas on its first call when pandas
    is installed (pyarrow asks whether a list is a pandas object), 0.2 s of CPU and 50 MB
    for nothing here; the JSON reader gives the same table (floats exact,
    tests/survey/test_survey_rows.py)."""
    from tlsprobe.survey.extra import pyarrow, pyarrow_json
    pa, pj = pyarrow(), pyarrow_json()
    if not data:
        return schema().empty_table()      # the reader refuses an empty input
    return pj.read_json(
        pa.BufferReader(data),
        read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
        parse_options=pj.ParseOptions(explicit_schema=schema(),
                                       unexpected_field_behavior="error"))


def _manifest_problem(data: dict[str, object]) -> str:
    """What makes a manifest's members unusable ("" when nothing does): the types the
    runs, `survey summary` and `survey diff` read them as."""
    for key in ("identity", "arguments"):
        if key in data and not isinstance(data[key], dict):
            return f"{key} is not an object"
    shards, done = data.get("shards", []), data.get("done", [])
    if not isinstance(shards, list) or not all(
            isinstance(s, dict) and isinstance(s.get("name"), str) for s in shards):
        return "shards is not a list of named shards"
    if not isinstance(done, list) or not all(isinstance(d, str) for d in done):
        return "done is not a list of shard names"
    if not isinstance(data.get("schema", 1), int):
        return "schema is not a number"
    return ""


class SurveyDir:
    """One survey's output directory."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def prepare(self) -> None:
        """Create the directory and check that it can be written (a usage error if not)."""
        if self.path.exists() and not self.path.is_dir():
            raise UsageError(f"--out {self.path}: a file, not a folder: give a folder (it "
                             "is created if missing)")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".write-test-")
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise UsageError(f"--out {self.path}: cannot write there "
                             f"({os_error_text(exc)})") from None

    def manifest(self) -> dict[str, Any] | None:
        """The manifest, None when there is none; a damaged one is a usage error."""
        path = self.path / MANIFEST
        if not path.exists() and (self.path / OLD_MANIFEST).exists():
            path = self.path / OLD_MANIFEST
        try:
            path.stat()
        except FileNotFoundError:
            return None
        except OSError:
            pass        # read_bounded says why it cannot be read
        raw = read_bounded(path, MAX_MANIFEST_BYTES, "a survey manifest")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{path}: not a survey manifest ({exc})") from None
        if not isinstance(data, dict) or data.get("kind") != "survey_manifest":
            raise UsageError(f"{path}: not a survey manifest")
        problem = _manifest_problem(data)
        if problem:
            raise UsageError(f"{path}: not a survey manifest ({problem})")
        return data

    def start(self, identity: dict[str, Any], arguments: dict[str, Any],
              shards: list[Shard]) -> set[str]:
        """Write or check the manifest; the names of the shards already done."""
        old = self.manifest()
        if old is not None and old.get("identity") != identity:
            changed = sorted(k for k in set(identity) | set(old.get("identity") or {})
                             if (old.get("identity") or {}).get(k) != identity.get(k))
            raise UsageError(f"{self.path} holds a survey of different arguments (differs in "
                             f"{', '.join(changed)}): use another --out, or the same arguments "
                             "to resume")
        for stale in [p for pattern in STALE for p in self.path.glob(pattern)]:
            stale.unlink(missing_ok=True)   # left by a run that was killed
        self._move_old_layout()
        done = self.done(shards)
        if old is not None and old.get("schema", 1) < MANIFEST_SCHEMA:
            done -= self._old_rows(done)
        self._done = set(done)
        self._write_manifest(identity, arguments, shards, done)
        return done

    def _move_old_layout(self) -> None:
        """An older survey's JSON lines files into `_jsonl/` (its manifest is replaced once
        the new one is written): the Parquet readers then read the folder."""
        (self.path / JSONL_DIR).mkdir(exist_ok=True)
        for old in self.path.glob("shard-*.jsonl"):
            os.replace(old, self.path / JSONL_DIR / old.name)

    def _old_rows(self, done: set[str]) -> set[str]:
        """The shards, of those done, whose Parquet rows are of an older schema (one row per
        target and version): a resumed run surveys them again, so that every shard has the
        one schema and the folder reads as one table."""
        from tlsprobe.survey.extra import parquet
        pq, names = parquet(), schema().names
        old = set()
        for name in done:
            if not (self.path / f"{name}.parquet").is_file():
                continue            # its rows wait in _rows/, written by this version
            try:
                current = pq.read_schema(self.path / f"{name}.parquet").names == names
            except Exception:  # noqa: BLE001 -- pyarrow's own types: a damaged file is redone
                current = False
            if not current:
                old.add(name)
        return old

    def done(self, shards: list[Shard]) -> set[str]:
        """The shards whose Parquet file or `_rows` file (not yet converted) exists."""
        return {s.name for s in shards if (self.path / f"{s.name}.parquet").is_file()
                or (self.path / ROWS_DIR / f"{s.name}.jsonl").is_file()}

    def _write_manifest(self, identity: dict[str, Any], arguments: dict[str, Any],
                        shards: list[Shard], done: set[str]) -> None:
        self._identity, self._arguments, self._shards = identity, arguments, shards
        data = {"tool": "tlsprobe", "kind": "survey_manifest", "schema": MANIFEST_SCHEMA,
                "version": __version__, "identity": identity, "arguments": arguments,
                "shards": [{"name": s.name, "targets": len(s.targets),
                            "first_index": s.targets[0][0]} for s in shards],
                "done": sorted(done)}
        _atomic_write(self.path / MANIFEST, (json.dumps(data, indent=1) + "\n").encode())
        (self.path / OLD_MANIFEST).unlink(missing_ok=True)
        self._written = time.monotonic()

    def write_shard(self, shard: Shard, audited: list[tuple[AuditReport, float]]) -> None:
        """Both files of one shard (its JSON lines, its rows for the Parquet file in
        `_rows`), atomically, then the manifest's done list; `audited`: each report with when
        its audit started (epoch seconds). No pyarrow here: `write_parquet` makes the Parquet
        files once the audits are over."""
        audited = sorted(audited, key=lambda a: a[0].index or 0)
        lines = "".join(r.to_json() + "\n" for r, _ in audited).encode()
        _atomic_write(self.path / JSONL_DIR / f"{shard.name}.jsonl", lines)
        (self.path / ROWS_DIR).mkdir(exist_ok=True)
        _atomic_write(self.path / ROWS_DIR / f"{shard.name}.jsonl",
                      rows_data([row_for(r, shard.number, started) for r, started in audited]))
        self._done.add(shard.name)
        if len(self._done) >= len(self._shards) or \
                time.monotonic() - self._written >= MANIFEST_EVERY:
            self._write_manifest(self._identity, self._arguments, self._shards, self._done)

    def pending(self) -> int:
        """The shards whose rows wait in `_rows` for `write_parquet`."""
        return sum(1 for _ in (self.path / ROWS_DIR).glob("shard-*.jsonl"))

    def write_parquet(self) -> int:
        """Every `_rows` file as its shard's Parquet file (atomically; the `_rows` file
        removed once it is in place), in shard order; the number written. Imports pyarrow
        (without numpy: call it in the command's process, once the workers are stopped)."""
        from tlsprobe.survey.extra import parquet_without_numpy, pyarrow
        pending = sorted((self.path / ROWS_DIR).glob("shard-*.jsonl"))
        if not pending:
            return 0
        pq, pa = parquet_without_numpy(), pyarrow()
        for rows in pending:
            sink = pa.BufferOutputStream()
            try:
                table = rows_table(rows.read_bytes())
            except (ValueError, TypeError) as exc:     # pyarrow's ArrowInvalid and kin
                raise UsageError(f"{rows}: not a survey rows file of this tlsprobe ({exc}): "
                                 "remove it to survey its shard again") from None
            pq.write_table(table, sink)
            _atomic_write(self.path / f"{rows.stem}.parquet", sink.getvalue().to_pybytes())
            rows.unlink()
        return len(pending)
