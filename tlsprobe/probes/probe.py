"""A single probe: connect, run the client handshake, and turn what happened into a result.

Failures are values: the result carries `error` and `error_kind` (network, not_tls, alert,
protocol, closed) and the events seen so far, so the trace can still be printed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig
from tlsprobe.errors import NetworkError
from tlsprobe.net.tcp import Target, open_channel
from tlsprobe.probes import facts
from tlsprobe.report.model import ProbeResult
from tlsprobe.session.flow import Event

EventSink = Callable[[Event], None]


@dataclass(frozen=True)
class ProbeOptions:
    config: ClientConfig = field(default_factory=ClientConfig)
    timeout: float = 10.0
    read_timeout: float | None = None
    stop_after_first_flight: bool = True
    annotate: bool = True


@dataclass
class ProbeRun:
    """A finished probe: the result and every event, for the trace."""

    result: ProbeResult
    events: list[Event]


def _looks_like_tls(data: bytes) -> bool:
    if not data:
        return True
    if data[0] in (20, 21, 22, 23, 24):
        return len(data) < 2 or data[1] == 3
    return bool(data[0] & 0x80)  # SSLv2 record header


def _not_tls_message(data: bytes) -> str:
    text = data[:60].decode("latin-1")
    printable = "".join(c if 32 <= ord(c) < 127 else "." for c in text).strip(".")
    if data[:5] in (b"HTTP/", b"<html", b"<!DOC"):
        what = "an HTTP response"
    elif data[:4] == b"SSH-":
        what = "an SSH banner"
    elif data[:4] in (b"220 ", b"220-"):
        what = "an SMTP/FTP banner"
    else:
        what = "non-TLS data"
    return f"not a TLS server: it sent {what} ({printable[:50]!r})"


def run_probe(target: Target, options: ProbeOptions) -> ProbeRun:
    """Probe one server. Network errors, alerts and protocol errors end up in the result."""
    config = options.config
    engine = ClientHandshake(config, annotate=options.annotate,
                             stop_after_first_flight=options.stop_after_first_flight)
    t0 = time.monotonic()
    address = None
    connect_s = None
    error: tuple[str, str] | None = None
    try:
        channel = open_channel(target, timeout=options.timeout, read_timeout=options.read_timeout,
                               total_timeout=options.timeout * 3)
    except NetworkError as exc:
        return ProbeRun(facts.result_from(engine, target, None, error=(str(exc), "network")), [])
    address, connect_s = channel.address, channel.connect_time
    hs_start = time.monotonic()
    first = True
    with channel:
        try:
            channel.send(engine.start())
            while not engine.done:
                data = channel.recv()
                if first and data and not _looks_like_tls(data):
                    raise HandshakeFailure("not_tls", _not_tls_message(data))
                first = False
                if not data:
                    engine.connection_closed()
                    break
                out = engine.receive(data)
                if out:
                    channel.send(out)
        except HandshakeFailure as exc:
            error = (f"{target.display}: {exc}", exc.kind)
        except NetworkError as exc:
            if engine.server_hello is None and engine.hrr is None and "reset" in str(exc):
                error = (f"{exc} (before ServerHello)", "network")
            else:
                error = (str(exc), "network")
    hs_s = time.monotonic() - hs_start
    timings = (connect_s, hs_s, time.monotonic() - t0)
    result = facts.result_from(engine, target, address, error=error, timings=timings)
    return ProbeRun(result, engine.events)


def exit_kind_message(kind: str | None) -> str:
    return {"network": "network error", "not_tls": "not TLS", "alert": "TLS alert",
            "protocol": "protocol error", "closed": "connection closed"}.get(kind or "", "error")


__all__ = ["ProbeOptions", "ProbeRun", "run_probe", "registry"]
