"""Run the selected benchmarks in this process or, like `openssl speed -multi`, in several.

With `processes > 1` every worker process runs the same list of figures; a barrier starts
each figure in all workers at once, so they really compete for the CPUs, and the figure
reported is the sum of the workers' operations per second (as `openssl speed -multi`).
Workers are started with the "spawn" method: nothing of the parent (threads of a progress
display, open files) leaks into them.

Ctrl-C: the workers ignore SIGINT (they inherit the ignored disposition from the moment they
are started, so a Ctrl-C sent to the whole process group during their start-up cannot give a
traceback either); only the parent reacts. It stops the workers at once (SIGTERM) and raises
`Interrupted` carrying the figures complete so far; a figure cut short is dropped, never
reported as if it had run its full time.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Barrier
from typing import Any

from tlsprobe.model.speed import AlgorithmResult, Figure
from tlsprobe.speed import catalog
from tlsprobe.speed.base import Algorithm
from tlsprobe.speed.harness import measure

# progress(done, total, label): `label` names the figure about to be measured (or "" at the end).
Progress = Callable[[int, int, str], None]

# Longest wait for the other workers at a barrier or for a worker message (key generation
# of RSA-4096 in a loaded machine is the slowest step between two figures).
_SYNC_TIMEOUT = 300.0


# Longest wait for a worker to end after SIGTERM before SIGKILL.
_STOP_TIMEOUT = 1.0

# (algorithm, operation, block_size) -> each worker's (count, seconds)
Timings = dict[tuple[str, str, int | None], list[tuple[int, float]]]


class SpeedError(RuntimeError):
    """A benchmark could not be run (a worker process failed)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run; `results` holds the figures completed before it."""

    def __init__(self, results: list[AlgorithmResult]) -> None:
        super().__init__()
        self.results = results


def _no_progress(done: int, total: int, label: str) -> None:
    return None


def figure_total(algorithms: Sequence[Algorithm], block_sizes: Sequence[int]) -> int:
    """How many figures a run of `algorithms` measures."""
    return sum(len(a.operation_names(block_sizes)) for a in algorithms)


def run(algorithms: Sequence[Algorithm], seconds: float, *, processes: int = 1,
        block_sizes: Sequence[int], progress: Progress | None = None) -> list[AlgorithmResult]:
    """Measure every operation of `algorithms` for `seconds` each (per process).

    Raises `Interrupted` (a KeyboardInterrupt) with the completed figures on Ctrl-C."""
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    report = progress or _no_progress
    if processes <= 1:
        return _run_here(algorithms, seconds, block_sizes, report)
    return _run_multi(algorithms, seconds, processes, block_sizes, report)


def _run_here(algorithms: Sequence[Algorithm], seconds: float, block_sizes: Sequence[int],
              report: Progress) -> list[AlgorithmResult]:
    total = figure_total(algorithms, block_sizes)
    done = 0
    results: list[AlgorithmResult] = []
    figures: list[Figure] = []
    current: Algorithm | None = None
    try:
        for current in algorithms:
            figures = []
            for op in current.build(block_sizes):
                report(done, total, f"{current.name} {op.name}"
                       + (f" {op.block_size} bytes" if op.block_size is not None else ""))
                timing = measure(op, seconds)
                figures.append(Figure(op.name, timing.count, timing.seconds, timing.per_second,
                                      op.block_size))
                done += 1
            results.append(_result(current, figures))
            figures = []
        report(done, total, "")
    except KeyboardInterrupt:
        if current is not None and figures:
            results.append(_result(current, figures))
        raise Interrupted(results) from None
    return results


def _result(algorithm: Algorithm, figures: Sequence[Figure]) -> AlgorithmResult:
    return AlgorithmResult(algorithm.name, algorithm.kind, algorithm.description, tuple(figures))


def _worker(names: list[str], seconds: float, block_sizes: list[int], barrier: Barrier,
            out: Any, index: int) -> None:
    """Worker process body: measure every figure after the barrier, send each timing."""
    # Ctrl-C is the parent's business: it stops the workers (see the module docstring).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        for name in names:
            (algorithm,) = catalog.lookup(name)
            for op in algorithm.build(block_sizes):
                barrier.wait(_SYNC_TIMEOUT)
                timing = measure(op, seconds)
                out.put(("figure", index, name, op.name, op.block_size, timing.count,
                         timing.seconds))
        out.put(("done", index))
    except Exception as exc:  # noqa: BLE001 -- report any failure, release the others
        barrier.abort()
        out.put(("error", index, f"{exc.__class__.__name__}: {exc}"))


def _run_multi(algorithms: Sequence[Algorithm], seconds: float, processes: int,
               block_sizes: Sequence[int], report: Progress) -> list[AlgorithmResult]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    out = context.Queue()
    names = [a.name for a in algorithms]
    workers = [context.Process(target=_worker, daemon=True,
                               args=(names, seconds, list(block_sizes), barrier, out, index))
               for index in range(processes)]
    partial: Timings = {}
    try:
        with _sigint_held_back():
            for worker in workers:
                worker.start()
        _collect(algorithms, processes, block_sizes, out, workers, report, partial)
    except KeyboardInterrupt:
        _stop(workers)
        raise Interrupted(_assemble(algorithms, partial, processes)) from None
    except BaseException:
        _stop(workers)
        raise
    for worker in workers:
        worker.join(timeout=5)
    _stop(workers)
    return _assemble(algorithms, partial, processes)


@contextmanager
def _sigint_held_back() -> Iterator[None]:
    """Start workers with SIGINT ignored (they inherit it) and blocked here (a Ctrl-C in
    that moment stays pending and reaches the parent just after, not lost)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal dispositions can only be changed in the main thread
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _stop(workers: Sequence[BaseProcess]) -> None:
    """End every started worker now: SIGTERM, then SIGKILL after `_STOP_TIMEOUT`."""
    started = [worker for worker in workers if worker.pid is not None]
    for worker in started:
        if worker.is_alive():
            worker.terminate()
    for worker in started:
        worker.join(timeout=_STOP_TIMEOUT)
        if worker.is_alive():
            worker.kill()
            worker.join()


def _assemble(algorithms: Sequence[Algorithm], partial: Timings,
              processes: int) -> list[AlgorithmResult]:
    """Results from the figures every worker completed (an algorithm with none is left out)."""
    results = []
    for algorithm in algorithms:
        figures = []
        for key, timings in partial.items():
            if key[0] != algorithm.name or len(timings) < processes:
                continue
            rates = tuple(c / s if s > 0 else 0.0 for c, s in timings)
            figures.append(Figure(key[1], sum(c for c, _ in timings), max(s for _, s in timings),
                                  sum(rates), key[2], rates))
        if figures:
            results.append(_result(algorithm, figures))
    return results


def _collect(algorithms: Sequence[Algorithm], processes: int, block_sizes: Sequence[int],
             out: Any, workers: Sequence[BaseProcess], report: Progress,
             partial: Timings) -> None:
    """Gather the workers' timings into `partial` (filled as they arrive, so that an
    interrupted run still has the figures completed before)."""
    total = figure_total(algorithms, block_sizes)
    labels = [f"{a.name} {op}" for a in algorithms for op in a.operation_names(block_sizes)]
    finished: set[int] = set()
    done = 0
    report(0, total, labels[0] if labels else "")
    while len(finished) < processes:
        try:
            message = out.get(timeout=1.0)
        except queue_module.Empty:
            # a worker gone without its "done" (killed, out of memory) never reaches the next
            # barrier: the others would wait there for _SYNC_TIMEOUT. What a worker sent
            # before it ended is read by now (a process flushes its queue as it exits).
            if any(not worker.is_alive() for index, worker in enumerate(workers)
                   if index not in finished):
                raise SpeedError("a benchmark worker process ended without reporting") from None
            continue
        if message[0] == "error":
            raise SpeedError(f"benchmark worker {message[1]} failed: {message[2]}")
        if message[0] == "done":
            finished.add(message[1])
            continue
        _, _, name, operation, block_size, count, spent = message
        timings = partial.setdefault((name, operation, block_size), [])
        timings.append((count, spent))
        if len(timings) == processes:
            done += 1
            report(done, total, labels[done] if done < total else "")

