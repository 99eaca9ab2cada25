"""What several checks share: one answer per target (`once`: the first check to ask makes
it, its connections counted under that check, the others await the same value; used by the
certificate checks for the chain and the HTTP checks for the response headers), and
`PassThrough`, the base of the transports a check puts between the engine and the
connection (a recording, a shaped first send, a renegotiation tunnel)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from tlsprobe.net.shared import shared_task
from tlsprobe.net.transport import WrappingTransport
from tlsprobe.probes.checks.base import CheckContext

__all__ = ["PassThrough", "once"]

T = TypeVar("T")

#: (id(TargetRunner), key) -> its answer; an entry goes when its runner does
_SHARED: dict[tuple[int, str], asyncio.Future[object]] = {}


async def once(ctx: CheckContext, key: str,
               make: Callable[[CheckContext], Awaitable[T]]) -> T:
    """`make(ctx)`'s value for this target, made once per target and `key`."""
    slot = (id(ctx.runner), key)
    future = _SHARED.get(slot)
    if future is None:
        future = _SHARED[slot] = shared_task(make(ctx))
        weakref.finalize(ctx.runner, _SHARED.pop, slot, None)
    # the slot's future was made by `make` for this key: its value is a T
    return cast(T, await asyncio.shield(future))


#: the base of a check's own transports: net/transport.py's pass-through (peer, local, bind
#: and close of the inner transport; a subclass changes what it sends or reads)
PassThrough = WrappingTransport
