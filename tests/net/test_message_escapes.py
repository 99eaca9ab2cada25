"""Network bytes in error lines have one escaping style, README's (`\\x1b`, `\\n`, Python's
way of showing bytes): a not-TLS answer, a STARTTLS refusal and a QUIC CONNECTION_CLOSE
reason phrase, each from a real loopback peer, show the same bytes the same way ('\\r\\n',
never '\\x0d\\x0a'; a quote as \\', a backslash doubled, other bytes \\xNN)."""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.quic.conftest import udp_peer  # noqa: F401 (a fixture)
from tests.quic.test_quic_probe import _server_initial

#: what each peer sends, and how every error line must show it
NASTY = b"no\t\x1b[2J it's \\ \xe2\x80\xae\x7f"
SHOWN = "no\\t\\x1b[2J it\\'s \\\\ \\xe2\\x80\\xae\\x7f"


@pytest.fixture
def tcp_peer() -> Iterator[Callable[[bytes], int]]:
    """A loopback TCP server sending `data` to each connection, then reading until the
    client closes; its port."""
    listeners: list[socket.socket] = []

    def start(data: bytes) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def serve() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    conn.settimeout(5)
                    try:
                        conn.sendall(data)
                        while conn.recv(4096):
                            pass
                    except OSError:
                        pass
        threading.Thread(target=serve, daemon=True).start()
        return int(listener.getsockname()[1])
    yield start
    for listener in listeners:
        listener.close()


def _line(res: Any) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "\x1b" not in res.stderr and "\u202e" not in res.stderr
    for other in ("\\x0d", "\\x0a", "\\x09", "\\x27", "\\x5c"):
        assert other not in lines[0], lines[0]
    return str(lines[0])


def test_not_tls_answer(tcp_peer: Callable[[bytes], int], run_cli: Callable[..., Any]) -> None:
    port = tcp_peer(b"HELLO " + NASTY + b"\r\n")
    line = _line(run_cli(f"127.0.0.1:{port}", "--timeout", "5"))
    assert line.endswith(f"it sent non-TLS data ('HELLO {SHOWN}\\r\\n')"), line


def test_starttls_refusal(tcp_peer: Callable[[bytes], int],
                          run_cli: Callable[..., Any]) -> None:
    port = tcp_peer(b"554 5.7.0 " + NASTY + b"\r\n")
    line = _line(run_cli(f"127.0.0.1:{port}", "--starttls", "smtp", "--timeout", "5"))
    assert f"'554 5.7.0 {SHOWN}" in line, line


def test_quic_connection_close_reason(udp_peer: Any,  # noqa: F811 (the fixture)
                                      run_cli: Callable[..., Any]) -> None:
    from tlsprobe.net import quic_wire as w
    sock, _, answers = udp_peer
    reason = NASTY + b"\r\n"
    answers.append(lambda d: _server_initial(d, b"\x1c\x0a\x06" + w.varint(len(reason)) +
                                             reason))
    line = _line(run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "5",
                         timeout=30))
    assert line.endswith(f"PROTOCOL_VIOLATION (0xa): '{SHOWN}\\r\\n'"), line


def test_scan_msg_shows_a_preamble_it_did_not_understand_in_the_same_style(
        tcp_peer: Callable[[bytes], int], run_cli: Callable[..., Any], tmp_path: Any) -> None:
    """`scan --starttls imap --msg FILE` against a peer that answers with an SMTP-like
    banner: the --msg file shows the bytes it sent as every message does, unquoted (was
    their latin-1 text: â\\x80® for U+202E's bytes, a backslash not doubled)."""
    port = tcp_peer(b"220 " + NASTY + b"\r\n")
    res = run_cli("scan", f"127.0.0.1:{port}", "--starttls", "imap", "--checks", "groups",
                  "--no-progress", "--timeout", "5", "--msg", tmp_path / "m.txt")
    assert res.returncode == 4, res.stderr
    text = (tmp_path / "m.txt").read_text(encoding="utf-8")
    assert "\x1b" not in text and "\u202e" not in text and "\x80" not in text
    unquoted = SHOWN.replace("\\'", "'")
    assert f"<<< plain text (imap, before TLS, not understood): 220 {unquoted}\n" in text, text
