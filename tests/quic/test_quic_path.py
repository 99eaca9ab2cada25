"""PATH_CHALLENGE and PATH_RESPONSE (RFC 9000 8.2, 19.17, 19.18): read, not taken for an
unknown frame that made the whole packet ignored (its HANDSHAKE_DONE, ACK and CRYPTO frames
lost). A PATH_CHALLENGE in a 1-RTT packet is answered with a PATH_RESPONSE in a datagram of
at least 1,200 bytes (8.2.2); in an Initial or Handshake packet, where 12.4 forbids it (as
every frame but PADDING, PING, ACK, CRYPTO and CONNECTION_CLOSE), it is the server's
protocol violation. aioquic challenges the path (tests/lab_servers/quic_server.py
--path-challenge) in the packet that carries its HANDSHAKE_DONE; a scripted peer sends the
forbidden Initial."""
from __future__ import annotations

import json
import re
import select
from collections.abc import Callable
from typing import Any

import pytest
from tests.quic.conftest import Peer
from tests.quic.test_quic_loss import Relay, relay  # noqa: F401  (the relay fixture, shared)
from tests.quic.test_quic_probe import _server_initial

from tlsprobe.errors import EXIT_PROTOCOL
from tlsprobe.net import quic_wire as w


def _validated(server: Any, wait: float = 5.0) -> bool:
    """Whether the aioquic server printed PATH_VALIDATED (a PATH_RESPONSE matched)."""
    out = server.process.stdout
    while select.select([out], [], [], wait)[0]:
        line = out.readline()
        if not line or line.strip() == "PATH_VALIDATED":
            return bool(line)
    return False


def test_a_path_challenge_is_answered_and_its_packet_read(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1", path_challenge=True)
    r = relay(server)
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--msg")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # the packet with the challenge was read whole: its HANDSHAKE_DONE counted
    assert re.search(r"^< 1-RTT v1 .*PATH_CHALLENGE.*HANDSHAKE_DONE", out, re.MULTILINE), out
    assert "HANDSHAKE_DONE received: yes" in out and "ignored" not in out
    assert re.search(r"^> 1-RTT v1 .*PATH_RESPONSE, PADDING$", out, re.MULTILINE), out
    assert _validated(server)    # aioquic matched our PATH_RESPONSE to its challenge
    assert r.wait_client(lambda: any(not d[0] & 0x80 and len(d) >= 1200
                                     for d in r.from_client))   # RFC 9000 8.2.2


def test_json_counts_nothing_ignored_after_a_path_challenge(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1", path_challenge=True)
    res = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5", "--json")
    assert res.returncode == 0, res.stderr
    quic = json.loads(res.stdout)["quic"]
    assert quic["handshake_done"] is True and quic["ignored"] == 0
    assert quic["closed_by_us"] == 0


@pytest.mark.parametrize("frame, name", [(b"\x1a" + bytes(range(8)), "PATH_CHALLENGE"),
                                         (b"\x1b" + bytes(8), "PATH_RESPONSE"),
                                         (b"\x1e", "HANDSHAKE_DONE")])
def test_a_frame_an_initial_may_not_carry_is_a_protocol_violation(
        udp_peer: Peer, run_cli: Callable[..., Any], frame: bytes, name: str) -> None:
    # RFC 9000 12.4: a connection error of type PROTOCOL_VIOLATION, named; before, the
    # path frames made the packet unreadable (ignored) and HANDSHAKE_DONE was taken
    sock, got, answers = udp_peer
    answers.append(lambda d: _server_initial(got[0], frame + b"\x01"))
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  "--json", timeout=30)
    assert res.returncode == EXIT_PROTOCOL, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith(f"server sent a {name} frame in an Initial packet (RFC 9000 12.4 "
                         "forbids it there: PROTOCOL_VIOLATION)"), line
    quic = json.loads(res.stdout)["quic"]
    # not taken: no HANDSHAKE_DONE was due (tlsprobe sent no Finished), none is said to be
    assert quic["closed_by_us"] == 0xA and quic["handshake_done"] is None


def test_path_frames_are_read() -> None:
    frames = w.parse_frames(b"\x1a" + b"12345678" + b"\x1b" + b"abcdefgh" + b"\x01")
    assert [(f.type, f.data) for f in frames] == [(0x1A, b"12345678"), (0x1B, b"abcdefgh"),
                                                  (0x01, b"")]
    with pytest.raises(ValueError):
        w.parse_frames(b"\x1a1234")   # cut short
