"""`scan --msg FILE --pcap-out FILE --keylog FILE` (issue 13 item 4): every connection of the
audit is recorded and labelled with its phase and number, over plain TCP and over STARTTLS
(Postfix submission, configured with P-384 alone: the same run checks the group audit and
`--no-verify`). Each run is checked against the audit's own connection count: the --msg
file has one labelled section per connection, `tlsprobe pcap` and tshark read as many TCP
connections (distinct client ports) with the labels as pcapng comments, and the key log
decrypts the TLS 1.3 connections that read the server's encrypted flight."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.lab_servers.daemons import DaemonFactory

Cli = Callable[..., Any]
HEADER = re.compile(r"^=== (\S+) (.+), connection (\d+) ===$", re.M)


def _scan(run_cli: Cli, tmp_path: Path, target: str, *extra: str) -> dict[str, Any]:
    res = run_cli("scan", target, "--checks", "groups,sigalgs,cert", "--no-verify", "--json",
                  "--no-progress", "--no-policy", "--msg", tmp_path / "m.txt",
                  "--pcap-out", tmp_path / "p.pcapng", "--keylog", tmp_path / "k.log", *extra,
                  timeout=240)
    assert res.returncode == 0, res.stderr
    report: dict[str, Any] = json.loads(res.stdout)
    assert report["error"] is None
    assert report["trust"]["detail"] == "skipped (--no-verify)"
    return report


def _labels_per_phase(report: dict[str, Any]) -> list[tuple[str, int]]:
    return sorted((phase, n) for phase, count in report["connections"].items()
                  for n in range(1, count + 1))


def _check_msg_headers(path: Path, report: dict[str, Any], target: str) -> list[str]:
    """One section per connection, labelled with its phase and number; their texts."""
    text = path.read_text()
    headers = HEADER.findall(text)
    assert {h[0] for h in headers} == {target}
    assert sorted((phase, int(n)) for _, phase, n in headers) == _labels_per_phase(report)
    sections = HEADER.split(text)[4::4]
    assert len(sections) == report["total_connections"]
    return sections


def _check_msg(path: Path, report: dict[str, Any], target: str) -> list[str]:
    """One section per connection, each with a ClientHello; the sections' texts."""
    sections = _check_msg_headers(path, report, target)
    assert all(re.search(r"^>>> (TLS|SSL) \d\.\d, Handshake \[length \w+\], ClientHello$", s,
                         re.M) for s in sections), sections[0]
    assert all(s.rstrip().endswith("---") for s in sections)
    return sections


def _check_pcap(run_cli: Cli, tmp_path: Path, report: dict[str, Any], port: int,
                decode_as: str) -> list[dict[str, Any]]:
    """As many connections as the audit made, on distinct client ports, decrypted where the
    key log has secrets; tshark decodes every ClientHello and shows the labels."""
    res = run_cli("pcap", tmp_path / "p.pcapng", "--json", "--keylog", tmp_path / "k.log",
                  timeout=120)
    assert res.returncode == 0, res.stderr
    conns: list[dict[str, Any]] = json.loads(res.stdout)["connections"]
    assert len(conns) == report["total_connections"]
    assert len({c["client_port"] for c in conns}) == len(conns)
    assert {c["server_port"] for c in conns} == {port}
    keylog = (tmp_path / "k.log").read_text()
    labelled = re.findall(r"^# \S+ (.+), connection (\d+)$", keylog, re.M)
    assert labelled and keylog.count("SERVER_HANDSHAKE_TRAFFIC_SECRET") == len(labelled)
    assert sum(1 for c in conns if c["decrypted"]) == len(labelled)
    assert all(c["certificates"] for c in conns if c["decrypted"])
    if shutil.which("tshark"):
        out = subprocess.run(["tshark", "-r", str(tmp_path / "p.pcapng"), "-d",
                              f"tcp.port=={port},{decode_as}", "-Y", "tls.handshake.type == 1",
                              "-T", "fields", "-e", "tcp.srcport"], capture_output=True,
                             text=True, timeout=120, check=True).stdout.split()
        assert len(out) >= len(conns) and len(set(out)) == len(conns)
        comments = subprocess.run(["tshark", "-r", str(tmp_path / "p.pcapng"), "-Y",
                                   "frame.comment", "-T", "fields", "-e", "frame.comment"],
                                  capture_output=True, text=True, timeout=120,
                                  check=True).stdout.splitlines()
        assert sorted(comments) == sorted(f"127.0.0.1:{port} {phase}, connection {n}"
                                          for phase, n in _labels_per_phase(report))
    return conns


def _offered_groups(conns: list[dict[str, Any]]) -> set[str]:
    return {g["name"] for c in conns for g in c["offer"]["groups"]}


@pytest.mark.needs_impl("openssl")
def test_scan_records_every_plain_tcp_connection(server_cache: Any, run_cli: Cli,
                                                 tmp_path: Path) -> None:
    server = server_cache("openssl")
    target = f"127.0.0.1:{server.port}"
    report = _scan(run_cli, tmp_path, target)
    assert report["connections"]["groups TLS 1.3"] >= 2
    sections = _check_msg(tmp_path / "m.txt", report, target)
    assert not any("plain text" in s for s in sections)
    conns = _check_pcap(run_cli, tmp_path, report, server.port, "tls")
    supported = {g["name"] for audit in report["groups"] for g in audit["supported"]}
    assert supported and supported <= _offered_groups(conns)


@pytest.mark.needs_impl("openssl")
def test_the_key_log_has_the_secrets_of_the_checks_handshakes(server_cache: Any, run_cli: Cli,
                                                              tmp_path: Path) -> None:
    # the active checks drive their own engines: their completed handshakes (TLS 1.2 and
    # 1.3 resumption, the HTTP request, the renegotiation) were recorded in the pcapng but
    # their secrets never reached --keylog, so none of them could be decrypted
    server = server_cache("openssl")
    target = f"127.0.0.1:{server.port}"
    res = run_cli("scan", target, "--checks", "resumption,hsts", "--no-verify", "--json",
                  "--no-progress", "--no-policy", "--pcap-out", tmp_path / "p.pcapng",
                  "--keylog", tmp_path / "k.log", timeout=240)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    keylog = (tmp_path / "k.log").read_text()
    labelled = re.findall(r"^# \S+ (.+), connection (\d+)$", keylog, re.M)
    phases = {phase for phase, _n in labelled}
    assert {"check hsts request", "check resumption session ID",
            "check resumption TLS 1.3"} <= phases, labelled
    assert "CLIENT_RANDOM" in keylog and "CLIENT_TRAFFIC_SECRET_0" in keylog
    res = run_cli("pcap", tmp_path / "p.pcapng", "--json", "--keylog", tmp_path / "k.log",
                  timeout=120)
    assert res.returncode == 0, res.stderr
    conns = json.loads(res.stdout)["connections"]
    assert len(conns) == report["total_connections"]
    assert sum(1 for c in conns if c["decrypted"]) == len(labelled) >= 3


def test_scan_over_starttls_records_every_connection_with_its_preamble(
        daemon: DaemonFactory, run_cli: Cli, tmp_path: Path) -> None:
    server = daemon("postfix", curves="secp384r1")   # shared with test_starttls_scan.py
    port = server.ports["submission"]
    target = f"127.0.0.1:{port}"
    report = _scan(run_cli, tmp_path, target, "--starttls", "smtp")
    groups = {a["version"]["name"]: [g["name"] for g in a["supported"]]
              for a in report["groups"]}
    assert groups["TLS 1.3"] == ["secp384r1"], report["groups"]      # not Postfix's default
    assert report["starttls"]["protocol"] == "smtp"
    sections = _check_msg(tmp_path / "m.txt", report, target)
    for section in sections:    # the plain-text dialogue, then TLS
        assert section.index("<<< plain text (smtp, before TLS): 220 ") < \
            section.index(">>> plain text (smtp, before TLS): STARTTLS") < \
            section.index(", Handshake [length")
    conns = _check_pcap(run_cli, tmp_path, report, port, "smtp")
    assert {"secp384r1", "x25519"} <= _offered_groups(conns)
    assert all(c["preamble"] for c in conns), conns[0]["preamble"]


def test_scan_of_a_daemon_of_another_protocol_records_the_failed_preambles(
        daemon: DaemonFactory, run_cli: Cli, tmp_path: Path) -> None:
    """`--starttls imap` against Postfix: not speaking imap (exit 4), and the --msg file
    shows what each connection that asked was told (the SMTP banner, as plain text)."""
    server = daemon("postfix", curves="secp384r1")
    target = f"127.0.0.1:{server.ports['smtp']}"
    res = run_cli("scan", target, "--starttls", "imap", "--checks", "groups", "--json",
                  "--no-progress", "--no-policy", "--msg", tmp_path / "m.txt", timeout=120)
    assert res.returncode == 4, res.stderr
    report = json.loads(res.stdout)
    assert report["error_kind"] == "not_tls" and "not speaking imap" in report["error"]
    sections = _check_msg_headers(tmp_path / "m.txt", report, target)
    assert sections and all("<<< plain text (imap, before TLS, not understood): 220 " in s
                            and "ClientHello" not in s for s in sections)


def test_recording_files_that_cannot_be_written_are_usage_errors(run_cli: Cli,
                                                                 tmp_path: Path) -> None:
    """Checked before any connection (nothing listens on the target: a connection would be
    exit 3); one line each, exit 2."""
    for option, path, text in (("--msg", tmp_path / "no" / "m.txt", "does not exist"),
                               ("--pcap-out", tmp_path, "is a directory"),
                               ("--keylog", tmp_path / "no" / "k.log", "does not exist")):
        res = run_cli("scan", "127.0.0.1:1", "--no-progress", option, path, timeout=60)
        assert res.returncode == 2, res.stderr
        assert res.stderr.count("\n") == 1 and f"{option} {path}: " in res.stderr
        assert text in res.stderr
