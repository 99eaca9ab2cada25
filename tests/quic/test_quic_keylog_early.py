"""`tlsprobe HOST --quic --keylog FILE` writes the secrets as the handshake ends, before its
CONNECTION_CLOSE leaves (as over TCP, before close_notify), so that a capture running
beside it finds the keys while the connection is open. Was: written once the run was over.
Seen through a UDP relay on loopback (test_quic_loss.Relay) in front of aioquic's server,
which reads the key log as each of our datagrams passes."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.quic.test_quic_loss import Relay, relay  # noqa: F401


def test_the_quic_probe_logs_its_keys_before_its_close(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any],
        tmp_path: Path) -> None:
    server = quic_server("x25519")
    r = relay(server)
    keys = tmp_path / "keys.log"
    logged: list[int] = []   # key log lines as each of our datagrams passed

    def note(datagram: bytes) -> bytes:
        logged.append(len(keys.read_text().splitlines()) if keys.exists() else 0)
        return datagram
    r.alter_client = note
    res = run_cli("127.0.0.1:" + str(r.port), "--quic", "--keylog", str(keys), "--json",
                  "--no-verify", "--timeout", "5", isolated=True)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["version"]["name"] == "TLS 1.3"
    lines = keys.read_text().splitlines()
    assert len(lines) >= 5, lines     # handshake and traffic secrets
    assert logged and logged[-1] == len(lines), (logged, lines)   # before the last datagram
