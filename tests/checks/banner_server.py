"""A TLS server that is not an HTTP server: after the handshake it greets with a fixed
IMAP-like line (holding an ANSI escape, which tlsprobe must show escaped) and then reads and
ignores what the client sends, as an implicit-TLS mail server does. Used for the HTTP checks'
"not applicable" side. Options: --port, --chain-file, --key-file (tests/checks/conftest.py
script_server)."""
from __future__ import annotations

import argparse
import socket
import ssl
import threading

GREETING = b"* OK \x1b[31mIMAP4rev1 test server ready\r\n"


def serve(conn: socket.socket, ctx: ssl.SSLContext) -> None:
    try:
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.settimeout(10)
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
    args = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.chain_file, args.key_file)
    with socket.create_server(("127.0.0.1", args.port)) as srv:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve, args=(conn, ctx), daemon=True).start()


if __name__ == "__main__":
    main()
