"""Polite asyncio connection scheduler: one job = one connection = one ClientConfig.

Each job drives the sans-IO `ClientHandshake` over an asyncio stream until the server has
answered the question the job asks (a HelloRetryRequest, a ServerHello, the first flight, or
the CertificateVerify of a full TLS 1.3 handshake) and returns an `Outcome` value; nothing
is signalled with exceptions. Per host at most `per_host` connections run at once, starts
are spaced by `delay` seconds, and resets and timeouts are retried with exponential backoff.
A refused connect is not retried: nothing listens there, which is a clear answer (the audit
reports it as a network error, exit 3). What still fails after the retries is
"inconclusive", never a refusal: only an alert or a clean close from the server counts as
"the server said no", and a clean close only when a second connection gets it too
(TargetRunner.run).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from collections.abc import Callable

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig, conformant_shares
from tlsprobe.kex.dhprime import DhPrimeCheck, check_dh_prime, work_deadline
from tlsprobe.net.tcp import AddrInfo, Target, host_name_problem, resolve_async
from tlsprobe.probes.dhgroups import dh_group_name
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import SERVER, ApplicationDataEvent
from tlsprobe.wire.record import looks_like_tls

# Outcome.status values
HELLO_RETRY = "hello_retry_request"
SERVER_HELLO = "server_hello"
ALERT = "alert"
CLOSED = "closed"
INCONCLUSIVE = "inconclusive"

# Stop conditions of a job
STOP_HELLO = "hello"            # at the ServerHello (or HelloRetryRequest)
STOP_FLIGHT = "flight"          # after the server's first flight (TLS 1.2 ServerHelloDone)
STOP_VERIFY = "verify"          # TLS 1.3: after the decrypted CertificateVerify

ConnectionHook = Callable[[Target, str], None]


@dataclass(frozen=True)
class Outcome:
    """What one connection established.

    `status`: hello_retry_request, server_hello, alert, closed (a refusal), or inconclusive
    (`reason` says why). For TLS 1.3 `group` is the ServerHello key_share group; for TLS 1.2
    the ServerKeyExchange named curve, or the RFC 7919 codepoint of a recognised DH prime;
    `dh_check` is the verdict on the DH modulus (prime, safe prime, composite; kex/dhprime).
    """

    status: str
    version: int | None = None
    cipher_suite: int | None = None
    group: int | None = None
    hrr_group: int | None = None
    dh_name: str | None = None
    dh_bits: int | None = None
    dh_check: DhPrimeCheck | None = None
    explicit_curve: bool = False
    signature_scheme: int | None = None
    certificates: tuple[bytes, ...] = ()
    alert: int | None = None
    reason: str = ""
    attempts: int = 1
    decrypted: bool = False         # the TLS 1.3 encrypted flight was decrypted
    confirmed: bool = False         # a refusal seen on a second connection too

    @property
    def answered(self) -> bool:
        return self.status in (HELLO_RETRY, SERVER_HELLO)

    @property
    def refused(self) -> bool:
        return self.status in (ALERT, CLOSED)

    @property
    def conclusive(self) -> bool:
        return self.status != INCONCLUSIVE

    def describe(self) -> str:
        """One line for notes: 'alert handshake_failure (40)', 'timed out', ..."""
        if self.status == ALERT and self.alert is not None:
            return f"alert {registry.alert_name(self.alert)} ({self.alert})"
        if self.status == CLOSED:
            return "connection closed without an answer"
        if self.status == HELLO_RETRY and self.hrr_group is not None:
            return f"HelloRetryRequest for {registry.group_label(self.hrr_group)}"
        if self.status == SERVER_HELLO:
            return f"ServerHello {registry.version_name(self.version or 0)}"
        return self.reason or self.status


@dataclass(frozen=True)
class Job:
    """One connection: what to offer, where to stop, and the phase it is counted under."""

    config: ClientConfig
    phase: str
    stop: str = STOP_HELLO


TOTAL_FACTOR = 3  # a connection may last this many per-read timeouts in all


class _Retryable(Exception):
    """A network failure worth retrying (reset, timeout)."""


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
    addresses: dict[str, str] = field(default_factory=dict)
    internal_errors: dict[str, str] = field(default_factory=dict)  # target -> first bug
    _sems: dict[str, asyncio.Semaphore] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    _next_start: dict[str, float] = field(default_factory=dict)
    _lookups: dict[tuple[str, int], asyncio.Future[list[AddrInfo]]] = field(
        default_factory=dict)

    def count(self, target: Target) -> dict[str, int]:
        """Connections per phase for one target."""
        return {phase: n for (t, phase), n in self.connections.items() if t == target.display}

    async def run(self, target: Target, job: Job) -> Outcome:
        host = target.host.lower()
        sem = self._sems.setdefault(host, asyncio.Semaphore(max(1, self.per_host)))
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self.retried[target.display] += 1
                pause = self.backoff * (2 ** (attempt - 1))
                await asyncio.sleep(pause * (1 + random.random() / 2))
            async with sem:
                await self._pace(host)
                try:
                    outcome = await self._attempt(target, job)
                except _Retryable as exc:
                    last = str(exc)
                    continue
                except Exception as exc:    # a bug: this job's answer is lost, no other
                    return self._internal_error(target, exc)
            return _with_attempts(outcome, attempt + 1)
        tries = f"{self.retries + 1} attempts" if self.retries else "1 attempt, no retries"
        return Outcome(INCONCLUSIVE, reason=f"{last} (after {tries})",
                       attempts=self.retries + 1)

    def _internal_error(self, target: Target, exc: Exception) -> Outcome:
        """An unexpected exception in one job (a bug in tlsprobe): the job is inconclusive
        and the target is marked (`internal_errors`) so that its report says so; the other
        jobs and targets go on. TLSPROBE_DEBUG=1 prints the traceback on stderr."""
        reason = f"internal error: {type(exc).__name__}: {exc}"
        self.internal_errors.setdefault(target.display, reason)
        if os.environ.get("TLSPROBE_DEBUG") == "1":
            traceback.print_exception(exc)
        return Outcome(INCONCLUSIVE, reason=reason)

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

    async def _attempt(self, target: Target, job: Job) -> Outcome:
        try:
            reader, writer = await asyncio.wait_for(self._open(target), self.timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise _Retryable("connect timed out") from None
        except ConnectionRefusedError:
            # Nothing listens: retrying would only repeat the answer (and cost backoff time).
            return Outcome(INCONCLUSIVE, reason="connection refused")
        except socket.gaierror as exc:
            return Outcome(INCONCLUSIVE, reason=f"unknown host ({exc.strerror})")
        except UnicodeError as exc:     # the IDNA encoding refused the name ('a..b')
            return Outcome(INCONCLUSIVE, reason=f"unknown host (not a valid host name: "
                           f"{host_name_problem(target.host) or exc})")
        except OSError as exc:
            raise _Retryable(exc.strerror or str(exc)) from None
        self.connections[(target.display, job.phase)] += 1
        peer = writer.get_extra_info("peername")
        if peer:
            self.addresses.setdefault(target.display, str(peer[0]))
        if self.on_connection is not None:
            self.on_connection(target, job.phase)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        try:
            # CPU work on the server's parameters (the DH prime check) stops by the
            # connection's deadline as well (_converse: the loop's clock is monotonic)
            with work_deadline(time.monotonic() + TOTAL_FACTOR * self.timeout):
                return await self._converse(reader, writer, job)
        finally:
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except (OSError, asyncio.TimeoutError, TimeoutError):
                pass

    async def _open(self, target: Target) -> tuple[asyncio.StreamReader,
                                                   asyncio.StreamWriter]:
        """Resolve the name (once per target and run, in a thread nothing waits for at exit:
        net/tcp.py resolve_async) and connect to the first address that accepts."""
        key = (target.host.lower(), target.port)
        lookup = self._lookups.get(key)
        if lookup is None or (lookup.done() and (lookup.cancelled() or
                                                 lookup.exception() is not None)):
            lookup = self._lookups[key] = asyncio.ensure_future(
                resolve_async(target.host, target.port))
        infos = await asyncio.shield(lookup)   # one job giving up leaves the lookup running
        last: OSError = OSError("no address")
        for family, _, _, _, address in infos:
            try:
                return await asyncio.open_connection(address[0], address[1], family=family)
            except OSError as exc:
                last = exc
        raise last

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        job: Job) -> Outcome:
        # STOP_VERIFY: TLS 1.3 reads (decrypts and verifies) the server's flight, sending
        # nothing; TLS 1.2 stops after the ServerHelloDone as usual.
        hs = ClientHandshake(job.config, annotate=False, stop_after_first_flight=True,
                             read_server_flight=job.stop == STOP_VERIFY)
        first = True
        sslv2 = False   # the answer began with an SSLv2 record header
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TOTAL_FACTOR * self.timeout
        try:
            writer.write(hs.start())
            await writer.drain()
            while True:
                remaining = deadline - loop.time()
                try:
                    if remaining <= 0:
                        raise asyncio.TimeoutError
                    data = await asyncio.wait_for(reader.read(65536),
                                                  min(self.timeout, remaining))
                except (asyncio.TimeoutError, TimeoutError):
                    if deadline - loop.time() <= 0:
                        # A server that trickles bytes: not retried, the answer stays open.
                        limit = f"total time limit of {TOTAL_FACTOR * self.timeout:.1f} s " \
                                "per connection reached"
                        if hs.server_hello is not None:
                            return outcome_of(hs, reason=limit)
                        # a timeout (exit 3 when nothing else answered), not a protocol error
                        return Outcome(INCONCLUSIVE, reason=f"timed out: server too slow, "
                                       f"{limit}")
                    if hs.server_hello is not None and job.stop != STOP_HELLO:
                        return outcome_of(hs, reason="timed out waiting for the rest of the "
                                          "server's flight")
                    raise _Retryable("timed out waiting for the server") from None
                if not data:
                    hs.connection_closed()
                    return outcome_of(hs)
                if first and looks_like_tls(data) is False:
                    verdict = _not_tls(data)
                    if verdict is not None:
                        return Outcome(INCONCLUSIVE, reason=verdict)
                    # TLS- or SSLv2-shaped but broken: the record layer names the fault.
                if first:
                    sslv2 = bool(data[0] & 0x80)
                first = False
                out = hs.receive(data)
                if _finished(hs, job):
                    return outcome_of(hs)
                if out:
                    writer.write(out)
                    await writer.drain()
        except HandshakeFailure as exc:
            if hs.server_hello is not None:
                # The ServerHello answered the question; note what went wrong after it.
                return outcome_of(hs, reason=str(exc))
            if exc.kind == "alert":
                return Outcome(ALERT, alert=exc.alert, reason=str(exc))
            if exc.kind == "closed":
                return Outcome(CLOSED, reason=str(exc))
            if hs.hrr is not None:
                return outcome_of(hs, reason=str(exc))
            if sslv2:
                return Outcome(INCONCLUSIVE, reason=f"protocol error: the server answered in "
                               f"SSLv2 ({exc})")
            return Outcome(INCONCLUSIVE, reason=f"protocol error: {exc}")
        except (ConnectionResetError, BrokenPipeError) as exc:
            if hs.server_hello is not None:
                return outcome_of(hs, reason="connection reset after the ServerHello")
            raise _Retryable("connection reset by peer") from exc
        except OSError as exc:
            raise _Retryable(exc.strerror or str(exc)) from None


def _not_tls(data: bytes) -> str | None:
    """The verdict on first bytes that are no valid TLS record header: None when they still
    look like a TLS record (content type 20..26, major version 3; e.g. a length over the
    limit) or an SSLv2 record, which the engine then reports as a protocol error, as the
    probe does; else "not TLS: ..." with a printable snippet, or the first bytes in hex."""
    if data[0] & 0x80 or (data[0] in range(20, 27) and (len(data) < 2 or data[1] == 3)):
        return None
    text = "".join(c if 32 <= ord(c) < 127 else "." for c in data[:40].decode("latin-1"))
    text = text.strip(".")
    what = "an HTTP response" if data.startswith(b"HTTP/") else \
        "an SSH banner" if data.startswith(b"SSH-") else "non-TLS data"
    shown = repr(text) if sum(c != "." for c in text) >= 3 else \
        "first bytes " + data[:8].hex(" ")
    return f"not TLS: the server sent {what} ({shown})"


def _finished(hs: ClientHandshake, job: Job) -> bool:
    if hs.hrr is not None and hs.server_hello is None:
        # The HelloRetryRequest answers group, suite and version questions.
        return job.stop != STOP_VERIFY
    if hs.server_hello is None:
        return False
    if job.stop == STOP_HELLO:
        return True
    if job.stop == STOP_VERIFY and _version(hs) >= 0x0304:
        if HandshakeType.certificate_verify in hs.flight.messages or hs.done:
            return True
        # An engine that cannot decrypt the TLS 1.3 flight shows it as opaque records.
        return any(isinstance(ev, ApplicationDataEvent) and ev.direction == SERVER and
                   not ev.decrypted for ev in hs.events)
    return hs.done or hs.first_flight_done


def _version(hs: ClientHandshake) -> int:
    return hs.server_hello.selected_version if hs.server_hello is not None else 0


def _with_attempts(outcome: Outcome, attempts: int) -> Outcome:
    return outcome if attempts == 1 else replace(outcome, attempts=attempts)


def outcome_of(hs: ClientHandshake, reason: str = "") -> Outcome:
    """Read the answer off a handshake that got at least a ServerHello or an HRR."""
    if hs.server_hello is None:
        if hs.hrr is not None:
            return Outcome(HELLO_RETRY, version=hs.hrr.selected_version,
                           cipher_suite=hs.hrr.cipher_suite, hrr_group=hs.hrr.hrr_selected_group)
        return Outcome(INCONCLUSIVE, reason=reason or "no ServerHello")
    sh = hs.server_hello
    version = sh.selected_version
    group = dh_name = dh_bits = sig = None
    dh_check: DhPrimeCheck | None = None
    explicit = False
    if version >= 0x0304:
        share = sh.key_share
        group = share[0] if share else None
    ske = hs.flight.messages.get(HandshakeType.server_key_exchange)
    if ske is not None:
        named = getattr(ske, "named_curve", None)
        prime = getattr(ske, "dh_p", None)
        explicit = getattr(ske, "explicit_curve", None) is not None
        if named is not None:
            group = named
        elif prime:
            p = int.from_bytes(prime, "big")
            dh_bits = p.bit_length()
            dh_name = dh_group_name(p)
            dh_check = check_dh_prime(p)
            if dh_name and dh_name.startswith("ffdhe"):
                group = registry.parse_group(dh_name)
        sig = getattr(ske, "algorithm", None)
    cv = hs.flight.messages.get(HandshakeType.certificate_verify)
    if cv is not None:
        sig = getattr(cv, "algorithm", getattr(cv, "signature_scheme", sig))
    certs: tuple[bytes, ...] = tuple(getattr(hs, "certificates", None) or ())
    cert_msg = hs.flight.messages.get(HandshakeType.certificate)
    if not certs and cert_msg is not None:
        from tlsprobe.probes.facts import certificates_of
        certs = tuple(certificates_of(cert_msg))
    if cv is None and not reason and getattr(hs, "incomplete_reason", None):
        reason = str(hs.incomplete_reason)
    return Outcome(SERVER_HELLO, version=version, cipher_suite=sh.cipher_suite, group=group,
                   hrr_group=hs.hrr.hrr_selected_group if hs.hrr is not None else None,
                   dh_name=dh_name, dh_bits=dh_bits, dh_check=dh_check,
                   explicit_curve=explicit,
                   signature_scheme=sig, certificates=certs, reason=reason,
                   decrypted=cv is not None)


def broad_sigalgs() -> tuple[int, ...]:
    """Every registered signature scheme, so no server declines for want of one."""
    return tuple(s.code for s in registry.all_signature_schemes() if s.iana)


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

    def config(self, versions: tuple[int, ...], **kw: object) -> ClientConfig:
        """A ClientConfig for an audit connection: no ALPN, every signature scheme, and the
        key shares in the order of supported_groups (RFC 8446 section 4.2.8; a server may
        refuse anything else, which would then be mistaken for an answer to the question)."""
        kw.setdefault("signature_algorithms", broad_sigalgs())
        kw.setdefault("alpn", ())
        config = ClientConfig(server_name=self.server_name, versions=versions, **kw)  # type: ignore[arg-type]
        if config.key_share_groups:
            config = replace(config, key_share_groups=conformant_shares(
                config.offered_groups(), config.key_share_groups))
        return config

    async def run(self, config: ClientConfig, phase: str, stop: str = STOP_HELLO, *,
                  confirm: bool | None = None) -> Outcome:
        """One connection's answer. A refusal is asked again once on a second connection
        when it is a bare close (a flaky network or a middlebox drops connections that way,
        so it proves nothing alone), with `confirm` True always (a negative verdict that can
        fail CI), with False never (the caller confirms otherwise). Refused again: that
        refusal, `confirmed`. Answered: the answer (a real alert answered differently is
        noted in `disagreements`). Else inconclusive."""
        job = Job(config, phase, stop)
        out = self._seen(await self.scheduler.run(self.target, job))
        again_if = out.status == CLOSED if confirm is None else confirm
        if not out.refused or not again_if:
            return out
        again = self._seen(await self.scheduler.run(self.target, job))
        if again.refused:
            return replace(again, confirmed=True)
        if again.answered:
            if out.status == ALERT:
                self.disagreements.append(f"{phase}: the same hello got {out.describe()}, "
                                          f"then {again.describe()}")
            return again
        return replace(again, reason=f"{out.describe()}, then on a second connection: "
                       f"{again.describe()}")

    def _seen(self, out: Outcome) -> Outcome:
        if out.conclusive:
            self.conclusive += 1
        elif self.first_unsure is None:
            self.first_unsure = out
        return out

    def connections(self, phase: str) -> int:
        return self.scheduler.connections[(self.target.display, phase)]
