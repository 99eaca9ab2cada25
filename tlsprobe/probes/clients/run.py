"""`tlsprobe clients`: every chosen profile simulated against each target (no audit phases:
a refusal's reason is "refused" with the alert), and the profiles chosen by --profiles."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from tlsprobe.errors import FailureKind, UsageError
from tlsprobe.model.clients import ClientProfile, ClientsReport
from tlsprobe.model.encode import started_at
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.scheduler import Scheduler, TargetRunner
from tlsprobe.probes.clients.fresh import server_name_for
from tlsprobe.probes.clients.profiles import load_profiles
from tlsprobe.probes.clients.simulate import PHASE, TrustChecker, simulate_clients

__all__ = ["choose_profiles", "clients_of", "run_clients"]


def choose_profiles(given: Sequence[str] | str | None, option: str = "--profiles",
                    folder: Path | None = None) -> tuple[ClientProfile, ...]:
    """The profiles `given` names (a comma list or a list of ids or substrings of an id or
    of the client's name, any case; None: all of them) among those of `folder` (None: the
    packaged ones); a name matching none, or no profile at all, is a UsageError."""
    try:
        profiles = load_profiles(folder)
    except FileNotFoundError:
        profiles = ()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read the client profiles in {folder}: {exc}") from None
    if not profiles:
        where = f"in {folder}" if folder is not None else "packaged"
        raise UsageError(f"no client profile {where} (JSON files: docs/CLIENTS.md)")
    if given is None:
        return profiles
    words = [w.strip().lower() for w in (given.split(",") if isinstance(given, str) else given)]
    words = [w for w in words if w]
    if not words:
        raise UsageError(f"{option}: empty list; give profile ids or parts of them")
    chosen: dict[str, ClientProfile] = {}
    for word in words:
        hits = [p for p in profiles if p.id == word] or \
            [p for p in profiles if word in p.id or word in p.label.lower()]
        if not hits:
            ids = ", ".join(p.id for p in profiles) or "none packaged"
            raise UsageError(f"{option}: {word!r} names no client profile (profiles: {ids})")
        chosen.update((p.id, p) for p in hits)
    return tuple(p for p in profiles if p.id in chosen)


async def clients_of(target: Target, scheduler: Scheduler, profiles: tuple[ClientProfile, ...],
                     server_name: str | None, checker: TrustChecker | None) -> ClientsReport:
    """One target's report; an error when no connection reached it at all."""
    started = time.monotonic()
    runner = TargetRunner(target, scheduler, server_name)
    sims = await simulate_clients(runner, profiles, None, checker)
    report = ClientsReport(host=target.host, port=target.port, server_name=server_name,
                           address=scheduler.addresses.get(target.display), clients=sims,
                           connections=scheduler.count(target).get(PHASE, 0),
                           duration_s=round(time.monotonic() - started, 3),
                           started_at=started_at(time.monotonic() - started))
    unsure = runner.first_unsure
    if sims and not runner.conclusive and unsure is not None:
        # no connection reached a TLS server (refused, reset, timed out, not TLS): the
        # target's error, with its exit code, as an audit that established nothing
        return replace(report, error=f"{target.display}: "
                       f"{unsure.reason or unsure.describe()}",
                       error_kind=unsure.kind or FailureKind.NETWORK)
    return report


def run_clients(targets: list[Target], scheduler: Scheduler,
                profiles: tuple[ClientProfile, ...], *, server_name: str | None = None,
                send_sni: bool = True, cafile: str | None = None, verify: bool = True,
                concurrency: int = 4,
                on_report: Callable[[ClientsReport], None] | None = None
                ) -> list[ClientsReport]:
    """Blocking entry point: every target (`concurrency` at a time), reports in order, each
    also handed to `on_report` as soon as it is done (what Ctrl-C leaves is shown).
    `server_name` None: the target's host name (none for an IP literal)."""

    async def all_targets() -> list[ClientsReport]:
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(target: Target) -> ClientsReport:
            name = None if not send_sni else server_name or server_name_for(target.host)
            checker = TrustChecker(name or target.host, cafile, verify)
            async with gate:
                report = await clients_of(target, scheduler, profiles, name, checker)
            if on_report is not None:
                on_report(report)
            return report

        return list(await asyncio.gather(*(one(t) for t in targets)))

    return asyncio.run(all_targets())
