"""One not-TLS verdict (net/not_tls.py) for the probe, the scan and the timing runs: a server
that answers with an HTTP response, an SSH banner or binary garbage gets the same one line
naming it and exit 4 from each command; SSLv2-looking bytes are a protocol error (exit 6),
never "not a TLS server"."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.plain_peer import Answering
from tlsprobe.net.not_tls import not_tls_message

HTTP = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
SSH = b"SSH-2.0-OpenSSH_9.2\r\n"
GARBAGE = bytes([0x00, 0x01, 0x02, 0xFE, 0xFF, 0x00]) + bytes(range(0x30, 0x80))
SSLV2 = bytes.fromhex("802e0400010002") + bytes(0x29)   # an SSLv2 SERVER-HELLO, zero-filled

COMMANDS = {
    "probe": ("--timeout", "3"),
    "scan": ("--checks", "versions", "--retries", "0", "--timeout", "3", "--no-progress"),
    "timing": ("--timeout", "3", "--timing-groups", "x25519", "--timing-runs", "2"),
}


@pytest.fixture
def answering() -> Iterator[type[Answering]]:
    made: list[Answering] = []

    def make(answer: bytes) -> Answering:
        made.append(Answering(answer))
        return made[-1]
    yield make  # type: ignore[misc]
    for server in made:
        server.close()


@pytest.mark.parametrize("answer", [HTTP, SSH, GARBAGE], ids=["http", "ssh", "garbage"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_same_not_tls_line_and_exit_4_from_every_command(run_cli, answering, answer,
                                                              command):
    server = answering(answer)
    target = f"127.0.0.1:{server.port}"
    argv = (target, *COMMANDS[command]) if command == "probe" else \
        (command, target, *COMMANDS[command])
    code, out, err = run_cli(*argv)
    assert code == 4, (out, err)
    assert err.count("\n") == 1 and err.startswith(f"tlsprobe: {target}: "), err
    assert not_tls_message(answer) in err, err


@pytest.mark.parametrize("command", ["probe", "scan"])
def test_sslv2_looking_bytes_are_a_protocol_error_not_not_tls(run_cli, answering, command):
    server = answering(SSLV2)
    target = f"127.0.0.1:{server.port}"
    argv = (target, *COMMANDS[command]) if command == "probe" else \
        (command, target, *COMMANDS[command])
    code, out, err = run_cli(*argv)
    assert code == 6, (out, err)
    assert "not a TLS server" not in err and "SSLv2" in err, err
