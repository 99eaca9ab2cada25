"""Fixtures for the hostile-server suite.

- `hostile_server` (session): a running `HostileServer` (asyncio loop in a thread on
  127.0.0.1); `hostile_server.serve(script) -> Listener` (`.port`, `.log`, `.connections`).
  Every listener and connection is closed at the end of the session.
- `hostile_jobs` (one board per session): every child-process run the collected hostile
  test modules plan (their `hostile_plan(tmp_dir)`; under pytest-xdist, the asking test's
  module's alone), queued on one small pool so that the probes' and the
  audits' timeout waits overlap; `hostile_jobs.result(key) -> (ProbeOutcome, Listener)`;
  `hostile_jobs.dirs[module]` is the temp dir each module's children ran in.

Each test waits for its own job only: `result(key)` takes a job the pool has not started yet
and runs it in the test itself, so a test's time (and its pytest timeout) covers at most one
child run, however busy the machine and however long the queue ahead of it.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from .catalog import Scenario
from .runner import ProbeOutcome
from .server import HostileServer, Listener

#: (key, scenario, run(listener) -> outcome, slow): one child process per job
Job = tuple[str, Scenario, Callable[[Listener], ProbeOutcome], bool]
WORKERS = 4


class JobBoard:
    def __init__(self, server: HostileServer) -> None:
        self.server = server
        self.pool = ThreadPoolExecutor(max_workers=WORKERS)
        self.futures: dict[str, tuple[Future[ProbeOutcome], Listener]] = {}
        self.runs: dict[str, Callable[[Listener], ProbeOutcome]] = {}
        self.done: dict[str, ProbeOutcome] = {}
        self.dirs: dict[str, Path] = {}  # module short name -> its temp dir

    def submit(self, jobs: list[Job]) -> None:
        for key, sc, run, _ in sorted(jobs, key=lambda job: not job[3]):  # slow ones first
            listener = self.server.serve(sc.script)
            self.runs[key] = run
            self.futures[key] = (self.pool.submit(run, listener), listener)

    def result(self, key: str) -> tuple[ProbeOutcome, Listener]:
        future, listener = self.futures[key]
        if key not in self.done:
            # not started yet: run it here rather than wait behind the rest of the queue
            self.done[key] = (self.runs[key](listener) if future.cancel()
                              else future.result())
        return self.done[key], listener


@pytest.fixture(scope="session")
def hostile_server() -> Iterator[HostileServer]:
    server = HostileServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def _hostile_board(hostile_server: HostileServer) -> Iterator[JobBoard]:
    board = JobBoard(hostile_server)
    try:
        yield board
    finally:
        board.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def hostile_jobs(request: pytest.FixtureRequest, _hostile_board: JobBoard,
                 tmp_path_factory: pytest.TempPathFactory) -> JobBoard:
    """The session's board, with the jobs planned on first use: those of every collected
    module with a `hostile_plan` in one session; under pytest-xdist (each worker collects
    every test but runs only some) those of the asking test's module alone, which the root
    conftest keeps on one worker (XDIST_GROUPS), so no worker runs another's children."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        modules = {request.module} if hasattr(request.module, "hostile_plan") else set()
    else:
        modules = {item.module for item in request.session.items
                   if hasattr(getattr(item, "module", None), "hostile_plan")}
    jobs: list[Job] = []
    for module in sorted(modules, key=lambda m: m.__name__):
        name = module.__name__.split(".")[-1]
        if name in _hostile_board.dirs:
            continue
        _hostile_board.dirs[name] = tmp_path_factory.mktemp(name)
        jobs += module.hostile_plan(_hostile_board.dirs[name])
    _hostile_board.submit(jobs)
    return _hostile_board
