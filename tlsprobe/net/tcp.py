"""TCP connections with a connect timeout, a per-read timeout and a total deadline.

Every failure becomes a `NetworkError` whose one-line message names host, port and cause.
Name resolution is inside the deadline too: `getaddrinfo` cannot be interrupted, so it runs
in a daemon thread that is abandoned when its time is up.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
import time
from collections.abc import Iterable
from typing import Self, TypeGuard

from tlsprobe.errors import NetworkCause, NetworkError, os_error_text
from tlsprobe.model.units import seconds_text
from tlsprobe.net.target import Target, host_name_problem, parse_target
from tlsprobe.net.transport import Transport


def describe_os_error(exc: BaseException) -> str:
    """A socket failure in tlsprobe's own words ("connection reset by peer", "timed out"),
    the one wording of every transport (sync, asyncio, STARTTLS, QUIC): never Python's
    capitalised strerror."""
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror})"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(exc, OSError) and exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return "network unreachable"
    return os_error_text(exc)


def cause_of(exc: BaseException) -> NetworkCause:
    """The class of an OS-level failure (errors.NetworkCause)."""
    if isinstance(exc, (socket.gaierror, UnicodeError)):
        return "unknown_host"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return "reset"
    return "other"


class Channel(Transport):
    """A connected TCP socket (a net.transport.Transport); reads honour both a per-read
    timeout and a total deadline."""

    def __init__(self, sock: socket.socket, target: Target, address: str,
                 read_timeout: float, deadline: float, connect_time: float,
                 total: float | None = None) -> None:
        self.sock = sock
        self.target = target
        self.address = address
        self.read_timeout = read_timeout
        self.deadline = deadline
        self.connect_time = connect_time
        self.total = total if total is not None else \
            deadline - time.monotonic() + connect_time
        self.bytes_sent = 0
        self.bytes_received = 0

    @property
    def peer(self) -> tuple[str, int]:
        return self.address, self.target.port

    @property
    def sockaddr(self) -> tuple[int, SockAddr]:
        """The address family and socket address connected to (to connect there again)."""
        return int(self.sock.family), tuple(self.sock.getpeername())

    @property
    def local(self) -> tuple[str, int]:
        """Our end of the connection (an unspecified address when the socket cannot tell)."""
        try:
            name = self.sock.getsockname()
            return str(name[0]), int(name[1])
        except OSError:
            return ("::" if ":" in self.address else "0.0.0.0", 0)

    def error(self, cause: str, kind: NetworkCause = "other") -> NetworkError:
        return NetworkError(f"{self.target.display}: {cause}", kind, cause)

    def send(self, data: bytes) -> None:
        try:
            self.sock.settimeout(max(0.01, min(self.read_timeout, self.deadline - time.monotonic())))
            self.sock.sendall(data)
            self.bytes_sent += len(data)
        except OSError as exc:
            raise self.error(f"send failed: {describe_os_error(exc)}", cause_of(exc)) from None

    def recv(self, limit: int = 65536) -> bytes:
        """Next chunk of bytes by the channel's deadline; b"" at EOF."""
        return self.receive(self.deadline, limit)

    def receive(self, deadline: float, limit: int = 65536) -> bytes:
        """Next chunk of bytes by `deadline` (and the channel's own); b"" at EOF. Raises
        NetworkError on timeout (cause "timeout" or "deadline") or reset."""
        deadline = min(deadline, self.deadline)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self.error(f"timed out: total time limit of {seconds_text(self.total)} s reached",
                             "deadline")
        self.sock.settimeout(min(self.read_timeout, remaining))
        try:
            data = self.sock.recv(limit)
        except TimeoutError:
            if remaining < self.read_timeout:
                raise self.error(f"timed out: total time limit of {seconds_text(self.total)} s "
                                 "reached", "deadline") from None
            raise self.error(f"timed out waiting for the server "
                             f"(no data for {seconds_text(self.read_timeout)} s)", "timeout") from None
        except OSError as exc:
            raise self.error(describe_os_error(exc), cause_of(exc)) from None
        self.bytes_received += len(data)
        return data

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: a socket address of an IP family: (host, port) for IPv4, (host, port, flowinfo, scope_id)
#: for IPv6
SockAddr = tuple[str, int] | tuple[str, int, int, int]
AddrInfo = tuple[int, int, int, str, SockAddr]
_RawInfo = tuple[int, int, int, str, "SockAddr | tuple[int, bytes]"]


def _is_ip_address(address: SockAddr | tuple[int, bytes]) -> TypeGuard[SockAddr]:
    return isinstance(address[0], str)


def _ip_infos(infos: Iterable[_RawInfo]) -> list[AddrInfo]:
    """getaddrinfo's answers of the IP families (the (int, bytes) form of a Python built
    without IPv6 support cannot be connected to and is left out)."""
    return [(f, t, p, c, a) for f, t, p, c, a in infos if _is_ip_address(a)]


def _numeric(host: str) -> str | bytes:
    """An IP address as getaddrinfo takes it without the IDNA codec: a `str` host is always
    IDNA-encoded first (importing encodings.idna, stringprep and unicodedata, 2 % of a
    group audit's start-up), which an address does not need; its ASCII bytes resolve the
    same (AI_NUMERICHOST)."""
    return host.encode("ascii") if host.isascii() else host


def resolve(target: Target, family: int, wait: float) -> list[AddrInfo]:
    """getaddrinfo for `target`, given at most `wait` seconds (an IP address is immediate);
    TimeoutError when the resolver has not answered by then."""
    flags = socket.AI_NUMERICHOST if _is_ip(target.host) else 0
    if flags:
        return _ip_infos(socket.getaddrinfo(_numeric(target.host), target.port, family,
                                            socket.SOCK_STREAM, 0, flags))
    infos: list[AddrInfo] = []
    errors: list[BaseException] = []

    def lookup() -> None:
        try:
            infos.extend(_ip_infos(socket.getaddrinfo(target.host, target.port, family,
                                                      socket.SOCK_STREAM)))
        except (OSError, UnicodeError) as exc:
            errors.append(exc)

    worker = threading.Thread(target=lookup, name="tlsprobe-resolve", daemon=True)
    worker.start()
    worker.join(max(0.0, wait))
    if worker.is_alive():
        raise TimeoutError("name resolution")
    if errors:
        raise errors[0]
    return infos


async def resolve_async(host: str, port: int) -> list[AddrInfo]:
    """getaddrinfo in a daemon thread of its own, for asyncio callers: a caller that stops
    waiting (asyncio.wait_for) is free at once, and nothing waits for a stuck resolver at
    exit (the loop's default executor, which asyncio.open_connection resolves in, is joined
    by asyncio.run: a resolver that does not answer held a whole scan past its limits)."""
    import asyncio  # here: the probe's start-up (inside its time limit) does not need it

    if _is_ip(host):
        return _ip_infos(socket.getaddrinfo(_numeric(host), port, 0, socket.SOCK_STREAM, 0,
                                            socket.AI_NUMERICHOST))
    loop = asyncio.get_running_loop()
    future: asyncio.Future[list[AddrInfo]] = loop.create_future()

    def settle(result: list[AddrInfo] | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or [])

    def lookup() -> None:
        result: list[AddrInfo] | None = None
        error: BaseException | None = None
        try:
            result = _ip_infos(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            error = exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:    # the loop is closed: nobody is waiting any more
            pass

    threading.Thread(target=lookup, name="tlsprobe-resolve", daemon=True).start()
    return await future


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def open_channel(target: Target, *, timeout: float = 10.0, read_timeout: float | None = None,
                 total_timeout: float | None = None, family: int = 0,
                 deadline: float | None = None) -> Channel:
    """Resolve and connect (trying each address) within `timeout` seconds and the deadline.

    `deadline` (time.monotonic()) is when the whole exchange must end; without it, the
    deadline is `total_timeout` (default 3 x timeout + 10) from now."""
    start = time.monotonic()
    total = total_timeout if total_timeout is not None else 3 * timeout + 10
    if deadline is None:
        deadline = start + total
    try:
        infos = resolve(target, family, min(timeout, deadline - start))
    except (socket.gaierror, UnicodeError) as exc:
        raise _failed(target, describe_os_error(exc), "unknown_host") from None
    except TimeoutError:
        raise _failed(target, "timed out resolving the host name", "timeout") from None
    except OSError as exc:
        raise _failed(target, describe_os_error(exc), cause_of(exc)) from None
    last: BaseException | None = None
    for fam, kind, proto, _, addr in infos:
        if deadline - time.monotonic() <= 0:
            raise _failed(target, f"timed out: total time limit of {seconds_text(total)} s reached "
                          "before a connection was made", "deadline")
        sock = socket.socket(fam, kind, proto)
        sock.settimeout(max(0.01, min(timeout, deadline - time.monotonic())))
        try:
            sock.connect(addr)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Channel(sock, target, str(addr[0]), read_timeout or timeout, deadline,
                       time.monotonic() - start, total)
    raise _failed(target, describe_os_error(last) if last else "no address",
                  cause_of(last) if last else "other")


def _failed(target: Target, reason: str, cause: NetworkCause) -> NetworkError:
    return NetworkError(f"{target.display}: {reason}", cause, reason)


def connect_address(target: Target, family: int, address: SockAddr, *,
                    timeout: float, deadline: float) -> Channel:
    """Connect to an already resolved `address` (repeated connections to one server, e.g.
    the timing runs), waiting at most `timeout` and never past `deadline`; the channel's
    per-read timeout is `timeout`. NetworkError (with its cause) when it fails."""
    start = time.monotonic()
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(max(0.01, min(timeout, deadline - start)))
        sock.connect(address)
    except OSError as exc:
        sock.close()
        raise _failed(target, describe_os_error(exc), cause_of(exc)) from None
    return Channel(sock, target, str(address[0]), timeout, deadline,
                   time.monotonic() - start, deadline - start)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at the moment (for a local server we start, e.g. the
    demo's openssl s_server)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


__all__ = ["AddrInfo", "Channel", "SockAddr", "Target", "cause_of", "connect_address",
           "describe_os_error", "free_port", "host_name_problem", "open_channel", "parse_target", "resolve"]
