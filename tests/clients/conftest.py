"""Client simulation tests: the profiles recorded here (tests/clients/data, by
tests/clients/data/record.py from the installed clients), a loopback listener that keeps
each ClientHello it is sent (what went on the wire), and a runner of the simulation over the
scan's scheduler."""
from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.clients import ClientProfile, ClientSimulation
from tlsprobe.net.tcp import parse_target
from tlsprobe.probes.audit.scheduler import Scheduler, TargetRunner
from tlsprobe.probes.clients.profiles import load_profiles
from tlsprobe.probes.clients.simulate import TrustChecker, simulate_clients

DATA = Path(__file__).resolve().parent / "data"


def recorded_profiles() -> dict[str, ClientProfile]:
    """The profiles recorded for these tests, by id (test-chromium, test-firefox, ...)."""
    return {p.id: p for p in load_profiles(DATA)}


@pytest.fixture(scope="session")
def profiles() -> dict[str, ClientProfile]:
    return recorded_profiles()


def simulate(port: int, chosen: list[ClientProfile], *, host: str = "localhost",
             report: AuditReport | None = None, timeout: float = 5.0,
             cafile: str | None = None, trust: bool = False,
             retries: int = 0) -> dict[str, ClientSimulation]:
    """Each profile simulated against host:port over the scan's scheduler, by id; the chain
    checked (against `cafile`, else the system store) only with `cafile` or `trust`."""
    target = parse_target(f"{host}:{port}")
    scheduler = Scheduler(timeout=timeout, retries=retries, backoff=0.05)
    name = None if host[0].isdigit() or ":" in host else host
    runner = TargetRunner(target, scheduler, name)
    checker = TrustChecker(name or host, cafile) if cafile or trust else None
    sims = asyncio.run(simulate_clients(runner, tuple(chosen), report, checker))
    return {s.profile: s for s in sims}


@dataclass
class Catcher:
    """A loopback listener that keeps the ClientHello handshake message of every connection
    (reassembled from its records) and closes the connection."""

    port: int = 0
    hellos: list[bytes] = field(default_factory=list)
    record_versions: list[int] = field(default_factory=list)
    sock: socket.socket | None = None

    def serve(self) -> None:
        assert self.sock is not None
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                hello, version = _read_hello(conn)
                if hello:
                    self.hellos.append(hello)
                    self.record_versions.append(version)


def _read_hello(conn: socket.socket) -> tuple[bytes, int]:
    """The ClientHello handshake message and the version of its first record."""
    data, hello, version = b"", b"", 0
    try:
        while True:
            while len(data) < 5:
                chunk = conn.recv(65536)
                if not chunk:
                    return b"", 0
                data += chunk
            size = int.from_bytes(data[3:5], "big")
            while len(data) < 5 + size:
                chunk = conn.recv(65536)
                if not chunk:
                    return b"", 0
                data += chunk
            version = version or int.from_bytes(data[1:3], "big")
            hello, data = hello + data[5:5 + size], data[5 + size:]
            if len(hello) >= 4 and len(hello) >= 4 + int.from_bytes(hello[1:4], "big"):
                return hello[:4 + int.from_bytes(hello[1:4], "big")], version
    except OSError:
        return b"", 0


@pytest.fixture
def catcher() -> Iterator[Catcher]:
    c = Catcher()
    c.sock = socket.socket()
    c.sock.bind(("127.0.0.1", 0))
    c.sock.listen(16)
    c.port = c.sock.getsockname()[1]
    thread = threading.Thread(target=c.serve, daemon=True)
    thread.start()
    yield c
    c.sock.close()
    thread.join(5)
