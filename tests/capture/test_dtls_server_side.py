"""A DTLS handshake of which the capture holds only the server's side (a capture point that
sees one direction, ndpi's stun_dtls_unidirectional_server.pcap): the server's ServerHello
starts the conversation, as tshark reads it; a datagram of a protected or non-hello record
still starts none."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.helpers.capbuild import dtls_server_hello, ether, ipv4, pcap_bytes, udp

TSHARK = shutil.which("tshark")
CLIENT, SERVER = ("10.0.0.5", 50123), ("10.0.0.6", 4433)


def from_server(payload: bytes) -> bytes:
    return ether(ipv4(SERVER[0], CLIENT[0], 17, udp(SERVER[1], CLIENT[1], payload)))


def test_server_hello_alone_starts_a_conversation(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "server_only.pcap"
    app = b"\x17\xfe\xfd\x00\x01" + bytes(6) + (32).to_bytes(2, "big") + bytes(32)
    path.write_bytes(pcap_bytes([from_server(app), from_server(dtls_server_hello())]))
    code, out, err = run_cli("pcap", str(path), "--jsonl", "--no-progress")
    assert code == 0, err
    [conn] = [json.loads(line) for line in out.splitlines()
              if json.loads(line)["kind"] == "connection"]
    assert (conn["protocol"], conn["client"], conn["server"]) == \
        ("dtls", "10.0.0.5:50123", "10.0.0.6:4433")
    assert conn["version"]["name"] == "DTLS 1.2" and conn["offer"] is None
    assert conn["cipher"]["iana_name"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    assert conn["first_frame"] == 2  # the application data before it started nothing
    if TSHARK:
        seen = subprocess.run(
            [TSHARK, "-r", str(path), "-d", "udp.port==4433,dtls", "-Y",
             "dtls.handshake.type == 2", "-T", "fields", "-e", "dtls.handshake.ciphersuite"],
            capture_output=True, text=True, timeout=60, check=True).stdout.split()
        assert seen == ["0xc02f"]
