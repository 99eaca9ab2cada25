"""The accept loop of the tests' scripted loopback servers (tests/starttls): a listener on
127.0.0.1 that hands every connection to `handle` in a thread of its own until `close`,
and the check that a failing run said one line on stderr."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

#: one step of a scripted server: ("send", bytes), ("line", 0) (read to a newline),
#: ("upto", bytes) (read until the bytes read end with these), ("exact", n) (read n bytes)
Step = tuple[str, Any]


class Accepting:
    """Accept on 127.0.0.1 (a free port: `port`) until `close`; each connection goes to
    `handle(conn)` in its own daemon thread (`threads` False: in the accepting thread, one
    at a time). `handle` owns the connection (closes it); `stopped` tells it to give up."""

    def __init__(self, handle: Callable[[socket.socket], object], *,
                 threads: bool = True) -> None:
        self.handle = handle
        self.threads = threads
        self.stopped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = int(self.listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.threads:
                threading.Thread(target=self.handle, args=(conn,), daemon=True).start()
            else:
                self.handle(conn)

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()
        self._thread.join(5)


def play_steps(conn: socket.socket, steps: list[Step]) -> None:
    """Play a server's side; reads no byte beyond each step's (MySQL's client sends its
    ClientHello right after the SSL request: those bytes are the TLS handshake's)."""
    for kind, arg in steps:
        if kind == "send":
            conn.sendall(arg)
            continue
        end = {"line": b"\n", "upto": arg}.get(kind)
        buf = b""
        while len(buf) < arg if kind == "exact" else not buf.endswith(end):
            chunk = conn.recv(arg - len(buf) if kind == "exact" else 1)
            if not chunk:
                raise ConnectionError("client closed")
            buf += chunk


def one_stderr_line(stderr: str) -> str:
    """The one line a failing run printed on stderr (no traceback, nothing else)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]
