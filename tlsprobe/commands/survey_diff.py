"""`tlsprobe survey diff OLD NEW`: what changed per target between two survey folders.

Text on stdout (each target that changed, was added or removed, then the summary counts);
`--json` the records of --jsonl on stdout instead of the text; `--jsonl FILE` one JSON object
per such target (`kind` "target_changes") and a last one with
the summary (`kind` "survey_diff_summary"); `--parquet FILE` one row per change (host, port,
status, kind, what, version, old, new, direction, reason; an added or removed target is one
row with its status and no change). The scan documents come from the surveys' JSON lines
files (survey/diff.py). Exit codes: 0 done; 2 usage (a folder that is no survey output, a
damaged line, a file that cannot be written, pyarrow missing for --parquet).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from types import ModuleType
from typing import TYPE_CHECKING, TextIO

from tlsprobe.errors import EXIT_OK, UsageError, os_error_text

if TYPE_CHECKING:
    from tlsprobe.model.changes import TargetChanges

PARQUET_COLUMNS = ("host", "port", "status", "kind", "what", "version", "old", "new",
                   "direction", "reason")


def add_diff_arguments(p: argparse.ArgumentParser) -> None:
    """The positional NEW and the output files of `survey diff OLD NEW`."""
    p.add_argument("new", nargs="?", metavar="NEW", help="(diff) the newer survey directory: "
                   "tlsprobe survey diff OLD NEW")
    p.add_argument("--jsonl", metavar="FILE", help="(diff) also write the changes as JSON "
                   "lines, one object per target that changed, then the summary")
    p.add_argument("--parquet", metavar="FILE", help="(diff) also write the changes as "
                   "Parquet, one row per change")


def _rows(t: TargetChanges) -> list[dict[str, object]]:
    base: dict[str, object] = {"host": t.host, "port": t.port, "status": t.status.value}
    if not t.changes:
        return [{**base, **{k: None for k in PARQUET_COLUMNS[3:]}}]
    return [{**base, "kind": c.kind.value, "what": c.what, "version": c.version, "old": c.old,
             "new": c.new, "direction": c.direction.value, "reason": c.reason}
            for c in t.changes]


def _temporary(path: str) -> str:
    """The temporary file beside `path` the diff writes (renamed onto it when the diff is
    complete, so that a failed run leaves no partial file), named before it exists (this
    process's own) so that an interruption anywhere leaves nothing behind; "" when `path`
    is not a regular file (/dev/null, a FIFO, /dev/stdout): a rename would replace the
    device or pipe with a file, so it is written itself."""
    import stat
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""
    except OSError:
        pass                    # not there yet: made by the rename
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, f".{name}.{os.getpid()}.tmp")


def _open(path: str, tmp: str, option: str) -> TextIO:
    """`tmp` (or `path` itself when there is none) opened for writing; a usage error naming
    `path` when it cannot be."""
    try:
        return open(tmp or path, "w", encoding="utf-8")    # closed by run()
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write it ({os_error_text(exc)})"
                         ) from None


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    old, new = args.directory, getattr(args, "new", None)
    if old is None or new is None:
        raise UsageError("survey diff needs two survey directories: tlsprobe survey diff "
                         "OLD NEW")
    began, clock = time.time(), time.monotonic()
    from tlsprobe.model.encode import run_head, to_jsonable, utc_stamp
    from tlsprobe.policy.doc_read import obj
    from tlsprobe.report.changes import render_survey_summary, render_target_changes
    from tlsprobe.survey.diff import diff_surveys, jsonl_files
    jsonl_files(old)
    jsonl_files(new)        # both checked before any output file is created
    pa = pq = None
    if args.parquet:
        from tlsprobe.survey.extra import parquet, pyarrow
        pa, pq = pyarrow(), parquet()
    lines: TextIO | None = None
    tmp = _temporary(args.jsonl) if args.jsonl else ""
    sinks = [out] if args.json else []
    rows: list[dict[str, object]] = []

    def emit(t: TargetChanges) -> None:
        if not args.json:
            render_target_changes(t, out)
        record = json.dumps({"kind": "target_changes", **obj(to_jsonable(t))}) + "\n"
        for sink in sinks:
            sink.write(record)
        if pa is not None:
            rows.extend(_rows(t))

    try:
        if args.jsonl:
            lines = _open(args.jsonl, tmp, "--jsonl")
            sinks.insert(0, lines)
        result = diff_surveys(old, new, emit)
        summary = result.summary()
        record = json.dumps({"kind": "survey_diff_summary", **obj(to_jsonable(summary)),
                             **run_head(), "started_at": utc_stamp(began),
                             "duration_s": round(time.monotonic() - clock, 6)})
        for sink in sinks:
            sink.write(record + "\n")
        if lines is not None:
            lines.close()
            if tmp:
                os.replace(tmp, args.jsonl)
    finally:
        if lines is not None:
            lines.close()
        if tmp:     # renamed into place, or never made, or left by an interruption
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    if pa is not None and pq is not None:
        _write_parquet(pa, pq, rows, args.parquet)
    if not args.json:
        if result.changed or result.added or result.removed or result.unaudited:
            print(file=out)
        render_survey_summary(old, new, summary, out)
    return EXIT_OK


def _write_parquet(pa: ModuleType, pq: ModuleType, rows: list[dict[str, object]],
                   path: str) -> None:
    """The rows as one Parquet file (typed columns even when there is no row)."""
    types = {"port": "int32"}
    schema = pa.schema([(c, getattr(pa, types.get(c, "string"))()) for c in PARQUET_COLUMNS])
    table = pa.Table.from_pylist(rows, schema=schema)
    try:
        pq.write_table(table, path)
    except OSError as exc:
        raise UsageError(f"--parquet {path}: cannot write it ({os_error_text(exc)})"
                         ) from None
