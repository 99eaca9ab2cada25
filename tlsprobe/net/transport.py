"""The transport interface the drivers (net/driver.py) run a TLS handshake over.

A transport is a connected, ordered byte stream to one server: it sends bytes, receives the
next chunk by a deadline, reports the peer's address and closes. It is opened by a connector
(`Connector`, `AsyncConnector`: target and deadline in, connected transport out), so a
caller that takes a connector (`probes.probe.run_probe(connect=...)`, `Scheduler.connector`)
runs unchanged over any channel:

- plain TCP (net/tcp.py `Channel`, net/tcp_async.py `AsyncTcpTransport`);
- TCP after a STARTTLS preamble (issue 13): the connector opens TCP, holds the plain-text
  dialogue (SMTP EHLO/STARTTLS, IMAP, ...) and returns the transport positioned where the
  TLS bytes begin; a failed preamble is a `NetworkError` or a not-TLS `HandshakeFailure`,
  so the callers' failure handling needs nothing new;
- a QUIC connection: a transport whose send/receive carry the TLS handshake bytes of the
  CRYPTO frames (the datagrams, packet protection and acknowledgements stay inside it).

Contract every transport keeps (the drivers rely on it, and nothing else):
- `receive(deadline)` returns the next non-empty chunk, b"" once the peer has closed its
  side, or raises `NetworkError` (cause "timeout": its own per-read wait ran out; "deadline":
  `deadline`, a time.monotonic() value, has passed; "reset", "other"); it never waits past
  `deadline`;
- `send(data)` sends all of `data` or raises `NetworkError`;
- `close()` never raises; `peer` is the (address, port) connected to.
The per-read timeout (how long one chunk may keep us waiting, as opposed to the deadline of
the whole exchange) is the transport's own, set by its connector.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from tlsprobe.net.tcp import Target


class Transport(Protocol):
    """A connected byte stream for the synchronous driver (`drive`); `local` is our end
    (the client address of a --pcap-out capture)."""

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def local(self) -> tuple[str, int]: ...

    def send(self, data: bytes) -> None: ...

    def receive(self, deadline: float) -> bytes: ...

    def close(self) -> None: ...


class AsyncTransport(Protocol):
    """A connected byte stream for the asyncio driver (`adrive`); as `Transport`."""

    @property
    def peer(self) -> tuple[str, int]: ...

    async def send(self, data: bytes) -> None: ...

    async def receive(self, deadline: float) -> bytes: ...

    async def close(self) -> None: ...


#: opens a transport to a target by a deadline (time.monotonic()); NetworkError on failure
Connector = Callable[[Target, float], Transport]
AsyncConnector = Callable[[Target, float], Awaitable[AsyncTransport]]


@dataclass(frozen=True)
class Segment:
    """Bytes that went one way at one time (for --pcap-out)."""

    from_client: bool
    data: bytes
    time: float


class Recorder:
    """A transport that keeps every byte sent and received, with its time (--pcap-out)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.segments: list[Segment] = []
        self.eof = False

    @property
    def peer(self) -> tuple[str, int]:
        return self.inner.peer

    @property
    def local(self) -> tuple[str, int]:
        return self.inner.local

    def send(self, data: bytes) -> None:
        if data:
            self.segments.append(Segment(True, data, time.time()))
            self.inner.send(data)

    def receive(self, deadline: float) -> bytes:
        data = self.inner.receive(deadline)
        if data:
            self.segments.append(Segment(False, data, time.time()))
        else:
            self.eof = True
        return data

    def close(self) -> None:
        self.inner.close()


__all__ = ["AsyncConnector", "AsyncTransport", "Connector", "Recorder", "Segment",
           "Transport"]
