"""Temporary STARTTLS refusals end to end (issue 30, 2.8): SMTP 421 and 454, LMTP 421, FTP
421, IMAP BYE, POP3 -ERR [SYS/TEMP], NNTP 400, ManageSieve (TRYLATER), IRC throttling, XMPP
<resource-constraint/>, LDAP busy, PostgreSQL 53300 and MySQL 1040 are asked again with
backoff: a scripted loopback server that refuses the first connections so and then lets
STARTTLS through is probed (and audited) as usual; one that always refuses is that target's
error, one line, exit 3 (like a refused or timed-out connection), the attempts said. The
real daemon's case (vsftpd with max_per_ip=1) is in test_starttls_daemons.py, with the
other daemons (one xdist group)."""
from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.accepting import Accepting, Step, one_stderr_line, play_steps
from tests.helpers.servers import CertSet

from tests.starttls.dialogue import (SERVER_HEAD, TLS_FEATURE, ldap_response, mysql_error,
                      mysql_greeting, pg_error)

from tlsprobe.net.starttls_binary import SSL_REQUEST, ldap_request  # noqa: E402

Cli = Callable[..., Any]
REPO = Path(__file__).resolve().parents[2]
# a step of the server's side: ("line", _) reads a line, ("exact", n) n bytes, ("upto", b)
# up to and including b, ("send", data) sends

SMTP_OK: list[Step] = [("send", b"220 mx ESMTP\r\n"), ("line", 0),
                       ("send", b"250-mx\r\n250 STARTTLS\r\n"), ("line", 0),
                       ("send", b"220 2.0.0 Ready to start TLS\r\n")]
XMPP_ERROR = (b"<stream:error><resource-constraint xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>"
              b"</stream:error></stream:stream>")
SCRIPTS: dict[str, tuple[str, list[Step], list[Step], str]] = {
    # id: (protocol, busy script, accepting script, text of the refusal)
    "smtp-421": ("smtp", [("send", b"421 4.3.2 Service not available, try later\r\n")],
                 SMTP_OK, "smtp: the server refused the session temporarily: '421 4.3.2"),
    "smtp-454": ("smtp", SMTP_OK[:4] + [(
        "send", b"454 4.7.0 TLS not available due to temporary reason\r\n")], SMTP_OK,
        "smtp: the server refused STARTTLS temporarily: '454 4.7.0"),
    "lmtp-421": ("lmtp", [("send", b"421 4.3.2 shutting down\r\n")], SMTP_OK,
                 "lmtp: the server refused the session temporarily"),
    "ftp-421": ("ftp", [("send", b"421 There are too many connections from your internet "
                                 b"address.\r\n")],
                [("send", b"220 ftp ready\r\n"), ("line", 0),
                 ("send", b"211-Features:\r\n AUTH TLS\r\n211 End\r\n"), ("line", 0),
                 ("send", b"234 Proceed with negotiation.\r\n")],
                "ftp: the server refused the session temporarily: '421 There are too many"),
    "imap-bye": ("imap", [("send", b"* BYE [UNAVAILABLE] Too many connections\r\n")],
                 [("send", b"* OK [CAPABILITY IMAP4rev1 STARTTLS] ready\r\n"), ("line", 0),
                  ("send", b"a002 OK Begin TLS negotiation now\r\n")],
                 "imap: the server refused the session temporarily: '* BYE"),
    "pop3-sys-temp": ("pop3", [("send", b"+OK ready\r\n"), ("line", 0),
                               ("send", b"+OK\r\nSTLS\r\n.\r\n"), ("line", 0),
                               ("send", b"-ERR [SYS/TEMP] TLS not available now\r\n")],
                      [("send", b"+OK ready\r\n"), ("line", 0),
                       ("send", b"+OK\r\nSTLS\r\n.\r\n"), ("line", 0),
                       ("send", b"+OK Begin TLS\r\n")],
                      "pop3: the server refused STLS temporarily: '-ERR [SYS/TEMP]"),
    "nntp-400": ("nntp", [("send", b"400 Service temporarily unavailable\r\n")],
                 [("send", b"200 news ready\r\n"), ("line", 0),
                  ("send", b"101 caps\r\nVERSION 2\r\nSTARTTLS\r\n.\r\n"), ("line", 0),
                  ("send", b"382 Continue with TLS negotiation\r\n")],
                 "nntp: the server refused the session temporarily: '400"),
    "sieve-trylater": ("sieve", [("send", b'BYE (TRYLATER) "Too many connections"\r\n')],
                       [("send", b'"IMPLEMENTATION" "x"\r\n"STARTTLS"\r\nOK "ready"\r\n'),
                        ("line", 0), ("send", b'OK "Begin TLS"\r\n')],
                       "sieve: the server refused the session temporarily"),
    "irc-throttled": ("irc", [("line", 0), ("send", b"ERROR :Closing Link: 127.0.0.1 "
                                                    b"(Throttled: Reconnecting too fast)\r\n")],
                      [("line", 0), ("send", b":irc.test 670 * :STARTTLS successful\r\n")],
                      "irc: the server refused the connection temporarily"),
    "xmpp-resource-constraint": (
        "xmpp", [("upto", b"version='1.0'>"), ("send", SERVER_HEAD + XMPP_ERROR)],
        [("upto", b"version='1.0'>"),
         ("send", SERVER_HEAD + b"<stream:features>" + TLS_FEATURE + b"</stream:features>"),
         ("upto", b"/>"), ("send", b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")],
        "xmpp: stream error 'resource-constraint' (temporary)"),
    "ldap-busy": ("ldap", [("exact", len(ldap_request())),
                           ("send", ldap_response(51, b"server busy"))],
                  [("exact", len(ldap_request())), ("send", ldap_response(0))],
                  "ldap: the server refused StartTLS temporarily, resultCode 51 (busy)"),
    "postgres-too-many": ("postgres", [("exact", len(SSL_REQUEST)), ("send", pg_error(
        b"SFATAL\x00C53300\x00Msorry, too many clients already\x00\x00"))],
        [("exact", len(SSL_REQUEST)), ("send", b"S")],
        "postgres: the server refused SSLRequest temporarily: '53300'"),
    "mysql-1040": ("mysql", [("send", mysql_error(1040, b"Too many connections"))],
                   [("send", mysql_greeting(0x0200 | 0x0800 | 0x8000)), ("exact", 36)],
                   "mysql: the server refused the connection (error 1040) temporarily"),
}


@dataclass
class Busy:
    """A scripted server: the first `refusals` connections (or, with `concurrent`, any
    connection while that many others are open; with `after`, every connection after the
    first `after`) get the busy script, the others the accepting one and then a TLS
    handshake (Python's ssl module)."""

    port: int
    connections: int = 0
    refused: int = 0
    handshakes: int = 0
    starts: list[float] = field(default_factory=list)   # time.monotonic() of each connection
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def busy_server(certs: CertSet) -> Iterator[Callable[..., Busy]]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(certs["rsa"].chain), str(certs["rsa"].key))
    servers: list[Accepting] = []

    def start(case: str, refusals: int = 10 ** 6, concurrent: int = 0,
              after: int = 0) -> Busy:
        _, busy_steps, ok_steps, _ = SCRIPTS[case]
        state = Busy(0)
        open_now = [0]

        def serve(conn: socket.socket) -> None:
            conn.settimeout(10)
            with state.lock:
                state.connections += 1
                state.starts.append(time.monotonic())
                open_now[0] += 1
                refuse = open_now[0] > concurrent if concurrent else \
                    state.connections > after if after else state.connections <= refusals
                state.refused += refuse
            try:
                if refuse:
                    play_steps(conn, busy_steps)
                    conn.settimeout(2)
                    while conn.recv(4096):   # until the client closes
                        pass
                    return
                play_steps(conn, ok_steps)
                with context.wrap_socket(conn, server_side=True) as tls:
                    with state.lock:
                        state.handshakes += 1
                    while tls.recv(4096):
                        pass
            except (OSError, ssl.SSLError, ConnectionError):
                pass
            finally:
                with state.lock:
                    open_now[0] -= 1
                conn.close()

        server = Accepting(serve)
        servers.append(server)
        state.port = server.port
        return state

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_probe_asks_again_after_a_temporary_refusal(busy_server: Callable[..., Busy],
                                                    run_cli: Cli, case: str) -> None:
    proto = SCRIPTS[case][0]
    server = busy_server(case, refusals=2)
    res = run_cli(f"127.0.0.1:{server.port}", "--starttls", proto, "--no-verify", "--json",
                  "--timeout", "5", timeout=60)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["error"] is None and data["version"]["name"] == "TLS 1.3"
    assert data["starttls"]["protocol"] == proto
    assert (server.refused, server.connections, server.handshakes) == (2, 3, 1)


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_probe_still_refused_is_exit_3(busy_server: Callable[..., Busy], run_cli: Cli,
                                       case: str) -> None:
    proto, _, _, text = SCRIPTS[case]
    server = busy_server(case)
    # the deadline of the call: the total limit (3 x --timeout) plus start-up on a busy
    # machine; how many times it asked is counted below, not timed
    res = run_cli(f"127.0.0.1:{server.port}", "--starttls", proto, "--json",
                  "--timeout", "1.5", timeout=4.5 + 25)
    assert res.returncode == 3, res.stderr
    line = one_stderr_line(res.stderr)
    assert line.startswith(f"tlsprobe: 127.0.0.1:{server.port}: {text}"), line
    assert "still refused after" in line and line.endswith("try again later)"), line
    data = json.loads(res.stdout)
    assert data["error_kind"] == "network" and text in data["error"]
    # asked again with backoff (0.25, 0.5, 1 s: 4 attempts on a quiet machine), within two
    # thirds of the total time limit (3 x --timeout)
    assert 2 <= server.connections <= 8 and server.handshakes == 0


def test_scan_of_a_server_that_refuses_parallel_connections(
        busy_server: Callable[..., Busy], run_cli: Cli) -> None:
    """421 to any connection while another is open (as vsftpd max_per_ip=1 or Postfix
    smtpd_client_connection_count_limit=1 do): the default --per-host 3 audit asks again
    and establishes every version, nothing left inconclusive by the refusals."""
    server = busy_server("smtp-421", concurrent=1)
    res = run_cli("scan", f"127.0.0.1:{server.port}", "--starttls", "smtp", "--checks",
                  "versions", "--json", "--no-progress", "--no-policy", "--timeout", "5",
                  timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None
    spoken = {v["version"]["name"]: v["status"] for v in report["versions"]}
    assert "inconclusive" not in spoken.values(), report["versions"]
    assert spoken["TLS 1.3"] == "supported" and spoken["TLS 1.2"] == "supported"
    assert server.refused >= 1
    assert report["starttls"]["banner"] == "220 mx ESMTP"


@pytest.mark.parametrize("case", ["smtp-454", "xmpp-resource-constraint", "mysql-1040"])
def test_scan_still_refused_is_the_targets_error(busy_server: Callable[..., Busy],
                                                 run_cli: Cli, case: str) -> None:
    proto, _, _, text = SCRIPTS[case]
    server = busy_server(case)
    res = run_cli("scan", f"127.0.0.1:{server.port}", "--starttls", proto, "--json",
                  "--no-progress", "--timeout", "2", timeout=120)
    assert res.returncode == 3, res.stderr
    report = json.loads(res.stdout)
    assert report["error_kind"] == "network"
    assert text in report["error"] and "still refused after" in report["error"]
    line = one_stderr_line(res.stderr)
    assert line.startswith(f"tlsprobe: 127.0.0.1:{server.port}: ") and text in line, line
    assert server.handshakes == 0 and server.connections >= 2


def test_scan_retries_the_first_refusals(busy_server: Callable[..., Busy],
                                         run_cli: Cli) -> None:
    server = busy_server("imap-bye", refusals=2)
    res = run_cli("scan", f"127.0.0.1:{server.port}", "--starttls", "imap", "--checks",
                  "versions", "--json", "--no-progress", "--no-policy", "--timeout", "5",
                  timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None
    assert {v["version"]["name"]: v["status"] for v in report["versions"]}["TLS 1.3"] == \
        "supported"
    assert report["starttls"]["banner"] == "* OK [CAPABILITY IMAP4rev1 STARTTLS] ready"


def test_timing_asks_again_after_a_temporary_refusal(busy_server: Callable[..., Busy],
                                                     run_cli: Cli) -> None:
    """`--timing` opens a connection per handshake; its first ones refused with 421, it asks
    again and times the handshakes as usual."""
    server = busy_server("smtp-421", refusals=2)
    res = run_cli(f"127.0.0.1:{server.port}", "--timing", "--starttls", "smtp", "--timeout",
                  "5", "--timing-runs", "2", "--timing-warmup", "0", "--timing-groups",
                  "x25519", "--timing-versions", "1.3", "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    assert server.refused == 2 and server.handshakes >= 3


def test_scan_stops_asking_a_server_that_closed_its_door(busy_server: Callable[..., Busy],
                                                         run_cli: Cli) -> None:
    """A rate limit: the first connection goes through, every later one gets 421. Once three
    audit connections in a row have used up their attempts, the rest of the audit gets that
    answer at once (each would otherwise ask for its whole --timeout): what was established
    stays, the rest is inconclusive with the server's reply."""
    server = busy_server("smtp-421", after=1)
    res = run_cli("scan", f"127.0.0.1:{server.port}", "--starttls", "smtp", "--checks",
                  "versions,groups,suites,sigalgs", "--json", "--no-progress", "--no-policy",
                  "--timeout", "1",
                  timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    report = json.loads(res.stdout)
    statuses = {v["version"]["name"]: (v["status"], v["detail"]) for v in report["versions"]}
    assert any(status == "inconclusive" and "refused the session temporarily" in detail
               for status, detail in statuses.values()), statuses
    # 1 accepted, then the three in a row that gave up and at most two others in flight
    # beside them (--per-host 3), each asking at most twice within --timeout 1 (asking on,
    # the audit made 23)
    assert server.connections <= 1 + (3 + 2) * 2, server.connections


def _said(path: str) -> str:
    return " ".join((REPO / path).read_text(encoding="utf-8").split())


@pytest.mark.parametrize("path", ["README.md", "docs/STARTTLS.md", "docs/LIMITS.md"])
def test_the_documents_say_the_backoff_the_code_keeps(path: str) -> None:
    """The pause before asking again (first, doubling, cap, the random share added) and the
    reserve kept for the new attempt, as the documents say them, are `Backoff`'s."""
    from tlsprobe.net.starttls_connect import BACKOFF as B
    text = _said(path)
    assert f"{B.first:g} s, doubling, at most {B.cap:g} s, with a random 0 to " \
           f"{B.spread * 100:g} % added" in text
    assert f"{B.reserve * 100:g} % of the connection's time (at least {B.least:g} s)" in text
    if path != "docs/LIMITS.md":
        assert f"{B.first:g} to {B.cap * (1 + B.spread):g} s" in text


def test_probe_keeps_the_documented_reserve_for_the_next_attempt(
        busy_server: Callable[..., Busy], run_cli: Cli) -> None:
    """--timeout 1: the preamble's time is two thirds of 3 s; a third attempt (after pauses
    of at least 0.25 and 0.5 s) leaves no 1.0 to 1.25 s pause plus the 0.5 s reserve: three
    connections at most, each at least its documented pause after the one before."""
    from tlsprobe.net.starttls_connect import BACKOFF
    server = busy_server("smtp-421")
    res = run_cli(f"127.0.0.1:{server.port}", "--starttls", "smtp", "--timeout", "1",
                  timeout=30)
    assert res.returncode == 3, res.stderr
    assert "try again later)" in one_stderr_line(res.stderr)
    assert 1 <= server.connections <= 3, server.starts
    for n, (a, b) in enumerate(zip(server.starts, server.starts[1:]), 1):
        assert b - a >= min(BACKOFF.cap, BACKOFF.first * 2 ** (n - 1)), server.starts
