"""Where the shards run: on this machine (survey/local.py: this process for one worker,
else worker processes forked from it), or on a Dask cluster (--scheduler ADDRESS).

On Dask each shard is one task: `audit_shard` runs the asyncio scanner (probes.audit.audit_many
with its per-host Scheduler) over the shard's targets and returns the reports; this process
writes each shard's files as its task completes. A task lost with a dying worker is rerun by
Dask; a shard is written once, when its result arrives, so no target is in the results twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tlsprobe.errors import UsageError
from tlsprobe.model.audit import AuditReport
from tlsprobe.probes.audit.run import AuditOptions
from tlsprobe.requests.survey import ShardSettings
from tlsprobe.survey.lanes import Audited
from tlsprobe.survey.targets import Shard

#: the prefix of the Dask event topic a worker announces each finished target on (one
#: topic per run: several surveys may share a scheduler)
TOPIC = "tlsprobe-survey-target"
Announce = Callable[[str], None]


def audit_shard(shard: Shard, options: AuditOptions, settings: ShardSettings,
                topic: str | None = None, on_target: Announce | None = None
                ) -> list[Audited]:
    """Audit one shard (runs inside a worker); reports carry their input index. Each
    finished target is announced with the shard's name, for the progress lines: to
    `on_target` (in this process), or as an event on `topic` (in a Dask worker)."""
    from tlsprobe.net.pacing import PacedConnector
    from tlsprobe.net.tcp_async import TcpConnector
    from tlsprobe.probes.audit.run import audit_many
    connection = settings.connection
    connector = TcpConnector(connection.timeout)
    scheduler = connection.scheduler(connector=PacedConnector(connector, settings.rate)
                                     if settings.rate else connector)
    targets = [t for _, t in shard.targets]
    ended: dict[int, float] = {}

    def end(report: AuditReport) -> None:
        ended[id(report)] = time.time()
        if on_target is not None:
            on_target(shard.name)
        elif topic is not None:
            _announce(topic, shard.name)

    reports = asyncio.run(audit_many(targets, options, scheduler,
                                     concurrency=connection.concurrency, on_report=end))
    return [(replace(r, index=i), ended.get(id(r), time.time()) - r.duration_s)
            for (i, _), r in zip(shard.targets, reports)]


def _announce(topic: str, name: str) -> None:
    """A target of shard `name` is done: an event to the client, from the worker."""
    try:
        _distributed().get_worker().log_event(topic, name)
    except (UsageError, ValueError):    # no Dask, or not inside a worker: no progress line
        pass


def dask_available() -> bool:
    """Whether dask.distributed is installed (the `cluster` extra; not imported here)."""
    from tlsprobe.survey.extra import has_distributed
    return has_distributed()


Done = Callable[[Shard, list[Audited]], None]


def run_on_dask(shards: list[Shard], options: AuditOptions, settings: ShardSettings,
                done: Done, *, scheduler: str, on_target: Announce | None = None) -> None:
    """Shards as Dask tasks on the cluster at `scheduler` (an address); the rate is split
    across the cluster's worker threads."""
    with dask_client(scheduler) as client:
        threads = sum(w.get("nthreads", 1) for w in
                      client.scheduler_info(n_workers=-1)["workers"].values()) or 1
        if settings.rate:
            settings = replace(settings, rate=settings.rate / threads)
        _submit(client, shards, options, settings, done, on_target)


def _submit(client: Any, shards: list[Shard], options: AuditOptions,
            settings: ShardSettings, done: Done, on_target: Announce | None) -> None:
    as_completed = _distributed().as_completed
    topic = None
    if on_target is not None:
        topic = f"{TOPIC}-{os.getpid()}-{time.time_ns()}"
        announce = on_target     # the event handler runs in the client's thread
        client.subscribe_topic(topic, lambda event: announce(str(event[1])))
    futures = {client.submit(audit_shard, shard, options, settings, topic, pure=False,
                             key=f"tlsprobe-{shard.name}-{os.getpid()}-{time.time_ns()}"): shard
               for shard in shards}
    try:
        for future in as_completed(futures):
            done(futures[future], future.result())
    finally:
        client.cancel(list(futures))
        if topic is not None:
            client.unsubscribe_topic(topic)


def _distributed() -> Any:
    """The dask.distributed module, untyped (it ships no type hints)."""
    from tlsprobe.survey.extra import distributed
    return distributed()


class dask_client:
    """A dask Client on the scheduler at `address` (a usage error when it cannot connect)."""

    def __init__(self, address: str, workers: int = 0) -> None:
        self.address = address

    def __enter__(self) -> Any:
        try:
            self.client = _distributed().Client(self.address, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"--scheduler {self.address}: cannot connect "
                             f"({' '.join(str(exc).split())[:200]})") from None
        return self.client

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        # bounded, and an error while closing must not hide the interruption or the error
        # that ended the run
        with contextlib.suppress(Exception):
            self.client.close(timeout=10 if kind is not None else 30)


class Progress:
    """Targets done, rate and estimated time left on stderr: a line as targets finish (each
    target announced by its worker, before its shard is written), at most one a second
    unless another whole percent is done, and the last."""

    def __init__(self, total: int, already: int, enabled: bool,
                 sizes: dict[str, int]) -> None:
        self.total, self.written, self.enabled, self.sizes = total, already, enabled, sizes
        self.already = already
        self.running: dict[str, int] = {}     # targets done in shards not yet written
        self.closed: set[str] = set()
        self.lock = threading.Lock()
        self.started, self.last, self.shown = time.monotonic(), 0.0, -1

    def target(self, shard: str) -> None:
        """A target of `shard` is done (from any thread; a rerun shard counts once)."""
        with self.lock:
            if shard in self.closed:
                return
            self.running[shard] = min(self.running.get(shard, 0) + 1, self.sizes.get(shard, 0))
            self._show()

    def add(self, shard: Shard) -> None:
        """The shard is written."""
        with self.lock:
            self.closed.add(shard.name)
            self.running.pop(shard.name, None)
            self.written += len(shard.targets)
            self._show()

    def _show(self) -> None:
        done = min(self.written + sum(self.running.values()), self.total)
        now = time.monotonic()
        percent = done * 100 // max(self.total, 1)
        if not self.enabled or done <= self.shown or (
                now - self.last < 1.0 and done < self.total and
                percent == self.shown * 100 // max(self.total, 1)):
            return
        self.last, self.shown = now, done
        rate = (done - self.already) / max(now - self.started, 1e-6)
        left = (self.total - done) / rate if rate > 0 else 0.0
        print(f"tlsprobe survey: {done}/{self.total} targets, {rate:.1f} targets/s, "
              f"about {_clock(left)} left", file=sys.stderr, flush=True)


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
