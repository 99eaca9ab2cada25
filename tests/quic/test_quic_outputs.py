"""`--keylog` and `--pcap-out` over QUIC: the UDP datagrams written as a pcap, read back by
`tlsprobe pcap` (same TLS version, cipher and group as the probe) and by tshark, which
decrypts the handshake with the key log (the server's Certificate inside Handshake packets)."""
from __future__ import annotations

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


def test_pcap_with_the_key_log_of_a_quic_probe_says_why_it_is_not_decrypted(
        quic_server: Any, run_cli: Callable[..., Any], tmp_path: Path) -> None:
    # the key log holds this QUIC handshake's secrets: `pcap --keylog` said "no key matched
    # any connection", which was false; it says the keys matched and what is not read
    server = quic_server("x25519,secp256r1")
    pcap, keylog = tmp_path / "quic.pcap", tmp_path / "keys.log"
    res = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--pcap-out", pcap, "--keylog", keylog)
    assert res.returncode == 0, res.stderr
    back = run_cli("pcap", pcap, "--keylog", keylog)
    assert back.returncode == 0, back.stderr
    [note] = back.stderr.strip().splitlines()
    assert note == (f"tlsprobe: note: {pcap}: keylog {keylog}: 1 connection(s) not decrypted: "
                    "QUIC: only its Initial packets are read (tshark -o "
                    "tls.keylog_file:FILE decrypts the Handshake packets)")
    other = tmp_path / "other.log"      # a key log of another session: still no match
    other.write_text(keylog.read_text().replace(keylog.read_text().split()[1], "00" * 32))
    back = run_cli("pcap", pcap, "--keylog", other)
    assert back.stderr.strip().endswith(f"keylog {other}: no key matched any connection")
