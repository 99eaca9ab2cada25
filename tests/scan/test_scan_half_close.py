"""An audit job's connection sends its FIN right after the ClientHello (issue 35, the relay).

openssl s_server serves one connection at a time and takes the next only when the client's
close reaches it: through a slow path each of a group audit's connections held it a round
trip longer than its answer needed. The job sends nothing after its hello, so its FIN goes
with the hello (a half-close) and the server is free once it has answered. A path that
drops half-closed connections (a proxy that ends both ways on the client's FIN) loses the
first answers: read like a flaky network's, and the target's connections close whole
from then on. Real s_server -www behind loopback relays that log, per connection, when the
client's FIN and the server's first byte passed."""
from __future__ import annotations

import select
import socket
import threading
import time
from typing import Any

import pytest

from tests.helpers.faultproxy import pipe, serve_loopback
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

DELAY = 0.05   # seconds each client chunk is held, with what follows it meanwhile (a FIN
               # sent with the hello is seen before the server has the hello)


class LoggingRelay:
    """A loopback relay to `backend` that holds each client chunk DELAY s and notes per
    connection when the client's FIN and the server's first byte passed (`fin_first`: the
    FIN before any answer). `drop_half_closed`: the client's FIN ends the connection both
    ways, unanswered (as nginx's stream proxy does without proxy_half_close; the hello held
    with it is not passed on, so no answer can come, whatever the load), except on the
    first connection, which is passed on whole: the target answers a half-closed connection
    once, and a client that trusted the path from then on would lose the rest."""

    def __init__(self, backend: tuple[str, int], drop_half_closed: bool = False) -> None:
        self.backend = backend
        self.drop = drop_half_closed
        self.log: list[dict[str, float]] = []
        self.sock, self.port = serve_loopback(self._accept)

    def _accept(self, conn: socket.socket) -> None:
        entry: dict[str, float] = {}
        drop = self.drop and bool(self.log)   # the first connection is passed on whole
        self.log.append(entry)
        threading.Thread(target=self._serve, args=(conn, entry, drop), daemon=True).start()

    def _serve(self, conn: socket.socket, entry: dict[str, float], drop: bool) -> None:
        try:
            upstream = socket.create_connection(self.backend, timeout=10)
        except OSError:
            conn.close()
            return
        answer = threading.Thread(target=pipe, args=(upstream, conn, lambda: entry.setdefault(
            "answer", time.monotonic())), daemon=True)
        answer.start()
        self._forward(conn, upstream, entry, drop)
        answer.join(10)
        conn.close()
        upstream.close()

    def _forward(self, conn: socket.socket, upstream: socket.socket,
                 entry: dict[str, float], drop: bool) -> None:
        """The client's bytes to the server, each chunk held DELAY s with what follows it
        meanwhile (its FIN too: noted before the server can have answered); `drop`: a chunk
        held with the client's FIN is not passed on, and the connection ends both ways."""
        ended = False
        try:
            while not ended:
                data = conn.recv(65536)
                if not data:
                    entry.setdefault("fin", time.monotonic())
                    break
                held, ended = self._hold(conn, data, entry)
                if not (ended and drop):
                    upstream.sendall(held)
        except OSError:
            pass
        for sock in (conn, upstream) if drop else (upstream,):
            try:
                sock.shutdown(socket.SHUT_RDWR if drop else socket.SHUT_WR)
            except OSError:
                pass

    @staticmethod
    def _hold(conn: socket.socket, data: bytes, entry: dict[str, float]) -> tuple[bytes, bool]:
        """`data` and what else the client sends within DELAY s; True when it ended."""
        until = time.monotonic() + DELAY
        held = [data]
        while (left := until - time.monotonic()) > 0:
            if not select.select([conn], [], [], left)[0]:
                break
            more = conn.recv(65536)
            if not more:
                entry.setdefault("fin", time.monotonic())
                time.sleep(max(0.0, until - time.monotonic()))
                return b"".join(held), True
            held.append(more)
        return b"".join(held), False

    def fin_first(self) -> list[bool]:
        """Per connection, in the order accepted: did the client's FIN pass before the
        server's first byte (or without one)?"""
        return [e.get("fin", float("inf")) < e.get("answer", float("inf")) for e in self.log]

    def unanswered(self) -> list[int]:
        """The connections (indices) whose client sent its FIN and got no answer."""
        return [i for i, e in enumerate(self.log) if "fin" in e and "answer" not in e]

    def close(self) -> None:
        self.sock.close()


def _groups(port: int) -> tuple[Any, list[tuple[str, list[str], str]]]:
    """A group audit of 127.0.0.1:port: the report and its verdicts (version, groups in the
    server's order, the order)."""
    report = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=("groups",)),
                       Scheduler(timeout=5))[0]
    assert report.error is None, report.error
    return report, [(g.version.name, [c.name for c in g.supported], str(g.order))
                    for g in report.groups]


@pytest.fixture
def s_server(server_cache: Any) -> Any:
    return server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)


@pytest.mark.needs_impl("openssl")
def test_a_group_audits_connections_send_their_fin_with_the_hello(s_server: Any) -> None:
    direct, want = _groups(s_server.port)
    relay = LoggingRelay(("127.0.0.1", s_server.port))
    try:
        report, got = _groups(relay.port)
    finally:
        relay.close()
    assert got == want and want[0][1] == ["x25519", "secp384r1", "ffdhe2048"], (got, want)
    assert report.total_connections == direct.total_connections == len(relay.log), \
        (report.total_connections, direct.total_connections, len(relay.log))
    # every connection's FIN reached the relay before the server's answer left it: the
    # one-connection server never waits for a close after answering
    assert all(relay.fin_first()), relay.log


@pytest.mark.needs_impl("openssl")
def test_a_path_that_drops_half_closed_connections_gets_whole_ones(s_server: Any) -> None:
    direct, want = _groups(s_server.port)
    relay = LoggingRelay(("127.0.0.1", s_server.port), drop_half_closed=True)
    try:
        report, got = _groups(relay.port)
    finally:
        relay.close()
    assert got == want, (got, want)
    # the path dropped half-closed connections (all but the first: the target answered one
    # half-closed connection, then lost the others); from the first loss on, the
    # connections close whole, but for those already open then (the per-host cap's 3)
    lost = relay.unanswered()
    assert lost, relay.log
    assert not any(relay.fin_first()[lost[0] + 3:]), relay.fin_first()
    # each lost answer (a half-closed connection's, whole or cut) was asked again, as after
    # a flaky network's bare close
    half = sum(relay.fin_first())
    assert report.total_connections == len(relay.log) <= direct.total_connections + half, \
        (report.total_connections, direct.total_connections, relay.fin_first())
