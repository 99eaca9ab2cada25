"""Scan behaviour a stock server does not show: a server that refuses offers without key
shares, connection resets, politeness limits. The servers here are small loopback TLS 1.3
responders written with tlsprobe's own codec and key exchange: they parse the real
ClientHello bytes and answer with a real ServerHello (a valid key share) or an alert.
"""
from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import pytest

from tlsprobe import kex
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.model.audit import AuditReport, GroupAudit
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.handshake import HandshakeReassembler, decode_handshake, frame
from tlsprobe.wire.hello import ClientHello, ServerHello
from tlsprobe.wire.record import Record, RecordReader

X25519, P256, P384, MLKEM768_X25519 = 0x001D, 0x0017, 0x0018, 0x11EC


@dataclass
class MiniServer:
    """TLS 1.3 only; supports `groups` in client order; optional misbehaviour.

    shareless: "alert" refuses a ClientHello whose key_share is empty (instead of sending a
    HelloRetryRequest); "hrr" behaves. reset_first: that many connections are reset (RST)
    before the server answers normally. Like tlslite-ng, it refuses key shares that break
    RFC 8446 section 4.2.8 (not in supported_groups' order) with illegal_parameter, and
    `max_groups` refuses hellos listing more groups with handshake_failure (a server that
    chokes on large offers). busy_reset: a connection that arrives while another is being
    served is reset at once (a server that refuses parallel connections). busy_refuse: the
    server stops listening while it serves a connection (connections are refused), as a
    single-threaded server without a backlog does."""

    groups: tuple[int, ...]
    shareless: str = "alert"
    max_groups: int = 1000
    reset_first: int = 0
    reset_all: bool = False
    hold: float = 0.0
    busy_reset: bool = False
    busy_refuse: bool = False
    closed: bool = False
    busy: int = 0                   # connections reset for arriving while another was served
    starts: list[float] = field(default_factory=list)
    max_active: int = 0
    illegal: int = 0                # hellos refused for breaking RFC 8446 4.2.8
    _active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.port = 0
        while True:
            # busy_refuse leaves its port free while it serves: one below the ephemeral
            # range, which no other bind(0) or outgoing connection takes meanwhile
            if self.busy_refuse:
                self.port = random.randrange(20000, 32000)
            try:
                self._listen()
                break
            except OSError:
                continue
        threading.Thread(target=self._accept, daemon=True).start()

    def _listen(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(("127.0.0.1", self.port))
        except OSError:
            self.sock.close()
            raise
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.busy_refuse:    # nobody listens while this one is served
                self.sock.close()
                self.starts.append(time.monotonic())
                self._active += 1
                self._serve(conn, len(self.starts), relisten=True)
                if self.closed:
                    self.sock.close()
                    return
                continue
            with self._lock:
                if self.busy_reset and self._active:
                    self.busy += 1
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()
                    continue
                self.starts.append(time.monotonic())
                n = len(self.starts)
                self._active += 1
                self.max_active = max(self.max_active, self._active)
            threading.Thread(target=self._serve, args=(conn, n), daemon=True).start()

    def _serve(self, conn: socket.socket, n: int, relisten: bool = False) -> None:
        # A connection counts as active from accept until just before the answer: that span lies
        # inside the client's connect..close span, so the count never exceeds what the client
        # really had open (waiting for the client's close would lag behind it and over-count).
        done = False
        try:
            hello = self._read_hello(conn)
            if self.hold:
                time.sleep(self.hold)
            if self.reset_all or n <= self.reset_first:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            answer = self._answer(hello)
            # Left before the answer goes out: the client cannot have closed (and opened its
            # next connection) yet, so the span never outlasts the client's own.
            done = self._leave()
            if relisten:     # listening again before the answer goes out, so before the
                self._listen()    # client can close and connect again
                relisten = False
            conn.sendall(answer)
            conn.recv(100)
        except OSError:
            pass
        finally:
            if not done:
                self._leave()
            if relisten:     # not answered: listening again all the same
                self._listen()
            conn.close()

    def _leave(self) -> bool:
        with self._lock:
            self._active -= 1
        return True

    @staticmethod
    def _read_hello(conn: socket.socket) -> ClientHello:
        records, handshakes = RecordReader(), HandshakeReassembler()
        conn.settimeout(5)
        while True:
            data = conn.recv(65536)
            if not data:
                raise OSError("closed")
            for rec in records.feed(data):
                for msg in handshakes.feed(rec.fragment):
                    return decode_handshake(msg).message

    def _answer(self, hello: ClientHello) -> bytes:
        alert = Record(21, 0x0303, bytes([2, 40])).to_bytes()
        shares = {e.group: e.key_exchange for e in hello.key_shares}
        if 0x0304 not in hello.supported_versions:
            return Record(21, 0x0303, bytes([2, 70])).to_bytes()
        listed = [g for g in hello.supported_groups if g in shares]
        if list(shares) != listed:   # RFC 8446 4.2.8, as tlslite-ng checks it
            self.illegal += 1
            return Record(21, 0x0303, bytes([2, 47])).to_bytes()
        if len(hello.supported_groups) > self.max_groups:
            return alert
        offered = [g for g in hello.supported_groups if g in self.groups]
        if not shares:
            if self.shareless == "alert" or not offered:
                return alert
            return self._server_hello(hello, ext.key_share_hrr(offered[0]), hrr=True)
        group = next((g for g in shares if g in self.groups), None)
        if group is None:
            return alert
        public, _ = kex.respond(group, shares[group])
        return self._server_hello(hello, ext.key_share_server(group, public))

    @staticmethod
    def _server_hello(hello: ClientHello, share: ext.Extension, hrr: bool = False) -> bytes:
        from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM
        sh = ServerHello(0x0303, HELLO_RETRY_REQUEST_RANDOM if hrr else os.urandom(32),
                         hello.legacy_session_id, 0x1301, 0,
                         [ext.supported_versions_server(0x0304), share])
        return Record(22, 0x0303, frame(2, sh.serialize())).to_bytes()

    def close(self) -> None:
        self.closed = True
        self.sock.close()


@pytest.fixture
def mini():
    started: list[MiniServer] = []

    def start(**kw) -> MiniServer:
        server = MiniServer(**kw)
        started.append(server)
        return server
    yield start
    for s in started:
        s.close()


def groups_audit(server: MiniServer, **sched) -> AuditReport:
    sched.setdefault("timeout", 2.0)
    return run_audit([Target("127.0.0.1", server.port)], AuditOptions(checks=("groups",)),
                     Scheduler(**sched))[0]


def groups13(server: MiniServer, **sched) -> GroupAudit:
    audit = groups_audit(server, **sched).group_audit(0x0304)
    assert audit is not None
    return audit


def test_share_less_refusal_falls_back_to_real_key_shares(mini):
    server = mini(groups=(P384, X25519, MLKEM768_X25519), shareless="alert")
    g = groups13(server)
    assert g.method == "key_share" and g.spoken is True
    assert {c.id for c in g.supported} == {P384, X25519, MLKEM768_X25519}
    # Groups tlsprobe cannot compute a share for are "not established", never "unsupported".
    uncomputable = {c.id for c in g.inconclusive}
    assert uncomputable and all(not kex.is_computable(c) for c in uncomputable)
    assert not uncomputable & {c.id for c in g.not_supported}
    assert any("HelloRetryRequest route inconclusive" in n for n in g.notes)


@pytest.mark.parametrize("mode", ["alert", "drop"])
def test_the_key_share_route_cut_by_a_limiter_misses_no_group(mini, mode):
    """The share-less offer refused, the groups are enumerated with real key shares; a
    limiter (tests/helpers/faultproxy.py) serves the first three TLS 1.3 hellos, the
    share-less one (refused, and asked again) and the first key-share offer (the server picks secp384r1), then
    refuses every hello: x25519 and X25519MLKEM768, which the server has, were "not
    supported" (--groups-only: no reference hello repeated after the phase). Now such a
    refusal is asked twice and holds only while the last answered offer is still
    answered: here it is not, and the rest is inconclusive."""
    from tests.helpers.faultproxy import FaultProxy
    server = mini(groups=(P384, X25519, MLKEM768_X25519), shareless="alert")
    seen = [0]   # TLS 1.3 hellos (the TLS 1.2 audit runs beside: the mini server refuses it)

    def limiter(_i: int, hello: ClientHello | None) -> str | None:
        if hello is None or 0x0304 not in hello.supported_versions:
            return None
        seen[0] += 1
        return mode if seen[0] > 3 else None
    proxy = FaultProxy([("127.0.0.1", server.port)], limiter)
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)], AuditOptions(checks=("groups",)),
                      Scheduler(retries=0, timeout=2.0, per_host=1))[0]
    finally:
        proxy.close()
    g = r.group_audit(0x0304)
    assert g is not None and g.method == "key_share", g
    assert [c.id for c in g.supported] == [P384], g
    assert not {X25519, MLKEM768_X25519} & {c.id for c in g.not_supported}, g
    assert {X25519, MLKEM768_X25519} <= {c.id for c in g.inconclusive}, g
    assert any("rate limiting" in n for n in g.notes), g.notes


def test_hrr_route_on_the_mini_server_matches_its_groups(mini):
    server = mini(groups=(X25519, P256), shareless="hrr")
    report = groups_audit(server)
    g, g12 = report.group_audit(0x0304), report.group_audit(0x0303)
    assert g.method == "hello_retry_request"
    # The mini server follows the client's order: listed in candidate order.
    assert [c.id for c in g.supported] == [P256, X25519] and g.order == "client"
    # 2 picks, the final refusal, the last offer answered, the final hello twice more
    # (confirm.refusal_stands), the first offer once more after it (the group audit alone:
    # no reference hello repeated after it checks the server still answers), 1 to decide
    # the order
    assert g.connections == 8
    # TLS 1.3 only: a protocol_version alert settles TLS 1.2
    # (that alert says "not spoken", a negative verdict: asked on a second connection)
    assert g12.spoken is False and g12.connections == 2 and g12.supported == ()
    assert len(server.starts) == report.total_connections == 10


def test_resets_are_inconclusive_not_unsupported(mini):
    server = mini(groups=(X25519,), shareless="hrr", reset_all=True)
    report = run_audit([Target("127.0.0.1", server.port)], AuditOptions(checks=("groups",)),
                       Scheduler(retries=2, backoff=0.01, timeout=2.0))[0]
    g = report.group_audit(0x0304)
    assert g.supported == () and g.not_supported == ()
    assert len(g.inconclusive) > 10 and g.spoken is None
    assert report.retries >= 2 and any("reset" in n for n in g.notes)


def test_a_reset_is_retried_with_backoff(mini):
    server = mini(groups=(X25519,), shareless="hrr", reset_first=1)
    report = run_audit([Target("127.0.0.1", server.port)], AuditOptions(checks=("groups",)),
                       Scheduler(retries=2, backoff=0.05, per_host=1, timeout=2.0))[0]
    g = report.group_audit(0x0304)
    assert [c.id for c in g.supported] == [X25519] and g.inconclusive == ()
    assert report.retries == 1
    # The reset connection was the first one; its job waits the backoff before retrying.
    assert server.starts[-1] - server.starts[0] >= 0.05


def test_per_host_cap_and_delay(mini):
    server = mini(groups=(X25519, P256, P384), shareless="hrr", hold=0.05)
    run_audit([Target("127.0.0.1", server.port)], AuditOptions(checks=("groups", "pq")),
              Scheduler(per_host=2, timeout=2.0))
    assert server.max_active <= 2 and len(server.starts) >= 6
    paced = mini(groups=(X25519, P256), shareless="hrr")
    run_audit([Target("127.0.0.1", paced.port)], AuditOptions(checks=("groups",)),
              Scheduler(delay=0.1, timeout=2.0))
    gaps = [b - a for a, b in zip(paced.starts, paced.starts[1:])]
    # Starts are paced 0.1 s apart by the client; the server sees them through accept(),
    # whose latency on a loaded machine shifts single gaps but not the whole span.
    assert gaps and paced.starts[-1] - paced.starts[0] >= 0.095 * len(gaps)
    assert min(gaps) >= 0.05


def test_a_server_that_resets_parallel_connections_gets_one_at_a_time(mini):
    """A server that resets every connection arriving while it serves another: the resets
    in company are asked again alone, and after two answered there, the target gets one
    connection at a time; nothing is lost (the retries with backoff alone lost groups as
    long as other connections kept the server busy)."""
    server = mini(groups=(X25519, P256, P384), shareless="hrr", hold=0.3, busy_reset=True)
    report = groups_audit(server, retries=2, backoff=0.02)   # the backoff: within one hold
    g, g12 = report.group_audit(0x0304), report.group_audit(0x0303)
    assert server.busy >= 2 and g.inconclusive == g12.inconclusive == (), (server.busy, g12)
    assert {c.id for c in g.supported} == {X25519, P256, P384} and g.spoken is True
    assert g12.spoken is False    # TLS 1.3 only (was: TLS 1.2 inconclusive, 30 groups lost)
    assert report.one_at_a_time and "reset while another was open" in report.one_at_a_time


def test_a_server_that_refuses_while_it_serves_gets_one_connection_at_a_time(mini):
    """A server that stops listening while it serves a connection: connections refused
    while another is open are asked again alone (a refusal before any connection was made
    is still "nothing listens", not retried)."""
    server = mini(groups=(X25519, P256), shareless="hrr", hold=0.2, busy_refuse=True)
    report = groups_audit(server, retries=2, backoff=0.02)
    g, g12 = report.group_audit(0x0304), report.group_audit(0x0303)
    assert g.inconclusive == g12.inconclusive == (), (g, g12)
    assert {c.id for c in g.supported} == {X25519, P256} and g12.spoken is False
    # refused; or reset, for the connections the closing listener still held in its backlog
    # (a busy machine leaves some there): either way, in company only
    assert report.one_at_a_time and any(
        f"{how} while another was open" in report.one_at_a_time for how in ("refused", "reset"))


def test_a_server_that_resets_alone_too_keeps_its_parallel_connections(mini):
    """A reset that repeats alone is the server's own answer: the target keeps its parallel
    connections (and the resets stay inconclusive)."""
    server = mini(groups=(X25519,), shareless="hrr", reset_all=True, hold=0.05)
    report = groups_audit(server, retries=2, backoff=0.01)
    assert report.one_at_a_time is None and server.max_active >= 2


def test_unreachable_target_is_a_network_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # bound, not listening: connections are refused
        report = run_audit([Target("127.0.0.1", port)], AuditOptions(),
                           Scheduler(retries=1, backoff=0.01, timeout=1.0))[0]
    assert report.error_kind == "network" and "refused" in report.error
    assert report.findings == () and report.total_connections == 0


def test_a_server_that_accepts_no_version_is_an_error(mini):
    """Every hello refused with an alert: the audit is an error (exit 5), not a clean 0."""
    from tlsprobe.commands.scan import exit_code
    server = mini(groups=(), shareless="alert")
    report = run_audit([Target("127.0.0.1", server.port)], AuditOptions(checks=("versions",)),
                       Scheduler(timeout=2.0))[0]
    assert report.error_kind == "alert"
    assert "accepted no protocol version" in (report.error or "")
    assert all(v.status == "not_supported" for v in report.versions)
    assert exit_code([report], None) == 5


def test_every_audit_hello_orders_its_key_shares_as_rfc_8446_wants(mini):
    """The versions, suites and post-quantum hellos give their key shares separately from
    supported_groups; sent out of order, a strict server refused them all (illegal_parameter)
    and TLS 1.3 was reported as not spoken."""
    server = mini(groups=(X25519, P256), shareless="hrr")
    report = run_audit([Target("127.0.0.1", server.port)],
                       AuditOptions(checks=("versions", "groups", "pq", "suites")),
                       Scheduler(timeout=2.0))[0]
    assert server.illegal == 0
    assert [v.status for v in report.versions if v.version.id == 0x0304] == ["supported"]
    assert {c.id for c in report.group_audit(0x0304).supported} == {X25519, P256}
    assert [c.id for c in report.suite_audit(0x0304).supported] == [0x1301]


def test_a_refused_large_offer_is_confirmed_with_a_minimal_hello(mini):
    """A server that refuses the big versions hello but speaks TLS 1.3: the refusal answers
    that hello, not the version; one minimal hello shows TLS 1.3 is spoken."""
    server = mini(groups=(X25519, P256), shareless="hrr", max_groups=4)
    report = run_audit([Target("127.0.0.1", server.port)], AuditOptions(checks=("versions",)),
                       Scheduler(timeout=2.0))[0]
    v13 = next(v for v in report.versions if v.version.id == 0x0304)
    assert v13.status == "supported" and "minimal hello" in v13.detail
    assert "handshake_failure" in v13.detail
    # TLS 1.2 is refused twice (full and minimal hello): "not spoken" is confirmed.
    v12 = next(v for v in report.versions if v.version.id == 0x0303)
    assert v12.status == "not_supported" and "minimal TLS 1.2 hello too" in v12.detail
    # Older versions refused with protocol_version need no second connection; the minimal
    # TLS 1.3 hello is asked once more after the refusals (they hold only while it is
    # answered: versions.py _refusals_hold); TLS 1.2's minimal refusal is confirmed (the
    # minimal TLS 1.3 hello, then the minimal TLS 1.2 hello twice: confirm.refusal_stands).
    assert report.connections["versions"] == 11


def test_probe_warns_when_key_shares_break_the_groups_order(run_cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # nothing listens: the warning comes before connecting
        bad = run_cli(f"127.0.0.1:{port}", "--groups", "P-256:x25519", "--key-shares",
                      "x25519:P-256", "--timeout", "1")
        good = run_cli(f"127.0.0.1:{port}", "--groups", "P-256:x25519", "--key-shares",
                       "P-256:x25519", "--timeout", "1")
    warning = [ln for ln in bad.stderr.splitlines() if "warning" in ln]
    assert len(warning) == 1 and "order of supported_groups" in warning[0]
    assert warning[0].startswith("tlsprobe: warning: --key-shares:")
    assert "warning" not in good.stderr


def test_default_hellos_are_conformant_and_the_check_sees_a_bad_order():
    from tlsprobe.engine.config import ClientConfig, share_order_problem
    from tlsprobe.probes.timing.plan import plan
    for config in (ClientConfig(), ClientConfig(grease=True), ClientConfig(groups=(P256, X25519)),
                   plan(0x0304, X25519, None).config):
        assert share_order_problem(config) is None, config
    assert "order" in share_order_problem(ClientConfig(key_share_groups=(X25519, MLKEM768_X25519)))
    assert "does not list" in share_order_problem(
        ClientConfig(groups=(X25519,), key_share_groups=(X25519, P256)))
