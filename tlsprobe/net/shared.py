"""Work several asyncio callers share: one task each awaits through `asyncio.shield`, so
that a caller giving up (its deadline) leaves it running for the others.

Such a task may end with an error after every caller stopped waiting (a name lookup that
fails once the job that asked for it timed out). Its outcome is taken when it ends, so
asyncio never logs it as "Task exception was never retrieved" (a traceback on stderr, from
every survey worker that looked up names that do not resolve); a later caller still gets the
error from the task itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from tlsprobe.net.tcp import AddrInfo, Target, resolve_async

__all__ = ["SharedLookups", "shared_task"]

T = TypeVar("T")


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def shared_task(work: Awaitable[T]) -> asyncio.Future[T]:
    """`work` as a task whose error never goes unretrieved (await it through shield)."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieve)
    return task


class SharedLookups:
    """Name lookups of one connector: one per target at a time, shared by the jobs that
    ask at once; a failed or cancelled one is tried again by the next job."""

    def __init__(self) -> None:
        self._lookups: dict[tuple[str, int], asyncio.Future[list[AddrInfo]]] = {}

    async def addresses(self, target: Target) -> list[AddrInfo]:
        """The target's addresses (resolve_async: in a thread nothing waits for at exit)."""
        key = (target.host.lower(), target.port)
        lookup = self._lookups.get(key)
        if lookup is None or (lookup.done() and (lookup.cancelled() or
                                                 lookup.exception() is not None)):
            lookup = self._lookups[key] = shared_task(resolve_async(target.host,
                                                                    target.port))
        return await asyncio.shield(lookup)   # one job giving up leaves the lookup running
