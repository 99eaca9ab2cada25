"""Polite asyncio connection scheduler: one job = one connection = one ClientConfig.

Each job drives the sans-IO `ClientHandshake` with the asyncio driver (net/driver.py adrive)
over a transport its connector opens (TCP by default: net/tcp_async.py) until the server has
answered the question the job asks (a HelloRetryRequest, a ServerHello, the first flight, or
the CertificateVerify of a full TLS 1.3 handshake) and returns an `Outcome` value
(probes/audit/outcome.py); nothing is signalled with exceptions. Pacing (net/pacing.py): per
host at most `per_host` connections at once, starts `delay` seconds apart, a target that
queues parallel connections one at a time (`TargetGate`); resets and timeouts are retried
with exponential backoff. A hello the channel cannot carry (`adapt`) is not sent.
A refused connect is not retried: nothing listens there, which is a clear answer (the audit
reports it as a network error, exit 3). What still fails after the retries is
"inconclusive", never a refusal: only an alert or a clean close from the server counts as
"the server said no", and a clean close only when a second connection gets it too
(TargetRunner.run).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final, TypeVar

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure, Limits
from tlsprobe.engine.config import ClientConfig, conformant_shares
from tlsprobe.engine.interface import Handshake
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.kex.dhprime import work_deadline
from tlsprobe.model.units import seconds_text
from tlsprobe.net.driver import Progress, adrive
from tlsprobe.net.pacing import Pacing, Watch, Watched
from tlsprobe.net.recording import TAPE, Recording, Tape, taping
from tlsprobe.net.tcp import Target
from tlsprobe.net.tcp_async import TcpConnector
from tlsprobe.net.transport import AsyncConnector, AsyncTransport, NotApplicable
from tlsprobe.probes.audit.outcome import (
    ALERT,
    CLOSED,
    HELLO_RETRY,
    INCONCLUSIVE,
    SERVER_HELLO,
    STOP_FLIGHT,
    STOP_HELLO,
    STOP_VERIFY,
    Job,
    Outcome,
    Stop,
    finished,
    outcome_of,
)

if TYPE_CHECKING:
    from tlsprobe.net.starttls import StartTlsError

ConnectionHook = Callable[[Target, str], None]
T = TypeVar("T")

TOTAL_FACTOR = 3  # a connection may last this many per-read timeouts in all


def _starttls_error() -> type[StartTlsError]:
    """The error of a --starttls preamble, for the one `except` that handles it: the
    STARTTLS machines (net/starttls*.py) are imported when a connection fails, not by every
    scan (start-up); only a scan with --starttls can raise it."""
    from tlsprobe.net.starttls import StartTlsError
    return StartTlsError


class _Retryable(Exception):
    """A network failure worth retrying (reset, timeout, a STARTTLS preamble the server
    closed); `kind`: what it is when it lasts through the retries."""

    def __init__(self, reason: str, kind: FailureKind = FailureKind.NETWORK) -> None:
        super().__init__(reason)
        self.kind = kind


#: the stops at which a job's client has nothing more to send: its FIN goes with the hello
HALF_CLOSED_STOPS = (STOP_HELLO, STOP_FLIGHT)


#: the engine's bounds (scan --max-*) inside a conversation a check drives itself (set by
#: `Scheduler.converse` around its `talk`; the check's engines read it by `check_limits`)
CHECK_LIMITS: ContextVar[Limits | None] = ContextVar("tlsprobe_check_limits", default=None)


def check_limits() -> Limits | None:
    """The scan's engine bounds for a check's own handshakes (None: the engine's defaults)."""
    return CHECK_LIMITS.get()


@dataclass
class Scheduler:
    """Runs jobs against targets with a per-host cap, pacing and retries."""

    per_host: int = 3
    delay: float = 0.0
    retries: int = 2
    timeout: float = 5.0
    backoff: float = 0.25
    on_connection: ConnectionHook | None = None
    connections: Counter[tuple[str, str]] = field(default_factory=Counter)
    retried: Counter[str] = field(default_factory=Counter)
    #: per target, hellos answered (a ServerHello or an alert) only on a retry after a reset
    #: or a timeout of their own: the path is flaky (a retry alone after silence in company
    #: is not counted: that is a server queueing connections, net/pacing.py TargetGate)
    transient: Counter[str] = field(default_factory=Counter)
    addresses: dict[str, str] = field(default_factory=dict)
    internal_errors: dict[str, str] = field(default_factory=dict)  # target -> first bug
    #: opens each connection (net/transport.py); None: TCP with `timeout`
    connector: AsyncConnector | None = None
    #: records every connection (scan --msg/--pcap-out/--keylog, net/recording.py): a tape
    #: per attempt, filled by a RecordingConnector in `connector`; None: nothing is kept
    recording: Recording | None = None
    #: import cryptography.x509 beside the first connection (preload_x509): set by the audit
    #: when a check reads certificates (audit_target); a group audit reads none and imports
    #: no `cryptography` at all
    x509_ahead: bool = False
    #: the engine's bounds on each connection (scan --max-*; None: the engine's defaults),
    #: as the channel applies them (`engine_limits`: QUIC counts packets, not records)
    limits: Limits | None = None
    #: the per-host caps, start spacing and per-target gates (net/pacing.py)
    pacing: Pacing = field(init=False)

    def __post_init__(self) -> None:
        if self.connector is None:
            self.connector = TcpConnector(self.timeout)
        self.pacing = Pacing(self.per_host, self.delay)

    @property
    def engine_limits(self) -> Limits:
        """The bounds each connection's engine holds (`limits` on this channel)."""
        return self.channel.engine_limits(self.limits or Limits())

    @property
    def channel(self) -> AsyncConnector:   # the connector, set by __post_init__
        assert self.connector is not None
        return self.connector

    def count(self, target: Target) -> dict[str, int]:
        """Connections per phase for one target."""
        return {phase: n for (t, phase), n in self.connections.items() if t == target.display}

    async def run(self, target: Target, job: Job) -> Outcome:
        config = self.channel.adapt(job.config)   # QUIC: the hello's QUIC form
        if isinstance(config, NotApplicable):   # a hello the channel cannot carry: not sent
            return Outcome(INCONCLUSIVE, reason=config.reason, attempts=0)
        if config is not job.config:
            job = replace(job, config=config)
        gate = self.pacing.gate(target)
        last, last_kind = "", FailureKind.NETWORK
        first: Watch | None = None   # a connection starved in company, asked again alone
        failed = False               # retried after a failure of its own (not in company)
        for attempt in range(self.retries + 1):
            if attempt:
                self.retried[target.display] += 1
                if first is None:   # waiting to be alone is the pause of the other kind
                    failed = True
                    await self.pacing.back_off(self.backoff, attempt)
            watch = Watch()
            outcome: Outcome | None = None
            async with self.pacing.slot(target, alone=first is not None):
                try:
                    outcome = await self._attempt(target, job, watch)
                except _Retryable as exc:
                    last, last_kind = str(exc), exc.kind
                except Exception as exc:  # noqa: BLE001 -- a bug: this job's answer is lost, no other
                    return self._internal_error(target, exc)
            if first is not None:
                gate.learn(first, watch)
            first = watch if await gate.again_alone(watch, own=False) else None
            if first is not None and attempt < self.retries:
                continue    # a refusal or silence in company: asked again alone
            if outcome is not None:
                if failed and (outcome.answered or outcome.status == ALERT):
                    self.transient[target.display] += 1
                return _with_attempts(outcome, attempt + 1)
        tries = f"{self.retries + 1} attempts" if self.retries else "1 attempt, no retries"
        return Outcome(INCONCLUSIVE, reason=f"{last} (after {tries})",
                       attempts=self.retries + 1, kind=last_kind)

    async def converse(self, target: Target, phase: str,
                       talk: Callable[[AsyncTransport, float], Awaitable[T]]) -> T | Outcome:
        """One connection an active check drives itself (probes/checks/base.py): opened by
        the connector under the per-host cap and pacing, counted under `phase`, handed to
        `talk(transport, deadline)` and closed. Not retried (the check decides whether to
        ask again). A connection that could not be opened, or a network failure inside
        `talk`, is an inconclusive Outcome with the reason; other exceptions propagate."""
        gate = self.pacing.gate(target)
        first: Watch | None = None
        while True:
            watch = Watch()
            # recorded like a job's connection (--pcap-out, --msg: its bytes; the check
            # drives its own engine, so no trace events; its secrets reach the tape from
            # net/driver.py's adrive)
            with taping(self.recording, target, phase) as tape:
                try:
                    async with self.pacing.slot(target, alone=first is not None):
                        got = await self._converse_on(target, phase, talk, watch)
                finally:
                    if tape is not None:
                        tape.finish()
            if first is not None:
                gate.learn(first, watch)
                return got
            if not (self.retries and await gate.again_alone(watch, own=True)):
                return got
            # starved in company: whatever the check made of the silence, it is asked
            # again alone (one of the --retries)
            first = watch
            self.retried[target.display] += 1

    async def _converse_on(self, target: Target, phase: str,
                           talk: Callable[[AsyncTransport, float], Awaitable[T]],
                           watch: Watch) -> T | Outcome:
        async with self.pacing.gate(target).watching(watch):
            try:
                transport = await self._open(target, phase, watch)
            except NetworkError as exc:
                return Outcome(INCONCLUSIVE, reason=exc.reason, kind=FailureKind.NETWORK)
            if isinstance(transport, Outcome):
                return transport
            bounds = CHECK_LIMITS.set(self.engine_limits)
            try:
                with work_deadline(time.monotonic() + TOTAL_FACTOR * self.timeout):
                    return await talk(transport, time.monotonic() + TOTAL_FACTOR * self.timeout)
            except NetworkError as exc:
                return Outcome(INCONCLUSIVE, reason=exc.reason, kind=FailureKind.NETWORK)
            finally:
                CHECK_LIMITS.reset(bounds)
                await transport.close()

    async def _open(self, target: Target, phase: str, watch: Watch) -> AsyncTransport | Outcome:
        """A connection through the connector, counted under `phase` (the job's and the
        check's alike), its reads noted in `watch`. A NetworkError goes to the caller, who
        retries or not; the server's answer to --starttls is an inconclusive Outcome
        (counted when it was reached)."""
        watch.connecting, made = True, False
        try:
            transport: AsyncTransport = Watched(
                await self.channel(target, time.monotonic() + self.timeout), watch)
            made = True
        except NetworkError as exc:
            watch.failed(exc)
            raise
        except _starttls_error() as exc:     # evaluated only when an exception gets here
            made = exc.connected
            if exc.connected:
                self.connections[(target.display, phase)] += 1
            return Outcome(INCONCLUSIVE, reason=str(exc), kind=exc.kind)
        finally:
            await self.pacing.gate(target).opened(watch, made)
        self.connections[(target.display, phase)] += 1
        self.addresses.setdefault(target.display, transport.peer[0])
        if self.on_connection is not None:
            self.on_connection(target, phase)
        return transport

    def _internal_error(self, target: Target, exc: Exception) -> Outcome:
        """An unexpected exception in one job (a bug in tlsprobe): the job is inconclusive
        and the target is marked (`internal_errors`) so that its report says so; the other
        jobs and targets go on. TLSPROBE_DEBUG=1 prints the traceback on stderr."""
        reason = f"internal error: {type(exc).__name__}: {exc}"
        self.internal_errors.setdefault(target.display, reason)
        if os.environ.get("TLSPROBE_DEBUG") == "1":
            traceback.print_exception(exc)
        return Outcome(INCONCLUSIVE, reason=reason, kind=FailureKind.INTERNAL)

    async def _attempt(self, target: Target, job: Job, watch: Watch) -> Outcome:
        # the connection's tape (None: nothing recorded) is current for the whole attempt:
        # the RecordingConnector numbers it when TCP opens, _converse fills in the rest
        with taping(self.recording, target, job.phase) as tape:
            async with self.pacing.gate(target).watching(watch):
                return await self._attempt_on_tape(target, job, tape, watch)

    async def _attempt_on_tape(self, target: Target, job: Job, tape: Tape | None,
                               watch: Watch) -> Outcome:
        try:
            transport = await self._open(target, job.phase, watch)
        except NetworkError as exc:
            if tape is not None:
                tape.finish()
            if exc.cause in ("refused", "unknown_host"):
                # Nothing listens, or no such name: retrying would only repeat the answer
                # (and cost backoff time).
                return Outcome(INCONCLUSIVE, reason=exc.reason, kind=FailureKind.NETWORK)
            raise _Retryable(exc.reason, FailureKind.CLOSED if exc.cause == "closed" else
                             FailureKind.NETWORK) from None
        if isinstance(transport, Outcome):   # the server's answer to --starttls: not retried
            if tape is not None:
                tape.finish()
            return transport
        try:
            # CPU work on the server's parameters (the DH prime check) stops by the
            # connection's deadline as well
            with work_deadline(time.monotonic() + TOTAL_FACTOR * self.timeout):
                return await self._converse(transport, job, target, watch)
        finally:
            await transport.close()

    async def _converse(self, transport: AsyncTransport, job: Job,
                        target: Target | None = None, watch: Watch | None = None) -> Outcome:
        """One job's conversation (the asyncio driver) and its outcome; with a recording,
        its trace events and secrets go on the current tape."""
        # STOP_VERIFY: TLS 1.3 reads (decrypts and verifies) the server's flight, sending
        # nothing; TLS 1.2 stops after the ServerHelloDone as usual.
        tape = TAPE.get()
        trace = tape is not None and self.recording is not None and self.recording.trace
        if self.x509_ahead:
            preload_x509()
        hs = ClientHandshake(transport.hello(job.config), annotate=trace,
                             stop_after_first_flight=True,
                             read_server_flight=job.stop == STOP_VERIFY,
                             names_only=job.names_only, limits=self.engine_limits)
        seen = Progress()
        transport.bind(hs)   # QUIC: packet keys from the engine's secrets
        try:
            if target is not None and watch is not None and \
                    job.stop in HALF_CLOSED_STOPS and self.pacing.half_close(target):
                return await self._talk_half_closed(hs, transport, job, seen, target, watch)
            return await self._talk(hs, transport, job, seen)
        finally:
            if tape is not None:
                tape.finish(hs.events if trace else (), hs.keylog_lines)

    async def _talk(self, hs: Handshake, transport: AsyncTransport, job: Job,
                    seen: Progress) -> Outcome:
        try:
            await adrive(hs, transport, time.monotonic() + TOTAL_FACTOR * self.timeout,
                         until=lambda h: finished(h, job.stop), progress=seen)
            return outcome_of(hs)
        except HandshakeFailure as exc:
            return _failed(hs, exc, seen)
        except NetworkError as exc:
            return self._network(hs, exc, job)

    async def _talk_half_closed(self, hs: Handshake, transport: AsyncTransport, job: Job,
                                seen: Progress, target: Target, watch: Watch) -> Outcome:
        """`_talk` with the client's FIN right after its hello (net/pacing.py says why).
        The server has the whole hello first, so a TLS server answers as it would have;
        what the FIN changes is what follows the answer (an alert for the early end: in
        the same chunk, it does not change the answer) and what a middlebox may do: drop
        the connection unanswered, perhaps only now and then. Such a loss reads like a
        flaky network's (`_talk`'s rules: a bare close is asked again, a reset retried),
        and makes the target's connections close whole from then on, so that every
        later connection, the one that asks again included, is answered as before."""
        stop = job.stop
        try:
            await adrive(hs, transport, time.monotonic() + TOTAL_FACTOR * self.timeout,
                         until=lambda h: finished(h, stop), progress=seen, half_close=True)
        except HandshakeFailure as exc:
            if finished(hs, stop):   # the answer, then (same chunk) what our FIN brought
                return outcome_of(hs)   # as a whole close, which stops reading at the answer
            if exc.kind == FailureKind.CLOSED:   # closed before the whole answer
                self.pacing.half_closed(target, str(exc))
            return _failed(hs, exc, seen)
        except NetworkError as exc:
            if exc.cause != "deadline" and (exc.cause != "timeout" or not watch.crowded):
                self.pacing.half_closed(target, exc.reason)
            return self._network(hs, exc, job)
        if not finished(hs, stop):
            self.pacing.half_closed(target, "ended before the answer")
        return outcome_of(hs)

    def _network(self, hs: Handshake, exc: NetworkError, job: Job) -> Outcome:
        """A network failure during the conversation: what the server said so far, or a
        retry (a reset, a per-read timeout), or inconclusive (the total limit)."""
        if exc.cause == "deadline":
            # A server that trickles bytes: not retried, the answer stays open.
            limit = f"total time limit of {seconds_text(TOTAL_FACTOR * self.timeout)} s per " \
                "connection reached"
            if hs.messages.server_hello is not None:
                return outcome_of(hs, reason=limit)
            # a timeout (exit 3 when nothing else answered), not a protocol error
            return Outcome(INCONCLUSIVE, reason=f"timed out: server too slow, {limit}",
                           kind=FailureKind.NETWORK)
        if exc.cause == "timeout":
            if hs.messages.server_hello is not None and job.stop != STOP_HELLO:
                return outcome_of(hs, reason="timed out waiting for the rest of the "
                                  "server's flight")
            raise _Retryable(exc.reason) from None   # as the transport says it (QUIC: what
            # came and was ignored, net/quic.py QuicCore._timeout), as the probe does
        if exc.cause == "refused":   # QUIC: an ICMP port unreachable after our Initial
            return Outcome(INCONCLUSIVE, reason=exc.reason, kind=FailureKind.NETWORK)
        if exc.cause == "reset":   # as the transport names it (QUIC: a stateless reset)
            if hs.messages.server_hello is not None:
                return outcome_of(hs, reason=f"{exc.reason}, after the ServerHello")
            raise _Retryable(exc.reason) from None
        raise _Retryable(exc.reason) from None


#: alerts that refuse a hello for what every hello of the audit has in common, not for the
#: versions, suites, groups or schemes it asks about: no_application_protocol (our ALPN:
#: over QUIC every hello offers h3, which a DNS-over-QUIC server refuses), unrecognized_name
#: (the server name), access_denied (the client): never "not supported"
NOT_THE_OFFER: Final = {
    120: "the server refused the ALPN protocols offered (over QUIC: h3, unless scan --quic "
         "--alpn LIST names others)",
    112: "the server refused the server name sent (--sni NAME sends another, --no-sni none)",
    49: "the server denied this client access"}


def _failed(hs: Handshake, exc: HandshakeFailure, seen: Progress) -> Outcome:
    """The outcome of a handshake the engine (or the not-TLS verdict) stopped."""
    if hs.messages.server_hello is not None:
        # The ServerHello answered the question; note what went wrong after it.
        return outcome_of(hs, reason=str(exc))
    if exc.kind == FailureKind.ALERT:
        hint = NOT_THE_OFFER.get(exc.alert or 0)
        if hint is not None:   # a refusal, but not of what the audit asks about
            return Outcome(INCONCLUSIVE, alert=exc.alert, kind=exc.kind,
                           reason=f"{exc}: {hint}, not the versions, suites or groups")
        return Outcome(ALERT, alert=exc.alert, reason=str(exc), kind=exc.kind)
    if exc.kind == FailureKind.CLOSED:   # a QUIC transport error is no refusal
        return Outcome(CLOSED if exc.refused else INCONCLUSIVE, reason=str(exc),
                       kind=exc.kind)
    if hs.messages.hrr is not None:
        return outcome_of(hs, reason=str(exc))
    if exc.kind in (FailureKind.NOT_TLS, FailureKind.LIMIT):   # a limit of ours: no fault
        return Outcome(INCONCLUSIVE, reason=str(exc), kind=exc.kind)
    if hs.hello_violation is not None:
        return Outcome(INCONCLUSIVE, reason=f"protocol error: {exc}", kind=FailureKind.PROTOCOL,
                       violation=hs.hello_violation)
    if seen.sslv2:
        return Outcome(INCONCLUSIVE, reason=f"protocol error: the server answered in "
                       f"SSLv2 ({exc})", kind=FailureKind.PROTOCOL)
    return Outcome(INCONCLUSIVE, reason=f"protocol error: {exc}", kind=FailureKind.PROTOCOL)


def _with_attempts(outcome: Outcome, attempts: int) -> Outcome:
    return outcome if attempts == 1 else replace(outcome, attempts=attempts)


def broad_sigalgs() -> tuple[int, ...]:
    """Every registered signature scheme, so no server declines for want of one, and TLS
    1.2's DSA ones (dsa_sha1 to dsa_sha512, not TLS 1.3 schemes): without them a server with
    a DSA certificate that picks a DHE_DSS suite refuses the hello (OpenSSL does)."""
    return tuple(s.code for s in registry.all_signature_schemes()
                 if s.iana or s.code & 0xFF == 2 and 2 <= s.code >> 8 <= 6)


@dataclass
class TargetRunner:
    """The scheduler bound to one target, with the offer defaults every check shares."""

    target: Target
    scheduler: Scheduler
    server_name: str | None = None
    disagreements: list[str] = field(default_factory=list)
    #: outcomes that established something (an answer or a refusal), and the first one that
    #: did not: an audit with none of the former never reached the server at all
    conclusive: int = 0
    first_unsure: Outcome | None = None
    #: connections a caller drove itself that got no TLS answer: counted by the caller
    #: (client simulation) for a network failure, by `seen_tls` for a peer that is not TLS
    unreached: int = 0
    #: the trust store the certificate checks judge a chain against (scan --cafile; None:
    #: the system bundle), as the cert phase's trust verdict does
    cafile: str | None = None
    #: the chain of each leaf key type the cert phase read, the default one's first
    #: (probes/audit/certs.py chains_by_type), and why its search for them is not complete:
    #: what the certificate checks judge besides their own connection's chain
    chains: dict[str, Outcome] = field(default_factory=dict)
    chains_note: str | None = None
    #: the last hello the server answered, and where its connection stopped: what
    #: confirm.still_answered asks when no hello of the caller's own was answered
    answered_hello: tuple[ClientConfig, Stop] | None = None
    #: hellos closed without an answer and answered when asked again (`run`): a path or a
    #: limiter that drops connections, so a bare close elsewhere proves nothing either
    closed_answered: int = 0
    #: hellos refused with an alert and answered when asked again: a limiter's alerts, so
    #: an alert elsewhere is no longer the server's word either (`alerts`)
    alert_answered: int = 0

    @property
    def transient(self) -> int:
        """Hellos the server answered only on a retry after a reset or a timeout: the path
        is flaky, so a reset or silence elsewhere proves nothing (probes/audit/confirm.py)."""
        return self.scheduler.transient[self.target.display]

    def flaky(self) -> str | None:
        """What made the path look flaky so far (a reset or a timeout a retry answered, a
        bare close answered when asked again), one clause; None: nothing did."""
        seen = []
        if self.transient > 0:
            n = self.transient
            seen.append(f"the path reset or timed out {n} ordinary hello{'s' if n > 1 else ''} "
                        "that a retry then answered")
        if self.closed_answered > 0:
            n = self.closed_answered
            seen.append(f"{n} hello{'s' if n > 1 else ''} closed without an answer "
                        f"{'were' if n > 1 else 'was'} answered when asked again")
        alerts = self.alerts()
        if alerts is not None:
            seen.append(alerts)
        return " and ".join(seen) or None

    def alerts(self) -> str | None:
        """What made the path's alerts look like a limiter's (hellos refused with an alert
        and answered when asked again), one clause; None: nothing did."""
        n = self.alert_answered
        if n == 0:
            return None
        return (f"{n} hello{'s' if n > 1 else ''} refused with an alert "
                f"{'were' if n > 1 else 'was'} answered when asked again")

    def answered_after(self, kind: str) -> None:
        """A hello refused with `kind` (a close, an alert) was answered when asked again."""
        if kind == CLOSED:
            self.closed_answered += 1
        elif kind == ALERT:
            self.alert_answered += 1

    def config(self, versions: tuple[int, ...], **kw: Any) -> ClientConfig:
        """A ClientConfig for an audit connection: no ALPN, every signature scheme, and the
        key shares in the order of supported_groups (RFC 8446 section 4.2.8; a server may
        refuse anything else, which would then be mistaken for an answer to the question)."""
        kw.setdefault("signature_algorithms", broad_sigalgs())
        kw.setdefault("alpn", ())
        config = ClientConfig(server_name=self.server_name, versions=versions, **kw)
        if config.key_share_groups:
            config = replace(config, key_share_groups=conformant_shares(
                config.offered_groups(), config.key_share_groups))
        return config

    async def run(self, config: ClientConfig, phase: str, stop: Stop = STOP_HELLO, *,
                  confirm: bool | None = None, names_only: bool = False) -> Outcome:
        """One connection's answer. A refusal is asked again once on a second connection
        when it is a bare close (a flaky network or a middlebox drops connections that way,
        so it proves nothing alone), with `confirm` True always (a negative verdict that can
        fail CI), with False never (the caller confirms otherwise). Refused again: that
        refusal, `confirmed`; closed twice on a path that has shown itself flaky (`flaky`:
        a periodic dropper closes two hellos of one question when others come between),
        inconclusive. Answered: the answer (a real alert answered differently is
        noted in `disagreements`). Else inconclusive. `names_only`: Job.names_only."""
        job = Job(config, phase, stop, names_only)
        out = self._seen(await self.scheduler.run(self.target, job), job)
        again_if = out.status == CLOSED if confirm is None else confirm
        if not out.refused or not again_if:
            return out
        again = self._seen(await self.scheduler.run(self.target, job), job)
        seen = self.flaky() if CLOSED == out.status == again.status else None
        if seen is not None:   # two bare closes on a path that drops connections
            return replace(again, status=INCONCLUSIVE, kind=FailureKind.NETWORK, reason=(
                f"connection closed without an answer, twice, but {seen}: on this path a "
                "closed connection proves nothing"))
        if again.refused:
            return replace(again, confirmed=True)
        if again.answered:
            self.answered_after(out.status)
            if out.status == ALERT:
                self.disagreements.append(f"{phase}: the same hello got {out.describe()}, "
                                          f"then {again.describe()}")
            return again
        return replace(again, reason=f"{out.describe()}, then on a second connection: "
                       f"{again.describe()}")

    def seen_tls(self, failure: HandshakeFailure | None) -> None:
        """A connection a caller drove itself (`Scheduler.converse`: client simulation)
        ended in `failure` (None: the handshake went as far as asked). Only a peer that is
        not TLS leaves the target unreached; any other end is an answer of a TLS server."""
        if failure is None or failure.kind != FailureKind.NOT_TLS:
            self.conclusive += 1
            return
        self.unreached += 1
        if self.first_unsure is None:
            self.first_unsure = Outcome(INCONCLUSIVE, reason=str(failure),
                                        kind=FailureKind.NOT_TLS)

    def seen_unreached(self, out: Outcome) -> None:
        """A connection a caller drove itself that got no TLS answer (refused, reset,
        timed out): `out` is the first such, unless one came before."""
        if self.first_unsure is None:
            self.first_unsure = out

    def _seen(self, out: Outcome, job: Job | None = None) -> Outcome:
        if job is not None and out.answered:
            self.answered_hello = (job.config, job.stop)
        if out.conclusive:
            self.conclusive += 1
        elif self.first_unsure is None and out.attempts:   # 0: not sent (scan --quic)
            self.first_unsure = out
        return out

    def connections(self, phase: str) -> int:
        return self.scheduler.connections[(self.target.display, phase)]


_PRELOADING: list[bool] = []


def preload_x509() -> None:
    """Import cryptography's X.509 module in a thread of its own, once, when the first
    connection is up, for an audit that reads certificates (`Scheduler.x509_ahead`): every
    certificate a server sends is parsed with it (engine/guards.py), and its import (its name parser's regular expressions, email.utils: about 0.03 s of CPU,
    an eighth of a group audit's instructions) would otherwise run when the first one
    arrives, while the server waits for the client. Started here it runs while the first
    connections wait for their answers: through a slow network the time is hidden; on
    loopback it is spent as before (the main thread waits for the import lock if it needs
    the module first)."""
    if _PRELOADING or "cryptography.x509" in sys.modules:
        return
    _PRELOADING.append(True)
    threading.Thread(target=_import_x509, name="tlsprobe-x509", daemon=True).start()


def _import_x509() -> None:
    import cryptography.x509  # noqa: F401 - see preload_x509


__all__ = ["ALERT", "CHECK_LIMITS", "CLOSED", "HELLO_RETRY", "INCONCLUSIVE", "SERVER_HELLO",
           "STOP_FLIGHT", "STOP_HELLO", "STOP_VERIFY", "Job", "Outcome", "Scheduler",
           "TargetRunner", "broad_sigalgs", "check_limits", "outcome_of"]
