"""A farm of cheap TLS servers on many loopback addresses and ports, for surveys of hundreds
of targets: one asyncio loop in a daemon thread of this process serves every listening
socket with Python's ssl module (OpenSSL), so a target costs one socket, not one process.

Addresses spread over 127.0.0.0/8 (127.A.B.C; Linux routes the whole /8 to lo). Each
address gets `ports_per_host` listening ports (ephemeral, so no clash with other servers);
targets cycle through a few configurations (TLS 1.2 and 1.3, TLS 1.3 only, TLS 1.2 only;
one curve each, so that a group audit takes few connections) so the answers differ, and every `refused_every`-th
address has nothing listening (the survey reports those as network failures).

Used by tests/survey/test_survey_run.py and benchmarks/survey.py.
"""
from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

#: name -> (minimum version, maximum version, the one ECDH curve, OpenSSL's name)
CONFIGS: dict[str, tuple[ssl.TLSVersion, ssl.TLSVersion, str]] = {
    "tls12+13": (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3, "prime256v1"),
    "tls13": (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3, "secp384r1"),
    "tls12-p384": (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2, "secp384r1"),
}
#: what a survey must find: config -> version name -> the supported groups (IANA names)
EXPECTED: dict[str, dict[str, list[str]]] = {
    "tls12+13": {"TLS 1.3": ["secp256r1"], "TLS 1.2": ["secp256r1"]},
    "tls13": {"TLS 1.3": ["secp384r1"], "TLS 1.2": []},
    "tls12-p384": {"TLS 1.3": [], "TLS 1.2": ["secp384r1"]},
}


@dataclass(frozen=True)
class FarmTarget:
    host: str
    port: int
    config: str | None      # None: nothing listens (refused)

    @property
    def display(self) -> str:
        return f"{self.host}:{self.port}"


def addresses(count: int) -> list[str]:
    """`count` loopback addresses spread over 127.0.0.0/8 (never 127.0.0.1, which the
    other test servers use): 127.A.B.C with A, B, C varying."""
    out = []
    for i in range(count):
        a, b, c = 10 + i % 7 * 30, (i * 37) % 250 + 1, i % 250 + 2
        out.append(f"127.{a}.{b}.{c}")
    assert len(set(out)) == count
    return out


def _context(cert: Path, key: Path, config: str) -> ssl.SSLContext:
    low, high, curve = CONFIGS[config]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.minimum_version, ctx.maximum_version = low, high
    ctx.set_ecdh_curve(curve)     # the only group, in TLS 1.3 too
    return ctx


class _Server(asyncio.Protocol):
    """One TLS connection over memory BIOs: the handshake, then whatever the client sends
    read and dropped. A failed handshake's alert is sent before the close (asyncio's own
    SSL transport drops it, and a client then cannot tell a refusal from a crash)."""

    def __init__(self, ctx: ssl.SSLContext, farm: Farm) -> None:
        farm.accepted += 1
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.shaken = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.incoming.write(data)
        try:
            if not self.shaken:
                self.tls.do_handshake()
                self.shaken = True
            while self.tls.read(65536):
                pass
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLError, OSError):
            self._flush()
            self.transport.close()
            return
        self._flush()

    def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.transport.write(data)


class Farm:
    """The servers; `targets` in a fixed order (host by host), `stop()` closes them all."""

    def __init__(self, cert: Path, key: Path, hosts: int, ports_per_host: int,
                 refused_every: int = 0) -> None:
        self.accepted = 0       # connections accepted so far (all targets)
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(lambda loop, context: None)  # failed handshakes
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        contexts = {name: _context(cert, key, name) for name in CONFIGS}
        names = list(CONFIGS)
        self.targets: list[FarmTarget] = []
        self._servers: list[asyncio.base_events.Server] = []
        plan = []
        for h, host in enumerate(addresses(hosts)):
            for p in range(ports_per_host):
                refused = refused_every and h % refused_every == refused_every - 1
                plan.append((host, None if refused else names[(h + p) % len(names)]))
        try:
            for host, config in plan:
                if config is None:
                    self.targets.append(FarmTarget(host, _unused_port(host), None))
                    continue
                sock = socket.socket()
                sock.bind((host, 0))
                server = asyncio.run_coroutine_threadsafe(self._serve(sock, contexts[config]),
                                                          self.loop).result(30)
                self._servers.append(server)
                self.targets.append(FarmTarget(host, sock.getsockname()[1], config))
        except BaseException:
            self.stop()
            raise

    async def _serve(self, sock: socket.socket, ctx: ssl.SSLContext
                     ) -> asyncio.base_events.Server:
        return await self.loop.create_server(lambda: _Server(ctx, self), sock=sock, backlog=256)

    def stop(self) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()
        if self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)


def _unused_port(host: str) -> int:
    """A port on `host` that nothing listens on (bound and released)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
