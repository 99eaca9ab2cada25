"""Argument parsing, connection log and accept loop shared by the Python test servers.

No TLS library is imported here: the pyOpenSSL and Python ssl servers must see their
OPENSSL_CONF (set by tests/helpers/servers.py in the environment) before OpenSSL initialises.
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import threading
import time
from typing import Callable

VERSIONS = ("tls1_0", "tls1_1", "tls1_2", "tls1_3")


def parse_args(description: str) -> argparse.Namespace:
    """Options common to every Python test server (group names already in the impl's spelling)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1", "::1"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--cert-file", required=True)
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--chain-file", required=True)
    ap.add_argument("--groups", default=None, help="colon list in this implementation's spelling")
    ap.add_argument("--ciphers", default=None, help="TLS <= 1.2 cipher list (impl syntax)")
    ap.add_argument("--ciphersuites", default=None, help="TLS 1.3 suites (impl syntax)")
    ap.add_argument("--min-version", default="tls1_2", choices=VERSIONS)
    ap.add_argument("--max-version", default="tls1_3", choices=VERSIONS)
    ap.add_argument("--serverpref", action="store_true")
    ap.add_argument("--dhparam", default=None, help="PEM DH parameters file")
    ap.add_argument("--log", default=None, help="one line per connection is appended here")
    ap.add_argument("--reply-unread", action="store_true",
                    help="answer at once after the handshake, read nothing and close without "
                    "close_notify (the client's request, unread, makes the close a reset)")
    return ap.parse_args()


class ConnLog:
    """Thread-safe, line-buffered log of what each connection negotiated."""

    def __init__(self, path: str | None) -> None:
        self._fh = open(path, "a", buffering=1) if path else None
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        if self._fh is not None:
            with self._lock:
                self._fh.write(f"{time.time():.3f} {line}\n")


def serve_forever(host: str, port: int, handler: Callable[[socket.socket, tuple], None]) -> None:
    """Accept on host:port forever, one daemon thread per connection."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(256)
    print(f"listening {host}:{port} pid={os.getpid()}", flush=True)
    while True:
        conn, addr = listener.accept()
        # A blocking socket with a kernel receive timeout: stalled clients cannot pin a thread,
        # and pyOpenSSL / tlslite still see an ordinary blocking socket.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 5, 0))
        threading.Thread(target=_run, args=(handler, conn, addr), daemon=True).start()


def _run(handler: Callable[[socket.socket, tuple], None], conn: socket.socket, addr: tuple) -> None:
    try:
        handler(conn, addr)
    except Exception:  # a broken client must never take the server down
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


def http_reply(info: str) -> bytes:
    """A minimal HTTP/1.0 response whose body says what was negotiated."""
    body = (info + "\n").encode()
    head = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(body)
    return head + body
