"""Bounds and robustness of the STARTTLS machine and of `run_preamble`: long lines, endless
banners and oversized packets are cut off; any bytes give a Step, never an exception;
network text is escaped; run_preamble over real loopback sockets keeps its deadline."""
from __future__ import annotations

import re
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.accepting import Accepting
from tlsprobe.errors import FailureKind, UsageError
from tlsprobe.net.starttls import (AUTO_PORTS, PROTOCOLS, Limits, Problem, StartTls,
                                   StartTlsError, Status, protocol_for_port, run_preamble)
from tlsprobe.net.tcp import open_channel, parse_target


def feed_until_done(machine: StartTls, chunks: Iterator[bytes], most: int) -> tuple[int, str]:
    """Feed chunks until the machine stops needing data; (bytes fed, failure message)."""
    fed = 0
    step = machine.start()
    for chunk in chunks:
        step = machine.receive_data(chunk)
        fed += len(chunk)
        if step.status is not Status.NEED_DATA or fed > most:
            break
    assert step.status is Status.FAILED and step.failure is not None, (fed, step)
    return fed, step.failure.message


def test_a_line_without_end_is_cut_off_at_the_line_limit() -> None:
    machine = StartTls("smtp")
    fed, message = feed_until_done(machine, iter([b"220 "] + [b"A" * 512] * 100), 1 << 20)
    assert 4096 < fed <= 4096 + 512 + 4
    assert machine.record.lines == ()
    assert "cut off: a line longer than 4096 bytes" in message and len(message) < 300


def test_an_endless_multiline_banner_is_cut_off_at_the_line_count() -> None:
    machine = StartTls("smtp")
    fed, message = feed_until_done(machine, iter(lambda: b"220-welcome\r\n", None), 1 << 20)
    assert fed == 201 * len(b"220-welcome\r\n")
    assert "cut off after 200 lines" in message
    assert len(machine.record.lines) == 200


def test_the_whole_preamble_is_bounded_in_bytes() -> None:
    machine = StartTls("ftp", limits=Limits(max_line=100, max_lines=1000, max_bytes=1000))
    fed, message = feed_until_done(machine, iter(lambda: b"220-" + b"x" * 50 + b"\r\n", None),
                                   1 << 20)
    assert 1000 < fed <= 1056 and "cut off after 1000 bytes" in message


@pytest.mark.parametrize("proto,data,text", [
    ("ldap", b"\x30\x84\x7f\xff\xff\xff", "a 2147483647-byte message"),
    ("xmpp", b"<stream:stream xmlns:stream='" + b"a" * 5000, "a tag longer than 4096 bytes"),
    ("xmpp", b"<?xml version='1.0'?>" + b" " * 5000, "bytes of text without a tag"),
])
def test_oversized_packets_and_tags_are_refused_before_they_are_read(proto: str, data: bytes,
                                                                     text: str) -> None:
    machine = StartTls(proto)
    machine.start()
    step = machine.receive_data(data)
    assert step.failure is not None and step.failure.problem is Problem.TOO_LONG
    assert step.failure.kind is FailureKind.PROTOCOL and text in step.failure.message


def test_control_characters_from_the_server_are_escaped() -> None:
    machine = StartTls("smtp")
    machine.start()
    step = machine.receive_data(b"554 \x1b[2J\x1b]0;owned\x07 go away\xe2\x80\xae\r\n")
    assert step.failure is not None
    assert step.failure.message == ("smtp: the server refused the session: "
                                    "'554 \\x1b[2J\\x1b]0;owned\\x07 go away\\xe2\\x80\\xae'")
    assert machine.record.lines[0].text == "554 \\x1b[2J\\x1b]0;owned\\x07 go away\\xe2\\x80\\xae"


@settings(max_examples=60, deadline=None)
@given(proto=st.sampled_from(PROTOCOLS), chunks=st.lists(st.binary(max_size=300), max_size=12))
def test_any_bytes_give_a_step_never_an_exception(proto: str, chunks: list[bytes]) -> None:
    machine = StartTls(proto, server_name="localhost")
    step = machine.start()
    for chunk in chunks + [b""]:
        step = machine.receive_data(chunk)
        assert step.status in (Status.NEED_DATA, Status.READY, Status.FAILED)
        if step.status is Status.FAILED:
            assert step.failure is not None
            message = step.failure.message
            assert message.isprintable() and message.isascii() and len(message) < 1200
            break


def test_auto_port_map_and_unknown_protocols() -> None:
    assert protocol_for_port(25) == protocol_for_port(587) == "smtp"
    assert [protocol_for_port(p) for p in (110, 143, 21, 389, 5432, 3306, 5222, 5269, 119,
                                           4190, 6667)] == \
        ["pop3", "imap", "ftp", "ldap", "postgres", "mysql", "xmpp", "xmpp-server", "nntp",
         "sieve", "irc"]
    assert protocol_for_port(465) is None and protocol_for_port(993) is None
    assert set(AUTO_PORTS.values()) <= set(PROTOCOLS)
    with pytest.raises(UsageError, match="unknown STARTTLS protocol 'smtps'"):
        StartTls("smtps")


def _serve(script: Callable[[socket.socket], object]) -> Accepting:
    """A scripted server on 127.0.0.1 playing `script` on each connection, one at a time."""
    def run(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                script(conn)
            except OSError:
                pass
    return Accepting(run, threads=False)


def _smtp_server(conn: socket.socket) -> None:
    conn.sendall(b"220 mx\r\n")
    assert conn.recv(100) == b"EHLO tlsprobe.invalid\r\n"
    conn.sendall(b"250-mx\r\n250 STARTTLS\r\n")
    assert conn.recv(100) == b"STARTTLS\r\n"
    conn.sendall(b"220 go\r\n")
    conn.recv(100)


def test_run_preamble_over_a_socket_and_over_a_channel() -> None:
    for use_channel in (False, True):
        server = _serve(_smtp_server)
        port = server.port
        if use_channel:
            stream: object = open_channel(parse_target(f"127.0.0.1:{port}"), timeout=5)
        else:
            stream = socket.create_connection(("127.0.0.1", port), timeout=5)
        record = run_preamble(stream, "smtp", time.monotonic() + 10)  # type: ignore[arg-type]
        assert record.banner == b"220 mx" and record.capability == b"250 STARTTLS"
        assert [line.sender for line in record.lines] == \
            ["server", "client", "server", "server", "client", "server"]
        stream.close()  # type: ignore[attr-defined]
        server.close()


def test_a_silent_server_fails_at_the_deadline_without_burning_cpu() -> None:
    done = threading.Event()
    server = _serve(lambda conn: done.wait(10))
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    with pytest.raises(StartTlsError) as caught:
        run_preamble(sock, "imap", time.monotonic() + 0.5)
    cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu
    done.set()
    sock.close()
    server.close()
    assert caught.value.kind is FailureKind.NETWORK and caught.value.exit_code == 3
    assert str(caught.value).startswith("imap: no answer while waiting for the greeting; the "
                                        "server sent nothing: it may wait for the client")
    assert cpu < 0.3


def test_a_greeting_that_trickles_without_end_is_no_silence() -> None:
    """A server that keeps sending greeting lines ("220-...", never the last "220 ") past
    the deadline answered: the timeout says what it sent of the step it was in (it said "no
    answer while waiting for the greeting"); the next step starts counting anew."""
    done = threading.Event()

    def trickle(conn: socket.socket) -> None:
        while not done.is_set():
            conn.sendall(b"220-still greeting\r\n")
            done.wait(0.1)
    def ehlo_trickle(conn: socket.socket) -> None:
        conn.sendall(b"220-mx\r\n220 mx\r\n")
        conn.recv(100)
        conn.sendall(b"250-mx\r\n250-PIPELINING\r\n")
        done.wait(10)
    for script, text in ((trickle, r"smtp: timed out in the greeting: the server sent \d+ "
                                   r"line\(s\) of it but not its end$"),
                         (ehlo_trickle, r"smtp: timed out in the EHLO reply: the server sent "
                                        r"2 line\(s\) of it but not its end$")):
        done.clear()
        server = _serve(script)
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        with pytest.raises(StartTlsError) as caught:
            run_preamble(sock, "smtp", time.monotonic() + 0.6)
        done.set()
        sock.close()
        server.close()
        assert caught.value.kind is FailureKind.NETWORK and caught.value.exit_code == 3
        assert re.match(text, str(caught.value)), str(caught.value)


def test_a_server_that_closes_or_speaks_another_protocol_over_a_socket() -> None:
    def http(conn: socket.socket) -> None:
        conn.recv(100)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    def greet_then_close(conn: socket.socket) -> None:
        conn.sendall(b"220 mx\r\n")
        conn.recv(100)   # the EHLO read: closing with it unread would be a reset, not a close
    for proto, script, kind, code, text in (
            ("smtp", greet_then_close, FailureKind.CLOSED, 5,
             "smtp: the server closed the connection while we waited for the EHLO reply"),
            ("xmpp", http, FailureKind.NOT_TLS, 4, "not speaking xmpp: it sent an HTTP response"),
            ("smtp", lambda conn: conn.sendall(b"220 mx\r\n" + b"x" * 8000),
             FailureKind.PROTOCOL, 6, "cut off")):
        server = _serve(script)
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        with pytest.raises(StartTlsError) as caught:
            run_preamble(sock, proto, time.monotonic() + 5)
        sock.close()
        server.close()
        assert caught.value.kind is kind and caught.value.exit_code == code
        assert text in str(caught.value)
