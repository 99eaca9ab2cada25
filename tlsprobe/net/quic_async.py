"""QUIC for asyncio callers (the scan scheduler, `scan --quic`): an `AsyncConnector` whose
transports carry the TLS handshake in QUIC packets over UDP, as net/quic.py does for the
probe (the same QuicCore: connection, retransmission timer, timeouts).

One connector serves a whole scan. Every connection picks fresh random connection IDs, a
Destination Connection ID (the server's Initial keys and its routing come from it) and our
Source Connection ID, so that neither links a scan's connections nor lets a relay or a
middlebox routing by CID take one connection's packets for another's. The audit builds its
ClientHellos before a connection exists, with the connector's placeholder CID in the
quic_transport_parameters (initial_source_connection_id, RFC 9000 7.3, must name the
connection's): the transport's `hello` puts its own there before the engine is made. Each
connection has its own UDP socket too.

`adapt` turns an audit hello into its QUIC form (net/quic_hello.py, the rule the probe
applies too: TLS 1.3 and QUIC's suites only, ALPN h3 unless the hello names protocols, our
transport parameters, no session ticket); a hello QUIC cannot carry (no TLS 1.3, RFC 9001
4.2) gets `NotApplicable`. Received datagrams wait in a
bounded queue (`MAX_QUEUED`; more are dropped, as a network would).
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import replace

from tlsprobe.engine.client import Limits
from tlsprobe.engine.config import ClientConfig
from tlsprobe.errors import NetworkCause, NetworkError
from tlsprobe.net.quic import QuicCore, _text, engine_limits
from tlsprobe.net.quic_hello import NO_TLS13, quic_hello
from tlsprobe.net.quic_info import QuicInfo
from tlsprobe.net.quic_params import client_parameters
from tlsprobe.net.quic_wire import QUIC_V1, new_connection_ids
from tlsprobe.net.shared import SharedLookups
from tlsprobe.net.tcp import AddrInfo, Target, cause_of
from tlsprobe.net.transport import AsyncConnector, AsyncTransport, NotApplicable

MAX_QUEUED = 64          # datagrams waiting to be read per connection
NOT_APPLICABLE = NO_TLS13   # the note of the audit sections of other versions


class _Datagrams(asyncio.DatagramProtocol):
    """Received datagrams (and socket errors such as ICMP port unreachable) in a queue."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | OSError] = asyncio.Queue()

    def datagram_received(self, data: bytes, addr: object) -> None:
        if self.queue.qsize() < MAX_QUEUED:
            self.queue.put_nowait(data)

    def error_received(self, exc: Exception) -> None:
        if isinstance(exc, OSError) and self.queue.qsize() < MAX_QUEUED:
            self.queue.put_nowait(exc)


class AsyncQuicTransport(QuicCore, AsyncTransport):
    """One QUIC connection over an asyncio datagram endpoint (an `AsyncTransport`)."""

    def __init__(self, endpoint: asyncio.DatagramTransport, datagrams: _Datagrams,
                 target: Target, info: QuicInfo, read_timeout: float,
                 limits: Limits | None = None) -> None:
        super().__init__(target, info, read_timeout, limits)
        self.endpoint = endpoint
        self.datagrams = datagrams
        peer = endpoint.get_extra_info("peername")
        self._peer = (str(peer[0]), int(peer[1])) if peer else (target.host, target.port)
        local = endpoint.get_extra_info("sockname")
        self._local = (str(local[0]), int(local[1])) if local else ("0.0.0.0", 0)

    @property
    def peer(self) -> tuple[str, int]:
        return self._peer

    def hello(self, config: ClientConfig) -> ClientConfig:
        """`config` (the connector's QUIC form) with this connection's own Source
        Connection ID in its transport parameters."""
        if config.quic_transport_parameters is None:
            return config
        info = self.info
        return replace(config, quic_transport_parameters=client_parameters(
            info.scid, info.version, info.offered))

    @property
    def local(self) -> tuple[str, int] | None:
        return self._local

    def _flush(self) -> None:
        for datagram in self._outgoing(self._local, self._peer):
            try:
                self.endpoint.sendto(datagram)
            except OSError as exc:
                raise self._error(f"UDP send failed: {_text(exc)}", cause_of(exc)) from None

    async def send(self, data: bytes) -> None:
        self._from_engine(data)
        self._flush()

    async def receive(self, deadline: float) -> bytes:
        read_by = self._start_read(deadline)
        while True:
            ready = self._ready()
            self._flush()
            if ready is not None:
                return ready
            now = time.monotonic()
            if now >= read_by:
                raise self._timeout(deadline, now)
            try:
                got = await asyncio.wait_for(self.datagrams.queue.get(),
                                             max(0.001, self._wake(read_by) - now))
            except TimeoutError:
                got = b""
            if isinstance(got, OSError):
                raise self._error(_text(got), cause_of(got))
            if got:
                self._datagram(got)
            self._maybe_retransmit()

    async def close(self) -> None:
        try:
            if self._closing():
                self._flush()
        except NetworkError:
            pass
        self.endpoint.close()


class AsyncQuicConnector(AsyncConnector):
    """Opens `AsyncQuicTransport`s (an `AsyncConnector`); see the module docstring.
    `versions` as net.quic.quic_connector's (our Initial's version first); `limits`: the
    scan's --max-message (which bounds each epoch's CRYPTO data too) and --max-records
    (which over QUIC counts the server's packets with CRYPTO data), as the probe's."""

    def __init__(self, timeout: float, versions: tuple[int, ...] = (QUIC_V1,),
                 alpn: tuple[str, ...] | None = None, limits: Limits | None = None) -> None:
        self.timeout = timeout
        self.limits = limits or Limits()
        self.alpn = alpn   # every hello's protocols (scan --alpn), else h3
        self.version = versions[0]
        self.offered = (*versions[1:], versions[0]) if len(versions) > 1 else ()
        self.scid = new_connection_ids()[0]    # the hellos' placeholder: see the module
        self._lookups = SharedLookups()

    def adapt(self, config: ClientConfig) -> ClientConfig | NotApplicable:
        """The QUIC form of an audit hello (an audit hello that names ALPN protocols keeps
        them; the others offer the connector's), or why QUIC cannot carry it."""
        return quic_hello(config, self.scid, self.version, self.offered,
                          alpn=config.alpn or self.alpn)

    def engine_limits(self, limits: Limits) -> Limits:
        """The engine's bounds over QUIC (net/quic.py `engine_limits`)."""
        return engine_limits(limits)

    async def __call__(self, target: Target, deadline: float) -> AsyncQuicTransport:
        wait = max(0.0, min(self.timeout, deadline - time.monotonic()))
        datagrams = _Datagrams()
        try:
            infos = await asyncio.wait_for(self._resolve(target), wait)
            family, _, _, _, address = infos[0]
            loop = asyncio.get_running_loop()
            endpoint, _ = await loop.create_datagram_endpoint(
                lambda: datagrams, remote_addr=(address[0], address[1]), family=family)
        except TimeoutError:
            raise _failed(target, "name lookup timed out", "timeout") from None
        except (socket.gaierror, UnicodeError, IndexError):
            raise _failed(target, "unknown host", "unknown_host") from None
        except OSError as exc:
            raise _failed(target, _text(exc), cause_of(exc)) from None
        scid, dcid = new_connection_ids()    # this connection's own (`hello`)
        info = QuicInfo(scid, dcid, self.version, self.offered)
        return AsyncQuicTransport(endpoint, datagrams, target, info, self.timeout,
                                  self.limits)

    async def _resolve(self, target: Target) -> list[AddrInfo]:
        """The target's addresses, looked up once per connector (shared by its jobs)."""
        return await self._lookups.addresses(target)


def _failed(target: Target, reason: str, cause: NetworkCause) -> NetworkError:
    return NetworkError(f"{target.display}: {reason}", cause, reason)


__all__ = ["NOT_APPLICABLE", "AsyncQuicConnector", "AsyncQuicTransport"]
