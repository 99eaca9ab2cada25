"""The Python API's STARTTLS inputs: `xmpp_host` (the command line's `--xmpp-host`) in
`probe`, `scan`, `ascan` and `simulate_clients`, and hints that name the API's parameters
(`xmpp_host`, `starttls='imap'`) to Python callers while the command line keeps its options.

The peers are scripted servers on loopback (tests/helpers/accepting.py): an XMPP server
that refuses the `to=` domain with a host-unknown stream error (and records the domain it
was asked for), and an IMAP server that greets a TLS client.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.helpers.accepting import Accepting

import tlsprobe

STREAMS = b"urn:ietf:params:xml:ns:xmpp-streams"
REFUSAL = (b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' from='localhost' "
           b"id='x1' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>"
           b"<stream:error><host-unknown xmlns='" + STREAMS + b"'/></stream:error>"
           b"</stream:stream>")
API_HINT = "name one it serves with xmpp_host)"
CLI_HINT = "name one it serves with --xmpp-host)"


class XmppRefuser:
    """An XMPP server that serves no domain: each stream header gets host-unknown; the
    headers it read are kept (`headers`)."""

    def __init__(self) -> None:
        self.headers: list[bytes] = []
        self.lock = threading.Lock()
        self.server = Accepting(self.serve)
        self.target = f"127.0.0.1:{self.server.port}"

    def serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            buf = b""
            try:
                while not buf.endswith(b"version='1.0'>"):
                    chunk = conn.recv(1)
                    if not chunk:
                        return
                    buf += chunk
                with self.lock:
                    self.headers.append(buf)
                conn.sendall(REFUSAL)
                conn.recv(100)
            except OSError:
                pass


@pytest.fixture
def xmpp() -> Iterator[XmppRefuser]:
    peer = XmppRefuser()
    try:
        yield peer
    finally:
        peer.server.close()


def _asked_for(peer: XmppRefuser, domain: str) -> None:
    with peer.lock:
        assert peer.headers and all(f"to='{domain}'".encode() in h for h in peer.headers), \
            peer.headers


def test_probe_takes_xmpp_host_and_its_hint_names_the_parameter(xmpp: XmppRefuser) -> None:
    """probe() had no xmpp_host (TypeError: a UsageError 'unexpected keyword'), and the
    refusal's hint said '--xmpp-host' to a Python caller."""
    result = tlsprobe.probe(xmpp.target, starttls="xmpp", xmpp_host="chat.example",
                            timeout=5, raise_on_error=False)
    _asked_for(xmpp, "chat.example")
    assert result.error is not None and result.error.endswith(API_HINT), result.error
    assert "--" not in result.error, result.error
    with pytest.raises(tlsprobe.ProbeError) as info:
        tlsprobe.probe(xmpp.target, starttls="xmpp", xmpp_host="chat.example", timeout=5)
    assert str(info.value).endswith(API_HINT), str(info.value)


def test_scan_and_clients_take_xmpp_host(xmpp: XmppRefuser) -> None:
    """scan(), ascan() and simulate_clients() send the xmpp_host domain and name the
    parameter in the hint; scan() also inside a running event loop (its worker thread)."""
    reports: list[Any] = tlsprobe.scan(xmpp.target, checks="versions", policies=[],
                                       starttls="xmpp", xmpp_host="scan.example", timeout=5,
                                       retries=0)
    reports += tlsprobe.simulate_clients(xmpp.target, profiles=["firefox"], starttls="xmpp",
                                         xmpp_host="scan.example", timeout=5, retries=0)
    reports += asyncio.run(tlsprobe.ascan(xmpp.target, checks="versions", policies=[],
                                          starttls="xmpp", xmpp_host="scan.example",
                                          timeout=5, retries=0))

    async def in_a_loop() -> list[Any]:
        return tlsprobe.scan(xmpp.target, checks="versions", policies=[], starttls="xmpp",
                             xmpp_host="scan.example", timeout=5, retries=0)
    reports += asyncio.run(in_a_loop())
    _asked_for(xmpp, "scan.example")
    assert len(reports) == 4
    for report in reports:
        assert report.error is not None and API_HINT in report.error, report.error
        assert "--" not in report.error, report.error


@pytest.mark.parametrize("call", [
    lambda t: tlsprobe.probe(t, xmpp_host="chat.example"),
    lambda t: tlsprobe.scan(t, starttls="smtp", xmpp_host="chat.example"),
    lambda t: tlsprobe.simulate_clients(t, xmpp_host="chat.example"),
    lambda t: tlsprobe.probe(t, starttls="xmpp", xmpp_host="bad domain"),
    lambda t: tlsprobe.probe(t, quic=True, xmpp_host="chat.example"),
    lambda t: tlsprobe.scan(t, starttls="xmpp", xmpp_host=5),
], ids=["probe-no-starttls", "scan-smtp", "clients-no-starttls", "not-a-domain", "quic",
        "not-a-str"])
def test_a_bad_xmpp_host_is_a_usage_error_naming_the_parameter(
        call: Callable[[str], object]) -> None:
    """Checked as the command line's --xmpp-host is, named as the API's parameter."""
    with pytest.raises(tlsprobe.UsageError) as info:
        call("127.0.0.1:1")
    assert "xmpp_host" in str(info.value) and "--" not in str(info.value), str(info.value)


def test_a_greeting_hint_names_the_starttls_parameter(run_cli: Callable[..., Any]) -> None:
    """A plain probe of an IMAP server: 'try --starttls imap' to the command line, "try
    starttls='imap'" to the API (it named the option)."""
    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(b"* OK [CAPABILITY IMAP4rev1 STARTTLS] ready\r\n")
                conn.settimeout(5)
                conn.recv(4096)
            except OSError:
                pass
    server = Accepting(serve)
    target = f"127.0.0.1:{server.port}"
    try:
        result = tlsprobe.probe(target, timeout=5, raise_on_error=False)
        done = run_cli(target, "--json", "--timeout", "5")
    finally:
        server.close()
    assert result.error is not None and "try starttls='imap')" in result.error, result.error
    assert "--" not in result.error
    assert done.returncode == 4 and "try --starttls imap)" in json.loads(done.stdout)["error"]


def test_the_command_line_still_names_its_option(xmpp: XmppRefuser,
                                                 run_cli: Callable[..., Any]) -> None:
    """After an API call in this process, the command line's hint is its option's."""
    tlsprobe.probe(xmpp.target, starttls="xmpp", timeout=5, raise_on_error=False)
    done = run_cli(xmpp.target, "--starttls", "xmpp", "--xmpp-host", "cli.example", "--json",
                   "--timeout", "5")
    assert done.returncode == 5 and json.loads(done.stdout)["error"].endswith(CLI_HINT)
