"""Connectors that hold a STARTTLS preamble on each fresh TCP connection (issue 13).

A connector (net/transport.py) opens a transport by a deadline; these wrap another one (TCP)
and, before returning its transport, run the plain-text dialogue of `--starttls PROTO` on it
with the sans-IO `StartTls` machine of net/starttls.py: `run_preamble` for the blocking
callers (the probe, timing), `arun_preamble` (the same machine over an `AsyncTransport`) for
the scan scheduler. The transport comes back positioned where the TLS bytes begin, so the one
driver (net/driver.py) takes over unchanged; every connection of a scan or timing run does
its own preamble, within the deadline its connector was given.

A preamble that fails raises `StartTlsError` (FailureKind per net/starttls_base.py:
not_tls for "not offered" or another protocol, refused, protocol, network), its message
prefixed with the target by the sync connector (the probe's error line), bare for the async
one (the audit prefixes the target). The async connector turns a silent or closing server
into a `NetworkError` (retried by the scheduler like any timeout or reset) and remembers a
definite answer (not offered, refused, another protocol) per target, so that the other
connections of that target's audit fail at once instead of asking again.

A temporary refusal (Problem.BUSY: SMTP 421/454, FTP 421, IMAP BYE, LDAP busy, ...) is asked
again on a fresh connection, with exponential backoff (`Backoff`), while the connection's
time allows; still refused, it is the error of that connection (exit 3, like a refused or
timed-out connection: the server is unavailable for now), the attempts and the time said.
In a scan, a target that refused every connection so far that way keeps that answer (its
later connections fail at once); one that has let a preamble through before goes on asking,
until GIVE_UP connections in a row have given up.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tlsprobe.errors import NetworkError, UsageError
from tlsprobe.model.starttls import StartTlsInfo
from tlsprobe.net.recording import note_preamble
from tlsprobe.net.starttls import (
    AUTO_PORTS,
    PROTOCOLS,
    PreambleFailure,
    PreambleRecord,
    Problem,
    StartTls,
    StartTlsError,
    Status,
    protocol_for_port,
    run_preamble,
)
from tlsprobe.net.starttls_base import escape
from tlsprobe.net.tcp import Target
from tlsprobe.net.transport import (
    AsyncConnector,
    AsyncTransport,
    Connector,
    Recorder,
    Segment,
    Transport,
    WrappingConnector,
)

__all__ = ["BACKOFF", "AsyncStartTlsConnector", "Backoff", "StartTlsConnector", "StartTlsSpec",
           "arun_preamble", "choose_protocol", "gave_up", "hold_preamble", "info_of"]

#: failures that are the server's answer, the same on every connection (not retried)
_DEFINITE = (Problem.NOT_OFFERED, Problem.REFUSED, Problem.WRONG_PROTOCOL, Problem.TOO_LONG,
             Problem.MALFORMED)


@dataclass(frozen=True)
class Backoff:
    """When to ask again after a temporary refusal: `first` seconds, doubled each time up to
    `cap`, then a random 0 to `spread` of it added (so that parallel connections do not come
    back together); no new attempt unless `reserve` of the window (and at least `least`
    seconds) is left for it after the pause. README.md, docs/STARTTLS.md and docs/LIMITS.md
    say these numbers (tests/starttls/test_starttls_busy.py holds them to it)."""

    first: float = 0.25
    cap: float = 2.0
    least: float = 0.5
    reserve: float = 0.2
    spread: float = 0.25

    def pause(self, attempt: int) -> float:
        """The pause before attempt number `attempt + 1` (attempt counts from 1)."""
        return min(self.cap, self.first * 2.0 ** (attempt - 1)) * (1 + random.random() * self.spread)

    def allows(self, start: float, end: float, pause: float) -> bool:
        """Is there time for another attempt after `pause`, in the window start..end?"""
        need = max(self.least, self.reserve * (end - start))
        return time.monotonic() + pause + need <= end


BACKOFF = Backoff()
#: audit connections of a target that, in a row, gave up on temporary refusals after its
#: preamble went through before: then the target is taken for unavailable (the rest of its
#: audit fails at once instead of each connection asking for seconds)
GIVE_UP = 3


def gave_up(exc: StartTlsError, attempts: int, start: float) -> StartTlsError:
    """The last temporary refusal, with how long it was asked (one line, exit 3)."""
    if attempts <= 1:
        said = "not asked again: no time left"
    else:
        said = f"still refused after {attempts} attempts in {time.monotonic() - start:.1f} s"
    failure = PreambleFailure(exc.problem, f"{exc} ({said}; try again later)")
    return StartTlsError(failure, exc.record, connected=exc.connected)


@dataclass(frozen=True)
class StartTlsSpec:
    """What `--starttls` asked for: the protocol, the XMPP `to=` domain (None: the dialogue's
    default), and whether `--starttls auto` chose the protocol by the port."""

    protocol: str
    server_name: str | None = None
    by_port: bool = False

    def note(self, port: int) -> str | None:
        """The stderr note line of `--starttls auto`: which protocol it chose."""
        if not self.by_port:
            return None
        return f"tlsprobe: note: --starttls auto: {self.protocol} (the well-known protocol " \
               f"of port {port})"


def choose_protocol(option: str, port: int, what: str = "--starttls") -> tuple[str, bool]:
    """The protocol of `--starttls OPTION` for `port`, and whether it was chosen by the
    port (`auto`); a name not in PROTOCOLS, or `auto` on a port without a well-known
    STARTTLS protocol, is a usage error (naming the option or argument `what`)."""
    name = option.strip().lower()
    if name == "auto":
        chosen = protocol_for_port(port)
        if chosen is None:
            known = ", ".join(f"{p} {n}" for p, n in sorted(AUTO_PORTS.items()))
            raise UsageError(f"{what} auto: port {port} has no well-known STARTTLS "
                             f"protocol ({known}); give the protocol, e.g. {what} smtp")
        return chosen, True
    if name not in PROTOCOLS:
        raise UsageError(f"{what}: unknown protocol {option!r} (known: "
                         f"{', '.join(PROTOCOLS)}, or auto)")
    return name, False


def info_of(record: PreambleRecord, spec: StartTlsSpec) -> StartTlsInfo:
    """The report's `starttls` object: network text escaped (starttls_base.escape)."""
    return StartTlsInfo(
        protocol=record.protocol, chosen_by="port" if spec.by_port else "option",
        banner=escape(record.banner) if record.banner is not None else None,
        capability=escape(record.capability) if record.capability is not None else None)


class _Stream:
    """A Transport as the blocking stream `run_preamble` reads: its per-read timeout and
    the deadline become the TimeoutError run_preamble turns into "no answer"."""

    def __init__(self, transport: Transport, deadline: float) -> None:
        self.transport = transport
        self.deadline = deadline

    def send(self, data: bytes) -> None:
        self.transport.send(data)

    def recv(self, size: int) -> bytes:
        try:
            return self.transport.receive(self.deadline)
        except NetworkError as exc:
            if exc.cause in ("timeout", "deadline"):
                raise TimeoutError from None
            raise


def _located(exc: StartTlsError, where: str) -> StartTlsError:
    """The same failure with the target named first (the probe's one error line)."""
    failure = PreambleFailure(exc.problem, f"{where}: {exc}")
    return StartTlsError(failure, exc.record)


def hold_preamble(transport: Transport, spec: StartTlsSpec, deadline: float,
                  where: str | None = None) -> PreambleRecord:
    """Run `spec`'s preamble on a fresh blocking transport by `deadline`; on return the next
    bytes are TLS. Raises StartTlsError, its message starting with `where` (the target) if
    given."""
    try:
        return run_preamble(_Stream(transport, deadline), spec.protocol, deadline,
                            server_name=spec.server_name)
    except StartTlsError as exc:
        if where is None:
            raise
        raise _located(exc, where) from None


class StartTlsConnector:
    """A `Connector`: `inner` opens TCP, then the preamble runs; `record` keeps what the
    last preamble exchanged (also when it failed), for the trace and the report, and
    `segments` its bytes with their times (the start of a --pcap-out capture). A temporary
    refusal is asked again (`backoff`) within the first `share` of the time to `deadline`
    (the rest is the handshake's); `attempts` counts the preambles."""

    def __init__(self, inner: Connector, spec: StartTlsSpec, *, backoff: Backoff = BACKOFF,
                 share: float = 2 / 3) -> None:
        self.inner = inner
        self.spec = spec
        self.backoff = backoff
        self.share = share
        self.record: PreambleRecord | None = None
        self.segments: list[Segment] = []
        self.attempts = 0

    def __call__(self, target: Target, deadline: float) -> Transport:
        start = time.monotonic()
        end = start + (deadline - start) * self.share
        attempts = 0
        while True:
            attempts += 1
            self.attempts = attempts
            try:
                return self._once(target, deadline)
            except StartTlsError as exc:
                if exc.problem is not Problem.BUSY:
                    raise
                pause = self.backoff.pause(attempts)
                if not self.backoff.allows(start, end, pause):
                    raise gave_up(exc, attempts, start) from None
                time.sleep(pause)

    def _once(self, target: Target, deadline: float) -> Transport:
        transport = self.inner(target, deadline)
        recorder = Recorder(transport)
        self.segments = recorder.segments
        try:
            self.record = hold_preamble(recorder, self.spec, deadline, target.display)
        except StartTlsError as exc:
            transport.close()
            self.record = exc.record
            raise
        except BaseException:
            transport.close()
            raise
        return transport


async def arun_preamble(transport: AsyncTransport, protocol: str, deadline: float, *,
                        server_name: str | None = None) -> PreambleRecord:
    """`run_preamble` over an asyncio transport: the same StartTls machine, the same
    StartTlsError (a timeout or network error as Problem.NETWORK)."""
    machine = StartTls(protocol, server_name=server_name)
    step = machine.start()
    while True:
        try:
            if step.send:
                await transport.send(step.send)
            if step.status is Status.READY:
                return machine.record
            if step.status is Status.FAILED and step.failure is not None:
                raise StartTlsError(step.failure, machine.record)
            data = await transport.receive(deadline)
        except NetworkError as exc:
            failure = machine.timed_out() if exc.cause in ("timeout", "deadline") else \
                PreambleFailure(Problem.NETWORK, f"{protocol}: {exc.reason} while waiting "
                                f"for {machine.waiting}")
            raise StartTlsError(failure, machine.record) from None
        step = machine.receive_data(data)


class AsyncStartTlsConnector(WrappingConnector):
    """An `AsyncConnector` for the scan scheduler: `inner` opens TCP, then the preamble of
    the target's spec (`specs` by `Target.display`: `--starttls auto` may choose per port).
    `records` keeps the first preamble of each target (`preamble`: the report's `starttls`
    object). A temporary refusal is asked again (`backoff`) until the connection's
    deadline."""

    def __init__(self, inner: AsyncConnector, specs: Mapping[str, StartTlsSpec], *,
                 backoff: Backoff = BACKOFF) -> None:
        super().__init__(inner)
        self.specs = specs
        self.backoff = backoff
        self.records: dict[str, PreambleRecord] = {}
        self._failed: dict[str, StartTlsError] = {}
        self._reached: set[str] = set()   # targets whose preamble reached TLS at least once
        self._given_up: dict[str, int] = {}   # connections in a row that gave up, by target

    def preamble(self, target: Target) -> StartTlsInfo | None:
        """What the target's first preamble said (None before any)."""
        record = self.records.get(target.display)
        spec = self.specs.get(target.display)
        return None if record is None or spec is None else info_of(record, spec)

    async def __call__(self, target: Target, deadline: float) -> AsyncTransport:
        start = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                return await self._once(target, deadline)
            except StartTlsError as exc:
                if exc.problem is not Problem.BUSY or not exc.connected:
                    raise
                pause = self.backoff.pause(attempts)
                if self.backoff.allows(start, deadline, pause):
                    await asyncio.sleep(pause)
                    continue
                final = gave_up(exc, attempts, start)
                row = self._given_up[target.display] = self._given_up.get(target.display,
                                                                          0) + 1
                # every answer so far "not now", or GIVE_UP connections in a row gave up:
                # the later connections get this answer at once
                if target.display not in self._reached or row >= GIVE_UP:
                    self._failed.setdefault(target.display, final)
                raise final from None

    async def _once(self, target: Target, deadline: float) -> AsyncTransport:
        known = self._failed.get(target.display)
        if known is not None:   # the same answer, without asking again
            raise StartTlsError(PreambleFailure(known.problem, str(known)), known.record,
                                connected=False)
        transport = await self.inner(target, deadline)
        try:
            spec = self.specs[target.display]
            record = await arun_preamble(transport, spec.protocol, deadline,
                                         server_name=spec.server_name)
        except StartTlsError as exc:
            note_preamble(exc.record)
            await transport.close()
            self.records.setdefault(target.display, exc.record)
            if exc.problem is Problem.BUSY:
                raise
            if exc.problem in _DEFINITE:
                self._failed.setdefault(target.display, exc)
                raise
            raise NetworkError(f"{target.display}: {exc}", "closed" if exc.problem is
                               Problem.CLOSED else "timeout", str(exc)) from None
        except BaseException:
            await transport.close()
            raise
        note_preamble(record)    # for scan --msg (net/recording.py)
        if target.display not in self._reached:   # the first that reached TLS over refusals
            self.records[target.display] = record
        self._reached.add(target.display)
        self._given_up[target.display] = 0
        return transport
