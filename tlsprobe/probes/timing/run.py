"""Handshake timing: N full handshakes per group (and optionally per suite), ranked by cost.

What is timed (probes/timing/plan.py): each entry offers one group (with its TLS 1.3 key
share) from an explicit list or from what the audit's enumeration finds the server accepts,
and lets the server pick the suite, or pins one. The blocking driver (net/driver.py) runs the
engine over TCP; the address is resolved once. Entries run round-robin (the order rotated
each round, so a drift in load spreads over all of them), the first `warmup` rounds
uncounted. Per handshake: `perf_counter` around the TCP connect and the
handshake (ClientHello sent to our Finished sent), and this thread's CPU time over the
handshake, splitting our work from the wait for the server; the GC is paused meanwhile.
Failures are values: an entry that never completes is "refused" when the server answered
(an alert, a close) and "inconclusive" when it did not (two time-outs or network errors), one
that keeps failing after succeeding "failing", and when `max_failures` handshakes in a row
fail the run stops early.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace

from tlsprobe import kex, registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.model.encode import started_at
from tlsprobe.model.probe import Cipher, Codepoint
from tlsprobe.model.timing import (
    FAILING,
    INCONCLUSIVE,
    MEASURED,
    MISMATCH,
    NOT_RUN,
    REFUSED,
    EntryStatus,
    EntryTiming,
    TimingReport,
    figures,
    rank,
)
from tlsprobe.net.driver import drive
from tlsprobe.net.starttls import Problem, StartTlsError
from tlsprobe.net.starttls_connect import BACKOFF, StartTlsSpec, gave_up, hold_preamble
from tlsprobe.net.tcp import SockAddr, Target, connect_address, open_channel
from tlsprobe.probes.audit.scheduler import Outcome, broad_sigalgs, outcome_of
from tlsprobe.probes.timing.plan import Plan, TimingOptions, plans_for
from tlsprobe.registry import AlertDescription

ProgressHook = Callable[[int, int, str], None]   # (handshakes done, planned, entry label)


@dataclass(frozen=True)
class Sample:
    connect_s: float
    handshake_s: float
    cpu_s: float
    outcome: Outcome
    hello_retry: bool = False   # the server answered a HelloRetryRequest (a group or a cookie)


class TimingFailure(Exception):
    """One handshake that did not complete; `kind` as the probe's failure kinds."""

    def __init__(self, message: str, kind: FailureKind, alert: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.alert = alert   # the description of the alert the server sent, if any


# -- one handshake -----------------------------------------------------------------------------
def time_handshake(family: int, address: SockAddr, config: ClientConfig,
                   timeout: float, starttls: StartTlsSpec | None = None) -> Sample:
    """Connect and complete one handshake (net/driver.py drive) within `timeout` seconds;
    raises TimingFailure when it does not complete. With `starttls` the preamble runs after
    the connect, inside the limit but outside both timed spans; a temporary refusal is asked
    again on a new connection (net/starttls_connect.py Backoff) within the first two thirds
    of the limit, and the connect span is the last connection's."""
    target = Target(str(address[0]), int(address[1]))
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.monotonic()
        deadline = start + timeout
        attempts = 0
        while True:
            attempts += 1
            t0 = time.perf_counter()
            try:
                channel = connect_address(target, family, address, timeout=timeout,
                                          deadline=deadline)
            except NetworkError as exc:
                raise _network_failure(exc, "connect", timeout) from None
            connected = time.perf_counter()
            if starttls is None:
                break
            try:
                hold_preamble(channel, starttls, deadline)   # run_timing names the target
                break
            except StartTlsError as exc:
                channel.close()
                failure = exc
                if exc.problem is Problem.BUSY:
                    pause = BACKOFF.pause(attempts)
                    if BACKOFF.allows(start, start + timeout * 2 / 3, pause):
                        time.sleep(pause)
                        continue
                    failure = gave_up(exc, attempts, start)
                raise TimingFailure(str(failure), failure.kind) from None
        with channel:
            t1 = time.perf_counter()
            c0 = time.thread_time()
            hs = ClientHandshake(config, annotate=False, stop_after_first_flight=False)
            try:
                drive(hs, channel, deadline)
            except HandshakeFailure as exc:
                raise TimingFailure(str(exc), exc.kind, exc.alert) from None
            except NetworkError as exc:
                raise _network_failure(exc, "the server", timeout) from None
            t2 = time.perf_counter()
            c1 = time.thread_time()
            if not hs.handshake_complete:
                raise TimingFailure(f"handshake not completed: "
                                    f"{hs.incomplete_reason or 'stopped'}", FailureKind.PROTOCOL)
            with suppress(NetworkError):
                channel.send(hs.close())   # close_notify, outside the timed span
            return Sample(connected - t0, t2 - t1, c1 - c0, outcome_of(hs),
                          hs.messages.hrr is not None)
    finally:
        if gc_was_enabled:
            gc.enable()


def _network_failure(exc: NetworkError, waiting_for: str, timeout: float) -> TimingFailure:
    if exc.cause in ("timeout", "deadline"):
        return TimingFailure(f"timed out waiting for {waiting_for} ({timeout:g} s)", exc.kind)
    return TimingFailure(exc.reason, exc.kind)


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
    last_kind: FailureKind | None = None
    status: EntryStatus | None = None     # set when the entry stops: refused, mismatch, failing
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
        offered = (f"{registry.group_label(p.group)} (its ECDSA certificate's curve "
                   f"{registry.group_name(p.companion)} listed after it)" if p.companion
                   is not None else f"{registry.group_label(p.group)} alone")
        return f"offered {offered}, the server used {got}"
    return None


def _refusal_hint(p: Plan, alert: int | None, explicit: bool) -> str:
    """What a refusal says beyond its alert. A protocol_version alert refuses the version
    (the hello offers that one alone), not the group. A TLS 1.2 ECDHE group offered alone
    may be refused only because the server's ECDSA certificate is on another curve, which
    the client must list too (the enumeration finds that curve and lists it; an explicit
    group list cannot know it)."""
    if alert == AlertDescription.protocol_version:
        return (f"; the server refuses {registry.version_name(p.version)} itself, "
                "whatever the group")
    info = registry.group(p.group) if p.group is not None else None
    if (not explicit or p.version != TLS12 or p.companion is not None or info is None
            or info.kind == "ffdhe"):
        return ""
    return ("; if the server's certificate is ECDSA, TLS 1.2 needs its curve offered too: "
            "run without --timing-groups to have it found and listed")


def _attempt(st: _State, family: int, address: SockAddr, options: TimingOptions,
             counted: bool) -> bool:
    """One handshake for one entry; False when it failed."""
    st.attempts += 1
    try:
        sample = time_handshake(family, address, st.plan.config, options.timeout,
                                options.starttls)
    except TimingFailure as exc:
        st.failures += 1
        st.consecutive += 1
        st.last_error, st.last_kind = str(exc), exc.kind
        if not st.confirmed and exc.kind != FailureKind.NETWORK:
            st.status = REFUSED   # an alert or close is an answer
            st.last_error += _refusal_hint(st.plan, exc.alert, bool(options.groups))
        elif not st.confirmed and st.attempts >= 2:
            st.status = INCONCLUSIVE   # a network error gets a retry; two are no answer
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
    st.hello_retry = st.hello_retry or sample.hello_retry
    if counted:
        st.samples.append(sample)
    return True


def _resolve(target: Target, timeout: float) -> tuple[int, SockAddr, str]:
    """Connect once (as the probe does, with its error messages) to fix the address."""
    channel = open_channel(target, timeout=timeout)
    with channel:
        family, address = channel.sockaddr
        return family, address, channel.address


def _preflight(family: int, address: SockAddr, options: TimingOptions) -> TimingFailure | None:
    """One ordinary handshake first: a server that is not TLS or does not answer is told
    at once, not after a whole enumeration."""
    config = ClientConfig(server_name=options.server_name, versions=options.versions,
                          alpn=(), signature_algorithms=broad_sigalgs())
    try:
        time_handshake(family, address, config, options.timeout, options.starttls)
    except TimingFailure as exc:
        if exc.kind in (FailureKind.NETWORK, FailureKind.NOT_TLS, FailureKind.REFUSED):
            raise
        return exc
    return None


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
    try:
        refused = _preflight(family, address, options)
    except TimingFailure as exc:
        return _finish(base, [], [], options, started, error=(str(exc), exc.kind))
    plans, notes = plans_for(target, options)
    if not plans:
        why = str(refused) if refused else "the enumeration found none we can compute"
        return _finish(base, [], notes, options, started,
                       error=(f"no key exchange group to time: {why}",
                              refused.kind if refused else FailureKind.ALERT))
    states = [_State(p) for p in plans]
    stopped = _run_rounds(states, family, address, options, on_progress)
    error = None
    if not stopped and not any(s.samples for s in states):
        first = states[0]
        where = f"{first.plan.label}, {registry.version_name(first.plan.version)}"
        error = (f"no handshake completed ({where}: {first.last_error})",
                 first.last_kind or FailureKind.ALERT)
    return _finish(base, states, notes, options, started, stopped=stopped, error=error)


def _run_rounds(states: list[_State], family: int, address: SockAddr,
                options: TimingOptions, on_progress: ProgressHook | None
                ) -> tuple[str, FailureKind] | None:
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
                    return why, st.last_kind or FailureKind.NETWORK
        gc.collect()
    return None


def _entry(st: _State, options: TimingOptions) -> EntryTiming:
    p, runs = st.plan, st.samples
    status = st.status or (MEASURED if runs else NOT_RUN)
    last = runs[-1].outcome if runs else None
    detail = st.last_error if status != MEASURED or st.failures else None
    return EntryTiming(
        version=Codepoint.version(p.version),
        group=Codepoint.group(p.group) if p.group is not None else None, label=p.label,
        status=status, detail=detail or ("the run stopped before" if status == NOT_RUN else None),
        offered_suite=Cipher.of(p.offered_suite) if p.offered_suite is not None else None,
        cipher_suite=Cipher.of(last.cipher_suite) if last and last.cipher_suite else None,
        failures=st.failures, hello_retry=st.hello_retry,
        client_kex_ms=kex_cost_ms(p.group, p.version, options.kex_budget)
        if runs and p.group is not None else None,
        **figures([(s.connect_s, s.handshake_s, s.cpu_s) for s in runs], options.confidence))


def _finish(base: TimingReport, states: list[_State], notes: list[str],
            options: TimingOptions, started: float, *, stopped: tuple[str, FailureKind] | None = None,
            error: tuple[str, FailureKind] | None = None) -> TimingReport:
    entries, rankings = rank([_entry(s, options) for s in states])
    kind = (stopped or error or (None, None))[1]
    return replace(base, entries=entries, rankings=rankings, notes=tuple(notes),
                   stopped=stopped[0] if stopped else None,
                   error=error[0] if error else None, error_kind=kind,
                   duration_s=round(time.monotonic() - started, 3),
                   started_at=started_at(time.monotonic() - started))


__all__ = ["Plan", "Sample", "TimingFailure", "TimingOptions", "kex_cost_ms", "measure_timing",
           "time_handshake"]
