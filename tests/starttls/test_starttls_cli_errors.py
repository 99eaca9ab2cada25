"""The STARTTLS errors end to end (python -m tlsprobe, probe and scan) against scripted
loopback servers: a server that does not offer STARTTLS (its capabilities quoted, exit 4),
one that refuses it (its reply, exit 5, kind "refused"), one of another protocol (exit 4)
and a silent one (exit 3 within the timeout): one stderr line, no traceback, the preamble
still in JSON and --msg. In a scan, a failing target gets its error as its report while
another target is audited as usual. Also `--starttls auto` (by port) and bad values."""
from __future__ import annotations

import argparse
import io
import json
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.helpers.accepting import Accepting, Step, one_stderr_line, play_steps
from tests.lab_servers.daemons import DaemonFactory

from tlsprobe.commands.starttls_option import spec_for
from tlsprobe.errors import UsageError
from tlsprobe.net.starttls import PreambleLine, PreambleRecord
from tlsprobe.net.starttls_connect import info_of
from tlsprobe.net.tcp import Target

Cli = Callable[..., Any]
Script = list[tuple[bool, bytes]]   # (read one line first?, then send these bytes)

NOT_OFFERED: Script = [(False, b"220 mx.test ESMTP\r\n"),
                       (True, b"250-mx.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n")]
REFUSED: Script = [(False, b"220 mx.test ESMTP\r\n"), (True, b"250-mx.test\r\n250 STARTTLS\r\n"),
                   (True, b"554 5.7.3 Unable to initialize security subsystem\r\n")]
OTHER: Script = [(False, b"SSH-2.0-OpenSSH_9.6\r\n")]
SILENT: Script = []


@pytest.fixture
def scripted() -> Iterator[Callable[[Script], int]]:
    """`scripted(script)` -> port: a server on 127.0.0.1 playing `script` on every
    connection (a scan opens several), then holding the connection until the client
    closes it (a silent server says nothing at all)."""
    servers: list[Accepting] = []

    def play(conn: socket.socket, script: Script, stop: threading.Event) -> None:
        conn.settimeout(15)
        with conn:
            try:
                for read_first, answer in script:
                    if read_first:
                        line = b""
                        while not line.endswith(b"\n"):
                            chunk = conn.recv(1)
                            if not chunk:
                                return
                            line += chunk
                    conn.sendall(answer)
                while not stop.is_set() and conn.recv(4096):
                    pass
            except OSError:
                return

    def start(script: Script) -> int:
        server = Accepting(lambda conn: play(conn, script, server.stopped))
        servers.append(server)
        return server.port

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("script,code,kind,text", [
    (NOT_OFFERED, 4, "not_tls", "EHLO keywords: 'PIPELINING 8BITMIME'"),
    (REFUSED, 5, "refused", "smtp: the server refused STARTTLS: '554 5.7.3 Unable to initialize"),
    (OTHER, 4, "not_tls", "not speaking smtp: it sent an SSH banner ('SSH-2.0-OpenSSH_9.6"),
], ids=["not-offered", "refused", "another-protocol"])
def test_probe_preamble_errors(scripted: Callable[[Script], int], run_cli: Cli,
                               script: Script, code: int, kind: str, text: str) -> None:
    port = scripted(script)
    res = run_cli(f"127.0.0.1:{port}", "--starttls", "smtp", "--json", "--timeout", "5")
    assert res.returncode == code, res.stderr
    line = one_stderr_line(res.stderr)
    assert line.startswith(f"tlsprobe: 127.0.0.1:{port}: ") and text in line, line
    assert line.count(f"127.0.0.1:{port}") == 1, line
    data = json.loads(res.stdout)
    assert data["error_kind"] == kind and text in data["error"]
    assert data["starttls"]["protocol"] == "smtp"
    if script is not OTHER:
        assert data["starttls"]["banner"] == "220 mx.test ESMTP"


def test_probe_msg_shows_the_refused_exchange(scripted: Callable[[Script], int],
                                              run_cli: Cli) -> None:
    port = scripted(REFUSED)
    res = run_cli(f"127.0.0.1:{port}", "--starttls", "smtp", "--msg", "--timeout", "5")
    assert res.returncode == 5
    assert res.stdout.splitlines() == [
        "<<< plain text (smtp, before TLS): 220 mx.test ESMTP",
        ">>> plain text (smtp, before TLS): EHLO tlsprobe.invalid",
        "<<< plain text (smtp, before TLS): 250-mx.test",
        "<<< plain text (smtp, before TLS): 250 STARTTLS",
        ">>> plain text (smtp, before TLS): STARTTLS",
        "<<< plain text (smtp, before TLS): 554 5.7.3 Unable to initialize security subsystem"]


def test_probe_against_a_silent_server_is_a_timeout(scripted: Callable[[Script], int],
                                                    run_cli: Cli) -> None:
    port = scripted(SILENT)
    res = run_cli(f"127.0.0.1:{port}", "--starttls", "smtp", "--timeout", "1", timeout=30)
    assert res.returncode == 3
    assert one_stderr_line(res.stderr) == (f"tlsprobe: 127.0.0.1:{port}: smtp: no answer while "
                                     "waiting for the greeting; the server sent nothing: it "
                                     "may wait for the client to speak first, as a port of "
                                     "implicit TLS does (then run without --starttls) or a "
                                     "protocol whose client begins (xmpp, ldap, postgres)")


def test_scan_failing_target_gets_its_error_others_unaffected(
        scripted: Callable[[Script], int], daemon: DaemonFactory, run_cli: Cli) -> None:
    good = daemon("postfix", curves="secp384r1").ports["smtp"]
    bad = scripted(REFUSED)
    res = run_cli("scan", f"127.0.0.1:{bad}", f"127.0.0.1:{good}", "--starttls", "smtp",
                  "--checks", "groups", "--json", "--no-progress", "--no-policy", timeout=240)
    assert res.returncode == 5, res.stderr
    reports = {r["port"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert reports[bad]["error_kind"] == "refused"
    assert "554 5.7.3 Unable to initialize" in reports[bad]["error"]
    # the refusal ends the audit at once: the connections that asked (at most --per-host 3
    # at once before the first answer) count, the later ones are not made
    assert 1 <= reports[bad]["total_connections"] <= 3, reports[bad]["connections"]
    assert reports[bad]["starttls"]["capability"] == "250 STARTTLS"
    assert reports[good]["error"] is None
    tls13 = next(g for g in reports[good]["groups"] if g["version"]["name"] == "TLS 1.3")
    assert [g["name"] for g in tls13["supported"]] == ["secp384r1"]
    line = one_stderr_line(res.stderr)
    assert line.startswith(f"tlsprobe: 127.0.0.1:{bad}: ") and "refused STARTTLS" in line


def test_scan_not_offered_and_silent(scripted: Callable[[Script], int], run_cli: Cli) -> None:
    absent, silent = scripted(NOT_OFFERED), scripted(SILENT)
    res = run_cli("scan", f"127.0.0.1:{absent}", f"127.0.0.1:{silent}", "--starttls", "smtp",
                  "--checks", "groups", "--json", "--no-progress", "--no-policy", "--timeout",
                  "1", "--retries", "0", timeout=120)
    reports = {r["port"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert reports[absent]["error_kind"] == "not_tls"
    assert "EHLO keywords: 'PIPELINING 8BITMIME'" in reports[absent]["error"]
    assert reports[silent]["error_kind"] == "network"
    assert "no answer while waiting for the greeting" in reports[silent]["error"]
    assert res.returncode == 4 and "Traceback" not in res.stderr


def _args(**kw: Any) -> argparse.Namespace:
    base = {"starttls": None, "xmpp_host": None, "sni": None, "no_sni": False}
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.parametrize("port,proto", [(25, "smtp"), (587, "smtp"), (143, "imap"),
                                        (110, "pop3"), (21, "ftp"), (389, "ldap"),
                                        (5432, "postgres"), (3306, "mysql"), (5222, "xmpp"),
                                        (5269, "xmpp-server"), (119, "nntp"), (4190, "sieve"),
                                        (6667, "irc")])
def test_auto_chooses_by_port_and_says_so(port: int, proto: str) -> None:
    note = io.StringIO()
    spec = spec_for(_args(starttls="auto"), Target("mx.test", port), note=note)
    assert spec is not None and spec.protocol == proto and spec.by_port
    assert note.getvalue() == (f"tlsprobe: note: --starttls auto: {proto} (the well-known "
                               f"protocol of port {port})\n")
    record = PreambleRecord(proto, b"220 \x1b[31mhi", None, (PreambleLine("server", b"x"),))
    info = info_of(record, spec)
    assert (info.chosen_by, info.banner) == ("port", "220 \\x1b[31mhi")


def test_named_protocol_says_nothing_and_xmpp_host_is_the_to_domain() -> None:
    note = io.StringIO()
    spec = spec_for(_args(starttls="XMPP", xmpp_host="chat.test", sni="other.test"),
                    Target("127.0.0.1", 5222), note=note)
    assert spec is not None and (spec.protocol, spec.server_name, spec.by_port) == (
        "xmpp", "chat.test", False)
    assert note.getvalue() == ""
    spec = spec_for(_args(starttls="xmpp", sni="other.test"), Target("127.0.0.1", 5222))
    assert spec is not None and spec.server_name == "other.test"
    spec = spec_for(_args(starttls="xmpp"), Target("chat.test", 5222))
    assert spec is not None and spec.server_name == "chat.test"


@pytest.mark.parametrize("kw,text", [
    ({"starttls": "auto"}, "--starttls auto: port 4433 has no well-known STARTTLS protocol"),
    ({"starttls": "gopher"}, "--starttls: unknown protocol 'gopher'"),
    ({"xmpp_host": "chat.test"}, "--xmpp-host only applies with --starttls"),
    # another protocol named: the domain would go unused without a word (it did)
    ({"starttls": "smtp", "xmpp_host": "chat.test"}, "--xmpp-host only applies with "
     "--starttls xmpp or xmpp-server (or auto), not smtp"),
    ({"starttls": "LDAP", "xmpp_host": "chat.test"}, "not LDAP"),
    ({"starttls": "xmpp", "xmpp_host": "a b"}, "--xmpp-host: 'a b' is not a domain name"),
])
def test_bad_values_are_usage_errors(kw: dict[str, str], text: str) -> None:
    with pytest.raises(UsageError) as caught:
        spec_for(_args(**kw), Target("127.0.0.1", 4433))
    assert text in str(caught.value)


def test_bad_value_on_the_command_line_is_exit_2(run_cli: Cli) -> None:
    for argv in (["127.0.0.1:4433", "--starttls", "gopher"],
                 ["127.0.0.1:4433", "--starttls", "imap", "--xmpp-host", "chat.test"],
                 ["scan", "127.0.0.1:4433", "--starttls", "smtp", "--xmpp-host", "chat.test"],
                 ["scan", "127.0.0.1:4433", "--starttls", "auto"],
                 ["127.0.0.1:4433", "--timing", "--starttls", "auto"]):
        res = run_cli(*argv)
        assert res.returncode == 2, (argv, res.stderr)
        assert one_stderr_line(res.stderr).startswith("tlsprobe: ")


@pytest.mark.parametrize("script,code,text", [
    (REFUSED, 5, "refused STARTTLS: '554 5.7.3"),
    (NOT_OFFERED, 4, "EHLO keywords: 'PIPELINING 8BITMIME'")], ids=["refused", "not-offered"])
def test_timing_preamble_errors(scripted: Callable[[Script], int], run_cli: Cli,
                                script: Script, code: int, text: str) -> None:
    port = scripted(script)
    res = run_cli(f"127.0.0.1:{port}", "--timing", "--starttls", "smtp", "--timeout", "5",
                  timeout=60)
    assert res.returncode == code, res.stderr
    line = one_stderr_line(res.stderr)
    assert line.startswith(f"tlsprobe: 127.0.0.1:{port}: ") and text in line, line
    assert line.count(f"127.0.0.1:{port}") == 1, line


def test_scan_text_names_the_starttls_protocol_and_banner(scripted: Callable[[Script], int],
                                                         run_cli: Cli) -> None:
    port = scripted(REFUSED)
    res = run_cli("scan", f"127.0.0.1:{port}", "--starttls", "smtp", "--no-progress",
                  "--checks", "groups", timeout=60)
    assert res.returncode == 5, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == f"Audit of 127.0.0.1:{port}"
    assert lines[1] == "STARTTLS: smtp; banner: 220 mx.test ESMTP"
    assert lines[2].startswith(f"Error: 127.0.0.1:{port}: smtp: the server refused STARTTLS")


def test_http_get_over_starttls_is_a_usage_error(daemon: DaemonFactory, run_cli: Cli) -> None:
    """After STARTTLS the connection carries the mail (directory, ...) protocol, not HTTP:
    `--http-get` sent a GET into Postfix's SMTP session and reported its answer, "221 2.7.0
    Error: I can break rules, too. Goodbye.", as the HTTP status line. Refused before any
    connection, on the command line and in the API alike."""
    server = daemon("postfix")
    target = f"127.0.0.1:{server.ports['smtp']}"
    res = run_cli(target, "--starttls", "smtp", "--http-get", "/", "--no-verify")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == ("tlsprobe: error: --http-get cannot be used with --starttls: after "
                          "STARTTLS the connection carries that protocol (smtp, imap, ...), "
                          "not HTTP\n")
    import tlsprobe
    with pytest.raises(UsageError, match=r"^http_get cannot be used with starttls"):
        tlsprobe.probe(target, starttls="smtp", http_get="/", verify=False)


def test_a_preamble_the_server_closes_is_closed_in_scan_as_in_the_probe(run_cli: Cli) -> None:
    """A server that ends every connection in the middle of its EHLO reply: the probe says
    "closed" (exit 5); the scan retried it as a network failure and then reported it as one
    ("network", exit 3), with the same message. Now closed (exit 5) after its retries too."""
    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.sendall(b"220 mx.test ESMTP\r\n")
                conn.recv(100)   # the EHLO, read: the close is a FIN, not a reset
                conn.sendall(b"250-mx.test\r\n25")
            except OSError:
                pass
    server = Accepting(serve, threads=False)
    target = f"127.0.0.1:{server.port}"
    try:
        probe = run_cli(target, "--starttls", "smtp", "--json", "--timeout", "3")
        scan = run_cli("scan", target, "--starttls", "smtp", "--checks", "versions", "--json",
                       "--no-progress", "--no-policy", "--timeout", "3", timeout=120)
    finally:
        server.close()
    said = "smtp: the server closed the connection while we waited for the EHLO reply"
    assert probe.returncode == 5 and json.loads(probe.stdout)["error_kind"] == "closed"
    assert said in probe.stderr
    report = json.loads(scan.stdout)
    assert (scan.returncode, report["error_kind"]) == (5, "closed"), scan.stderr
    assert said in report["error"] and said in scan.stderr


@pytest.mark.parametrize("proto", ["xmpp", "xmpp-server"])
def test_prosody_stream_error_shows_its_condition_text_and_a_hint(
        daemon: DaemonFactory, run_cli: Cli, proto: str) -> None:
    """Prosody answers a stream header for a domain it does not serve with a stream error
    whose <text> says so: the line named the condition alone ("stream error
    'host-unknown'"); now the server's text too (escaped, bounded) and what to change (the
    domain, --xmpp-host), exit 5 ("refused"), in the error line, JSON and a scan's report."""
    server = daemon("prosody")
    target = f"127.0.0.1:{server.ports[proto]}"
    # Prosody's own words: "This server does not serve X" (c2s), "This host ..." (s2s)
    said = re.compile(rf"{proto}: stream error 'host-unknown': 'This (server|host) does not "
                      r"serve elsewhere\.invalid' \(the server does not serve that domain: "
                      r"name one it serves with --xmpp-host\)")
    probe = run_cli(target, "--starttls", proto, "--xmpp-host", "elsewhere.invalid", "--json",
                    "--timeout", "5")
    assert probe.returncode == 5, probe.stderr
    line = one_stderr_line(probe.stderr)
    assert line.startswith(f"tlsprobe: {target}: ") and said.fullmatch(line.split(": ", 2)[2])
    data = json.loads(probe.stdout)
    assert data["error_kind"] == "refused" and data["error"] == line.removeprefix("tlsprobe: ")
    scan = run_cli("scan", target, "--starttls", proto, "--xmpp-host", "elsewhere.invalid",
                   "--checks", "versions", "--no-progress", "--no-policy", "--timeout", "5",
                   timeout=120)
    assert scan.returncode == 5, scan.stderr
    assert said.search(" ".join(scan.stdout.split())) and said.search(scan.stderr), scan.stdout


XMPP_HEAD_SENT = b"version='1.0'>"
STREAMS = b"urn:ietf:params:xml:ns:xmpp-streams"
SERVER_HEAD = (b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' from='localhost' "
               b"id='x1' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>")


@pytest.mark.parametrize("proto,steps,said", [
    # a multi-line refusal: the reason was in its first line, only the last was quoted
    ("smtp", [("send", b"220 mx.test ESMTP\r\n"), ("line", 0),
              ("send", b"250-mx.test\r\n250 STARTTLS\r\n"), ("line", 0),
              ("send", b"554-5.7.1 Client host rejected: listed at bl.test\r\n"
                       b"554 5.7.1 See https://bl.test/\r\n")],
     "smtp: the server refused STARTTLS: '554-5.7.1 Client host rejected: listed at bl.test"
     "\\r\\n554 5.7.1 See https://bl.test/'"),
    ("ftp", [("send", b"220 ftp.test\r\n"), ("line", 0), ("send", b"211 no features\r\n"),
             ("line", 0), ("send", b"534-Policy: no TLS for \x1b[31myou\r\n534 Denied\r\n")],
     "ftp: the server refused AUTH TLS: '534-Policy: no TLS for \\x1b[31myou\\r\\n534 "
     "Denied'"),
    # a stream error's <text> (and see-other-host's host), escaped and bounded
    ("xmpp", [("upto", XMPP_HEAD_SENT), ("send", SERVER_HEAD + b"<stream:error>"
              b"<see-other-host xmlns='" + STREAMS + b"'>[::1]:5999</see-other-host>"
              b"<text xmlns='" + STREAMS + b"'>moved\x1b]0;x\x07 " + b"A" * 300 + b"</text>"
              b"</stream:error></stream:stream>")],
     "xmpp: stream error 'see-other-host': '[::1]:5999': 'moved\\x1b]0;x\\x07 " + "A" * 188 +
     "'... (the server sends its clients to the host it names)"),
    ("xmpp", [("upto", XMPP_HEAD_SENT), ("send", SERVER_HEAD + b"<stream:features>"
              b"<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features>"),
              ("upto", b"/>"), ("send", b"<stream:error><policy-violation xmlns='" + STREAMS +
                                        b"'/><text xml:lang='en' xmlns='" + STREAMS +
                                        b"'>Encryption is\r\nnot for you</text>"
                                        b"</stream:error>")],
     "xmpp: stream error 'policy-violation': 'Encryption is\\r\\nnot for you'"),
    # a stream error the server cuts off (closes before its end): its condition still said
    ("xmpp", [("upto", XMPP_HEAD_SENT), ("send", SERVER_HEAD + b"<stream:error><conflict "
              b"xmlns='" + STREAMS + b"'/>")],
     "xmpp: the server closed the connection while we waited for the end of the stream "
     "error 'conflict'"),
], ids=["smtp-multiline", "ftp-multiline-escape", "xmpp-see-other-host", "xmpp-text",
        "xmpp-cut-off"])
def test_a_refusal_shows_what_the_server_said(run_cli: Cli, proto: str,
                                              steps: list[Step], said: str) -> None:
    """Every refusal quotes the server's whole answer, escaped and bounded: a multi-line
    SMTP/FTP reply (only its last line was shown), an XMPP stream error's <text> and the
    content of its condition (only the condition's name was shown)."""
    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                play_steps(conn, steps)
                if b"conflict" not in steps[-1][1]:
                    conn.recv(100)
            except OSError:
                pass
    server = Accepting(serve)
    try:
        res = run_cli(f"127.0.0.1:{server.port}", "--starttls", proto, "--json",
                      "--timeout", "5")
    finally:
        server.close()
    assert res.returncode == 5, res.stderr
    assert one_stderr_line(res.stderr) == f"tlsprobe: 127.0.0.1:{server.port}: {said}"
    data = json.loads(res.stdout)
    kind = "closed" if "closed the connection" in said else "refused"
    assert data["error_kind"] == kind and data["error"].endswith(said)
