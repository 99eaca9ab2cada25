"""A Python ssl (OpenSSL) server on loopback that answers a request with fixed bytes after
the handshake: the peer of tests of what tlsprobe makes of an application answer (a long
HTTP page, another protocol's banner)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def tls_answering(chain: Path, key: Path, answer: bytes, connections: int = 2
                  ) -> Iterator[int]:
    """Its port: each of the first `connections` connections is served (certificate
    `chain`, `key`), its request read (at most 4 KiB) and `answer` sent, then closed; a
    client that stops reading or closes early ends that connection only."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(chain, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)

    def serve() -> None:
        for _ in range(connections):
            try:
                raw, _ = listener.accept()
                with ctx.wrap_socket(raw, server_side=True) as conn:
                    conn.recv(4096)
                    conn.sendall(answer)
            except (OSError, ssl.SSLError):
                pass   # the client stopped reading and closed

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(10)
