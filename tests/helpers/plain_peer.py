"""A loopback TCP server that is no TLS server (tests of how tlsprobe names such a peer)."""

from __future__ import annotations

import socket
import threading


class Answering:
    """Answers every connection with `answer` (after reading what the client sent, at most
    2 s), then closes it; with `answer` None it holds every connection open in silence until
    `close`."""

    def __init__(self, answer: bytes | None) -> None:
        self.answer = answer
        self.held: list[socket.socket] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.answer is None:
                self.held.append(conn)
            else:
                threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(2)
            try:
                conn.recv(4096)
                conn.sendall(self.answer or b"")
            except OSError:
                pass

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()
