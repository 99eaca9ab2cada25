"""A connection rate limit for one worker: wraps the Scheduler's connector so that
connection starts are spaced by 1/rate seconds. The survey's global `--rate` is split
evenly across the workers, so the sum holds whatever shard runs where."""

from __future__ import annotations

import asyncio
import time

from tlsprobe.net.tcp import Target
from tlsprobe.net.transport import AsyncConnector, AsyncTransport, WrappingConnector


class PacedConnector(WrappingConnector):
    """An AsyncConnector that starts at most `rate` connections per second (rate > 0)."""

    def __init__(self, inner: AsyncConnector, rate: float) -> None:
        super().__init__(inner)
        self.interval = 1.0 / rate
        self._lock = asyncio.Lock()
        self._next = 0.0

    async def __call__(self, target: Target, deadline: float) -> AsyncTransport:
        waited = time.monotonic()
        async with self._lock:
            wait = self._next - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._next = max(self._next, time.monotonic()) + self.interval
        # the wait for a start slot is no part of the connect timeout
        return await self.inner(target, deadline + time.monotonic() - waited)
