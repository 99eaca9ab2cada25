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

import signal
from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tlsprobe.requests.capture import open_capture, passes

if TYPE_CHECKING:
    from tlsprobe.model.capture import CaptureSummary
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
    from tlsprobe.offline.datagram import Analyzed
    from tlsprobe.offline.filters import ConnectionFilter

#: a capture read: its analysis (streamed) or a worker's finished one, or None and why not
Opened = tuple["CaptureAnalysis | Finished", None] | tuple[None, str]


@dataclass
class Finished:
    """A capture read in a worker: what the command's loop uses of a CaptureAnalysis
    (iteration over (report, trace), `summary`, `notes_for`)."""

    reports: list[Analyzed]
    summary: CaptureSummary | None
    notes: tuple[str, ...]

    def __iter__(self) -> Iterator[Analyzed]:
        return iter(self.reports)

    def notes_for(self, reported: set[int] | None) -> tuple[str, ...]:
        """The notes the worker kept for the reported connections."""
        return self.notes


def read_capture(path: str, name: str, options: AnalyzerOptions, flt: ConnectionFilter
                 ) -> tuple[Finished, None] | tuple[None, str]:
    """Read one whole capture (in a worker): as `open_capture`, the analysis finished."""
    analysis, error = open_capture(path, name, options, None)
    if analysis is None:
        return None, error or "cannot be read"
    reports: list[Analyzed] = []
    reported: set[int] = set()
    for analyzed in analysis:
        if flt.active:
            if not passes(flt, analyzed.report):
                continue
            reported.add(analyzed.report.id)
        reports.append(analyzed)
    notes = analysis.notes_for(reported) if flt.active else analysis.notes_for(None)
    return Finished(reports, analysis.summary, notes), None


def _worker_init() -> None:
    """A pool worker: Ctrl-C is the main process's to handle (no traceback per worker);
    the garbage collector set as the command sets it for itself."""
    import gc
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


def read_in_order(paths: list[str], options: AnalyzerOptions, flt: ConnectionFilter, *,
                  jobs: int, scheduler: str | None) -> Generator[Opened, None, None]:
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


class _Result(Protocol):
    """A task's future, of a local pool or of Dask: its result when done."""

    def result(self) -> tuple[Finished, None] | tuple[None, str]: ...


_Task = Callable[[str, str, "AnalyzerOptions", "ConnectionFilter"],
                 "tuple[Finished, None] | tuple[None, str]"]


class _Pool(Protocol):
    """What `_ordered` asks of an executor: submit(read_capture, *args) -> a future."""

    def submit(self, fn: _Task, path: str, name: str, options: AnalyzerOptions,
               flt: ConnectionFilter, /) -> _Result: ...


class _DaskPool:
    """A dask Client seen as an executor: submit(fn, *args) -> a future with result()."""

    def __init__(self, client: Any) -> None:   # dask.distributed ships no type hints
        self.client = client

    def submit(self, fn: _Task, path: str, name: str, options: AnalyzerOptions,
               flt: ConnectionFilter, /) -> _Result:
        future: _Result = self.client.submit(fn, path, name, options, flt, pure=False)
        return future


def _ordered(paths: list[str], options: AnalyzerOptions, flt: ConnectionFilter,
             pool: _Pool, window: int) -> Iterator[Opened]:
    queue: deque[tuple[str, _Result | None]] = deque()
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
