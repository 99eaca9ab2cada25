"""`SurveyRequest`: a population survey as asked (`tlsprobe survey TARGETS --out DIR ...`),
checked once: the audit's options, how each shard's worker connects (`ShardSettings`: the
scan's `ConnectionSettings` and a rate) and how the run is laid out (shards, workers, the
Dask scheduler, the output directory)."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError
from tlsprobe.requests.names import CLI
from tlsprobe.requests.scan import (
    ConnectionSettings,
    audit_options,
    check_process_count,
    checked_server_name,
    checks_of,
    clients_of,
    read_only_of,
)

if TYPE_CHECKING:
    from tlsprobe.probes.audit.run import AuditOptions

#: the largest shard (its targets are held and audited together by one worker)
MAX_SHARD_SIZE = 100_000
#: --rate's range, connections per second: below the least a run would wait an hour and
#: more per connection (a hang in all but name), above the most no sense
MIN_RATE, MAX_RATE = 0.001, 100_000.0


@dataclass(frozen=True)
class ShardSettings:
    """How a worker audits a shard: the scan's connection settings and its connection rate
    (connections per second for this worker; None: no limit)."""

    connection: ConnectionSettings = field(
        default_factory=lambda: ConnectionSettings(concurrency=16))
    rate: float | None = None


@dataclass(frozen=True)
class SurveyRequest:
    """A checked survey: TARGETS as given (a file, '-' or a CIDR list: read by the survey),
    the output directory, the audit's options, the shards' settings and the run's layout."""

    targets: str
    out: str
    options: AuditOptions
    settings: ShardSettings
    shard_size: int = 64
    workers: int = 1
    scheduler: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SurveyRequest:
        """`tlsprobe survey TARGETS --out DIR ...` (its Namespace)."""
        connection = ConnectionSettings.from_args(args)
        sni = checked_server_name(args.sni, not args.no_sni, CLI)
        if not 1 <= args.shard_size <= MAX_SHARD_SIZE:
            raise UsageError(f"--shard-size must be from 1 to {MAX_SHARD_SIZE} targets, not "
                             f"{args.shard_size}")
        check_process_count(args.workers, "--workers")
        if args.scheduler is not None and "workers" in (getattr(args, "given_options", None)
                                                        or ()):
            # the cluster's workers audit then: a count here would go unused in silence
            raise UsageError("--workers sets the workers on this machine; with --scheduler "
                             "the cluster's workers audit (start as many as you want with "
                             "dask worker ADDRESS --nthreads 1): give one of the two")
        if args.rate is not None and not (math.isfinite(args.rate) and
                                          MIN_RATE <= args.rate <= MAX_RATE):
            raise UsageError(f"--rate must be a number of connections per second from "
                             f"{MIN_RATE:g} to {MAX_RATE:g}, not {args.rate:.15g}")
        if args.out is None:
            raise UsageError("--out DIR is required (where the survey's files go)")
        if args.directory is not None:
            raise UsageError(f"one TARGETS argument expected, got also {args.directory!r} "
                             "(the summary is: tlsprobe survey summary DIR)")
        clients = clients_of(args.clients, args.profiles, args.profiles_dir, CLI)
        options = audit_options(checks=checks_of(args.checks, CLI),
                                read_only=read_only_of(args.checks, CLI),
                                extra_groups=args.extra_groups, server_name_=sni,
                                send_sni=not args.no_sni, names=CLI, clients=clients)
        return cls(targets=args.targets, out=args.out, options=options,
                   settings=ShardSettings(connection, args.rate), shard_size=args.shard_size,
                   workers=args.workers, scheduler=args.scheduler)

    def identity(self) -> dict[str, object]:
        """What makes a survey directory this survey's (a resumed run must match it),
        without the targets' digest and count."""
        o = self.options
        identity: dict[str, object] = {
            "checks": list(o.checks), "extra_groups": list(o.extra_groups),
            "sni": o.server_name, "no_sni": not o.send_sni, "shard_size": self.shard_size}
        if o.clients:   # only then: the identity of a survey without clients is unchanged
            identity["clients"] = [p.id for p in o.clients]
        return identity

    def arguments(self) -> dict[str, object]:
        """How this run goes (a resumed run may change them): for the manifest."""
        c = self.settings.connection
        return {"targets": self.targets, "per_host": c.per_host, "rate": self.settings.rate,
                "concurrency": c.concurrency, "delay": c.delay, "retries": c.retries,
                "timeout": c.timeout, "scheduler": self.scheduler, "workers": self.workers}


__all__ = ["ShardSettings", "SurveyRequest"]
