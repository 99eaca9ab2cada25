"""A TLS server (Python's ssl) that refuses a ClientHello without server_name with a fatal
unrecognized_name alert (its SNI callback's answer), as a host serving only name-based
virtual hosts does (nginx's `ssl_reject_handshake on` in its default server); hellos with
any name complete. Used for the sni_chain check's "refused without SNI" side. Options:
--port, --chain-file, --key-file (tests/checks/conftest.py script_server)."""
from __future__ import annotations

import argparse
import socket
import ssl
import threading


def refuse_without_name(sock: ssl.SSLObject | ssl.SSLSocket, name: str | None,
                        ctx: ssl.SSLContext) -> int | None:
    return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME if name is None else None


def serve(conn: socket.socket, ctx: ssl.SSLContext) -> None:
    try:
        with ctx.wrap_socket(conn, server_side=True) as tls:
            tls.settimeout(10)
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
    ctx.sni_callback = refuse_without_name
    with socket.create_server(("127.0.0.1", args.port)) as srv:
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=serve, args=(conn, ctx), daemon=True).start()


if __name__ == "__main__":
    main()
