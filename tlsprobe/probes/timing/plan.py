"""What handshake timing measures: one Plan per entry (a version, one group, optionally one
pinned suite) from an explicit group list, or from what the audit's enumeration finds the
server accepts (probes/audit/groups.py: TLS 1.3 groups; TLS 1.2 curves, RFC 7919 groups, or the
fixed DHE parameters a server sends whatever the client lists); `--timing-suites all` pins
each suite the audit's cipher enumeration finds (probes/audit/ciphers.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from tlsprobe import kex, registry
from tlsprobe.engine.config import DEFAULT_SUITES_13, TLS12, TLS13, ClientConfig
from tlsprobe.engine.suites import suite_params
from tlsprobe.net.starttls_connect import AsyncStartTlsConnector, StartTlsSpec
from tlsprobe.net.tcp import Target
from tlsprobe.net.tcp_async import TcpConnector
from tlsprobe.probes.audit.scheduler import Scheduler, TargetRunner, broad_sigalgs


@dataclass(frozen=True)
class TimingOptions:
    runs: int = 20                          # measured handshakes per entry
    warmup: int = 2                         # rounds before those, not counted
    timeout: float = 5.0                    # per handshake (connect included), seconds
    versions: tuple[int, ...] = (TLS13, TLS12)
    groups: tuple[int, ...] | None = None   # None: what the server accepts (enumerated)
    suites: tuple[int, ...] | None = None   # pin each suite in turn (per applicable version)
    all_suites: bool = False                # pin each suite the server accepts
    server_name: str | None = None
    confidence: float = 0.95
    max_failures: int = 3                   # consecutive failures before an entry stops
    kex_budget: float = 0.3                 # seconds for the in-process kex figure per entry
    starttls: StartTlsSpec | None = None    # --starttls: the preamble of every connection


@dataclass(frozen=True)
class Plan:
    """One entry: what to offer and what the server must negotiate for it to count."""

    version: int
    group: int | None
    label: str
    config: ClientConfig
    offered_suite: int | None = None
    expect_group: bool = True               # False for fixed DHE parameters
    companion: int | None = None            # TLS 1.2: the ECDSA certificate's curve, listed last


def _kind(group: int | None) -> str:
    info = registry.group(group) if group is not None else None
    return "DHE" if group is None or (info is not None and info.kind == "ffdhe") else "ECDHE"


def _tls12_suites(kx: str) -> tuple[int, ...]:
    return tuple(c for c in registry.suites_for_version(TLS12)
                 if (s := registry.cipher_suite(c)) is not None and s.kx == kx
                 and suite_params(c) is not None)


def suite_applies(version: int, group: int | None, suite: int) -> bool:
    """Whether `suite` can be pinned for `group` in `version` (TLS 1.2: ECDHE suites with
    curves, DHE suites with ffdhe groups and fixed parameters)."""
    info = registry.cipher_suite(suite)
    if info is None or not info.applies_to(version) or suite_params(suite) is None:
        return False
    return info.kx == ("TLS13" if version >= TLS13 else _kind(group))


def plan(version: int, group: int | None, server_name: str | None, *, suite: int | None = None,
         label: str | None = None, expect_group: bool = True,
         companion: int | None = None) -> Plan:
    """The ClientConfig of one entry: that group alone, the suites that go with it.

    `companion` (TLS 1.2 ECDHE): the curve of the server's ECDSA certificate. A TLS 1.2
    server may only use that certificate when the client lists its curve, so the entry
    offers it after `group`; a server that prefers it then shows as a mismatch."""
    if (version >= TLS13 or companion == group or group is None or not expect_group
            or _kind(group) != "ECDHE"):
        companion = None
    kw: dict[str, Any] = {"server_name": server_name, "versions": (version,), "alpn": (),
                "signature_algorithms": broad_sigalgs(), "status_request": False}
    if version >= TLS13:
        kw.update(groups=(group,), key_share_groups=(group,),
                  cipher_suites_13=(suite,) if suite is not None else DEFAULT_SUITES_13)
    else:
        offered = (group,) if group is not None and expect_group else ()
        kw.update(groups=offered + ((companion,) if companion is not None else ()),
                  cipher_suites_12=(suite,) if suite is not None else _tls12_suites(_kind(group)))
    name = label or (registry.group_label(group) if group is not None else "DHE")
    return Plan(version, group, name, ClientConfig(**kw), suite, expect_group, companion)


def untimeable(group: int, versions: tuple[int, ...]) -> str:
    """Why explicit `group` gives no entry: "x (0x..): no key share can be computed here",
    or not a group of the versions timed."""
    wanted = " or ".join(registry.version_name(v) for v in versions)
    return f"{registry.group_label(group)}: " + (
        "no key share can be computed here" if not kex.is_computable(group)
        else f"not a {wanted} group")


def explicit_plans(options: TimingOptions) -> tuple[list[Plan], list[str]]:
    groups = options.groups or ()
    notes = [f"{registry.group_label(g)}: no key share can be computed here; not timed"
             for g in groups if not kex.is_computable(g)]
    return [plan(v, g, options.server_name) for v in options.versions for g in groups
            if kex.is_computable(g) and ((info := registry.group(g)) is None or
                                         info.applies_to(v))], notes


def _runner(target: Target, options: TimingOptions) -> TargetRunner:
    connector = None if options.starttls is None else AsyncStartTlsConnector(
        TcpConnector(options.timeout), {target.display: options.starttls})
    return TargetRunner(target, Scheduler(timeout=options.timeout, connector=connector),
                        options.server_name)


async def _discover(target: Target, options: TimingOptions) -> tuple[list[Plan], list[str]]:
    """The groups the server accepts, per version, as the audit enumerates them."""
    from tlsprobe.probes.audit import groups
    runner = _runner(target, options)
    versions = [v for v in (TLS13, TLS12) if v in options.versions]
    audits = await asyncio.gather(*(
        groups.tls13_groups(runner, groups.candidate_groups(TLS13)) if v == TLS13 else
        groups.ske_groups(runner, groups.candidate_groups(TLS12)) for v in versions))
    plans: list[Plan] = []
    notes: list[str] = []
    for version, audit in zip(versions, audits, strict=True):
        vname = registry.version_name(version)
        dhe = audit.dhe
        found = [c.id for c in audit.supported + (dhe.negotiated if dhe else ())]
        cert = audit.certificate_curve.id if audit.certificate_curve else None
        for g in dict.fromkeys(found):
            if kex.is_computable(g):
                plans.append(plan(version, g, options.server_name, companion=cert))
            else:
                notes.append(f"{vname}: {registry.group_label(g)} accepted, but no key share "
                             "can be computed here; not timed")
        if dhe is not None and dhe.status == "fixed" and dhe.fixed is not None:
            fixed = dhe.fixed
            plans.append(plan(version, fixed.group.id if fixed.group else None,
                              options.server_name, expect_group=False,
                              label=f"DHE {fixed.name} (fixed)"))
        if audit.spoken is False:
            notes.append(f"{vname}: not spoken by the server")
        elif not found:
            notes.append(f"{vname}: no group found" + (f" ({audit.notes[0]})"
                                                        if audit.notes else ""))
        elif audit.inconclusive:
            more = audit.inconclusive
            notes.append(f"{vname}: not established whether the server accepts "
                         + ", ".join(c.name for c in more[:6]) + (" ..." if more[6:] else ""))
    return plans, notes


async def _server_suites(target: Target, options: TimingOptions,
                         versions: set[int]) -> dict[int, tuple[int, ...]]:
    """The suites the server accepts in each version (the audit's cipher enumeration)."""
    from tlsprobe.probes.audit import ciphers
    runner = _runner(target, options)
    return {v: tuple(c.id for c in (await ciphers.enumerate_suites(runner, v)).supported)
            for v in sorted(versions, reverse=True)}


def with_suites(plans: list[Plan], suites: dict[int, tuple[int, ...]],
                server_name: str | None) -> list[Plan]:
    """Each plan once per applicable suite (plans without one keep the server's choice)."""
    out: list[Plan] = []
    for p in plans:
        chosen = [s for s in suites.get(p.version, ()) if suite_applies(p.version, p.group, s)]
        if not chosen:
            out.append(p)
        out += [plan(p.version, p.group, server_name, suite=s, label=p.label,
                     expect_group=p.expect_group, companion=p.companion) for s in chosen]
    return out


def plans_for(target: Target, options: TimingOptions) -> tuple[list[Plan], list[str]]:
    """The entries to measure (explicit or discovered), each pinned suite included."""
    if options.groups:
        plans, notes = explicit_plans(options)
    else:
        plans, notes = asyncio.run(_discover(target, options))
    if options.all_suites and plans:
        suites = asyncio.run(_server_suites(target, options, {p.version for p in plans}))
    else:
        suites = {v: tuple(options.suites or ()) for v in options.versions}
    return with_suites(plans, suites, options.server_name), notes


__all__ = ["Plan", "TimingOptions", "explicit_plans", "plan", "plans_for", "suite_applies",
           "untimeable", "with_suites"]
