"""The audit pipeline of one process of a local survey: `concurrency` lanes that take the
shards' targets one after another, so that the next shard's targets start while the last
ones of a shard finish (a shard at a time drained every lane at its end: a shard of 64
targets at 16 at once spent its last round mostly idle).

`audit_shards` asks for shards with `next_shard` only when a lane needs a target (the
queue holds at most `concurrency` targets), hands each finished target to `on_target` (the
progress line) and each finished shard, its reports in input order, to `finished`. Every
shard gets its own per-host Scheduler (a shard holds all ports of its addresses); the
connector, and with it the --rate pacing, is the process's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from tlsprobe.model.audit import AuditReport

if TYPE_CHECKING:
    from tlsprobe.net.tcp import Target
    from tlsprobe.probes.audit.run import AuditOptions
    from tlsprobe.probes.audit.scheduler import Scheduler
    from tlsprobe.requests.survey import ShardSettings
    from tlsprobe.survey.targets import Shard

#: a target's report and when its audit started (epoch seconds: its end, less its duration)
Audited = tuple[AuditReport, float]
Finished = Callable[["Shard", list[Audited]], None]
Announce = Callable[[str], None]
NextShard = Callable[[], Awaitable["Shard | None"]]


@dataclass
class _Open:
    """A shard whose targets are being audited: its scheduler and the reports so far."""

    shard: Shard
    scheduler: Scheduler
    left: int
    audited: list[Audited] = field(default_factory=list)


async def audit_shards(next_shard: NextShard, options: AuditOptions, settings: ShardSettings,
                       finished: Finished, on_target: Announce | None = None) -> None:
    """Audit every shard `next_shard` gives (until it gives None), `concurrency` targets at
    once across shard boundaries."""
    from tlsprobe.net.pacing import PacedConnector
    from tlsprobe.net.tcp_async import TcpConnector
    from tlsprobe.probes.audit.run import audit_many
    connection = settings.connection
    tcp = TcpConnector(connection.timeout)
    connector = PacedConnector(tcp, settings.rate) if settings.rate else tcp
    lanes = max(1, connection.concurrency)
    queue: asyncio.Queue[tuple[_Open, int, Target] | None] = asyncio.Queue(lanes)

    async def feed() -> None:
        while (shard := await next_shard()) is not None:
            if not shard.targets:
                finished(shard, [])
                continue
            state = _Open(shard, connection.scheduler(connector=connector), len(shard.targets))
            for index, target in shard.targets:
                await queue.put((state, index, target))
        for _ in range(lanes):
            await queue.put(None)

    async def lane() -> None:
        while (item := await queue.get()) is not None:
            state, index, target = item
            (report,) = await audit_many([target], options, state.scheduler, concurrency=1)
            # when it started: its end (now, as the report is handed over) less its duration
            state.audited.append((replace(report, index=index), time.time() - report.duration_s))
            if on_target is not None:
                on_target(state.shard.name)
            state.left -= 1
            if state.left == 0:
                state.audited.sort(key=lambda a: a[0].index or 0)
                finished(state.shard, state.audited)

    await asyncio.gather(feed(), *(lane() for _ in range(lanes)))


def audit_in_process(shards: list[Shard], options: AuditOptions, settings: ShardSettings,
                     finished: Finished, on_target: Announce | None = None) -> None:
    """Every shard in this process: one event loop, the lanes running across shards."""
    pending = iter(shards)

    async def next_shard() -> Shard | None:
        return next(pending, None)

    asyncio.run(audit_shards(next_shard, options, settings, finished, on_target))
