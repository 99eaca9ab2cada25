"""Fixtures for the --quic tests: `quic_server(groups=..., retry=...)` starts aioquic's QUIC
v1 server (tests/lab_servers/quic_server.py, a process of its own) on 127.0.0.1 and a free
UDP port, with the session's ECDSA certificate, once per configuration; all are stopped by
PID at the end. aioquic is in the test extra: without it the test fails (no skip)."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from servers import CertSet

SERVER = Path(__file__).resolve().parent.parent / "lab_servers" / "quic_server.py"
START_WAIT = 30.0


@dataclass(frozen=True)
class QuicServer:
    port: int
    ca: Path
    process: subprocess.Popen[str]

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


QuicServerFactory = Callable[..., QuicServer]


def _start(certs: CertSet, groups: str, retry: bool) -> QuicServer:
    leaf = certs.leaves["ecdsa"]
    argv = [sys.executable, str(SERVER), str(leaf.chain), str(leaf.key), "--groups", groups]
    if retry:
        argv.append("--retry")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], START_WAIT)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("READY "):
        _stop(proc)
        pytest.fail(f"aioquic server did not start (groups {groups}): {line!r}")
    return QuicServer(int(line.split()[1]), certs.ca, proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@pytest.fixture(scope="session")
def quic_server(certs: CertSet) -> Iterator[QuicServerFactory]:
    running: dict[tuple[str, bool], QuicServer] = {}

    def start(groups: str = "x25519,secp256r1", retry: bool = False) -> QuicServer:
        key = (groups, retry)
        found = running.get(key)
        if found is None or found.process.poll() is not None:
            running[key] = found = _start(certs, groups, retry)
            time.sleep(0.1)   # the socket is bound before READY; let the loop settle
        return found

    yield start
    for server in running.values():
        _stop(server.process)
