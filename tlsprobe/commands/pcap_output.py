"""`tlsprobe pcap`'s output as the reports come (commands/pcap.py reads, this writes): the
--msg trace, --details blocks, the --json document or --jsonl lines (streamed, batched when
not a terminal), and the rows of the final table or the --stats summary."""

from __future__ import annotations

import argparse
import io
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from operator import itemgetter
from typing import IO, TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from tlsprobe.model.capture import CaptureSummary, ReportText
    from tlsprobe.offline.stats import Statistics


#: JSON text gathered before one write when the output is not a terminal (a capture's
#: reports are some kilobytes each: one write per report costs more system time than the
#: writing itself). 64 KiB: a larger batch is a fresh large allocation each time, whose
#: pages are faulted in anew (a megabyte cost 4x the CPU time on a 500 MB --jsonl)
BATCH: Final = 1 << 16


class _WholeWrites(io.RawIOBase):
    """A descriptor under a BufferedWriter whose `write` writes all it is given (looping
    over short writes), so that the buffer never sees a short one; after a broken pipe
    (its reader gone: exit 141) what comes is dropped."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.broken = False
        #: a process forked from this one (a worker, pipe.py's reader) drops what its copy
        #: of the buffer holds: this process writes it
        self._owner = os.getpid()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b: ReadableBuffer) -> int:
        view = memoryview(b).cast("B")
        size = len(view)
        if os.getpid() != self._owner:
            return size
        while view and not self.broken:
            try:
                written = os.write(self._fd, view)
            except BrokenPipeError:
                self.broken = True
                raise
            view = view[written:]
        return size


@contextmanager
def whole_writes(out: IO[str]) -> Iterator[IO[str]]:
    """`out` (stdout) for a run that Ctrl-C or SIGTERM stops without ending it (their
    handler returns, the output goes on). A signal that comes while a write waits on a full
    pipe cuts it short (write(2) returns what the pipe took), and CPython's BufferedWriter
    (3.11) then drops the rest of a write larger than its buffer: a --jsonl line lost
    bytes in its middle. The text goes through a writer that writes each block whole
    instead (flushed at the end). `out` itself when it has no descriptor (a StringIO)."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        yield out
        return
    out.flush()
    raw = _WholeWrites(fd)
    text = io.TextIOWrapper(io.BufferedWriter(raw), encoding=getattr(out, "encoding", None),
                            errors=getattr(out, "errors", None),
                            line_buffering=getattr(out, "line_buffering", False))
    try:
        yield text
    finally:
        try:
            text.flush()
        except BrokenPipeError:
            raw.broken = True   # (the rest is dropped: the wrapper's close writes nothing)
            raise


class Output:
    """Writes reports as they come: trace, details, JSON (streamed; the --json document
    lists the connections first so it too can be written as it goes), rows for the final
    table (sorted by capture and first frame: connections end in another order than they
    start). JSON text going to a file or pipe is written 64 KiB at a time. Nothing is
    written until a capture could be opened. `streaming` (a live capture, stdin, --follow):
    each report is written and flushed as it comes, the table a row at a time with fixed
    column widths (report.offline_tables.StreamedTable)."""

    def __init__(self, args: argparse.Namespace, out: IO[str], streaming: bool = False
                 ) -> None:
        """`streaming`: the capture is still being written (stdin, --follow, live): each
        report is written and flushed as it comes, never gathered into a batch."""
        from tlsprobe.model.capture import ReportText, capture_encoder
        from tlsprobe.report.offline_details import render_details
        from tlsprobe.report.offline_tables import (
            StreamedTable,
            connection_label,
            connection_row,
        )
        self.args = args
        self.out = out
        self.rows: list[tuple[int, int, int, tuple[str, ...]]] = []
        self.count = 0
        self.file_index = 0  # which capture the reports come from (for the table's order)
        self._row = connection_row
        self._label = connection_label
        self._details = render_details
        self._pending: list[str] = []
        self._pending_size = 0
        self._batch = not out.isatty() and not streaming
        self._started = False
        self._table = not (args.json or args.jsonl or args.details or args.stats)
        self.streaming = streaming
        self._streamed = StreamedTable(out) if streaming and self._table and not args.msg \
            else None
        self._encoder = capture_encoder()  # this run's: remembers the shared values' JSON
        # the options `report` reads once a connection, as native attributes: an argparse
        # Namespace's attribute is a generic lookup each time in the compiled build
        self._any_json = bool(args.json or args.jsonl)
        self._jsonl = bool(args.jsonl)
        self._msg = bool(args.msg)
        self._details_on = bool(args.details)
        self._text_type: type[ReportText] = ReportText  # --json/--jsonl's usual report: its text
        #: `report` writes or keeps something of each report (False: `--stats` alone, whose
        #: counters are the statistics'; the run then does not call it per connection)
        self.per_report = bool(self._any_json or self._msg or self._details_on or
                               self._table or streaming)
        self._t0 = time.monotonic()        # the run's start: started_at and duration_s

    def _run_members(self) -> dict[str, object]:
        """The members every JSON document carries (tlsprobe_version, started_at: the run's
        start, duration_s: the run's seconds until now); a connection's own times are the
        capture's, in its record."""
        from tlsprobe.model.encode import run_head, started_at
        elapsed = time.monotonic() - self._t0
        return {**run_head(), "started_at": started_at(elapsed),
                "duration_s": round(elapsed, 3)}

    def begin(self) -> None:
        """A capture was opened: the output starts (the --json document's head)."""
        if not self._started:
            self._started = True
            if self.args.json:
                run = self._run_members()
                self.out.write('{"schema": 1, "tool": "tlsprobe", "command": "pcap", '
                               f'"tlsprobe_version": {json.dumps(run["tlsprobe_version"])}, '
                               f'"started_at": {json.dumps(run["started_at"])}, '
                               '"connections": [')
            elif self._streamed is not None:
                self._streamed.header()

    def _json(self, text: str, end: str = "") -> None:
        """Write `text` then `end` (kept apart: a report's text is not copied to add a
        newline)."""
        if not self._batch:
            self.out.write(text + end)
            return
        pending = self._pending
        pending.append(text)
        if end:
            pending.append(end)
        self._pending_size += len(text)
        if self._pending_size >= BATCH:
            self.flush()

    def flush(self) -> None:
        """Write the JSON text gathered so far."""
        if self._pending:
            self.out.write("".join(self._pending))
            self._pending = []
            self._pending_size = 0

    def report(self, report: Any, trace: list[str] | None) -> None:   # Any: hot path, no checks
        out = self.out
        self.count += 1
        if self._any_json:
            # a ReportText's to_json is its text: read it, not call an interpreted method
            line = report[1] if type(report) is self._text_type else \
                report.to_json(encoder=self._encoder)
            if self._msg and trace is not None:
                line = line[:-1] + ', "trace": ' + json.dumps(trace) + "}"
            if self._jsonl and self._batch:  # (`_json`'s batch, inline: every connection)
                pending = self._pending
                pending.append(line)
                pending.append("\n")
                self._pending_size += len(line)
                if self._pending_size >= BATCH:
                    self.flush()
            elif self._jsonl:
                self._json(line, "\n")
            else:
                self._json(("\n  " if self.count == 1 else ",\n  ") + line)
            if self.streaming:
                out.flush()
            return
        if self._msg and trace is not None:
            from tlsprobe.report.offline_tables import endpoint
            out.write(f"=== connection {self._label(report)}: {endpoint(report.client)} -> "
                      f"{endpoint(report.server)} ({report.file}) ===\n")
            if trace:
                out.write("\n".join(trace) + "\n")
            out.write("---\n")
        if self._details_on:
            self._details(report, out)
            out.write("\n")
        elif self._streamed is not None:
            self._streamed.row(self._row(report))
        elif self._table:
            self.rows.append((self.file_index, report.first_frame, report.id,
                              self._row(report)))
        if self.streaming:
            out.flush()

    def capture(self, summary: CaptureSummary) -> None:
        self.flush()
        self.file_index += 1
        if summary.error is not None and (self.args.json or self.args.jsonl):
            self.begin()  # an unreadable file has a record in the JSON output too
        if self.args.jsonl:
            self.out.write(json.dumps({**summary.to_dict(), **self._run_members()}) + "\n")

    def finish(self, stats: Statistics, summaries: list[CaptureSummary]) -> None:
        from tlsprobe.report.offline_tables import render_connections, render_stats
        self.flush()
        args, out = self.args, self.out
        if not self._started:
            return  # no capture could be opened: the errors are on stderr
        if args.json:
            out.write("\n ],\n" if self.count else "],\n")
            out.write(' "captures": ' + json.dumps([s.to_dict() for s in summaries]))
            if args.stats:
                out.write(',\n "stats": ' + json.dumps(stats.to_dict()))
            out.write(f',\n "duration_s": {self._run_members()["duration_s"]}}}\n')
            return
        if args.jsonl:
            if args.stats:
                out.write(json.dumps({"kind": "stats", **stats.to_dict(),
                                      **self._run_members()}) + "\n")
            return
        if stats.connections == 0:
            out.write(_nothing_found(summaries) + "\n")
            return
        if args.stats:
            render_stats(stats.tables(), stats.connections, out)
            _live_counts(summaries, out)
        elif self._streamed is not None:
            self._streamed.end()
        elif self._table:
            self.rows.sort(key=itemgetter(0, 1, 2))   # file, first frame, id
            if len(summaries) > 1:
                names = [s.file for s in summaries]
                render_connections([(names[i], *row) for i, _f, _n, row in self.rows], out,
                                   with_file=True)
            else:
                render_connections([row for *_key, row in self.rows], out)


def _live_counts(summaries: list[CaptureSummary], out: IO[str]) -> None:
    """--stats of a live capture: what the kernel says it received and dropped."""
    for summary in summaries:
        live = summary.capture.get("live")
        if isinstance(live, dict):
            out.write(f"Live capture on {summary.file}: {live['received']} packets "
                      f"received, {live['dropped']} dropped by the kernel or libpcap, "
                      f"{live['interface_dropped']} by the interface\n")


def _nothing_found(summaries: list[CaptureSummary]) -> str:
    """The line said instead of an empty table: no TLS at all, or none that the filters
    let through."""
    from tlsprobe.report.offline_tables import plural
    read = [s.file for s in summaries if s.error is None]
    files = ", ".join(read) if len(read) <= 3 else f"{len(read)} files"
    total = sum(s.tls_connections for s in summaries)
    if total:
        return (f"0 of {plural(total, 'TLS connection')} in {files} match"
                f"{'es' if total == 1 else ''} the filters")
    return f"no TLS connections found in {files}"


__all__ = ["BATCH", "Output"]
