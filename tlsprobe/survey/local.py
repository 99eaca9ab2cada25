"""A survey on this machine without Dask: `--workers 1` audits in this process; with N
more, N-1 worker processes are forked from this one, which has the audit's modules imported
already, so no worker imports them again, and the last worker runs on a thread of this
process (its audits use this process's modules: a process more cost about 20 MB of pages
of its own, copied from the shared ones as it ran them). A Dask LocalCluster started a
scheduler, a nanny per worker and a fork server, each importing Dask, and every worker
imported tlsprobe again: with the pandas pyarrow pulled in, 1.8 to 2.3 s of CPU and 226 to
276 MB more than `scan -f` for 200 loopback targets; two forked workers then 1.08x its CPU
and +77 to +81 MB; one forked, one thread about 1.04x to 1.09x and +62 to +66 MB; with
the Parquet files written once the workers are stopped (survey/store.py: no pyarrow beside
them) about 0.96x and +40 MB: benchmarks/survey.py, docs/CAPACITY.md.

Each worker runs survey/lanes.py's pipeline and is kept two shards ahead (the next one's
targets start while a shard's last ones finish); it sends back each finished target (for
the progress line) and each finished shard's reports, which this process writes. A worker
that dies (killed, out of memory) is replaced and its unfinished shards are given out
again: a shard is written once, when its reports arrive, so no target is in the results
twice; a shard whose worker died three times is an error.

Workers are forked while this process runs one thread (before its thread worker starts;
pyarrow, which starts threads of its own, is imported only once the workers are stopped); a replacement forked later, or any worker where fork is unsafe (threads
running, not Linux), comes from multiprocessing's fork server, which imports the audit
modules once. Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process group):
this process stops them and the run ends with exit 130.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any, Self

from tlsprobe.errors import EXIT_INTERNAL, TlsprobeError
from tlsprobe.survey.lanes import Announce, Finished, audit_in_process

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext
    from multiprocessing.process import BaseProcess

    from tlsprobe.probes.audit.run import AuditOptions
    from tlsprobe.requests.survey import ShardSettings
    from tlsprobe.survey.targets import Shard

#: shards a worker holds at once (the one it audits and the next)
AHEAD = 2
#: a shard whose worker died this many times ends the run
LOST_AT_MOST = 3
#: seconds a stopping worker gets before it is killed
STOP_WITHIN = 5.0


class WorkerError(TlsprobeError):
    """The local workers could not finish the survey (a shard's worker died too often, or a
    worker failed outside a target's audit): exit 70, the shards written so far kept."""

    exit_code = EXIT_INTERNAL


@contextlib.contextmanager
def local_workers(workers: int, options: AuditOptions, settings: ShardSettings,
                  progress: bool) -> Iterator[Pool | None]:
    """`workers` workers (None for one: the audits run in this process): `workers - 1`
    processes forked now (call it before pyarrow is imported) and a thread of this process. `progress`: the workers announce each
    target. --rate is split evenly across them."""
    if workers <= 1:
        yield None
        return
    if settings.rate:
        settings = replace(settings, rate=settings.rate / workers)
    with Pool(workers, options, settings, progress) as pool:
        yield pool


def run_local(shards: list[Shard], options: AuditOptions, settings: ShardSettings,
              finished: Finished, *, pool: Pool | None,
              on_target: Announce | None = None) -> None:
    """Audit `shards` on `pool`'s workers, or in this process (`pool` None), `finished`
    called in this process as each shard completes."""
    if pool is None:
        audit_in_process(shards, options, settings, finished, on_target)
    else:
        pool.run(shards, finished, on_target)


def _worker(conn: Connection, options: AuditOptions, settings: ShardSettings,
            progress: bool, inherited: tuple[int, ...]) -> None:
    """A worker process: audits the shards it is sent until it is sent None (or this
    process's pipe closes: the main process is gone). `inherited`: the main process's ends
    of the other workers' pipes, which a forked worker closes (held open here, they would
    keep those workers waiting after the main process died)."""
    if threading.current_thread() is threading.main_thread():    # a process of its own
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    for fd in inherited:
        with contextlib.suppress(OSError):
            os.close(fd)
    import asyncio

    from tlsprobe.survey.lanes import audit_shards
    try:
        async def serve() -> None:
            loop = asyncio.get_running_loop()
            inbox: asyncio.Queue[Shard | None] = asyncio.Queue()

            def receive() -> None:
                # a thread of its own: the pipe is drained while the loop is blocked in a
                # send of a shard's reports (else the main process, sending a large shard,
                # and this worker, sending its reports, could each wait for the other)
                while True:
                    try:
                        shard = conn.recv()
                    except (EOFError, OSError):     # the main process is gone
                        shard = None
                    try:
                        loop.call_soon_threadsafe(inbox.put_nowait, shard)
                    except RuntimeError:            # the loop ended (a failed worker)
                        return
                    if shard is None:
                        return

            threading.Thread(target=receive, name="tlsprobe-survey-inbox", daemon=True).start()
            await audit_shards(inbox.get, options, settings,
                               lambda shard, audited: conn.send(("shard", shard.name, audited)),
                               (lambda name: conn.send(("target", name))) if progress else None)

        asyncio.run(serve())
    except BaseException as exc:  # noqa: BLE001 -- reported to the main process, never a traceback here
        with contextlib.suppress(OSError, ValueError):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class _InThread:
    """The worker that runs in this process, on a thread (the process-like side of it that
    the pool uses: it cannot be terminated, it ends when sent None or at exit)."""

    exitcode = None

    def __init__(self, conn: Connection, args: tuple[AuditOptions, ShardSettings, bool]) -> None:
        self.thread = threading.Thread(target=_worker, args=(conn, *args, ()), daemon=True,
                                       name="tlsprobe-survey-worker")

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def terminate(self) -> None:
        """Nothing: a thread cannot be stopped from outside (a daemon thread, it ends with
        the process)."""

    kill = terminate


@dataclass
class _Worker:
    process: BaseProcess | _InThread
    conn: Connection
    shards: list[Shard] = field(default_factory=list)


class Pool:
    """The workers (forked processes and one thread of this process) and the shards each
    one holds."""

    def __init__(self, size: int, options: AuditOptions, settings: ShardSettings,
                 progress: bool) -> None:
        self.size, self.options, self.settings, self.progress = size, options, settings, progress
        self.workers: list[_Worker] = []
        self.lost: dict[str, int] = {}

    def __enter__(self) -> Self:
        # what the workers run, imported here once (forked workers share it) ...
        import encodings.idna  # noqa: F401  (host names)
        import gc

        import tlsprobe.net.tcp_async
        import tlsprobe.probes.audit.run
        import tlsprobe.survey.targets  # noqa: F401  (the shards they are sent)
        gc.freeze()     # ... and kept out of their garbage collector (which would copy it)
        try:
            with _ctrl_c_held():
                for _ in range(self.size - 1):
                    self.workers.append(self._start())
        finally:
            gc.unfreeze()
        # this process is the last worker (on a thread: its audits use this process's
        # modules, where a process more cost 20 MB of its own), started once the others
        # are forked (a process with threads forks no more)
        self.workers.append(self._start(in_thread=True))
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(failed=exc[0] is not None)

    def stop(self, failed: bool = False) -> None:
        """End the workers (once): sent None, then, if they do not end, terminated. The
        survey stops them as soon as the last shard is in, before it reads the Parquet files
        for its closing paragraph (their memory is not held beside that read)."""
        workers, self.workers = self.workers, []
        for worker in workers:
            with contextlib.suppress(OSError, ValueError):
                worker.conn.send(None)
        for worker in workers:
            worker.process.join(STOP_WITHIN if not failed else 0.2)
            if worker.process.is_alive():
                worker.process.terminate()        # SIGTERM: ends quietly
                worker.process.join(STOP_WITHIN)
            if worker.process.is_alive() and not isinstance(worker.process, _InThread):
                worker.process.kill()
                worker.process.join()
            worker.conn.close()

    def _start(self, in_thread: bool = False) -> _Worker:
        ours, theirs = multiprocessing.Pipe()
        if in_thread:
            thread = _InThread(theirs, (self.options, self.settings, self.progress))
            thread.start()      # it closes `theirs` when it ends
            return _Worker(thread, ours)
        context = _context()
        inherited = tuple(w.conn.fileno() for w in self.workers if not w.conn.closed) + (
            ours.fileno(),) if context.get_start_method() == "fork" else ()
        process = context.Process(target=_worker, args=(theirs, self.options, self.settings,
                                                        self.progress, inherited),
                                  name="tlsprobe-survey-worker", daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, ours)

    def run(self, shards: list[Shard], finished: Finished, on_target: Announce | None) -> None:
        todo = deque(shards)
        while todo or any(w.shards for w in self.workers):
            for worker in self.workers:
                while todo and len(worker.shards) < AHEAD:
                    shard = todo.popleft()
                    worker.shards.append(shard)
                    try:
                        worker.conn.send(shard)
                    except OSError:     # it died (EPIPE): its end of file comes next
                        break
            for ready in wait([w.conn for w in self.workers]):
                worker = next(w for w in self.workers if w.conn is ready)
                try:
                    message = worker.conn.recv()
                except (EOFError, OSError):
                    # it died: its end of file, or ECONNRESET when it died with shards
                    # sent to it still unread (the kernel resets a socket pair closed so)
                    todo.extendleft(reversed(self._replace(worker)))
                    continue
                self._handle(worker, message, finished, on_target)

    def _handle(self, worker: _Worker, message: Any, finished: Finished,
                on_target: Announce | None) -> None:
        kind = message[0]
        if kind == "target" and on_target is not None:
            on_target(message[1])
        elif kind == "shard":
            shard = next(s for s in worker.shards if s.name == message[1])
            worker.shards.remove(shard)
            finished(shard, message[2])
        elif kind == "error":
            raise WorkerError(f"a survey worker failed: {message[1]}")

    def _replace(self, dead: _Worker) -> list[Shard]:
        """A worker died: start another; its shards to give out again."""
        dead.process.join(STOP_WITHIN)
        dead.conn.close()
        for shard in dead.shards:
            self.lost[shard.name] = self.lost.get(shard.name, 0) + 1
            if self.lost[shard.name] >= LOST_AT_MOST:
                raise WorkerError(f"the worker auditing {shard.name} died {LOST_AT_MOST} "
                                  f"times (exit code {dead.process.exitcode})")
        self.workers[self.workers.index(dead)] = self._start(
            in_thread=isinstance(dead.process, _InThread))
        return dead.shards


def _context() -> ForkContext | ForkServerContext:
    """fork while this process runs one thread on Linux; else the fork server, with the
    audit modules and the SIGINT setting preloaded."""
    if sys.platform == "linux" and _threads() == 1:
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tlsprobe.survey.forked", "tlsprobe.survey.lanes",
                                    "tlsprobe.probes.audit.run"])
    return context


def _threads() -> int:
    """The threads of this process, as the kernel counts them (pyarrow's are not Python's)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count() + 1


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """A Ctrl-C while the workers are forked is raised once they are (a worker forked
    before it set SIGINT aside would die of it with a traceback)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: pressed.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt
