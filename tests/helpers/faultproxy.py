"""A loopback TCP proxy that injects network faults, deterministically, for scan tests.

`FaultProxy(backends, fault=..., choose=...)` listens on 127.0.0.1 and forwards each
connection to one of `backends` (loopback servers). Before forwarding it reads the client's
first TLS record (the ClientHello) and asks `fault(index, hello)` (index counts connections
from 1; hello is the decoded ClientHello, or None if it did not decode) what to do:

- None: forward to backend `choose(index)` (default 0) and relay both ways;
- RESET: close with an RST, as a flaky network or an overloaded balancer does;
- DROP: close cleanly (FIN) without an answer, as a middlebox dropping the connection does;
- ALERT: answer with a fatal handshake_failure alert and close, as a rate limiter or an
  overloaded TLS terminator refusing more handshakes does (the same alert a server sends
  when it shares nothing with the hello, which is why it must not be read as a refusal).

Faults are picked by rule, never at random, so tests repeat exactly: `at(...)` by index,
`every(n)` every n-th connection, `nth_matching(pred, ...)` by what the hello offers (which
does not depend on the order in which concurrent connections arrive).
"""
from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Sequence

from tlsprobe.wire.handshake import HandshakeReassembler, decode_handshake
from tlsprobe.wire.hello import ClientHello
from tlsprobe.wire.record import RecordReader

RESET, DROP, ALERT = "reset", "drop", "alert"
#: a fatal handshake_failure alert (TLS 1.2 record version, as servers send it)
ALERT_RECORD = bytes([21, 3, 3, 0, 2, 2, 40])
Fault = Callable[[int, "ClientHello | None"], "str | None"]


def at(indices: Sequence[int], mode: str) -> Fault:
    """Fault the connections with these indices (from 1)."""
    wanted = set(indices)
    return lambda index, _hello: mode if index in wanted else None


def every(n: int, mode: str, offset: int = 0) -> Fault:
    """Fault every n-th connection (index % n == offset)."""
    return lambda index, _hello: mode if index % n == offset else None


def nth_matching(pred: Callable[[ClientHello], bool], mode: str,
                 which: Sequence[int] = (1,)) -> Fault:
    """Fault the `which`-th hellos (from 1) among those `pred` accepts."""
    seen = [0]
    lock = threading.Lock()
    wanted = set(which)

    def fault(_index: int, hello: ClientHello | None) -> str | None:
        if hello is None or not pred(hello):
            return None
        with lock:
            seen[0] += 1
            return mode if seen[0] in wanted else None
    return fault


def serve_loopback(on_accept: Callable[[socket.socket], None]) -> tuple[socket.socket, int]:
    """A listening socket on a free 127.0.0.1 port, and its port: one thread accepts and
    hands each connection to `on_accept` (which starts the connection's own thread); closing
    the socket ends that thread. The one accept loop of this module's proxies and the scan
    tests' relays."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            on_accept(conn)

    threading.Thread(target=accept, daemon=True).start()
    return sock, sock.getsockname()[1]


class FaultProxy:
    def __init__(self, backends: Sequence[tuple[str, int]], fault: Fault | None = None,
                 choose: Callable[[int], int] | None = None) -> None:
        self.backends = list(backends)
        self.fault = fault or (lambda _i, _h: None)
        self.choose = choose or (lambda _i: 0)
        self.log: list[tuple[int, str | None, int | None]] = []   # index, fault, backend
        self._lock = threading.Lock()
        self._accepted = 0
        self.sock, self.port = serve_loopback(self._accept)

    def faults(self) -> list[tuple[int, str]]:
        return [(i, f) for i, f, _ in self.log if f is not None]

    def _accept(self, conn: socket.socket) -> None:
        self._accepted += 1   # the accepting thread alone counts
        threading.Thread(target=self._serve, args=(conn, self._accepted), daemon=True).start()

    def _serve(self, conn: socket.socket, index: int) -> None:
        try:
            first = _first_record(conn)
            mode = self.fault(index, _hello(first))
            backend = None if mode else self.choose(index)
            with self._lock:
                self.log.append((index, mode, backend))
            if mode == RESET:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
                return
            if mode == ALERT:
                conn.sendall(ALERT_RECORD)
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
                return
            if mode == DROP:
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
                return
            upstream = socket.create_connection(self.backends[backend or 0], timeout=5)
        except OSError:
            conn.close()
            return
        upstream.sendall(first)
        conn.settimeout(None)
        upstream.settimeout(None)
        t = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
        t.start()
        pipe(conn, upstream)
        t.join(10)
        for s in (conn, upstream):
            s.close()

    def close(self) -> None:
        self.sock.close()


def _first_record(conn: socket.socket) -> bytes:
    """The client's first TLS record (header and body), or what came before it closed."""
    conn.settimeout(5)
    data = b""
    while len(data) < 5 or len(data) < 5 + int.from_bytes(data[3:5], "big"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _hello(record: bytes) -> ClientHello | None:
    try:
        for rec in RecordReader().feed(record):
            for msg in HandshakeReassembler().feed(rec.fragment):
                hello = decode_handshake(msg).message
                return hello if isinstance(hello, ClientHello) else None
    except Exception:   # a test helper: anything undecodable is simply "not a hello"
        return None
    return None


def pipe(src: socket.socket, dst: socket.socket,
         first: Callable[[], None] = lambda: None) -> None:
    """Copy `src` to `dst` until `src` ends, then shut `dst`'s sending side; `first()` is
    called before each chunk is passed on (a relay counting what it answered)."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            first()
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
