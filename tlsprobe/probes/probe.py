"""A single probe: connect, run the client handshake, and turn what happened into a result.

By default the handshake is completed (both Finished messages exchanged and verified),
optionally followed by one HTTP request, and closed with close_notify; after our
close_notify the server's last records (TLS 1.3 NewSessionTickets, its own close_notify)
are read for a short while. Failures are values: the result carries `error` and
`error_kind` (network, not_tls, alert, protocol, closed) and the events seen so far, so
the trace can still be printed. Every byte sent and received is kept in `segments`, for
`--pcap-out`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from tlsprobe import registry
from tlsprobe._version import __version__
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure, Limits
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.interface import Handshake
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.escaping import quoted_bytes, wire_text
from tlsprobe.kex.dhprime import WorkDeadline, work_deadline
from tlsprobe.model.encode import started_at
from tlsprobe.model.probe import ProbeResult, Verification
from tlsprobe.model.units import seconds_text
from tlsprobe.net.driver import drive
from tlsprobe.net.starttls import PreambleRecord, StartTlsError
from tlsprobe.net.starttls_connect import StartTlsConnector, StartTlsSpec, info_of
from tlsprobe.net.tcp import Target, open_channel
from tlsprobe.net.transport import Connector, Recorder, Segment, Transport
from tlsprobe.probes import facts
from tlsprobe.session.flow import Event

DRAIN_TIMEOUT = 1.0  # seconds to wait for the server's last records after close_notify
STATUS_LINE_MAX = 8192   # bytes of an --http-get answer searched for its status line's end


@dataclass(frozen=True)
class ProbeOptions:
    config: ClientConfig = field(default_factory=ClientConfig)
    timeout: float = 10.0
    read_timeout: float | None = None
    stop_after_first_flight: bool = False
    annotate: bool = True
    http_get: str | None = None       # path of an HTTP GET sent after the handshake
    verify: bool = True               # check the certificate chain and hostname
    cafile: str | None = None         # trust store; None: the system bundle
    total_timeout: float | None = None  # the whole probe; None: 3 x timeout
    limits: Limits = field(default_factory=Limits)
    #: time.monotonic() by which the probe ends (name resolution, connect, handshake, the
    #: checks of the server's parameters); None: `total_timeout` from the call
    deadline: float | None = None
    #: --starttls: the plain-text preamble each connection holds before TLS (None: none)
    starttls: StartTlsSpec | None = None


@dataclass
class ProbeRun:
    """A finished probe: the result, every event (for the trace), the key log lines, and
    the raw conversation with its endpoints (for --pcap-out)."""

    result: ProbeResult
    events: list[Event]
    keylog_lines: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    client_address: tuple[str, int] | None = None
    server_address: tuple[str, int] | None = None
    started: float | None = None
    ended: float | None = None
    preamble: PreambleRecord | None = None    # --starttls: what was said before TLS


class _Conversation:
    """The recorded transport and the engine, for what follows the handshake (the HTTP
    request, the drain after close_notify)."""

    def __init__(self, transport: Recorder, engine: ClientHandshake, deadline: float) -> None:
        self.transport = transport
        self.engine = engine
        self.deadline = deadline

    @property
    def eof(self) -> bool:
        return self.transport.eof

    def send(self, data: bytes) -> None:
        self.transport.send(data)

    def pump(self, deadline: float | None = None) -> bool:
        """Read one chunk into the engine and send its answer; False at EOF."""
        data = self.transport.receive(self.deadline if deadline is None else deadline)
        if not data:
            return False
        self.send(self.engine.receive(data))
        return True


def http_request(path: str, host: str, port: int) -> bytes:
    """A minimal HTTP/1.1 GET that asks the server to close the connection."""
    if not path.startswith("/"):
        path = "/" + path
    authority = f"[{host}]" if ":" in host else host
    if port != 443:
        authority += f":{port}"
    return (f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: tlsprobe/{__version__}"
            f"\r\nAccept: */*\r\nConnection: close\r\n\r\n").encode("latin-1")


def _http_exchange(conv: _Conversation, options: ProbeOptions, target: Target) -> str:
    """Send the GET, read until the status line; returns it (or what happened instead)."""
    engine = conv.engine
    alpn = facts.negotiated_alpn(engine)
    if alpn not in (None, "http/1.1", "http/1.0"):
        return f"not sent: the server chose ALPN {alpn}"
    host = engine.config.server_name or target.host
    engine.send_application_data(http_request(options.http_get or "/", host, target.port))
    try:
        conv.send(engine.take_output())
    except NetworkError as exc:   # the server closed after the handshake
        return f"not sent ({exc})"
    while not _status_line_read(engine):
        try:
            if not conv.pump():
                break
        except NetworkError as exc:
            return f"no response ({exc})"
    data = bytes(engine.application_data)
    if not data:
        return "no response (connection closed)"
    line, end, _ = data.partition(b"\n")
    if not end and len(data) > STATUS_LINE_MAX:
        return f"not HTTP: no line end in the first {len(data)} bytes the server answered " \
            f"({quoted_bytes(data[:40])}...)"
    line = line.rstrip(b"\r")
    if not line.startswith(b"HTTP/"):   # an SMTP banner of an implicit-TLS port, say
        return f"not HTTP: the server answered {quoted_bytes(line)}"
    return wire_text(line[:200])   # a value from the network, as every one is


def _status_line_read(engine: ClientHandshake) -> bool:
    """The answer's first line is in (or the server closed, or sent more than a status line
    holds without a line end: reading on to --max-bytes would tell nothing more)."""
    data = engine.application_data
    return b"\n" in data or len(data) > STATUS_LINE_MAX or engine.peer_closed


def _close(conv: _Conversation) -> None:
    """Our close_notify after a completed handshake. The server may have closed first (it
    answered a 'Connection: close' request; one that leaves our request unread resets the
    connection): then it cannot go, and the result stands; what the server sent before is
    still read by `_drain` (an alert that took the handshake back, for one)."""
    try:
        conv.send(conv.engine.close())
    except NetworkError:
        pass


def _drain(conv: _Conversation) -> HandshakeFailure | None:
    """After our close_notify: read the server's last records (tickets, close_notify).

    Returns the alert that took the completed handshake back (TLS 1.3: the server checks
    our Finished, and our empty Certificate, only after we sent them), or a protocol error
    in what the server sent after the handshake (a malformed NewSessionTicket); a late
    network error or close leaves the handshake result standing. Application data ends the
    drain: the server accepted the handshake and goes on with its answer (the body of an
    --http-get response, however long: not ours to read to the end, nor to count against
    --max-bytes)."""
    answered = len(conv.engine.application_data)
    while not conv.engine.peer_closed and not conv.eof:
        try:   # each read waits at most DRAIN_TIMEOUT, as a per-read timeout would
            if not conv.pump(min(conv.deadline, time.monotonic() + DRAIN_TIMEOUT)):
                return None
            if len(conv.engine.application_data) > answered:
                return None
        except NetworkError:
            return None
        except HandshakeFailure as exc:
            return exc if exc.kind in (FailureKind.PROTOCOL, FailureKind.LIMIT) or \
                not conv.engine.handshake_complete else None
    return None


SKIPPED = Verification(False, "skipped (--no-verify)", skipped=True)


def verification_of(engine: Handshake, target: Target,
                    options: ProbeOptions) -> Verification | None:
    """The chain check of the server's certificates, as a value (None: no certificate)."""
    if not engine.verification.certificates:
        return None
    if not options.verify:
        return SKIPPED
    from tlsprobe.engine.chain import verify_with_store
    _, outcome = verify_with_store(engine.verification.certificates,
                                   engine.config.server_name or target.host, options.cafile)
    if isinstance(outcome, str):
        return Verification(False, outcome)
    return Verification(outcome.ok, outcome.message, outcome.hostname_ok,
                        outcome.code if outcome.established else None)


def tcp_connector(options: ProbeOptions, total: float) -> Connector:
    """The probe's default connector: TCP with its connect and per-read timeouts."""
    def connect(target: Target, deadline: float) -> Transport:
        return open_channel(target, timeout=options.timeout, read_timeout=options.read_timeout,
                            total_timeout=total, deadline=deadline)
    return connect


def run_probe(target: Target, options: ProbeOptions,
              connect: Connector | None = None) -> ProbeRun:
    """Probe one server over the transport `connect` opens (default: TCP). Network errors,
    alerts and protocol errors end up in the result, which says when the probe started and
    how long it took (`started_at`, `duration_s`)."""
    t0 = time.monotonic()
    run = _probe(target, options, connect)
    elapsed = time.monotonic() - t0
    run.result = replace(run.result, started_at=started_at(elapsed),
                         duration_s=round(elapsed, 3))
    return run


def _probe(target: Target, options: ProbeOptions, connect: Connector | None) -> ProbeRun:
    """`run_probe` without the result's start time and duration."""
    engine = ClientHandshake(options.config, annotate=options.annotate,
                             stop_after_first_flight=options.stop_after_first_flight,
                             read_server_flight=True, limits=options.limits)
    t0 = time.monotonic()
    started = time.time()
    total = options.total_timeout or options.timeout * 3
    deadline = options.deadline if options.deadline is not None else t0 + total
    if deadline <= t0:   # our own start-up used the time: say so, do not blame the server
        return ProbeRun(facts.result_from(engine, target, None, error=(
            (f"{target.display}: timed out: the total time limit of {seconds_text(total)} s was used up "
            f"by tlsprobe's own start-up ({t0 - deadline + total:.1f} s; a busy machine?) "
            "before connecting"), FailureKind.NETWORK)), [])
    connector = connect or tcp_connector(options, total)
    starttls = None if options.starttls is None else \
        StartTlsConnector(connector, options.starttls)
    try:
        transport = (starttls or connector)(target, deadline)
    except (NetworkError, StartTlsError) as exc:
        return _with_preamble(ProbeRun(facts.result_from(
            engine, target, None, error=(str(exc), exc.kind)), []), starttls)
    connect_s = time.monotonic() - t0
    transport.bind(engine)   # QUIC (net/quic.py): packet keys come from the engine's secrets
    recorder = Recorder(transport)
    conv = _Conversation(recorder, engine, deadline)
    error: tuple[str, FailureKind] | None = None
    http_status: str | None = None
    hs_s: float | None = None
    hs_start = time.monotonic()
    peer = transport.peer
    local = transport.local
    try:
        with work_deadline(deadline):
            try:
                drive(engine, recorder, deadline)
                hs_s = time.monotonic() - hs_start
                if engine.handshake_complete:
                    if options.http_get is not None:
                        http_status = _http_exchange(conv, options, target)
                    _close(conv)
                    refused = _drain(conv)
                    if refused is not None:
                        error = (f"{target.display}: {refused}", refused.kind)
            except HandshakeFailure as exc:
                error = (f"{target.display}: {exc}", exc.kind)
                try:
                    conv.send(engine.take_output())  # our alert, when the engine queued one
                except NetworkError:
                    pass
            except WorkDeadline as exc:   # CPU work on the server's parameters ran out of time
                error = (f"{target.display}: {exc} (total time limit of {seconds_text(total)} s)",
                         exc.kind)
            except NetworkError as exc:
                before = engine.messages.server_hello is None and engine.messages.hrr is None
                error = (f"{exc} (before ServerHello)" if before and exc.cause == "reset"
                         else str(exc), exc.kind)
    finally:
        transport.close()
    timings = (connect_s, hs_s if hs_s is not None else time.monotonic() - hs_start,
               time.monotonic() - t0)
    with work_deadline(deadline):    # facts names the DH modulus (the same bounded check)
        result = facts.result_from(engine, target, str(peer[0]), error=error, timings=timings,
                                   http_status=http_status)
    result = replace(result, verification=verification_of(engine, target, options))
    return _with_preamble(ProbeRun(result, list(engine.events), list(engine.keylog_lines),
                                   recorder.segments, (str(local[0]), int(local[1])),
                                   (str(peer[0]), int(peer[1])), started, time.time()),
                          starttls)


def _with_preamble(run: ProbeRun, connector: StartTlsConnector | None) -> ProbeRun:
    """The run with what its STARTTLS preamble said (trace and the result's `starttls`)."""
    if connector is None or connector.record is None:
        return run
    run.preamble = connector.record
    run.segments = connector.segments + run.segments   # --pcap-out: the preamble first
    run.result = replace(run.result, starttls=info_of(connector.record, connector.spec))
    return run


__all__ = ["ProbeOptions", "ProbeRun", "Segment", "http_request", "registry", "run_probe"]
