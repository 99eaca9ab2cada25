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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tlsprobe.errors import NetworkError, UsageError
from tlsprobe.model.starttls import StartTlsInfo
from tlsprobe.net.starttls import (PROTOCOLS, AUTO_PORTS, PreambleFailure, PreambleRecord,
                                   Problem, StartTls, StartTlsError, Status, protocol_for_port,
                                   run_preamble)
from tlsprobe.net.starttls_base import escape
from tlsprobe.net.recording import note_preamble
from tlsprobe.net.tcp import Target
from tlsprobe.net.transport import (AsyncConnector, AsyncTransport, Connector, Recorder,
                                    Segment, Transport)

__all__ = ["AsyncStartTlsConnector", "StartTlsConnector", "StartTlsSpec", "arun_preamble",
           "choose_protocol", "hold_preamble", "info_of"]

#: failures that are the server's answer, the same on every connection (not retried)
_DEFINITE = (Problem.NOT_OFFERED, Problem.REFUSED, Problem.WRONG_PROTOCOL, Problem.TOO_LONG,
             Problem.MALFORMED)


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


def choose_protocol(option: str, port: int) -> tuple[str, bool]:
    """The protocol of `--starttls OPTION` for `port`, and whether it was chosen by the
    port (`auto`); a name not in PROTOCOLS, or `auto` on a port without a well-known
    STARTTLS protocol, is a usage error."""
    name = option.strip().lower()
    if name == "auto":
        chosen = protocol_for_port(port)
        if chosen is None:
            known = ", ".join(f"{p} {n}" for p, n in sorted(AUTO_PORTS.items()))
            raise UsageError(f"--starttls auto: port {port} has no well-known STARTTLS "
                             f"protocol ({known}); give the protocol, e.g. --starttls smtp")
        return chosen, True
    if name not in PROTOCOLS:
        raise UsageError(f"--starttls: unknown protocol {option!r} (known: "
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
    `segments` its bytes with their times (the start of a --pcap-out capture)."""

    def __init__(self, inner: Connector, spec: StartTlsSpec) -> None:
        self.inner = inner
        self.spec = spec
        self.record: PreambleRecord | None = None
        self.segments: list[Segment] = []

    def __call__(self, target: Target, deadline: float) -> Transport:
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


class AsyncStartTlsConnector:
    """An `AsyncConnector` for the scan scheduler: `inner` opens TCP, then the preamble of
    the target's spec (`specs` by `Target.display`: `--starttls auto` may choose per port).
    `records` keeps the first preamble of each target."""

    def __init__(self, inner: AsyncConnector, specs: Mapping[str, StartTlsSpec]) -> None:
        self.inner = inner
        self.specs = specs
        self.records: dict[str, PreambleRecord] = {}
        self._failed: dict[str, StartTlsError] = {}

    async def __call__(self, target: Target, deadline: float) -> AsyncTransport:
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
            if exc.problem in _DEFINITE:
                self._failed.setdefault(target.display, exc)
                raise
            raise NetworkError(f"{target.display}: {exc}", "timeout", str(exc)) from None
        except BaseException:
            await transport.close()
            raise
        note_preamble(record)    # for scan --msg (net/recording.py)
        self.records.setdefault(target.display, record)
        return transport
