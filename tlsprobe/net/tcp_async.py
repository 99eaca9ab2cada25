"""TCP for asyncio callers (the scan scheduler): a connector that resolves each name once per
run and an `AsyncTransport` over asyncio streams with a per-read timeout.

Every failure is a `NetworkError` whose `cause` tells the caller what to do with it (the
scheduler retries "timeout", "reset" and "other", not "refused" or "unknown_host") and whose
`reason` is the one-line cause without the target ("connection refused").
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time

from tlsprobe.errors import NetworkCause, NetworkError
from tlsprobe.net.shared import SharedLookups
from tlsprobe.net.tcp import Target, cause_of, describe_os_error, host_name_problem
from tlsprobe.net.transport import AsyncConnector, AsyncTransport

#: how often `delivered` looks at the socket's unacknowledged bytes (seconds)
ACK_POLL = 0.001


class AsyncTcpTransport(AsyncTransport):
    """A connected asyncio stream; `receive` waits at most `read_timeout` per chunk."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 target: Target, read_timeout: float) -> None:
        self.reader = reader
        self.writer = writer
        self.target = target
        self.read_timeout = read_timeout
        peer = writer.get_extra_info("peername")
        self._peer = (str(peer[0]), int(peer[1])) if peer else (target.host, target.port)
        local = writer.get_extra_info("sockname")
        self._local = (str(local[0]), int(local[1])) if local else None

    @property
    def peer(self) -> tuple[str, int]:
        return self._peer

    @property
    def local(self) -> tuple[str, int] | None:
        """Our end (the client address of a scan --pcap-out capture)."""
        return self._local

    def _error(self, reason: str, cause: NetworkCause) -> NetworkError:
        return NetworkError(f"{self.target.display}: {reason}", cause, reason)

    async def send(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except OSError as exc:
            raise self._error(f"send failed: {describe_os_error(exc)}",
                              cause_of(exc)) from None

    async def receive(self, deadline: float) -> bytes:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            return await asyncio.wait_for(self.reader.read(65536),
                                          min(self.read_timeout, remaining))
        except TimeoutError:
            if deadline - time.monotonic() <= 0:
                raise self._error("timed out: total time limit reached", "deadline") from None
            raise self._error("timed out waiting for the server", "timeout") from None
        except OSError as exc:
            raise self._error(describe_os_error(exc), cause_of(exc)) from None

    async def delivered(self, limit: float) -> bool | None:
        """Linux: whether the server's TCP acknowledged every byte sent (the socket's
        SIOCOUTQ, bytes sent but not acknowledged, reads 0 and asyncio holds none back),
        looked at every ACK_POLL seconds for at most `limit`; None elsewhere or when the
        socket cannot say."""
        end = time.monotonic() + limit
        while True:
            left = self._unacknowledged()
            if left is None:
                return None
            if left == 0:
                return True
            if time.monotonic() >= end:
                return False
            await asyncio.sleep(ACK_POLL)

    def _unacknowledged(self) -> int | None:
        """Bytes written but not yet acknowledged by the peer, None when unknown."""
        sock = self.writer.get_extra_info("socket")
        if sock is None or not sys.platform.startswith("linux"):
            return None
        import fcntl
        import termios
        try:
            queued = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ,
                                                    b"\0\0\0\0"))[0]
        except OSError:
            return None
        return int(queued) + self.writer.transport.get_write_buffer_size()

    async def finish_sending(self) -> None:
        """Half-close: our FIN goes after what is still buffered (asyncio's write_eof);
        reading goes on until the server closes its side or the caller closes."""
        try:
            if self.writer.can_write_eof():
                self.writer.write_eof()
        except (OSError, RuntimeError):   # already closed / reset: the next read says so
            pass

    async def close(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 1.0)
        except (OSError, TimeoutError):
            pass


class TcpConnector(AsyncConnector):
    """Opens `AsyncTcpTransport`s (an `AsyncConnector`); each (host, port) is resolved once
    per connector, in a thread nothing waits for at exit (net/tcp.py resolve_async)."""

    def __init__(self, connect_timeout: float, read_timeout: float | None = None) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout if read_timeout is not None else connect_timeout
        self._lookups = SharedLookups()

    async def __call__(self, target: Target, deadline: float) -> AsyncTcpTransport:
        wait = max(0.0, min(self.connect_timeout, deadline - time.monotonic()))
        try:
            reader, writer = await asyncio.wait_for(self._open(target), wait)
        except TimeoutError:
            raise _failed(target, "connect timed out", "timeout") from None
        except ConnectionRefusedError:
            raise _failed(target, "connection refused", "refused") from None
        except socket.gaierror as exc:
            raise _failed(target, f"unknown host ({exc.strerror})", "unknown_host") from None
        except UnicodeError as exc:     # the IDNA encoding refused the name ('a..b')
            raise _failed(target, f"unknown host (not a valid host name: "
                          f"{host_name_problem(target.host) or exc})", "unknown_host") from None
        except OSError as exc:
            raise _failed(target, describe_os_error(exc), cause_of(exc)) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        return AsyncTcpTransport(reader, writer, target, self.read_timeout)

    async def _open(self, target: Target) -> tuple[asyncio.StreamReader,
                                                   asyncio.StreamWriter]:
        """Resolve the name (once per target, shared by concurrent callers) and connect to
        the first address that accepts."""
        infos = await self._lookups.addresses(target)
        last: OSError = OSError("no address")
        for family, _, _, _, address in infos:
            try:
                return await asyncio.open_connection(address[0], address[1], family=family)
            except OSError as exc:
                last = exc
        raise last


def _failed(target: Target, reason: str, cause: NetworkCause) -> NetworkError:
    return NetworkError(f"{target.display}: {reason}", cause, reason)


__all__ = ["AsyncTcpTransport", "TcpConnector"]
