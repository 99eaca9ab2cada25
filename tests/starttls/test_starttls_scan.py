"""`tlsprobe scan HOST:PORT --starttls PROTO` end to end against the real daemons: every
connection of the audit holds the preamble, and the group audit lists exactly the groups
the daemon was configured with (P-384 alone, so the daemon's defaults would not pass); the
version audit over STARTTLS; the JSON report's `starttls` object (once per target)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tests.lab_servers.daemons import DaemonFactory

Cli = Callable[..., Any]

# (daemon, options, port name, --starttls, the TLS 1.3 groups); Postfix's submission port:
# in test_starttls_scan_recording.py. MariaDB has no group option: OpenSSL's configuration
# (OPENSSL_CONF) restricts it; slapd uses GnuTLS (a priority string); vsftpd has no option
# and sets P-256 alone in its code (OpenSSL's default list starts with x25519).
GROUP_AUDITS = [
    ("postfix", {"curves": "secp384r1"}, "smtp", "smtp", ["secp384r1"]),
    ("dovecot", {"curves": "P-384"}, "imap", "imap", ["secp384r1"]),
    ("dovecot", {"curves": "P-384"}, "pop3", "pop3", ["secp384r1"]),
    ("dovecot", {"curves": "P-384"}, "sieve", "sieve", ["secp384r1"]),
    ("postgres", {"curve": "secp384r1"}, "postgres", "postgres", ["secp384r1"]),
    ("vsftpd", {}, "ftp", "ftp", ["secp256r1"]),
    ("prosody", {"curves": "P-384"}, "xmpp", "xmpp", ["secp384r1"]),
    ("slapd", {"curves": "SECP384R1"}, "ldap", "ldap", ["secp384r1"]),
    ("mariadb", {"curves": "P-384"}, "mysql", "mysql", ["secp384r1"]),
    ("mariadb", {"curves": "P-384", "require_secure_transport": True}, "mysql", "mysql",
     ["secp384r1"]),
]
IDS = [f"{g[0]}-{g[3]}" + ("-secure-transport" if "require_secure_transport" in g[1] else "")
       for g in GROUP_AUDITS]


def _tls13_groups(report: dict[str, Any]) -> list[str]:
    audit = next(g for g in report["groups"] if g["version"]["name"] == "TLS 1.3")
    return [g["name"] for g in audit["supported"]]


@pytest.mark.parametrize("name,options,port,proto,groups", GROUP_AUDITS, ids=IDS)
def test_group_audit_over_starttls_finds_the_configured_groups(
        daemon: DaemonFactory, run_cli: Cli, name: str, options: dict[str, object], port: str,
        proto: str, groups: list[str]) -> None:
    server = daemon(name, **options)
    xmpp = ("--xmpp-host", "localhost") if proto == "xmpp" else ()
    res = run_cli("scan", f"127.0.0.1:{server.ports[port]}", "--starttls", proto, "--checks",
                  "groups", "--json", "--no-progress", "--no-policy", *xmpp, timeout=240)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None
    assert _tls13_groups(report) == groups, report["groups"]
    assert report["starttls"]["protocol"] == proto
    # vsftpd's FEAT does not list AUTH TLS: no capability line to quote
    assert (report["starttls"]["capability"] is None) == (proto == "ftp")


@pytest.mark.parametrize("name,port,proto", [("mariadb", "mysql", "mysql"),
                                             ("slapd", "ldap", "ldap"),
                                             ("prosody", "xmpp", "xmpp")])
def test_version_audit_over_starttls(daemon: DaemonFactory, run_cli: Cli, name: str,
                                     port: str, proto: str) -> None:
    server = daemon(name)
    res = run_cli("scan", f"127.0.0.1:{server.ports[port]}", "--starttls", proto, "--checks",
                  "versions", "--json", "--no-progress", "--no-policy", "--xmpp-host",
                  "localhost", timeout=240) if proto == "xmpp" else \
        run_cli("scan", f"127.0.0.1:{server.ports[port]}", "--starttls", proto, "--checks",
                "versions", "--json", "--no-progress", "--no-policy", timeout=240)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    status = {v["version"]["name"]: v["status"] for v in report["versions"]}
    assert status["TLS 1.3"] == "supported" and status["TLS 1.2"] == "supported", status
    assert status["SSL 3.0"] == "not_supported", status
    assert report["starttls"]["protocol"] == proto
    assert report["total_connections"] >= len(status)


def test_default_scan_over_starttls_runs_every_check(daemon: DaemonFactory, run_cli: Cli
                                                     ) -> None:
    """The default scan (the audit and every check) over STARTTLS: every check's connection
    holds the preamble, each check has a verdict, the HTTP checks are not applicable to an
    IMAP server, and nothing is an internal error."""
    from tlsprobe.probes.checks.catalog import ALIASES
    server = daemon("dovecot", curves="P-384")
    res = run_cli("scan", f"127.0.0.1:{server.ports['imap']}", "--starttls", "imap", "--json",
                  "--no-progress", "--no-verify", timeout=240)
    assert res.returncode in (0, 1), res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None, report["error"]
    got = {c["name"]: c for c in report["check_results"]}
    assert list(got) == list(ALIASES["all"])
    assert all("internal error" not in c["reason"] for c in got.values()), got
    for name in ALIASES["http"]:
        assert got[name]["verdict"] == "not applicable", got[name]
    # the checks' own connections went through the preamble too (a connection without it
    # would have been refused by the IMAP server, and the check inconclusive)
    assert got["fallback"]["verdict"] == "not vulnerable", got["fallback"]["reason"]
    assert got["resumption"]["verdict"] in ("supported", "not supported"), got["resumption"]


@pytest.mark.parametrize("name,port,proto", [("slapd", "ldap", "ldap"),
                                             ("postgres", "postgres", "postgres")])
def test_http_checks_over_starttls_are_not_applicable(daemon: DaemonFactory, run_cli: Cli,
                                                      name: str, port: str, proto: str
                                                      ) -> None:
    """After STARTTLS the connection carries the preamble's protocol, not HTTP: the HTTP
    checks are not applicable, whatever the server does with an HTTP request (slapd and
    PostgreSQL close the connection, which was 'inconclusive: no answer to an HTTP
    request'), and ask nothing."""
    from tlsprobe.probes.checks.catalog import ALIASES
    server = daemon(name)
    res = run_cli("scan", f"127.0.0.1:{server.ports[port]}", "--starttls", proto, "--checks",
                  "http", "--json", "--no-progress", "--no-verify", timeout=240)
    assert res.returncode in (0, 1), res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None, report["error"]
    got = {c["name"]: c for c in report["check_results"]}
    assert list(got) == list(ALIASES["http"])
    for check in got.values():
        assert check["verdict"] == "not applicable", check
        assert check["reason"] == (f"not HTTP: after STARTTLS the connection carries {proto} "
                                   f"(--starttls {proto})"), check
    assert not [p for p in report["connections"] if "http" in p], report["connections"]


@pytest.mark.parametrize("name,port,proto", [("vsftpd", "ftp", "ftp"),
                                             ("mariadb", "mysql", "mysql")])
def test_a_daemon_that_alerts_then_leaves_tls_on_a_heartbeat_is_not_vulnerable(
        daemon: DaemonFactory, run_cli: Cli, name: str, port: str, proto: str) -> None:
    """vsftpd and MariaDB answer a record their TLS library refuses (the HeartbeatRequest)
    with a fatal unexpected_message alert, then leave TLS with a plain-text error of their
    protocol ("500 OOPS: ...SSL routines...", a MySQL error packet "Bad handshake"), no
    HeartbeatResponse: not vulnerable, quoting the alert, however the two arrive (it was
    'inconclusive: the server sent non-TLS data' when they came in one segment)."""
    server = daemon(name)
    res = run_cli("scan", f"127.0.0.1:{server.ports[port]}", "--starttls", proto, "--checks",
                  "heartbleed", "--json", "--no-progress", "--no-verify", timeout=240)
    assert res.returncode in (0, 1), res.stderr
    got = {c["name"]: c for c in json.loads(res.stdout)["check_results"]}["heartbleed"]
    assert got["verdict"] == "not vulnerable", got
    assert got["reason"].startswith("it refuses the HeartbeatRequest with fatal alert "
                                    "unexpected_message (10)"), got
    assert got["details"] == {"acknowledged": False, "bytes_leaked": 0}, got


def test_suite_audit_of_a_server_that_cannot_serve_one_key_exchange(daemon: DaemonFactory,
                                                                     run_cli: Cli) -> None:
    """Dovecot 2.3 without `ssl_dh` picks a DHE suite when the client lists one first and
    then closes the connection (its log: "SSL_accept() syscall failed"), so the audit's
    first TLS 1.2 offer (every suite, in codepoint order: DHE before ECDHE) gets no answer
    although the server speaks TLS 1.2. That is no proof that it accepts no suite (the
    report said "none accepted", a complete empty list): the suites are asked again one key
    exchange at a time, ECDHE first, and its ECDHE suites found. The TLS 1.2 signature
    schemes, read from (EC)DHE offers, list ECDHE first (they were "not established")."""
    server = daemon("dovecot")
    res = run_cli("scan", f"127.0.0.1:{server.ports['imap']}", "--starttls", "imap",
                  "--checks", "versions,suites,sigalgs", "--json", "--no-progress",
                  "--no-policy", timeout=240)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    tls12 = next(v for v in report["versions"] if v["version"]["name"] == "TLS 1.2")
    assert tls12["status"] == "supported"
    audit = next(s for s in report["suites"] if s["version"]["name"] == "TLS 1.2")
    names = [s["iana_name"] for s in audit["supported"]]
    assert {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"} <= set(names), audit
    assert all(n.startswith("TLS_ECDHE_RSA_") for n in names), names
    assert any("asked again one key exchange at a time" in n for n in audit["notes"])
    assert audit["order"] == "unknown"
    schemes = next(s for s in report["signature_schemes"] if s["version"]["name"] == "TLS 1.2")
    assert schemes["status"] == "established", schemes
    assert {"rsa_pss_rsae_sha256", "rsa_pkcs1_sha256"} <= {s["name"] for s in schemes["supported"]}
