"""Pacing: how many connections run at once and how fast they start (the scan scheduler's,
probes/audit/scheduler.py, and the survey's).

- `Pacing`: per host at most `per_host` connections at once, their starts spaced by `delay`
  seconds, and per target a `TargetGate` (below);
- `PacedConnector`: a connection rate limit (`survey --rate`, split across the workers);
- `TargetGate`: servers that serve one connection at a time (or a few), noticed and given
  one at a time;
- per target, whether its audit jobs' connections are half-closed (`Pacing.half_close`).

Some servers accept every TCP connection but handle one (`openssl s_server` without `-www`,
small embedded servers, single-threaded services): the others wait in the listen backlog,
unanswered, until the one being served closes; others reset or refuse connections beyond
their limit. With the scan's default of several connections per host, a check that holds
its connection for a while (an HTTP request the server never answers, a read until the
server goes quiet) would leave every other connection to that server timing out, and their
verdicts lost.

The scheduler (probes/audit/scheduler.py) therefore watches every connection (`Watch`): whether
the server sent it any byte, whether it failed for want of one (a read that timed out, a
reset, a refused or timed-out connect: `starved`), and whether another connection to the
same target was open at any time meanwhile (`crowded`). A connection starved while crowded
is asked again alone (`TargetGate.slot(alone=True)`: no other connection to that target
open; a check's own connection after a reset only once the target has shown that kind),
and when the server answers it there, that is the evidence that the target queues
or refuses parallel connections: from then on it gets one connection at a time
(`TargetGate.serial`). A silence that repeats alone is the server's real answer, and the
target keeps its concurrency. A timeout answered alone is enough (a queueing server shows
it no other way); a reset or refusal answered alone must happen twice, because a flaky path
resets a connection now and then whatever else is open.

Such a server takes the next connection only once the client's close has reached it: a
round trip after its answer, for every connection. An audit job's client sends nothing
after its ClientHello, so its FIN goes right after it (a half-close: the scheduler's
`_talk_half_closed`) and the server is free as soon as it has answered. A path that drops
half-closed connections (a proxy that ends both ways on the client's FIN) loses those
answers, perhaps only now and then; the first connection that ends without its answer
makes the target's connections close whole (`Pacing.half_closed`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from tlsprobe.errors import NetworkError
from tlsprobe.net.target import Target
from tlsprobe.net.transport import (
    AsyncConnector,
    AsyncTransport,
    WrappingConnector,
    WrappingTransport,
)

#: the causes of a failure that may be a server busy with another connection
STARVING = ("timeout", "deadline", "closed", "reset", "refused")
#: starved so, a connection answered alone makes the target serial at once ("closed": a
#: STARTTLS preamble the server ended, as it did when it went unanswered before)
UNANSWERED = ("timeout", "deadline", "closed")
#: how many reset/refused connections answered alone make a target serial (a timeout: one)
RESETS_TO_SERIAL = 2


@dataclass(eq=False)
class Watch:
    """One connection's record: bytes received from the server, whether it failed for want
    of an answer (`starved`, with the `cause`), whether another connection to the same target
    was open meanwhile (`crowded`)."""

    received: int = 0
    connecting: bool = False
    starved: bool = False
    cause: str = ""
    crowded: bool = False

    def failed(self, exc: NetworkError) -> None:
        """A connect or read failed: starved when nothing had come from the server."""
        if self.received == 0 and exc.cause in STARVING and not self.starved:
            self.starved, self.cause = True, exc.cause

    @property
    def contended(self) -> bool:
        """Starved while another connection to the target was open: to be asked alone."""
        return self.starved and self.crowded


class Watched(WrappingTransport):
    """The connection's transport as it is, noting in `watch` what the server sent."""

    def __init__(self, inner: AsyncTransport, watch: Watch) -> None:
        super().__init__(inner)
        self.watch = watch

    async def send(self, data: bytes) -> None:
        try:
            await self.inner.send(data)
        except NetworkError as exc:
            self.watch.failed(exc)
            raise

    async def receive(self, deadline: float) -> bytes:
        try:
            data = await self.inner.receive(deadline)
        except NetworkError as exc:
            self.watch.failed(exc)
            raise
        self.watch.received += len(data)
        return data


@dataclass(eq=False)
class TargetGate:
    """One target's connections: who is open (for `crowded`), who waits to be alone, and
    whether the target gets one connection at a time (`serial`, with the reason)."""

    loop: asyncio.AbstractEventLoop
    live: set[Watch] = field(default_factory=set)
    held: int = 0
    alone_held: bool = False
    alone_waiting: int = 0
    serial: str = ""
    reached: bool = False            # a connection was made (a refusal is then no "nobody")
    answered_alone: int = 0          # resets/refusals answered alone (RESETS_TO_SERIAL)
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)

    @asynccontextmanager
    async def slot(self, alone: bool = False) -> AsyncIterator[None]:
        """Hold a place among this target's connections: `alone` (or on a serial target)
        when no other is open; otherwise beside others, unless someone waits to be alone
        (who goes first: the others would starve it again)."""
        async with self.cond:
            if alone or self.serial:
                self.alone_waiting += 1
                try:
                    await self.cond.wait_for(lambda: self.held == 0)
                finally:
                    self.alone_waiting -= 1
                self.alone_held = True
            else:
                await self.cond.wait_for(lambda: not self.alone_held and
                                         not self.alone_waiting)
            self.held += 1
        try:
            yield
        finally:
            async with self.cond:
                self.held -= 1
                if self.held == 0:
                    self.alone_held = False
                self.cond.notify_all()

    @asynccontextmanager
    async def watching(self, watch: Watch) -> AsyncIterator[Watch]:
        """`watch` counted among the open connections (connect to close): it and every
        other open one are crowded."""
        if self.live:
            watch.crowded = True
            for other in self.live:
                other.crowded = True
        self.live.add(watch)
        try:
            yield watch
        finally:
            self.live.discard(watch)

    async def opened(self, watch: Watch, made: bool) -> None:
        """`watch`'s connect ended, the connection `made` or not."""
        async with self.cond:
            watch.connecting = False
            self.reached = self.reached or made
            self.cond.notify_all()

    async def again_alone(self, watch: Watch, own: bool) -> bool:
        """Is `watch`'s connection to be asked again alone? When it starved in company; for
        a check's own connection (`own`), whose check asks again itself and reads a reset
        as the server's answer (a middlebox that drops large hellos), a reset or refusal
        only once one in company was answered alone on this target. A refused connect counts
        only when a connection to the target was made (the others opening beside it are
        waited for): refused with none, nothing listens."""
        if not watch.contended:
            return False
        if watch.cause == "refused" and not self.reached:
            async with self.cond:
                await self.cond.wait_for(lambda: self.reached or
                                         not any(w.connecting for w in self.live))
            if not self.reached:
                return False
        return not own or watch.cause in UNANSWERED or self.answered_alone > 0

    def learn(self, first: Watch, alone: Watch) -> None:
        """After a connection `first` starved in company was asked again alone (`alone`):
        the target counts as serial from now on when the server answered alone (a timeout
        once, a reset or refusal RESETS_TO_SERIAL times)."""
        if self.serial or alone.received == 0:
            return
        if first.cause in UNANSWERED:
            self.serial = "a connection went unanswered while another was open, and was " \
                "answered alone"
            return
        self.answered_alone += 1
        if self.answered_alone >= RESETS_TO_SERIAL:
            self.serial = f"connections were {'refused' if first.cause == 'refused' else 'reset'}" \
                " while another was open, and answered alone"


@dataclass(eq=False)
class Pacing:
    """One scheduler's pacing: per host (lower-cased) at most `per_host` connections at
    once and their starts `delay` seconds apart; per target its `TargetGate`."""

    per_host: int = 3
    delay: float = 0.0
    _sems: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    _gates: dict[str, TargetGate] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _next_start: dict[str, float] = field(default_factory=dict)
    #: targets whose connections close whole from now on, with why (`half_closed`)
    _whole: dict[str, str] = field(default_factory=dict)

    @asynccontextmanager
    async def slot(self, target: Target, alone: bool = False) -> AsyncIterator[None]:
        """A place for one connection to `target`: in its gate (`alone`: no other open),
        under the host's cap, after the host's previous start by `delay`."""
        host = target.host.lower()
        async with self.gate(target).slot(alone=alone), self._sem(host):
            await self._pace(host)
            yield

    @staticmethod
    async def back_off(backoff: float, attempt: int) -> None:
        """The pause before retry `attempt` (from 1) after a failure: exponential from
        `backoff` seconds, with up to half again of random jitter."""
        pause = backoff * (2 ** (attempt - 1))
        import random  # with the first retry, not at every scan's start-up
        await asyncio.sleep(pause * (1 + random.random() / 2))

    def gate(self, target: Target) -> TargetGate:
        """The target's connections: who is open, and whether it gets one connection at a
        time (a scheduler run again in another event loop keeps what it learnt, in a new
        gate: asyncio's primitives belong to one loop)."""
        gate = self._gates.get(target.display)
        loop = asyncio.get_running_loop()
        if gate is None or gate.loop is not loop:
            gate = self._gates[target.display] = TargetGate(
                loop, serial=gate.serial if gate is not None else "")
        return gate

    def serial(self, target: Target) -> str:
        """Why the target got one connection at a time ("": it did not)."""
        gate = self._gates.get(target.display)
        return gate.serial if gate is not None else ""

    def half_close(self, target: Target) -> bool:
        """May a job's connection to `target` send its FIN right after the ClientHello?
        Yes until one such connection ended without its answer (`half_closed`)."""
        return target.display not in self._whole

    def half_closed(self, target: Target, why: str) -> None:
        """A half-closed connection to `target` ended without its answer (`why`): perhaps
        a proxy that ends the connection on the client's FIN, perhaps the network or the
        server: its connections close whole from now on."""
        self._whole.setdefault(target.display, why)

    def _sem(self, host: str) -> asyncio.Semaphore:
        return self._sems.setdefault(host, asyncio.Semaphore(max(1, self.per_host)))

    async def _pace(self, host: str) -> None:
        if self.delay <= 0:
            return
        lock = self._locks.setdefault(host, asyncio.Lock())
        async with lock:
            loop = asyncio.get_running_loop()
            wait = self._next_start.get(host, 0.0) - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self._next_start[host] = loop.time() + self.delay


class PacedConnector(WrappingConnector):
    """An AsyncConnector that starts at most `rate` connections per second (rate > 0): a
    survey worker's share of `survey --rate` (split evenly across the workers, so the sum
    holds whatever shard runs where)."""

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


__all__ = ["STARVING", "PacedConnector", "Pacing", "TargetGate", "Watch", "Watched"]
