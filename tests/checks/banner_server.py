"""A TLS server that is not an HTTP server: after the handshake it greets with a fixed
IMAP-like line (holding an ANSI escape, which tlsprobe must show escaped) and then reads and
ignores what the client sends, as an implicit-TLS mail server does. Used for the HTTP checks'
"not applicable" side. Options: --port, --chain-file, --key-file (tests/checks/conftest.py
script_server).

With `--answer FILE` it is an HTTP server of fixed answers instead: it reads the request's
head and sends the file's bytes as they are (hostile headers: escapes, latin-1, a lone CR, a
stale Date), then closes; the HTTP checks' tests use it where nginx cannot send such bytes.
Given several times, the Nth request gets the Nth file (the last one from then on): a
redirect, then what its target answers. `@NOW@` in an answer becomes the current HTTP date,
sent in the last part of its second (0.6 to 0.9 s past it), as a server's Date is cut to the
second while the client's clock is not."""
from __future__ import annotations

import argparse
import socket
import ssl
import threading
import time
from email.utils import formatdate

GREETING = b"* OK \x1b[31mIMAP4rev1 test server ready\r\n"


REQUESTS = [0]
LOCK = threading.Lock()


def _dated(answer: bytes) -> bytes:
    """`answer` with `@NOW@` as the current HTTP date, late in its second."""
    if b"@NOW@" not in answer:
        return answer
    while not 0.6 <= time.time() % 1 <= 0.9:
        time.sleep(0.02)
    return answer.replace(b"@NOW@", formatdate(int(time.time()), usegmt=True).encode())


def serve(conn: socket.socket, ctx: ssl.SSLContext, answers: list[bytes]) -> None:
    try:
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.settimeout(10)
            if answers:
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    data = tls.recv(4096)
                    if not data:
                        return
                    head += data
                with LOCK:
                    n, REQUESTS[0] = REQUESTS[0], REQUESTS[0] + 1
                tls.sendall(_dated(answers[min(n, len(answers) - 1)]))
                return
            tls.sendall(GREETING)
            while tls.recv(4096):
                pass
    except (OSError, ssl.SSLError):
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--chain-file", required=True)
    ap.add_argument("--key-file", required=True)
    ap.add_argument("--answer", action="append", default=[],
                    help="a file of bytes to answer HTTP with (again: the next request's)")
    args = ap.parse_args()
    answers = [open(path, "rb").read() for path in args.answer]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.chain_file, args.key_file)
    with socket.create_server(("127.0.0.1", args.port)) as srv:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve, args=(conn, ctx, answers), daemon=True).start()


if __name__ == "__main__":
    main()
