"""STARTTLS against the real daemons on loopback (Postfix, Dovecot, vsftpd, Prosody, slapd,
PostgreSQL 15, MariaDB): the preamble runs over a real socket, then a TLS handshake on the
same socket (Python's ssl module verifying the test CA, and tlsprobe's own engine) proves
the stream was left exactly at the start of TLS. A daemon configured with one group
(P-384) must negotiate that group, not the default. Daemons without TLS must give "not
offered" with their capabilities quoted; a daemon of another protocol, "not speaking".
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from tests.lab_servers.daemons import DAEMONS, DaemonFactory, DaemonUnavailable, start_daemon

from tlsprobe.engine.client import ClientHandshake
from tlsprobe.engine.config import ClientConfig
from tlsprobe.errors import FailureKind
from tlsprobe.net.starttls import PreambleRecord, Problem, StartTlsError, run_preamble
from tests.helpers.cpu import within
from tests.helpers.servers import CertSet, listening_inodes, peer_unavailable

SECP256R1, SECP384R1, X25519 = 0x0017, 0x0018, 0x001D
# (daemon, options, protocol of the port, preamble protocol, text in the capability line)
PORTS = [
    ("postfix", {}, "smtp", "smtp", b"STARTTLS"),
    ("postfix", {}, "submission", "smtp", b"STARTTLS"),
    ("dovecot", {}, "imap", "imap", b"STARTTLS"),
    ("dovecot", {}, "pop3", "pop3", b"STLS"),
    ("dovecot", {}, "sieve", "sieve", b'"STARTTLS"'),
    ("dovecot", {}, "lmtp", "lmtp", b"STARTTLS"),
    ("vsftpd", {}, "ftp", "ftp", None),
    ("prosody", {}, "xmpp", "xmpp", b"urn:ietf:params:xml:ns:xmpp-tls"),
    ("prosody", {}, "xmpp-server", "xmpp-server", b"urn:ietf:params:xml:ns:xmpp-tls"),
    ("slapd", {}, "ldap", "ldap", b"resultCode 0 (success)"),
    ("postgres", {}, "postgres", "postgres", b"S (SSLRequest accepted)"),
    ("mariadb", {}, "mysql", "mysql", b"(CLIENT_SSL)"),
    # the instance of test_starttls_scan.py's group audit (one MariaDB start fewer)
    ("mariadb", {"curves": "P-384", "require_secure_transport": True}, "mysql", "mysql",
     b"(CLIENT_SSL)"),
]
IDS = [f"{d}-{port}" + ("-secure-transport" if o else "") for d, o, port, _, _ in PORTS]


def _preamble(address: tuple[str, int], proto: str) -> tuple[socket.socket, PreambleRecord]:
    sock = socket.create_connection(address, timeout=10)
    try:
        return sock, run_preamble(sock, proto, time.monotonic() + 20, server_name="localhost")
    except BaseException:
        sock.close()
        raise


@pytest.mark.parametrize("name,options,port,proto,capability", PORTS, ids=IDS)
def test_preamble_then_python_ssl_handshake(daemon: DaemonFactory, certs: CertSet, name: str,
                                            options: dict[str, object], port: str, proto: str,
                                            capability: bytes | None) -> None:
    server = daemon(name, **options)
    sock, record = _preamble(("127.0.0.1", server.ports[port]), proto)
    context = ssl.create_default_context(cafile=str(certs.ca))
    sock.settimeout(10)
    with context.wrap_socket(sock, server_hostname="localhost") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        peer = tls.getpeercert()
        assert peer is not None and peer["subject"] == ((("commonName", "localhost"),),)
    if capability is None:
        assert record.capability is None   # vsftpd's FEAT does not list AUTH TLS
    else:
        assert record.capability is not None and capability in record.capability
    assert record.lines[0].sender == ("client" if proto in ("xmpp", "xmpp-server", "ldap",
                                                            "postgres") else "server")


def _engine_handshake(sock: socket.socket) -> ClientHandshake:
    engine = ClientHandshake(ClientConfig(server_name="localhost"), stop_after_first_flight=False)
    sock.settimeout(10)
    sock.sendall(engine.start())
    while not engine.done:
        data = sock.recv(65536)
        if not data:
            engine.connection_closed()
            break
        out = engine.receive(data)
        if out:
            sock.sendall(out)
    return engine


@pytest.mark.parametrize("name,options,port,proto,capability", PORTS, ids=IDS)
def test_preamble_then_tlsprobe_engine_handshake(daemon: DaemonFactory, name: str,
                                                 options: dict[str, object], port: str,
                                                 proto: str, capability: bytes | None) -> None:
    server = daemon(name, **options)
    sock, _ = _preamble(("127.0.0.1", server.ports[port]), proto)
    with sock:
        engine = _engine_handshake(sock)
    assert engine.handshake_complete and engine.messages.server_hello is not None
    assert engine.messages.server_hello.selected_version in (0x0303, 0x0304)


@pytest.mark.parametrize("name,options,port,default", [
    ("postfix", {"curves": "secp384r1"}, "smtp", X25519),
    ("dovecot", {"curves": "P-384"}, "imap", X25519),
    ("dovecot", {"curves": "P-384"}, "pop3", X25519),
    ("postgres", {"curve": "secp384r1"}, "postgres", SECP256R1),  # ssl_ecdh_curve=prime256v1
], ids=["postfix", "dovecot-imap", "dovecot-pop3", "postgres"])
def test_configured_group_is_negotiated_over_starttls(daemon: DaemonFactory, name: str,
                                                      options: dict[str, object], port: str,
                                                      default: int) -> None:
    """The engine offers X25519MLKEM768 and x25519 shares first; a daemon restricted to P-384
    must answer with secp384r1 (after a HelloRetryRequest), one with its defaults with its
    default group (x25519; PostgreSQL's ssl_ecdh_curve default is prime256v1)."""
    for opts, group in ((options, SECP384R1), ({}, default)):
        server = daemon(name, **opts)
        sock, _ = _preamble(("127.0.0.1", server.ports[port]), port)
        with sock:
            engine = _engine_handshake(sock)
        assert engine.handshake_complete and engine.messages.server_hello is not None
        assert engine.messages.server_hello.selected_version == 0x0304
        assert engine.messages.server_hello.key_share is not None
        assert engine.messages.server_hello.key_share[0] == group, (name, opts)


@pytest.mark.parametrize("name,options,port,quoted", [
    ("postfix", {"starttls": False}, "smtp", "EHLO keywords: 'PIPELINING"),
    ("dovecot", {"starttls": False}, "imap", "capabilities: 'IMAP4rev1"),
    ("dovecot", {"starttls": False}, "pop3", "CAPA list: 'CAPA"),
    ("dovecot", {"starttls": False}, "sieve", "capabilities: 'IMPLEMENTATION SIEVE"),
    ("dovecot", {"starttls": False}, "lmtp", "LHLO keywords: '8BITMIME"),
    ("vsftpd", {"starttls": False}, "ftp", "FEAT list: 'EPRT"),
    ("prosody", {"starttls": False}, "xmpp", "stream features: 'mechanisms'"),
    ("slapd", {"starttls": False}, "ldap", "'unsupported extended operation'"),
    ("postgres", {"ssl": False}, "postgres", "answered 'N'"),
    ("mariadb", {"ssl": False}, "mysql", "lack CLIENT_SSL"),
], ids=lambda v: v if isinstance(v, str) and " " not in v and ":" not in v else "")
def test_daemon_without_tls_is_not_offered(daemon: DaemonFactory, name: str,
                                           options: dict[str, object], port: str,
                                           quoted: str) -> None:
    server = daemon(name, **options)
    with pytest.raises(StartTlsError) as caught:
        _preamble(("127.0.0.1", server.ports[port]), port)
    error = caught.value
    assert error.problem is Problem.NOT_OFFERED and error.kind is FailureKind.NOT_TLS
    assert error.exit_code == 4 and quoted in str(error)
    assert (error.record.banner is None) == (port in ("ldap", "postgres"))


@pytest.mark.parametrize("name,port,proto,text", [
    ("postfix", "smtp", "imap", "not speaking imap: it sent an SMTP or FTP banner ('220 "),
    ("dovecot", "imap", "pop3", "not speaking pop3: it sent an IMAP greeting ('* OK"),
    ("postfix", "smtp", "xmpp", "not speaking xmpp: it sent an SMTP or FTP banner ('220 "),
    # MySQL's first read names the other protocol from all that came, not 4 bytes
    ("dovecot", "imap", "mysql", "not speaking mysql: it sent an IMAP greeting ('* OK "
     "[CAPABILITY IMAP4rev1"),
    ("dovecot", "sieve", "mysql", "not speaking mysql: it sent a ManageSieve greeting "
     "('\"IMPLEMENTATION\" \"Dovecot"),
    ("postfix", "smtp", "mysql", "not speaking mysql: it sent an SMTP or FTP banner ('220 "
     "mx.test.invalid ESMTP tlsprobe-test\\r\\n')"),
    # SMTP, LMTP and FTP share the 220 greeting: the replies tell them apart
    ("postfix", "smtp", "ftp", "not speaking ftp: it sent SMTP or LMTP replies ('50"),
    ("postfix", "smtp", "lmtp", "not speaking lmtp: the server does not know LHLO ('500 5.5.2 "
     "Error: command not recognized'): an SMTP server? try --starttls smtp"),
    ("dovecot", "lmtp", "smtp", "not speaking smtp: the server does not know EHLO ('500 5.5.1 "
     "Unknown command'): an LMTP server? try --starttls lmtp"),
    ("dovecot", "lmtp", "ftp", "not speaking ftp: it sent SMTP or LMTP replies ('50"),
    ("vsftpd", "ftp", "smtp", "not speaking smtp: the server wants a login before EHLO ('530 "
     "Please login with USER and PASS.'): an FTP server? try --starttls ftp"),
    ("vsftpd", "ftp", "lmtp", "not speaking lmtp: the server wants a login before LHLO ('530 "),
    ("mariadb", "mysql", "postgres", "not speaking postgres: it sent "),
    ("mariadb", "mysql", "smtp", "not speaking smtp: it sent a MySQL or MariaDB greeting ('"),
    ("mariadb", "mysql", "ftp", "not speaking ftp: it sent a MySQL or MariaDB greeting ('"),
    ("dovecot", "sieve", "imap", "not speaking imap: it sent a ManageSieve greeting "
     "('\"IMPLEMENTATION\""),
])
def test_daemon_of_another_protocol_is_named(daemon: DaemonFactory, name: str, port: str,
                                             proto: str, text: str) -> None:
    server = daemon(name)
    with pytest.raises(StartTlsError) as caught:
        _preamble(("127.0.0.1", server.ports[port]), proto)
    assert caught.value.problem is Problem.WRONG_PROTOCOL and caught.value.exit_code == 4
    assert text in str(caught.value)


def test_a_daemon_that_waits_for_the_client_is_a_timeout(daemon: DaemonFactory) -> None:
    """slapd says nothing until asked: an SMTP preamble against it ends at the deadline."""
    server = daemon("slapd")
    # the socket's own timeout far beyond the preamble's 1 s deadline: a preamble that
    # ignored its deadline would still wait when the call's deadline (within) is up
    sock = socket.create_connection(("127.0.0.1", server.ports["ldap"]), timeout=120)
    with sock, pytest.raises(StartTlsError) as caught:
        within(30, lambda: run_preamble(sock, "smtp", time.monotonic() + 1.0), "the preamble")
    assert caught.value.kind is FailureKind.NETWORK and caught.value.exit_code == 3
    assert str(caught.value) == "smtp: no answer while waiting for the greeting" + SILENT


# the hint of a preamble that heard nothing at all (neither side had spoken)
SILENT = ("; the server sent nothing: it may wait for the client to speak first, as a port "
          "of implicit TLS does (then run without --starttls) or a protocol whose client "
          "begins (xmpp, ldap, postgres)")


def test_implicit_tls_port_is_named(daemon: DaemonFactory, run_cli: Callable[..., Any]
                                    ) -> None:
    """vsftpd with implicit_ssl (FTPS on a port of implicit TLS, 990-style): `--starttls ftp`
    hears nothing (the server waits for a ClientHello), a client-first preamble gets the
    TLS library's error line; each says what the port may be and what to do. Without
    --starttls the port is TLS."""
    server = daemon("vsftpd", extra=("implicit_ssl=YES",))
    target = f"127.0.0.1:{server.ports['ftp']}"
    silent = run_cli("probe", target, "--starttls", "ftp", "--timeout", "2", "--no-verify")
    assert silent.returncode == 3, silent.stderr
    assert silent.stderr == f"tlsprobe: {target}: ftp: no answer while waiting for the " \
        f"greeting{SILENT}\n"
    # vsftpd writes "500 OOPS: ", then its TLS library's error, then closes unread input
    # (a reset that may drop the rest): the reply is named either way (the whole line:
    # test_starttls_protocols.py "postgres-implicit-tls-ftp")
    for proto in ("xmpp", "postgres"):
        xmpp = ("--xmpp-host", "localhost") if proto == "xmpp" else ()
        answered = run_cli("probe", target, "--starttls", proto, "--timeout", "5",
                           "--no-verify", *xmpp)
        assert answered.returncode == 4, answered.stderr
        assert answered.stderr.startswith(f"tlsprobe: {target}: not speaking {proto}: it sent "
                                          "an "), answered.stderr
        assert "('500 OOPS: " in answered.stderr and "something else" not in answered.stderr
    direct = run_cli("probe", target, "--no-verify", "--json")
    assert direct.returncode == 0, direct.stderr
    assert json.loads(direct.stdout)["version"]["name"] == "TLS 1.3"


def _listener_pids(ports: list[int]) -> set[tuple[int, str]]:
    """(PID, start time) of each process holding a listening socket on one of `ports` at
    127.0.0.1, where every daemon listens (from /proc). Only there: another test's server may
    listen on the same port number at ::1 or 127.0.0.2 and outlive this daemon. The start
    time tells a PID reused meanwhile from the daemon's process."""
    inodes = set().union(*(listening_inodes(port, "127.0.0.1") for port in ports))
    pids: set[tuple[int, str]] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue  # the process is gone (or not ours to read)
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{entry}/fd/{fd}")
            except OSError:
                continue  # that descriptor closed meanwhile: a busy daemon's other fds
            if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                pids.add((int(entry), _start_time(int(entry))))
                break
    return pids


def _start_time(pid: int) -> str:
    """Field 22 of /proc/PID/stat (clock ticks after boot), "" once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[19]
    except OSError:
        return ""


@pytest.mark.parametrize("name", DAEMONS)
def test_stopping_a_daemon_ends_every_process_that_listened(certs: CertSet,
                                                           name: str) -> None:
    """Stopped by process group: a daemon that leaves it (Postfix's `start-fg` master calls
    setsid) would keep listening after the test session."""
    folder = Path(tempfile.mkdtemp(prefix=f"tlsprobe-{name}-"))
    os.chmod(folder, 0o711)
    try:
        try:
            server = start_daemon(name, folder, certs)
        except DaemonUnavailable as exc:
            peer_unavailable(str(exc))
        ports = list(server.ports.values())
        pids = _listener_pids(ports)
        assert pids
        server.stop()
        deadline = time.monotonic() + 10
        while any(_alive(*pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in pids if _alive(*pid)]
        assert not any(listening_inodes(port, "127.0.0.1") for port in ports)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int, started: str) -> bool:
    """True while that process (not a later one given its PID) runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"


def test_vsftpd_max_per_ip(daemon: DaemonFactory, run_cli: Callable[..., Any]) -> None:
    """The real daemon: vsftpd with max_per_ip=1 answers 421 while another connection from
    127.0.0.1 is open. The probe asks again and gets through once that one closes; the
    audit (three connections at once by default) establishes every version."""
    server = daemon("vsftpd", max_per_ip=1)
    port = server.ports["ftp"]
    holder = socket.create_connection(("127.0.0.1", port), timeout=10)
    assert holder.recv(100).startswith(b"220")
    threading.Timer(1.0, holder.close).start()
    res = run_cli(f"127.0.0.1:{port}", "--starttls", "ftp", "--no-verify", "--json",
                  "--timeout", "5", timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["version"]["name"] == "TLS 1.3"
    res = run_cli("scan", f"127.0.0.1:{port}", "--starttls", "ftp", "--checks", "versions",
                  "--json", "--no-progress", "--no-policy", timeout=180)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    spoken = {v["version"]["name"]: v["status"] for v in report["versions"]}
    assert "inconclusive" not in spoken.values(), report["versions"]
    assert spoken["TLS 1.3"] == "supported"


@pytest.mark.parametrize("name,port,hint", [
    ("postfix", "smtp", "('220 mx.test.invalid ESMTP tlsprobe-test\\r'...) (a server that "
     "upgrades to TLS on request? try --starttls smtp)"),
    ("vsftpd", "ftp", "(a server that upgrades to TLS on request? try --starttls ftp)"),
    ("dovecot", "imap", "(an IMAP greeting: a server that upgrades to TLS on request? try "
     "--starttls imap)"),
    ("dovecot", "pop3", "(a POP3 greeting: a server that upgrades to TLS on request? try "
     "--starttls pop3)"),
    # Dovecot greets after its auth process answers: a ClientHello that came first fills
    # its input buffer, and its one line is then 'BYE "Input buffer full, aborting"'
    ("dovecot", "sieve", re.compile(r"\(a ManageSieve (greeting|reply): a server that "
                                    r"upgrades to TLS on request\? try --starttls sieve\)")),
    ("prosody", "xmpp", "(an XMPP stream header: a server that upgrades to TLS on request? try "
     "--starttls xmpp"),
    ("mariadb", "mysql", "(a MySQL or MariaDB greeting: a server that upgrades to TLS on "
     "request? try --starttls mysql)"),
])
def test_plain_probe_of_a_starttls_port_says_which_starttls_to_try(
        daemon: DaemonFactory, run_cli: Callable[..., Any], name: str, port: str,
        hint: str | re.Pattern[str]) -> None:
    """Without --starttls, a daemon's greeting is not TLS (exit 4): the one line says what
    to do, naming the --starttls protocol its greeting shows (it said only "it sent non-TLS
    data"), on the probe as on a scan."""
    target = f"127.0.0.1:{daemon(name).ports[port]}"
    res = run_cli(target, "--no-verify", "--timeout", "5")
    assert res.returncode == 4, res.stderr
    assert res.stderr.startswith(f"tlsprobe: {target}: not a TLS server: it sent ")
    found = hint.search(res.stderr) if isinstance(hint, re.Pattern) else hint in res.stderr
    assert found and res.stderr.count("\n") == 1, res.stderr
    if port == "imap":
        res = run_cli("scan", target, "--no-progress", "--checks", "versions", timeout=120)
        assert res.returncode == 4 and hint in res.stderr, res.stderr
