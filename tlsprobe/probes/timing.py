"""Handshake timing: N full handshakes per group (and optionally per suite), ranked by cost.

Which groups to time: an explicit list, or what the server accepts, found by the audit's
group enumeration (probes/groups.py) for TLS 1.3 and TLS 1.2 (ECDHE curves, RFC 7919 DHE
groups, or the fixed DHE parameters a server sends whatever the client lists). Each entry
offers one group (with its key share in TLS 1.3) and lets the server pick the suite, or
pins one suite.

How: blocking sockets and the sans-IO engine, no scheduler in between. The address is
resolved once. Entries are measured round-robin (one handshake of each per round, the
order rotated every round), so a drift in machine load spreads over all of them; the first
`warmup` rounds are not counted. Per handshake: `perf_counter` around the TCP connect and
around the handshake (ClientHello sent to our Finished sent), and this thread's CPU time
(`thread_time`) over the handshake, which splits our own work from the wait for the
server. The garbage collector is paused during each handshake. Failures are values: an
entry that never completes a handshake is "refused", one that fails repeatedly after
succeeding is "failing", and when a whole round fails after successes the run stops early
with what it has and a message.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace

from tlsprobe import kex, registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import DEFAULT_SUITES_13, TLS12, TLS13, ClientConfig
from tlsprobe.engine.suites import suite_params
from tlsprobe.net.tcp import Target, open_channel
from tlsprobe.probes.scheduler import (Outcome, Scheduler, TargetRunner, broad_sigalgs,
                                      outcome_of)
from tlsprobe.report.model import Cipher, Codepoint
from tlsprobe.report.timing_tables import (FAILING, MEASURED, MISMATCH, NOT_RUN, REFUSED,
                                           EntryTiming, Stats, TimingReport, rank)

ProgressHook = Callable[[int, int, str], None]   # (handshakes done, planned, entry label)


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


@dataclass(frozen=True)
class Plan:
    """One entry: what to offer and what the server must negotiate for it to count."""

    version: int
    group: int | None
    label: str
    config: ClientConfig
    offered_suite: int | None = None
    expect_group: bool = True               # False for fixed DHE parameters


@dataclass(frozen=True)
class Sample:
    connect_s: float
    handshake_s: float
    cpu_s: float
    outcome: Outcome


class TimingFailure(Exception):
    """One handshake that did not complete; `kind` as the probe's error kinds."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


# -- one handshake -----------------------------------------------------------------------------
def time_handshake(family: int, address: tuple, config: ClientConfig, timeout: float) -> Sample:
    """Connect and complete one handshake; raises TimingFailure when it does not complete."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(timeout)
    hs: ClientHandshake | None = None
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        deadline = t0 + timeout
        sock.connect(address)
        t1 = time.perf_counter()
        c0 = time.thread_time()
        hs = ClientHandshake(config, annotate=False, stop_after_first_flight=False)
        sock.sendall(hs.start())
        while not hs.done:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError()
            sock.settimeout(left)
            data = sock.recv(65536)
            if not data:
                hs.connection_closed()
                break
            out = hs.receive(data)
            if out:
                sock.sendall(out)
        t2 = time.perf_counter()
        c1 = time.thread_time()
        if not hs.handshake_complete:
            raise TimingFailure(f"handshake not completed: {hs.incomplete_reason or 'stopped'}",
                                "protocol")
        with suppress(OSError):
            sock.sendall(hs.close())   # close_notify, outside the timed span
        return Sample(t1 - t0, t2 - t1, c1 - c0, outcome_of(hs))
    except HandshakeFailure as exc:
        raise TimingFailure(str(exc), exc.kind) from None
    except TimeoutError:
        where = "connect" if hs is None else "the server"
        raise TimingFailure(f"timed out waiting for {where} ({timeout:g} s)", "network") from None
    except OSError as exc:
        raise TimingFailure(exc.strerror or str(exc) or type(exc).__name__, "network") from None
    finally:
        if gc_was_enabled:
            gc.enable()
        sock.close()


def kex_cost_ms(group: int, version: int, budget: float) -> float | None:
    """Median of our key generation plus shared secret for `group` (the engine's kex calls),
    timed in-process for about `budget` seconds; None when the group cannot be computed."""
    samples: list[float] = []
    spent_until = time.perf_counter() + budget
    try:
        while len(samples) < 4 or (time.perf_counter() < spent_until and len(samples) < 50):
            t0 = time.perf_counter()
            share = kex.generate(group)
            t1 = time.perf_counter()
            server_public, _ = kex.respond(group, share.public)
            derive = share.shared_secret if version >= TLS13 else share.premaster_secret
            t2 = time.perf_counter()
            derive(server_public)
            samples.append(t1 - t0 + time.perf_counter() - t2)
    except ValueError:   # UnsupportedGroup, InvalidShare
        return None
    samples = sorted(samples[1:])   # the first call pays for lazy setup
    return round(samples[len(samples) // 2] * 1000, 4)


# -- what to measure ---------------------------------------------------------------------------
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
         label: str | None = None, expect_group: bool = True) -> Plan:
    """The ClientConfig of one entry: that group alone, the suites that go with it."""
    kw: dict = {"server_name": server_name, "versions": (version,), "alpn": (),
                "signature_algorithms": broad_sigalgs(), "status_request": False}
    if version >= TLS13:
        kw.update(groups=(group,), key_share_groups=(group,),
                  cipher_suites_13=(suite,) if suite is not None else DEFAULT_SUITES_13)
    else:
        kw.update(groups=(group,) if group is not None and expect_group else (),
                  cipher_suites_12=(suite,) if suite is not None else _tls12_suites(_kind(group)))
    name = label or (registry.group_label(group) if group is not None else "DHE")
    return Plan(version, group, name, ClientConfig(**kw), suite, expect_group)


def explicit_plans(options: TimingOptions) -> tuple[list[Plan], list[str]]:
    plans, notes = [], []
    for version in options.versions:
        for g in options.groups or ():
            info = registry.group(g)
            if info is not None and not info.applies_to(version):
                continue
            if not kex.is_computable(g):
                notes.append(f"{registry.group_label(g)}: no key share can be computed here; "
                             "not timed")
                continue
            plans.append(plan(version, g, options.server_name))
    return plans, notes


def _runner(target: Target, options: TimingOptions) -> TargetRunner:
    return TargetRunner(target, Scheduler(timeout=options.timeout), options.server_name)


async def _discover(target: Target, options: TimingOptions) -> tuple[list[Plan], list[str]]:
    """The groups the server accepts, per version, as the audit enumerates them."""
    from tlsprobe.probes import groups
    runner = _runner(target, options)
    plans: list[Plan] = []
    notes: list[str] = []
    for version in (v for v in (TLS13, TLS12) if v in options.versions):
        audit = await (groups.tls13_groups(runner, groups.candidate_groups(TLS13))
                       if version == TLS13 else
                       groups.tls12_groups(runner, groups.candidate_groups(TLS12)))
        vname = registry.version_name(version)
        found = [c.id for c in audit.supported]
        dhe = audit.dhe
        if dhe is not None:
            found += [c.id for c in dhe.negotiated if c.id not in found]
        for g in found:
            if kex.is_computable(g):
                plans.append(plan(version, g, options.server_name))
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
            notes += [f"{vname}: {n}" for n in audit.notes] or \
                [f"{vname}: no group accepted"]
        if audit.inconclusive:
            notes.append(f"{vname}: not established whether the server accepts "
                         + ", ".join(c.name for c in audit.inconclusive))
    return plans, notes


async def _server_suites(target: Target, options: TimingOptions,
                         versions: set[int]) -> dict[int, tuple[int, ...]]:
    """The suites the server accepts in each version (the audit's cipher enumeration)."""
    from tlsprobe.probes import ciphers
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
                     expect_group=p.expect_group) for s in chosen]
    return out


# -- the measurement ---------------------------------------------------------------------------
@dataclass
class _State:
    plan: Plan
    samples: list[Sample] = field(default_factory=list)
    confirmed: bool = False       # one handshake completed with what was asked for
    attempts: int = 0
    failures: int = 0
    consecutive: int = 0
    last_error: str | None = None
    last_kind: str | None = None
    status: str | None = None     # set when the entry stops: refused, mismatch, failing
    hello_retry: bool = False

    @property
    def active(self) -> bool:
        return self.status is None


def _mismatch(p: Plan, out: Outcome) -> str | None:
    if out.version != p.version:
        return (f"offered {registry.version_name(p.version)}, the server chose "
                f"{registry.version_name(out.version or 0)}")
    if p.expect_group and p.group is not None and out.group != p.group:
        got = registry.group_label(out.group) if out.group is not None else \
            f"a {out.dh_bits}-bit DH prime ({out.dh_name or 'not a named group'})"
        return f"offered {registry.group_label(p.group)} alone, the server used {got}"
    return None


def _attempt(st: _State, family: int, address: tuple, options: TimingOptions,
             counted: bool) -> bool:
    """One handshake for one entry; False when it failed."""
    st.attempts += 1
    try:
        sample = time_handshake(family, address, st.plan.config, options.timeout)
    except TimingFailure as exc:
        st.failures += 1
        st.consecutive += 1
        st.last_error, st.last_kind = str(exc), exc.kind
        if not st.confirmed and (exc.kind != "network" or st.attempts >= 2):
            st.status = REFUSED   # an alert or close is an answer; a network error gets a retry
        elif st.confirmed and st.consecutive >= options.max_failures:
            st.status = FAILING
        return False
    st.consecutive = 0
    if not st.confirmed:
        wrong = _mismatch(st.plan, sample.outcome)
        if wrong is not None:
            st.status, st.last_error = MISMATCH, wrong
            return True
        st.confirmed = True
    st.hello_retry = st.hello_retry or sample.outcome.hrr_group is not None
    if counted:
        st.samples.append(sample)
    return True


def _resolve(target: Target, timeout: float) -> tuple[int, tuple, str]:
    """Connect once (as the probe does, with its error messages) to fix the address."""
    channel = open_channel(target, timeout=timeout)
    with channel:
        return channel.sock.family, channel.sock.getpeername(), channel.address


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
    pinned = with_suites(plans, suites, options.server_name)
    if options.suites and len(pinned) == len(plans) and \
            all(p.offered_suite is None for p in pinned):
        notes.append("none of the given suites applies to the groups timed; the server "
                     "chose the suite")
    return pinned, notes


def measure_timing(target: Target, options: TimingOptions,
                   on_progress: ProgressHook | None = None) -> TimingReport:
    """Time the handshakes of `target`. A target that cannot be reached raises
    NetworkError; everything else is in the report (`error`, `stopped`, entry statuses)."""
    started = time.monotonic()
    family, address, shown = _resolve(target, options.timeout)
    base = TimingReport(host=target.host, port=target.port, address=shown, runs=options.runs,
                        warmup=options.warmup, timeout_s=options.timeout,
                        confidence=options.confidence,
                        discovery="explicit" if options.groups else "audit")
    plans, notes = plans_for(target, options)
    if not plans:
        return _finish(base, [], notes, options, started, error=(
            "no key exchange group to time: the server accepted none we can compute", "alert"))
    states = [_State(p) for p in plans]
    stopped = _run_rounds(states, family, address, options, on_progress)
    return _finish(base, states, notes, options, started, stopped=stopped)


def _run_rounds(states: list[_State], family: int, address: tuple, options: TimingOptions,
                on_progress: ProgressHook | None) -> tuple[str, str] | None:
    """Round-robin until every entry has its runs or stopped. Returns (message, kind) when
    the server stopped completing handshakes: `max_failures` in a row, counted over the
    entries that had already succeeded."""
    planned = len(states) * (options.warmup + options.runs)
    done = failed_in_row = 0
    for round_no in range(options.warmup + options.runs + 1):   # +1: room for one retry
        active = [s for s in states if s.active and len(s.samples) < options.runs]
        if not active:
            return None
        shift = round_no % len(active)
        for st in active[shift:] + active[:shift]:
            was_confirmed = st.confirmed
            counted = round_no >= options.warmup and was_confirmed
            ok = _attempt(st, family, address, options, counted)
            done += 1
            if on_progress is not None:
                on_progress(done, planned, st.plan.label)
            if ok:
                failed_in_row = 0
            elif was_confirmed:
                failed_in_row += 1
                if failed_in_row >= options.max_failures:
                    for s in states:
                        if s.active:
                            s.status = FAILING if s.samples else NOT_RUN
                    why = (f"the server stopped completing handshakes after {done} of "
                           f"{planned} (last error: {st.last_error})")
                    return why, st.last_kind or "network"
        gc.collect()
    return None


def _entry(st: _State, options: TimingOptions) -> EntryTiming:
    p = st.plan
    status = st.status or (MEASURED if st.samples else NOT_RUN)
    samples = st.samples
    last = samples[-1].outcome if samples else None

    def stats(values: list[float]) -> Stats | None:
        return Stats.of([v * 1000.0 for v in values], options.confidence)

    total = stats([s.connect_s + s.handshake_s for s in samples])
    kex_ms = kex_cost_ms(p.group, p.version, options.kex_budget) \
        if samples and p.group is not None else None
    detail = st.last_error if status != MEASURED or st.failures else None
    if status == NOT_RUN and detail is None:
        detail = "not measured: the run stopped before"
    return EntryTiming(
        version=Codepoint.version(p.version),
        group=Codepoint.group(p.group) if p.group is not None else None, label=p.label,
        status=status, detail=detail,
        offered_suite=Cipher.of(p.offered_suite) if p.offered_suite is not None else None,
        cipher_suite=Cipher.of(last.cipher_suite) if last and last.cipher_suite else None,
        runs=len(samples), failures=st.failures, hello_retry=st.hello_retry,
        connect_ms=stats([s.connect_s for s in samples]),
        handshake_ms=stats([s.handshake_s for s in samples]), total_ms=total,
        client_cpu_ms=stats([s.cpu_s for s in samples]),
        wait_ms=stats([max(0.0, s.handshake_s - s.cpu_s) for s in samples]),
        client_kex_ms=kex_ms,
        handshakes_per_s=round(1000.0 / total.median, 1) if total and total.median else None,
        samples_ms=tuple(round(s.handshake_s * 1000.0, 4) for s in samples))


def _finish(base: TimingReport, states: list[_State], notes: list[str],
            options: TimingOptions, started: float, *, stopped: tuple[str, str] | None = None,
            error: tuple[str, str] | None = None) -> TimingReport:
    entries, rankings = rank([_entry(s, options) for s in states])
    kind = (stopped or error or (None, None))[1]
    return replace(base, entries=entries, rankings=rankings, notes=tuple(notes),
                   stopped=stopped[0] if stopped else None,
                   error=error[0] if error else None, error_kind=kind,
                   duration_s=round(time.monotonic() - started, 3))


__all__ = ["Plan", "Sample", "TimingFailure", "TimingOptions", "explicit_plans",
           "kex_cost_ms", "measure_timing", "plan", "plans_for", "suite_applies",
           "time_handshake", "with_suites"]
