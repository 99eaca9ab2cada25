"""Captures at scale: `tlsprobe pcap --jobs N` (local worker processes) and `--scheduler
ADDRESS` (Dask) read one capture file per task and hand each file's finished analysis back
in input order. The command's loop writes a finished analysis exactly as it writes a
capture read in-process (the same renderers and counters run on the same reports), so the
output is the sequential run's, byte for byte.

A worker returns the file's reports that the filters let through (with their traces), its
summary and notes. At most two files per worker are in flight ahead of the one being
written, so the main process holds a bounded number of files' reports. Over Dask the paths
must be readable by the workers (a shared file system); stdin ('-') is read in this process
at its place in the order.
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

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
    if os.path.isdir(path):
        return "is a directory"
    return None


def open_capture(path: str, name: str, options: Any, progress: Any) -> tuple[Any, str | None]:
    """(the capture's CaptureAnalysis, None), or (None, why it cannot be read: one line
    without the name)."""
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
        return None, f"cannot open: {exc.strerror or exc}"


def expand_directories(paths: Iterable[str]) -> list[str]:
    """Each directory replaced by the captures under it (recursively, by path order; a
    capture is told by its first bytes, other files are left out). A directory without one
    stays as it is: the command then says it is a directory."""
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
    try:
        with open(path, "rb") as fh:
            return fh.read(4).startswith(MAGICS)
    except OSError:
        return os.path.isfile(path)     # unreadable: kept, so that the reason is said


@dataclass
class Finished:
    """A capture read in a worker: what the command's loop uses of a CaptureAnalysis
    (iteration over (report, trace), `summary`, `notes_for`)."""

    reports: list[tuple[Any, Any]]
    summary: Any
    notes: tuple[str, ...]

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return iter(self.reports)

    def notes_for(self, reported: set[int] | None) -> tuple[str, ...]:
        """The notes the worker kept for the reported connections."""
        return self.notes


def read_capture(path: str, name: str, options: Any, flt: Any
                 ) -> tuple[Finished | None, str | None]:
    """Read one whole capture (in a worker): as `open_capture`, the analysis finished."""
    analysis, error = open_capture(path, name, options, None)
    if analysis is None:
        return None, error
    reports = []
    reported: set[int] = set()
    for report, trace in analysis:
        if flt.active:
            if not flt.matches(report):
                continue
            reported.add(report.id)
        reports.append((report, trace))
    notes = analysis.notes_for(reported) if flt.active else analysis.notes_for(None)
    return Finished(reports, analysis.summary, notes), None


def _worker_init() -> None:
    """A pool worker: Ctrl-C is the main process's to handle (no traceback per worker);
    the garbage collector set as the command sets it for itself."""
    import gc
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def read_in_order(paths: list[str], options: Any, flt: Any, *, jobs: int,
                  scheduler: str | None) -> Generator[tuple[Any, str | None], None, None]:
    """(analysis, error) per path, in the order of `paths`, read by `jobs` local worker
    processes or on the Dask scheduler at `scheduler`."""
    if scheduler is not None:
        from tlsprobe.survey.execute import dask_client
        with dask_client(scheduler, 0) as client:
            threads = sum(w.get("nthreads", 1) for w in
                          client.scheduler_info(n_workers=-1)["workers"].values()) or 1
            yield from _ordered(paths, options, flt, _DaskPool(client), 2 * threads)
        return
    from concurrent.futures import ProcessPoolExecutor
    # no more workers than files (with fork, the pool starts all of them at once)
    pool = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(paths))),
                               initializer=_worker_init)
    finished = False
    try:
        yield from _ordered(paths, options, flt, pool, 2 * jobs)
        finished = True
    finally:
        if not finished:    # stopped early (Ctrl-C, a closed pipe): no file left to read
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


class _DaskPool:
    """A dask Client seen as an executor: submit(fn, *args) -> a future with result()."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def submit(self, fn: Any, *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)


def _ordered(paths: list[str], options: Any, flt: Any, pool: Any, window: int
             ) -> Iterator[tuple[Any, str | None]]:
    queue: deque[tuple[str, Any]] = deque()
    waiting = iter(paths)

    def fill() -> None:
        for path in waiting:
            name = "<stdin>" if path == "-" else path
            # stdin is this process's: read at its turn, in here
            queue.append((name, None if path == "-" else
                          pool.submit(read_capture, path, name, options, flt)))
            if len(queue) >= window:
                return

    fill()
    while queue:
        name, future = queue.popleft()
        fill()      # the workers read on while this file is written
        yield (open_capture("-", name, options, None) if future is None
               else future.result())
