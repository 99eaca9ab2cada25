"""Fixtures for the --quic tests: `quic_server(groups=..., retry=...)` starts aioquic's QUIC
v1 server (tests/lab_servers/quic_server.py, a process of its own) on 127.0.0.1 and a free
UDP port, with the session's ECDSA certificate, once per configuration (a fixed stateless
reset token, or an application CONNECTION_CLOSE after each handshake, on request); all
are stopped by PID at the end. aioquic runs in the lab environment
(tests/helpers/lab_env.py: it needs pyOpenSSL, which the test environment must not have);
without it, servers.peer_unavailable (a failure under CI).
`ngtcp2_server(groups=..., validate=...)` does the same with ngtcp2's GnuTLS server
(`gtlsserver` from Debian's ngtcp2-server; groups as GnuTLS priority items), which sends a
HelloRetryRequest and a Retry (--validate-addr); missing, it is servers.peer_unavailable.
`udp_peer` is a scripted UDP peer for the hostile cases."""
from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import lab_env
from tests.helpers.servers import CertSet, _owned_by, peer_unavailable

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


def _start(certs: CertSet, groups: str, retry: bool, reset_token: str = "",
           close_code: str = "", alpn: str = "h3", path_challenge: bool = False,
           no_parameters: bool = False) -> QuicServer:
    leaf = certs.leaves["ecdsa"]
    argv = [lab_env.require(), str(SERVER), str(leaf.chain), str(leaf.key), "--groups", groups]
    if retry:
        argv.append("--retry")
    if reset_token:
        argv += ["--reset-token", reset_token]
    if close_code:
        argv += ["--close-code", close_code]
    if alpn != "h3":
        argv += ["--alpn", alpn]
    if path_challenge:
        argv.append("--path-challenge")
    if no_parameters:
        argv.append("--no-transport-parameters")
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
    running: dict[tuple[str, bool, str, str, str, bool, bool], QuicServer] = {}

    def start(groups: str = "x25519,secp256r1", retry: bool = False,
              reset_token: str = "", close_code: str = "", alpn: str = "h3",
              path_challenge: bool = False, no_parameters: bool = False) -> QuicServer:
        key = (groups, retry, reset_token, close_code, alpn, path_challenge, no_parameters)
        found = running.get(key)
        if found is None or found.process.poll() is not None:
            running[key] = found = _start(certs, groups, retry, reset_token, close_code, alpn,
                                          path_challenge, no_parameters)
            time.sleep(0.1)   # the socket is bound before READY; let the loop settle
        return found

    yield start
    for server in running.values():
        _stop(server.process)


def _udp_inodes(port: int) -> set[int]:
    """Socket inodes bound to 127.0.0.1:port (read from /proc/net/udp: no packet sent)."""
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/udp") as table:
        return {int(fields[9]) for fields in (line.split() for line in list(table)[1:])
                if fields[1] == wanted}


def _start_ngtcp2(certs: CertSet, groups: str, validate: bool) -> QuicServer:
    """gtlsserver on a free UDP port, ready once its own socket is bound there. A port that
    another process (a pytest-xdist worker's client or server) took between probing and
    binding it is retried on another port, up to 3 times."""
    binary = shutil.which("gtlsserver")
    if binary is None:
        peer_unavailable("gtlsserver (Debian package ngtcp2-server) is not installed")
    leaf = certs.leaves["ecdsa"]
    for _ in range(3):
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        argv = [str(binary), "-q", f"--groups={groups}",
                *(["--validate-addr"] if validate else []),
                "127.0.0.1", str(port), str(leaf.key), str(leaf.chain)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                text=True, start_new_session=True)
        until = time.monotonic() + START_WAIT
        while time.monotonic() < until and proc.poll() is None:
            inodes = _udp_inodes(port)
            if inodes and _owned_by(proc.pid, inodes):
                return QuicServer(port, certs.ca, proc)
            time.sleep(0.05)
        _stop(proc)
        if proc.returncode == 0 or time.monotonic() >= until:
            break
    pytest.fail(f"gtlsserver did not bind 127.0.0.1:{port} (groups {groups}, exit "
                f"{proc.returncode})")


@pytest.fixture(scope="session")
def ngtcp2_server(certs: CertSet) -> Iterator[QuicServerFactory]:
    running: dict[tuple[str, bool], QuicServer] = {}

    def start(groups: str = "-GROUP-ALL:+GROUP-X25519", validate: bool = False) -> QuicServer:
        key = (groups, validate)
        found = running.get(key)
        if found is None or found.process.poll() is not None:
            running[key] = found = _start_ngtcp2(certs, groups, validate)
        return found

    yield start
    for server in running.values():
        _stop(server.process)


Answer = bytes | Callable[[bytes], bytes]


class Received(list[bytes]):
    """The datagrams a `udp_peer` got, in order. A peer's thread appends them while it runs;
    `complete()` ends that thread and adds what the kernel had already delivered to the socket
    but the thread had not read yet (the client's last datagram, sent just before it exited)."""

    def __init__(self, sock: socket.socket, stop: threading.Event) -> None:
        super().__init__()
        self._sock, self._stop = sock, stop
        self.worker: threading.Thread | None = None

    def complete(self) -> Received:
        self._stop.set()
        if self.worker is not None:
            self.worker.join(5)
            assert not self.worker.is_alive(), "the UDP peer's thread did not stop"
        self._sock.setblocking(False)
        while True:
            try:
                self.append(self._sock.recv(65535))
            except BlockingIOError:
                return self


Peer = tuple[socket.socket, Received, list[Answer]]


@pytest.fixture
def udp_peer() -> Iterator[Peer]:
    """A loopback UDP socket; datagrams it gets are kept; `answers` are sent back to each
    (a callable answer is given the datagram). Call `got.complete()` once the client has
    exited before comparing everything it sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()
    got = Received(sock, stop)
    answers: list[Answer] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                data, addr = sock.recvfrom(65535)
            except (socket.timeout, OSError):
                continue
            got.append(data)
            for answer in answers:
                sock.sendto(answer(data) if callable(answer) else answer, addr)

    got.worker = threading.Thread(target=serve, daemon=True)
    got.worker.start()
    yield sock, got, answers
    stop.set()
    got.worker.join(2)
    sock.close()
