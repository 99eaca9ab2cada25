"""`--keylog` and `--pcap-out` over QUIC: the UDP datagrams written as a pcap, read back by
`tlsprobe pcap` (same TLS version, cipher and group as the probe) and by tshark, which
decrypts the handshake with the key log (the server's Certificate inside Handshake packets)."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcap_out_and_keylog_are_read_back(quic_server: Any, run_cli: Callable[..., Any],
                                           tmp_path: Path) -> None:
    server = quic_server("x25519,secp256r1")
    pcap, keylog = tmp_path / "quic.pcap", tmp_path / "keys.log"
    # starting in v1, moved to v2 by the server (RFC 9368): the capture holds both
    res = run_cli(server.target, "--quic", "--quic-version", "1,2", "--cafile", server.ca,
                  "--timeout", "5", "--json", "--pcap-out", pcap, "--keylog", keylog)
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout)
    assert (probe["quic"]["version_name"], probe["quic"]["compatible_from"]) == ("v2", "v1")
    keys = keylog.read_text().split()
    assert "CLIENT_HANDSHAKE_TRAFFIC_SECRET" in keys and "SERVER_TRAFFIC_SECRET_0" in keys

    back = run_cli("pcap", pcap, "--json")
    assert back.returncode == 0, back.stderr
    [conn] = json.loads(back.stdout)["connections"]
    assert (conn["transport"], conn["protocol"]) == ("udp", "quic")
    assert conn["server_port"] == server.port
    for field in ("version", "cipher"):
        assert conn[field] == probe[field], field
    assert conn["key_exchange"]["group"] == probe["key_exchange"]["group"]
    assert probe["key_exchange"]["group"]["name"] == "x25519"

    shark = subprocess.run(
        ["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}", "-T", "fields",
         "-e", "quic.version", "-e", "tls.handshake.type"],
        capture_output=True, text=True, timeout=60)
    assert shark.returncode == 0, shark.stderr
    rows = [line.split("\t") for line in shark.stdout.splitlines()]
    types = {t for row in rows if len(row) > 1 for t in row[1].split(",") if t}
    # ClientHello, ServerHello, then decrypted: EncryptedExtensions, Certificate,
    # CertificateVerify, Finished
    assert {"1", "2", "8", "11", "15", "20"} <= types, types
    assert rows[0][0] == "0x00000001"      # our first Initial
    assert {row[0].split(",")[0] for row in rows if row[0]} == {"0x00000001", "0x6b3343cf"}


def _shark_certificates(pcap: Path, keylog: Path) -> list[str]:
    """SHA-256 of each certificate tshark decrypts from the capture's QUIC Handshake
    packets with the key log."""
    shark = subprocess.run(
        ["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}", "-T", "fields",
         "-e", "tls.handshake.certificate"], capture_output=True, text=True, timeout=60)
    assert shark.returncode == 0, shark.stderr
    return [hashlib.sha256(bytes.fromhex(cert.replace(":", ""))).hexdigest()
            for line in shark.stdout.split() for cert in line.split(",") if cert]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcap_decrypts_the_quic_handshake_packets_with_the_probes_key_log(
        quic_server: Any, run_cli: Callable[..., Any], tmp_path: Path) -> None:
    # `pcap --keylog` read only the Initial packets of a QUIC handshake: the ALPN, the
    # certificate and the signature scheme were "not visible" though the key log held the
    # secrets tshark decrypts the Handshake packets with
    server = quic_server("x25519,secp256r1")
    pcap, keylog = tmp_path / "quic.pcap", tmp_path / "keys.log"
    res = run_cli(server.target, "--quic", "--quic-version", "1,2", "--cafile", server.ca,
                  "--timeout", "5", "--json", "--pcap-out", pcap, "--keylog", keylog)
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout)
    assert probe["quic"]["version_name"] == "v2"        # moved from v1 (RFC 9368)
    back = run_cli("pcap", pcap, "--json", "--keylog", keylog)
    assert back.returncode == 0 and back.stderr == "", back.stderr
    [conn] = json.loads(back.stdout)["connections"]
    assert conn["quic_version"]["name"] == "v2"
    assert (conn["decrypted"], conn["handshake_complete"]) == (True, True)
    assert conn["alpn"] == probe["alpn"] == "h3"
    assert conn["signature_scheme"] == probe["signature_scheme"]
    ours = [c["sha256"] for c in conn["certificates"]]
    assert ours == [c["sha256"] for c in probe["certificates"]]
    assert ours == _shark_certificates(pcap, keylog)
    assert any("EncryptedExtensions (decrypted)" in m for m in conn["messages"]), conn["messages"]

    # without the key log: the same connection, its ALPN not known (not "none")
    plain = run_cli("pcap", pcap, "--json")
    [conn] = json.loads(plain.stdout)["connections"]
    assert (conn["decrypted"], conn["alpn"], conn["certificates"]) == (False, None, [])

    # a key log with the traffic secrets but without the handshake ones: said, not silent
    partial = tmp_path / "partial.log"
    partial.write_text("".join(line + "\n" for line in keylog.read_text().splitlines()
                               if "HANDSHAKE_TRAFFIC_SECRET" not in line))
    back = run_cli("pcap", pcap, "--keylog", partial)
    assert back.returncode == 0, back.stderr
    assert back.stderr.strip() == (
        f"tlsprobe: note: {pcap}: keylog {partial}: 1 connection(s) not decrypted: QUIC: the "
        "key log has no CLIENT_HANDSHAKE_TRAFFIC_SECRET and SERVER_HANDSHAKE_TRAFFIC_SECRET "
        "for it (only its Initial packets are read)")
    other = tmp_path / "other.log"      # a key log of another session: no match
    other.write_text(keylog.read_text().replace(keylog.read_text().split()[1], "00" * 32))
    back = run_cli("pcap", pcap, "--keylog", other)
    assert back.stderr.strip().endswith(f"keylog {other}: no key matched any connection")


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcap_decrypts_quic_after_a_hello_retry_request_with_chacha20(
        ngtcp2_server: Any, run_cli: Callable[..., Any], tmp_path: Path) -> None:
    # ChaCha20's header protection and a second ClientHello (HelloRetryRequest): the
    # Handshake keys come from the second handshake's secrets
    server = ngtcp2_server("-GROUP-ALL:+GROUP-SECP256R1")
    pcap, keylog = tmp_path / "quic.pcap", tmp_path / "keys.log"
    res = run_cli(server.target, "--quic", "--groups", "x25519,secp256r1", "--ciphersuites",
                  "TLS_CHACHA20_POLY1305_SHA256", "--cafile", server.ca, "--timeout", "5",
                  "--json", "--pcap-out", pcap, "--keylog", keylog)
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout)
    assert probe["hello_retry_request"] is not None
    back = run_cli("pcap", pcap, "--json", "--keylog", keylog)
    assert back.returncode == 0 and back.stderr == "", back.stderr
    [conn] = json.loads(back.stdout)["connections"]
    assert conn["cipher"]["iana_name"] == "TLS_CHACHA20_POLY1305_SHA256"
    assert (conn["decrypted"], conn["handshake_complete"]) == (True, True)
    assert [c["sha256"] for c in conn["certificates"]] == _shark_certificates(pcap, keylog) \
        == [c["sha256"] for c in probe["certificates"]]
    assert conn["signature_scheme"] == probe["signature_scheme"]
    # `--msg`: the handshake messages as read, those of Handshake packets "(decrypted)"
    traced = run_cli("pcap", pcap, "--msg", "--keylog", keylog)
    heads = [line for line in traced.stdout.splitlines() if line[:4] in (">>> ", "<<< ")]
    assert [(h[:3], h.rsplit(", ", 1)[1]) for h in heads] == [
        (">>>", "ClientHello"), ("<<<", "HelloRetryRequest"), (">>>", "ClientHello"),
        ("<<<", "ServerHello"), ("<<<", "EncryptedExtensions (decrypted)"),
        ("<<<", "Certificate (decrypted)"), ("<<<", "CertificateVerify (decrypted)"),
        ("<<<", "Finished (decrypted)"), (">>>", "Finished (decrypted)")], heads


def test_pcap_reads_a_quic_servers_alert_in_its_connection_close(
        ngtcp2_server: Any, run_cli: Callable[..., Any], tmp_path: Path) -> None:
    # a server refusing every offered group closes with CONNECTION_CLOSE 0x128 (0x100 +
    # handshake_failure, RFC 9001 4.8) in an Initial packet: `pcap` said "no ServerHello in
    # the capture" and no alert
    server = ngtcp2_server("-GROUP-ALL:+GROUP-SECP256R1")
    pcap = tmp_path / "refused.pcap"
    res = run_cli(server.target, "--quic", "--groups", "x448", "--cafile", server.ca,
                  "--timeout", "5", "--pcap-out", pcap)
    assert res.returncode == 5 and "handshake_failure (40)" in res.stderr, res.stderr
    back = run_cli("pcap", pcap, "--json")
    [conn] = json.loads(back.stdout)["connections"]
    assert conn["alerts"] == [{"direction": "server", "level": 2, "description": 40,
                               "name": "handshake_failure"}], conn["alerts"]
    details = run_cli("pcap", pcap, "--details")
    assert "failed: server sent fatal alert handshake_failure" in details.stdout
    traced = run_cli("pcap", pcap, "--msg")
    assert "<<< TLS 1.3, Alert [length 0002], fatal handshake_failure" in \
        traced.stdout.splitlines()
