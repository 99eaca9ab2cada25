"""The local workers' pipe protocol (survey/local.py), with the audit replaced by a fake in
the forked workers (no network): large shards and large results at once must not leave the
main process and a worker each waiting for the other; every shard finished once."""
from __future__ import annotations

import fcntl
import multiprocessing
import os
import signal
import struct
import termios
import threading
import time
from typing import Any

import pytest

from tlsprobe.net.target import Target
from tlsprobe.probes.audit.run import AuditOptions
from tlsprobe.requests.survey import ShardSettings
from tlsprobe.survey import lanes, local
from tlsprobe.survey.targets import Shard

#: more than a pipe holds (a socket pair: about 2 x 208 KiB on Linux) each way: a shard of
#: 30,000 targets (about 700 KB pickled) and a "report" of 1 MB
TARGETS_A_SHARD = 30_000
REPORT = b"x" * 1_000_000


async def _fake_audit(next_shard: Any, options: Any, settings: Any, finished: Any,
                      on_target: Any = None) -> None:
    """Each shard "audited" at once: one large result per shard."""
    while (shard := await next_shard()) is not None:
        finished(shard, [(REPORT, 0.0)])


def test_large_shards_and_results_do_not_deadlock(monkeypatch):
    monkeypatch.setattr(lanes, "audit_shards", _fake_audit)     # inherited by the fork
    monkeypatch.setattr(local, "_context", lambda: multiprocessing.get_context("fork"))
    shards = [Shard(n, tuple((n * TARGETS_A_SHARD + i + 1, Target(f"127.0.{n}.1", i + 1))
                             for i in range(TARGETS_A_SHARD))) for n in range(6)]
    got: list[str] = []

    def finished(shard: Shard, audited: list[Any]) -> None:
        assert audited == [(REPORT, 0.0)]
        got.append(shard.name)
        if len(got) == 1:
            # the worker meanwhile finishes its next shard and blocks sending it; the
            # main process then sends it a shard larger than the pipe holds
            time.sleep(1.0)

    pool = local.Pool(2, AuditOptions(), ShardSettings(), progress=False)  # forked + thread
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with pool:
                pool.run(shards, finished, None)
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        for worker in pool.workers:        # unblock the main side, then fail
            worker.process.kill()
        thread.join(30)
        pytest.fail("the main process and the worker waited for each other")
    assert errors == []
    assert sorted(got) == [s.name for s in shards]


async def _quick_audit(next_shard: Any, options: Any, settings: Any, finished: Any,
                       on_target: Any = None) -> None:
    """Each shard "audited" at once, with a small result."""
    while (shard := await next_shard()) is not None:
        finished(shard, [(shard.name.encode(), 0.0)])


def _unread(conn: Any) -> int:
    """Bytes sent on `conn` that its peer has not read yet (SIOCOUTQ of a socket pair)."""
    return int(struct.unpack("i", fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0])


def test_a_worker_killed_with_shards_unread_is_replaced(monkeypatch):
    """A worker that dies while shards sent to it are still unread in its pipe: the main
    process reads ECONNRESET, not an end of file; the worker is replaced all the same and
    every shard finished once (it was an internal error, exit 70)."""
    monkeypatch.setattr(lanes, "audit_shards", _quick_audit)     # inherited by the fork
    monkeypatch.setattr(local, "_context", lambda: multiprocessing.get_context("fork"))
    shards = [Shard(n, ((n + 1, Target(f"127.0.{n}.1", 443)),)) for n in range(8)]
    got: list[str] = []
    pool = local.Pool(2, AuditOptions(), ShardSettings(), progress=False)  # forked + thread
    errors: list[BaseException] = []

    def run() -> None:
        try:
            pool.run(shards, lambda shard, audited: got.append(shard.name), None)
        except BaseException as exc:  # noqa: BLE001 -- reported below
            errors.append(exc)

    with pool:   # the workers started before the run, so that one can be stopped first
        forked = pool.workers[0]
        assert forked.process.pid is not None
        os.kill(forked.process.pid, signal.SIGSTOP)   # it reads nothing from here on
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not (forked.shards and _unread(forked.conn)):
            assert time.monotonic() < deadline, "no shard was sent to the stopped worker"
            time.sleep(0.01)
        os.kill(forked.process.pid, signal.SIGKILL)   # dies with its shards unread
        thread.join(60)
        assert not thread.is_alive(), "the survey did not end after the worker's death"
    assert errors == []
    assert sorted(got) == sorted(s.name for s in shards)
