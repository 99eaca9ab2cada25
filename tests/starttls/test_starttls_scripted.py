"""STARTTLS over real loopback sockets against small scripted servers, for the protocols no
practical Debian daemon covers (NNTP: inn2 needs a whole news system; IRC: no packaged ircd
with STARTTLS was set up) and for a refusal: each server speaks its dialogue, then does the
TLS handshake with Python's ssl module, so the test proves the stream is at TLS."""
from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable, Iterator

import pytest

from tlsprobe.errors import FailureKind
from tlsprobe.net.starttls import Problem, StartTlsError, run_preamble
from tests.helpers.accepting import Accepting
from tests.helpers.servers import CertSet

Script = list[tuple[bytes | None, bytes]]   # (line the server expects or None, its answer)

NNTP: Script = [(None, b"200 news.test ready\r\n"),
                (b"CAPABILITIES\r\n", b"101 Capability list:\r\nVERSION 2\r\nREADER\r\n"
                                      b"STARTTLS\r\n.\r\n"),
                (b"STARTTLS\r\n", b"382 Continue with TLS negotiation\r\n")]
IRC: Script = [(b"STARTTLS\r\n", b":irc.test NOTICE * :*** Looking up your hostname\r\n"
                                 b":irc.test 670 * :STARTTLS successful, go ahead with TLS "
                                 b"handshake\r\n")]
SMTP_554: Script = [(None, b"220 mx.test ESMTP\r\n"),
                    (b"EHLO tlsprobe.invalid\r\n", b"250-mx.test\r\n250 STARTTLS\r\n"),
                    (b"STARTTLS\r\n", b"554 5.7.3 Unable to initialize security subsystem\r\n")]


@pytest.fixture
def scripted(certs: CertSet) -> Iterator[Callable[[Script, bool], tuple[int, list[str]]]]:
    """`scripted(script, tls)` -> (port, outcomes): a one-connection server on 127.0.0.1 that
    plays `script` and then, if `tls`, completes a TLS handshake (outcome "tls TLSv1.3")."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(certs["rsa"].chain), str(certs["rsa"].key))
    servers: list[Accepting] = []

    def start(script: Script, tls: bool) -> tuple[int, list[str]]:
        outcomes: list[str] = []

        def run(conn: socket.socket) -> None:
            conn.settimeout(10)
            try:
                for expected, answer in script:
                    if expected is not None:
                        got = b""
                        while not got.endswith(b"\n"):
                            chunk = conn.recv(1)
                            if not chunk:
                                raise ConnectionError("client closed")
                            got += chunk
                        if got != expected:
                            outcomes.append(f"unexpected {got!r}")
                            return
                    conn.sendall(answer)
                if tls:
                    with context.wrap_socket(conn, server_side=True) as tls_conn:
                        outcomes.append(f"tls {tls_conn.version()}")
                        tls_conn.recv(1)
            except (OSError, ssl.SSLError) as exc:
                outcomes.append(f"error {exc}")
            finally:
                conn.close()
        server = Accepting(run, threads=False)
        servers.append(server)
        return server.port, outcomes
    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("proto,script,capability", [
    ("nntp", NNTP, b"STARTTLS"),
    ("irc", IRC, b":irc.test 670 * :STARTTLS successful, go ahead with TLS handshake"),
])
def test_scripted_server_then_tls(scripted: Callable[[Script, bool], tuple[int, list[str]]],
                                  certs: CertSet, proto: str, script: Script,
                                  capability: bytes) -> None:
    port, outcomes = scripted(script, True)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        record = run_preamble(sock, proto, time.monotonic() + 10)
        assert record.capability == capability
        context = ssl.create_default_context(cafile=str(certs.ca))
        with context.wrap_socket(sock, server_hostname="localhost") as tls:
            assert tls.version() == "TLSv1.3"
            tls.sendall(b"x")
    deadline = time.monotonic() + 10
    while not outcomes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert outcomes == ["tls TLSv1.3"]


def test_a_refusal_over_a_socket_is_exit_5_with_the_reply_quoted(
        scripted: Callable[[Script, bool], tuple[int, list[str]]]) -> None:
    port, _ = scripted(SMTP_554, False)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with pytest.raises(StartTlsError) as caught:
            run_preamble(sock, "smtp", time.monotonic() + 10)
    error = caught.value
    assert (error.problem, error.kind, error.exit_code) == (Problem.REFUSED, FailureKind.REFUSED, 5)
    assert str(error) == ("smtp: the server refused STARTTLS: "
                          "'554 5.7.3 Unable to initialize security subsystem'")
    assert error.record.capability == b"250 STARTTLS"
    assert [line.text for line in error.record.lines][-2:] == [
        "STARTTLS", "554 5.7.3 Unable to initialize security subsystem"]
