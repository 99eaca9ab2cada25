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

Every hook a caller uses on a channel is declared here with a no-op default, so that no
caller asks a transport or a connector what it has (`getattr`; tests/net/test_channels.py
checks): a transport's `bind(engine)` (QUIC's packet keys), `local` and, for async
transports, `delivered(limit)` (the peer's TCP acknowledged what was sent) and
`finish_sending()` (a half-close: TCP's FIN while the answer is still read); an async
connector's `adapt(config)` (the hello's form on this channel, or `NotApplicable`) and
`preamble(target)` (what a STARTTLS preamble said) and `engine_limits(limits)` (the
engine's bounds on this channel: QUIC counts --max-records in packets itself). TCP, STARTTLS and QUIC transports and
connectors subclass these protocols, so mypy --strict checks that they conform.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tlsprobe.net.target import Target

if TYPE_CHECKING:
    from tlsprobe.engine.client import ClientHandshake, Limits
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.model.starttls import StartTlsInfo


class Transport(Protocol):
    """A connected byte stream for the synchronous driver (`drive`); `local` is our end
    (the client address of a --pcap-out capture). Transports subclass it and so inherit
    the default of the `bind` hook."""

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def local(self) -> tuple[str, int]: ...

    def send(self, data: bytes) -> None: ...

    def receive(self, deadline: float) -> bytes: ...

    def close(self) -> None: ...

    def bind(self, engine: ClientHandshake) -> None:
        """Hook, called with the handshake's engine before the first `send`: QUIC takes
        its packet keys from the engine's key schedule. Default: nothing."""
        return None   # noqa: RET501  (a body: not abstract for mypy)


class AsyncTransport(Protocol):
    """A connected byte stream for the asyncio driver (`adrive`); as `Transport`, with
    `local` None when the socket cannot tell (the default)."""

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def local(self) -> tuple[str, int] | None:
        return None

    async def send(self, data: bytes) -> None: ...

    async def receive(self, deadline: float) -> bytes: ...

    async def close(self) -> None: ...

    def bind(self, engine: ClientHandshake) -> None:
        """As `Transport.bind`. Default: nothing."""
        return None   # noqa: RET501  (a body: not abstract for mypy)

    def hello(self, config: ClientConfig) -> ClientConfig:
        """Hook: the hello this connection sends, from the connector's `adapt`ed one,
        with what belongs to this connection alone (QUIC: its own Source Connection ID in
        the transport parameters). Default: `config` as it is."""
        return config

    async def delivered(self, limit: float) -> bool | None:
        """Hook: wait until the peer's TCP has acknowledged every byte sent so far, at
        most `limit` seconds: True when it has, False when it had not by then, None when
        the channel cannot tell (the default, at once). A check that must know its bytes
        arrived on their own (two TCP segments) waits for this instead of a fixed pause."""
        return None

    async def finish_sending(self) -> None:
        """Hook: nothing more will be sent on this connection: TCP sends its FIN now (a
        half-close; the server's answer is still read), so that a server which serves one
        connection at a time is free as soon as it has answered, instead of waiting a
        round trip for the client's close. Default: nothing (QUIC)."""
        return None   # noqa: RET501  (a body: not abstract for mypy)


@dataclass(frozen=True)
class NotApplicable:
    """A hello the channel cannot carry (`AsyncConnector.adapt`): no connection is made,
    and `reason` is the inconclusive answer."""

    reason: str


#: opens a transport to a target by a deadline (time.monotonic()); NetworkError on failure
Connector = Callable[[Target, float], Transport]


class AsyncConnector(Protocol):
    """Opens an `AsyncTransport` to a target by a deadline (time.monotonic(); NetworkError
    on failure), for the scan scheduler. Connectors subclass it and inherit the defaults of
    the hooks the scheduler and the audit call; a connector that wraps another (recording,
    pacing, a STARTTLS preamble over TCP) passes them on (`WrappingConnector`)."""

    async def __call__(self, target: Target, deadline: float) -> AsyncTransport: ...

    def adapt(self, config: ClientConfig) -> ClientConfig | NotApplicable:
        """The form of a hello this channel sends (QUIC: net/quic_hello.py), or
        NotApplicable for one it cannot carry. Default: the hello as it is."""
        return config

    def preamble(self, target: Target) -> StartTlsInfo | None:
        """What the plain-text preamble before TLS said on `target` (the report's
        `starttls` object), None without one (the default)."""
        return None

    def engine_limits(self, limits: Limits) -> Limits:
        """The engine's bounds for a connection of this channel given the user's `limits`
        (--max-*). Default: the same."""
        return limits


class WrappingConnector(AsyncConnector):
    """An `AsyncConnector` over `inner` that passes the hooks on to it; subclasses define
    `__call__`."""

    def __init__(self, inner: AsyncConnector) -> None:
        self.inner = inner

    def adapt(self, config: ClientConfig) -> ClientConfig | NotApplicable:
        return self.inner.adapt(config)

    def preamble(self, target: Target) -> StartTlsInfo | None:
        return self.inner.preamble(target)

    def engine_limits(self, limits: Limits) -> Limits:
        return self.inner.engine_limits(limits)


class WrappingTransport(AsyncTransport):
    """An `AsyncTransport` over `inner` that passes `peer`, `local`, `bind`, `hello`,
    `delivered`, `finish_sending` and `close` on; subclasses change `send` and `receive` (recording,
    watching)."""

    def __init__(self, inner: AsyncTransport) -> None:
        self.inner = inner

    @property
    def peer(self) -> tuple[str, int]:
        return self.inner.peer

    @property
    def local(self) -> tuple[str, int] | None:
        return self.inner.local

    def bind(self, engine: ClientHandshake) -> None:
        self.inner.bind(engine)

    def hello(self, config: ClientConfig) -> ClientConfig:
        return self.inner.hello(config)

    async def delivered(self, limit: float) -> bool | None:
        return await self.inner.delivered(limit)

    async def finish_sending(self) -> None:
        await self.inner.finish_sending()

    async def send(self, data: bytes) -> None:
        await self.inner.send(data)

    async def receive(self, deadline: float) -> bytes:
        return await self.inner.receive(deadline)

    async def close(self) -> None:
        await self.inner.close()


@dataclass(frozen=True)
class Segment:
    """Bytes that went one way at one time (for --pcap-out)."""

    from_client: bool
    data: bytes
    time: float


class Recorder(Transport):
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

    def bind(self, engine: ClientHandshake) -> None:
        self.inner.bind(engine)


__all__ = ["AsyncConnector", "AsyncTransport", "Connector", "NotApplicable", "Recorder",
           "Segment", "Transport", "WrappingConnector", "WrappingTransport"]
