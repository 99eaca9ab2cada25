"""`tlsprobe HOST:PORT --starttls PROTO` end to end (python -m tlsprobe) against the real
daemons of tests/lab_servers on loopback: the probe completes the handshake after the
preamble and reports the group the daemon was configured with (P-384 where the daemon takes
a group list, so defaults would not pass), `--msg` shows the plain-text exchange before the
first record, and the JSON has the `starttls` object."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tests.lab_servers.daemons import DaemonFactory

Cli = Callable[..., Any]

# (daemon, options, port name, --starttls, group it must negotiate, text in the banner)
PROBES = [
    ("postfix", {"curves": "secp384r1"}, "smtp", "smtp", "secp384r1", "ESMTP"),
    ("dovecot", {"curves": "P-384"}, "imap", "imap", "secp384r1", "* OK"),
    ("postgres", {"curve": "secp384r1"}, "postgres", "postgres", "secp384r1", None),
    ("mariadb", {}, "mysql", "mysql", "x25519", "MariaDB"),
    ("slapd", {}, "ldap", "ldap", "x25519", None),
    ("prosody", {}, "xmpp", "xmpp", "x25519", "<stream:stream"),
]


@pytest.mark.parametrize("name,options,port,proto,group,banner", PROBES,
                         ids=[p[0] + "-" + p[3] for p in PROBES])
def test_probe_over_starttls(daemon: DaemonFactory, run_cli: Cli, name: str,
                             options: dict[str, object], port: str, proto: str, group: str,
                             banner: str | None) -> None:
    server = daemon(name, **options)
    address = f"127.0.0.1:{server.ports[port]}"
    res = run_cli(address, "--starttls", proto, "--sni", "localhost", "--no-verify",
                  "--json", timeout=90)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["handshake_complete"] is True
    assert data["key_exchange"]["group"]["name"] == group, data["key_exchange"]
    info = data["starttls"]
    assert info["protocol"] == proto and info["chosen_by"] == "option"
    if banner is not None:
        assert info["banner"] is not None and banner in info["banner"], info
    assert info["capability"] is not None


def test_probe_msg_shows_the_ehlo_exchange_then_the_handshake(daemon: DaemonFactory,
                                                              run_cli: Cli) -> None:
    server = daemon("postfix", curves="secp384r1")
    res = run_cli(f"127.0.0.1:{server.ports['smtp']}", "--starttls", "smtp", "--msg",
                  "--no-verify", timeout=90)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    plain = [i for i, line in enumerate(lines) if "plain text (smtp, before TLS)" in line]
    first_record = next(i for i, line in enumerate(lines) if ">>> TLS" in line)
    assert plain and max(plain) < first_record
    assert lines[plain[0]].startswith("<<< plain text (smtp, before TLS): 220 ")
    assert any(line.startswith(">>> plain text (smtp, before TLS): EHLO ") for line in lines)
    assert any(line.endswith(": STARTTLS") and line.startswith(">>>") for line in lines)
    assert "secp384r1" in res.stdout
    summary = [line for line in lines if line.startswith("STARTTLS")]
    assert len(summary) == 1 and summary[0].split(None, 1)[1].startswith("smtp; banner: 220 ")


def test_probe_starttls_auto_says_which_protocol(daemon: DaemonFactory, run_cli: Cli) -> None:
    """auto on a port that is no well-known one is a usage error naming the ports; the
    choice itself is a note on stderr and `chosen_by: port` in JSON (checked with the
    scripted servers of test_starttls_cli_errors.py on port 25's protocol)."""
    server = daemon("postfix", curves="secp384r1")
    res = run_cli(f"127.0.0.1:{server.ports['smtp']}", "--starttls", "auto", timeout=60)
    assert res.returncode == 2
    assert res.stderr.startswith("tlsprobe: ") and "--starttls auto: port" in res.stderr
    assert "25 smtp" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_timing_over_starttls_times_the_configured_group(daemon: DaemonFactory,
                                                         run_cli: Cli) -> None:
    """--timing: the enumeration and every timed handshake hold the SMTP preamble; Postfix
    restricted to P-384 gets only secp384r1 timed among the named groups (both versions;
    TLS 1.2 DHE with Postfix's own parameters is an entry without a group)."""
    server = daemon("postfix", curves="secp384r1")
    res = run_cli(f"127.0.0.1:{server.ports['smtp']}", "--starttls", "smtp", "--timing",
                  "--timing-runs", "2", "--timing-warmup", "0", "--json", timeout=240)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    measured = [e for e in report["entries"] if e["status"] == "measured"]
    named = {(e["version"]["name"], e["group"]["name"]) for e in measured if e["group"]}
    assert named == {("TLS 1.3", "secp384r1"), ("TLS 1.2", "secp384r1")}, report["entries"]
    assert all(e["runs"] == 2 for e in measured), measured


def test_probe_pcap_out_holds_the_preamble_then_tls(daemon: DaemonFactory, run_cli: Cli,
                                                    tmp_path: Any) -> None:
    """--pcap-out: the plain-text exchange comes first in the client's stream, then the
    ClientHello, so Wireshark sees the whole connection."""
    server = daemon("postfix", curves="secp384r1")
    pcap = tmp_path / "smtp.pcap"
    res = run_cli(f"127.0.0.1:{server.ports['smtp']}", "--starttls", "smtp", "--no-verify",
                  "--pcap-out", pcap, timeout=90)
    assert res.returncode == 0, res.stderr
    data = pcap.read_bytes()
    ehlo, starttls = data.find(b"EHLO tlsprobe.invalid\r\n"), data.find(b"STARTTLS\r\n")
    hello = data.find(b"\x16\x03\x01")   # the ClientHello's record header
    assert 0 < ehlo < starttls < hello, (ehlo, starttls, hello)
    assert data.find(b"220 ") < ehlo
