"""Judging a run by CPU time and deadlines, never by wall time alone (docs/INTERNALS.md,
"tests/"): on a busy 2-core machine a child's wall time stretches several-fold, its CPU time
does not.

- `used_cpu()`: CPU seconds this process and its waited-for descendants used so far (take
  the difference around a call; an in-process CLI run and the children it waited for);
- `reaped_cpu()`: the same, of the descendants only;
- `tree_cpu(pid)`: CPU seconds a live process, its waited-for children and its live
  descendants used so far (from /proc);
- `within(seconds, call)`: a deadline on a call that must not hang: its result, or the test
  fails when it has not returned in time (a generous limit, not a measure of speed).
"""
from __future__ import annotations

import os
import resource
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def used_cpu() -> float:
    """User + system CPU seconds of this process (all its threads) and of its descendants
    that ended and were waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def reaped_cpu() -> float:
    """User + system CPU seconds of this process's descendants that ended and were waited
    for (a child's own waited-for children included)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def tree_cpu(pid: int) -> float:
    """CPU seconds used so far by a live process, the children it waited for and its live
    descendants (0 for a process that is gone)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    ticks = sum(int(f) for f in fields[11:15])   # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK") + sum(tree_cpu(c) for c in children_of(pid))


def within(seconds: float, call: Callable[[], T], what: str = "the call") -> T:
    """`call()` in a thread: its result (or its exception, raised here); the test fails when
    it has not returned after `seconds` (the thread is left to end on its own)."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(call())
        except BaseException as exc:    # handed to the caller's thread
            failed.append(exc)
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"{what} did not return within {seconds} s (a hang)")
    if failed:
        raise failed[0]
    return done[0]
