"""`--http-get` against scripted TLS 1.3 servers whose answer is hostile in size: the probe
reads the status line and no further (it read on until --max-bytes, exit 8, for an answer
of endless headers after a good status line, and for a first line without an end)."""
from __future__ import annotations

import json

from .catalog import HOLD
from .runner import run_tlsprobe
from .server import Conn, HostileServer, Script
from .tls import APPDATA, Tls13Server

CHUNK = 16000


async def _answer(conn: Conn, first: bytes, line: bytes) -> None:
    """A whole handshake, then (after the client's Finished and request) `first` and
    `line` again and again: more than the probe's --max-bytes in all."""
    ch = await conn.client_hello()
    tls = Tls13Server(ch, conn.hello_raw[-1])
    await conn.send(tls.hello_and_flight(tls.flight()))
    app = tls.application_protection()
    await conn.protected_record()   # the client's Finished
    await conn.protected_record()   # its GET
    await conn.send(app.encrypt(APPDATA, first))
    for _ in range(80):
        await conn.send(app.encrypt(APPDATA, line))
    await conn.hold(HOLD)


async def endless_headers(conn: Conn) -> None:
    await _answer(conn, b"HTTP/1.1 200 OK\r\n", b"X-Pad: " + b"a" * CHUNK + b"\r\n")


async def first_line_without_end(conn: Conn) -> None:
    await _answer(conn, b"HTTP/1.1 200 ", b"a" * CHUNK)


def _probe(server: HostileServer, script: Script) -> dict[str, object]:
    listener = server.serve(script)
    out = run_tlsprobe(f"127.0.0.1:{listener.port}", "--http-get", "/", "--no-verify",
                       "--json", "--max-bytes", "1000000", "--timeout", "5",
                       hard_timeout=60.0)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["error"] is None and data["handshake_complete"] is True, data["error"]
    return data


def test_answer_longer_than_max_bytes_after_its_status_line(
        hostile_server: HostileServer) -> None:
    assert _probe(hostile_server, endless_headers)["http_status"] == "HTTP/1.1 200 OK"


def test_first_line_without_an_end_is_not_read_to_max_bytes(
        hostile_server: HostileServer) -> None:
    status = _probe(hostile_server, first_line_without_end)["http_status"]
    assert isinstance(status, str)
    assert status.startswith("not HTTP: no line end in the first "), status
    assert "'HTTP/1.1 200 aaaa" in status, status


async def latin1_status(conn: Conn) -> None:
    await _answer(conn, b"HTTP/1.1 200 Caf\xe9 \\ \x1b[2J\r\nServer: x\r\n\r\n", b"")


def test_a_status_line_outside_ascii_is_shown_as_network_text(
        hostile_server: HostileServer) -> None:
    """The status line's bytes outside ASCII are \\xNN (a backslash doubled), as every
    network value: it was decoded as latin-1 ('Café' in JSON and on the terminal)."""
    data = _probe(hostile_server, latin1_status)
    assert data["http_status"] == "HTTP/1.1 200 Caf\\xe9 \\\\ \x1b[2J", data["http_status"]
    listener = hostile_server.serve(latin1_status)
    out = run_tlsprobe(f"127.0.0.1:{listener.port}", "--http-get", "/", "--no-verify",
                       "--timeout", "5", hard_timeout=60.0)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("HTTP "))
    assert line.split(None, 1)[1] == "HTTP/1.1 200 Caf\\xe9 \\\\ \\x1b[2J", line
