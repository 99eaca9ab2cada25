"""A name lookup that fails after the job waiting for it gave up: its error is retrieved by
tlsprobe, never left for asyncio to log ("Task exception was never retrieved", a traceback
on stderr that surveys of unresolvable names printed from their workers)."""
from __future__ import annotations

import asyncio
import gc
import logging
import socket
import time

import pytest

from tlsprobe.net import tcp

LOOKUP = 0.6    # seconds the patched resolver takes before it fails


def _slow_failure(*args: object, **kwargs: object) -> list[tcp.AddrInfo]:
    time.sleep(LOOKUP)
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.mark.parametrize("connector", ["tcp", "quic"])
def test_a_lookup_failing_after_its_job_gave_up_is_not_logged(
        connector: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.probes.audit.scheduler import INCONCLUSIVE, Job, Scheduler

    monkeypatch.setattr(socket, "getaddrinfo", _slow_failure)

    async def audit() -> object:
        if connector == "quic":
            from tlsprobe.net.quic_async import AsyncQuicConnector
            connect: object = AsyncQuicConnector(timeout=0.2)
        else:
            from tlsprobe.net.tcp_async import TcpConnector
            connect = TcpConnector(0.2)
        scheduler = Scheduler(timeout=0.2, retries=0, connector=connect)  # type: ignore[arg-type]
        outcome = await scheduler.run(tcp.Target("resolver.invalid", 443),
                                      Job(ClientConfig(), "versions"))
        await asyncio.sleep(LOOKUP * 2)     # the lookup fails while the loop still runs
        del scheduler, connect              # as a survey worker's audit ends
        gc.collect()                        # a task never retrieved is reported here
        await asyncio.sleep(0)
        return outcome

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        outcome = asyncio.run(audit())
        gc.collect()
    assert getattr(outcome, "status") == INCONCLUSIVE, outcome
    logged = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert not logged, logged
