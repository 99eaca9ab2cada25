"""One answer shared by several checks of one target: the first check to ask makes it (its
connections are counted under that check), the others await the same value. Used by the
certificate checks (the chain) and the HTTP checks (the response headers)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tlsprobe.probes.checks.base import CheckContext

__all__ = ["once"]

T = TypeVar("T")

#: (id(TargetRunner), key) -> its answer; an entry goes when its runner does
_SHARED: dict[tuple[int, str], "asyncio.Future[Any]"] = {}


async def once(ctx: CheckContext, key: str,
               make: Callable[[CheckContext], Awaitable[T]]) -> T:
    """`make(ctx)`'s value for this target, made once per target and `key`."""
    slot = (id(ctx.runner), key)
    future = _SHARED.get(slot)
    if future is None:
        future = _SHARED[slot] = asyncio.ensure_future(make(ctx))
        weakref.finalize(ctx.runner, _SHARED.pop, slot, None)
    got: T = await asyncio.shield(future)
    return got
