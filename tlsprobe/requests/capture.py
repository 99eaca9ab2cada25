"""`CaptureRequest`: captures to read as asked (`tlsprobe pcap FILE ...` or the API's
`read_capture(...)`), checked once: the files, the key log (loaded), the filters, how many
processes; and the reader of ONE capture file (`open_capture`), which `tlsprobe pcap`
and the API use for a file and the survey's workers (survey/captures.py) for many."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError, os_error_text
from tlsprobe.model.capture import BriefReport, ConnectionReport, ReportText
from tlsprobe.requests.names import API, CLI, Names

if TYPE_CHECKING:
    from tlsprobe.engine.keylog import KeyLog
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis, Progress
    from tlsprobe.offline.filters import ConnectionFilter
    from tlsprobe.offline.flowreader import FormatterFactory

#: what a capture is, by its first bytes: pcap (both byte orders, micro- and nanosecond),
#: pcapng, gzip (a compressed capture)
MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
          b"\x0a\x0d\x0d\x0a", b"\x1f\x8b")


def missing(path: str) -> str | None:
    """Why `path` cannot be a capture before opening it: missing, or a directory (pipes,
    FIFOs and devices are read as streams, as '-' is)."""
    if path == "-":
        return None
    if not os.path.exists(path):
        return "no such file"
    if os.path.isdir(path):  # left by expand_directories: no capture under it
        return "a directory with no capture under it (pcap, pcapng or gzip, told by " \
            "their first bytes): name a capture file"
    return None


def open_capture(path: str, name: str, options: AnalyzerOptions,
                 progress: Progress | None = None
                 ) -> tuple[CaptureAnalysis, None] | tuple[None, str]:
    """(the capture's CaptureAnalysis, None), or (None, why it cannot be read: one line
    without the name). `name` is how the capture is named in reports ('<stdin>' for '-')."""
    from tlsprobe.capture import CaptureError
    from tlsprobe.offline.analyzer import CaptureAnalysis
    error = missing(path)
    if error is not None:
        return None, error
    try:
        return CaptureAnalysis(path, options, progress, display_name=name), None
    except CaptureError as exc:
        return None, str(exc).removeprefix(f"{name}: ")
    except OSError as exc:
        return None, f"cannot open: {os_error_text(exc)}"


def expand_directories(paths: Iterable[str]) -> list[str]:
    """Each directory replaced by the captures under it (recursively, by path order; a
    capture is told by its first bytes, other files are left out). A directory without one
    stays as it is: the command then says that no capture is under it."""
    out: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            out.append(path)
            continue
        found = sorted(os.path.join(top, name) for top, _dirs, names in os.walk(path)
                       for name in names if _looks_like_capture(os.path.join(top, name)))
        out.extend(found or [path])
    return out


def _looks_like_capture(path: str) -> bool:
    if not os.path.isfile(path):
        # a FIFO, socket or device under the folder: opening it may wait forever for a
        # writer (read_capture(DIR) and `pcap DIR` hung on one), and reading its first
        # bytes would take them from it; named alone on the command line it is read
        return False
    try:
        with open(path, "rb") as fh:
            return fh.read(4).startswith(MAGICS)
    except OSError:
        return os.path.isfile(path)     # unreadable: kept, so that the reason is said


def passes(flt: ConnectionFilter, report: ConnectionReport | BriefReport | ReportText
           ) -> bool:
    """Whether the filters let `report` through: a whole report that matches (with filters
    the analysis makes whole reports: `CaptureRequest.options(brief=False)`)."""
    return isinstance(report, ConnectionReport) and flt.matches(report)


def _no_filter() -> ConnectionFilter:
    from tlsprobe.offline.filters import ConnectionFilter
    return ConnectionFilter()


#: seconds a key log that is a pipe is read before the note that it is read to its end
PIPE_NOTE_AFTER = 2.0


def _load_keylog(path: str, grows: bool, names: Names) -> KeyLog:
    """The key log at `path`. One still being written with the capture (`grows`) is read
    as it grows, a pipe or FIFO too (never waited for: `keylog_pipe`). A finished capture's
    is read whole first, a pipe to its end, which is when its writer closes it: after
    `PIPE_NOTE_AFTER` s the command line says so (and that Ctrl-C stops), not silent."""
    import stat
    import threading

    from tlsprobe.engine.keylog import load_keylog
    if grows:
        from tlsprobe.engine.keylog_pipe import load_growing_keylog
        return load_growing_keylog(path)
    if names is not CLI or not stat.S_ISFIFO(os.stat(path).st_mode):
        return load_keylog(path)
    said = (f"tlsprobe: note: {names('keylog')} {path!r} is a pipe: read to its end "
            "before the capture, when its writer closes it (Ctrl-C stops)")
    note = threading.Timer(PIPE_NOTE_AFTER, print, (said,),
                           {"file": sys.stderr, "flush": True})
    note.daemon = True
    note.start()
    try:
        return load_keylog(path)
    finally:
        note.cancel()


@dataclass(frozen=True)
class CaptureRequest:
    """Checked captures to read: the files (directories expanded), the key log, whether
    the capture's own keys and QUIC are read, the filters, and --jobs / --scheduler."""

    files: tuple[str, ...]
    keylog: KeyLog | None = None
    embedded_keys: bool = True
    quic: bool = True
    filter: ConnectionFilter = field(default_factory=_no_filter)
    jobs: int | None = None
    scheduler: str | None = None
    follow: bool = False

    @classmethod
    def build(cls, files: Sequence[str], *, keylog: str | None = None,
              embedded_keys: bool = True, quic: bool = True,
              filter: ConnectionFilter | None = None, jobs: int | None = None,
              scheduler: str | None = None, follow: bool = False,
              names: Names = API, live: bool = False) -> CaptureRequest:
        """The request, or a UsageError naming the input at fault. `live`: the packets
        come from a live capture (requests/live.py), whose key log grows as it runs."""
        if list(files).count("-") > 1:
            raise UsageError("stdin ('-') can be read only once")
        if follow:
            _check_follow(files, jobs, scheduler, names)
        if jobs is not None:
            check_jobs(jobs, names)
        keys = None
        if keylog is not None:
            try:   # a capture still being written: so may its key log be
                keys = _load_keylog(keylog, follow or live or "-" in files, names)
            except OSError as exc:
                raise UsageError(f"{names('keylog')} {keylog}: {os_error_text(exc)}"
                                 ) from None
        return cls(files=tuple(files) if follow else tuple(expand_directories(files)),
                   keylog=keys, embedded_keys=embedded_keys, quic=quic,
                   filter=filter or _no_filter(), jobs=jobs, scheduler=scheduler,
                   follow=follow)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CaptureRequest:
        """`tlsprobe pcap FILE... [options]` (its Namespace): the input side; what is
        written (--json, --csv, --plot ...) is the command's."""
        from tlsprobe.offline.filters import ConnectionFilter
        try:
            flt = ConnectionFilter.parse(args.host, args.port, args.sni, args.group,
                                         args.tls_version)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        return cls.build(args.files, keylog=args.keylog or None,
                         embedded_keys=not args.no_embedded_keys, quic=not args.no_quic,
                         filter=flt, jobs=args.jobs, scheduler=args.scheduler,
                         follow=args.follow, names=CLI, live=bool(args.interface))

    @property
    def parallel(self) -> bool:
        """Whether the files go to worker processes (or Dask): --jobs 2+ with several
        files, or a scheduler."""
        return (self.jobs or 1) > 1 and len(self.files) > 1 or self.scheduler is not None

    def options(self, *, trace_formatter: FormatterFactory | None = None,
                brief: bool = False, json_text: bool = False,
                pipe_min_bytes: int | None = None, stop_at: float | None = None
                ) -> AnalyzerOptions:
        """The analysis options of this request with what the output needs: the trace
        (`--msg`) when given the caller's formatter (report.trace.TraceFormatter: the
        renderer is not this layer's), brief or JSON-text reports, the second process;
        `stop_at`: the `time.monotonic()` deadline of a capture still being written
        (stdin, --follow)."""
        from tlsprobe.offline.analyzer import AnalyzerOptions
        return AnalyzerOptions(trace=trace_formatter is not None, keylog=self.keylog,
                               embedded_keys=self.embedded_keys, quic=self.quic,
                               trace_formatter=trace_formatter, brief=brief,
                               json_text=json_text, pipe_min_bytes=pipe_min_bytes,
                               follow=self.follow, stop_at=stop_at)

    @property
    def streaming(self) -> bool:
        """Whether the input is still being written (stdin, a followed file): reports
        are written as they come, not gathered."""
        return self.follow or "-" in self.files


def _check_follow(files: Sequence[str], jobs: int | None, scheduler: str | None,
                  names: Names) -> None:
    """--follow reads one growing file, in this process."""
    flag = names("follow")
    if len(files) != 1 or files[0] == "-":
        raise UsageError(f"{flag} reads one capture file that another program is still "
                         "writing (stdin is read as it comes without it)")
    if os.path.isdir(files[0]):
        raise UsageError(f"{flag} {files[0]}: is a directory")
    if jobs is not None and jobs > 1 or scheduler is not None:
        raise UsageError(f"{flag} reads in this process: not with {names('jobs')} or "
                         f"{names('scheduler')}")


def check_jobs(jobs: int, names: Names) -> None:
    from tlsprobe.requests.processes import check_process_count
    check_process_count(jobs, names("jobs"))


__all__ = ["MAGICS", "CaptureRequest", "check_jobs", "expand_directories", "missing",
           "open_capture", "passes"]
