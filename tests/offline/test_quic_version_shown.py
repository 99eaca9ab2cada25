"""`pcap` names the QUIC version of each QUIC connection (v1, v2, draft-NN, ...) in the
table's Version cell, the --details "QUIC version" row and the JSON `quic_version` object
(id, hex, name), read from real captures of the third-party corpus (suricata-verify's
quic-ietf: v1, quic-v2: v2) and from built captures of drafts, mvfst, Google's T051 and a
reserved version; a TCP connection has none (null)."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.shared_data import captures_dir, required
from tests.offline import quicbuild as Q
from tests.offline.test_quic_versions import handshake
from tlsprobe.wire.quic import version_name

CORPUS = [("suricata-verify/tests/quic-ietf/input.pcap", 1, "v1"),
          ("suricata-verify/tests/quic-v2/input.pcap", 0x6B3343CF, "v2")]


@pytest.mark.parametrize("name, version, shown", CORPUS)
def test_the_quic_version_in_every_output(run_cli: Callable[..., Any], name: str,
                                          version: int, shown: str) -> None:
    path = required(captures_dir() / name, name)
    table = run_cli("pcap", path)
    assert table.returncode == 0, table.stderr
    [row] = [x for x in table.stdout.splitlines() if x.startswith("quic/0 ")]
    assert f"TLS 1.3 (QUIC {shown})" in row, row
    details = run_cli("pcap", path, "--details")
    assert f"QUIC version        {shown} (0x{version:08x})" in details.stdout.splitlines()
    jsonl = run_cli("pcap", path, "--jsonl")
    [conn] = [d for d in map(json.loads, jsonl.stdout.splitlines())
              if d["kind"] == "connection"]
    assert conn["quic_version"] == {"id": version, "hex": f"0x{version:08x}", "name": shown}


@pytest.mark.parametrize("version, shown", [(0xFF00001D, "draft-29"),
                                            (0xFF000022, "draft-34"),
                                            (0xFACEB002, "mvfst draft-27"),
                                            (Q.T051, "Google T051"),
                                            (0x1A2A3A4A, "reserved")])
def test_drafts_and_other_versions_are_named(tmp_path: Path, run_cli: Callable[..., Any],
                                             version: int, shown: str) -> None:
    datagrams, _ = handshake(version)
    path = tmp_path / "q.pcap"
    Q.write(path, datagrams)
    jsonl = run_cli("pcap", path, "--jsonl")
    [conn] = [d for d in map(json.loads, jsonl.stdout.splitlines())
              if d["kind"] == "connection"]
    assert conn["quic_version"]["name"] == shown == version_name(version)
    assert conn["quic_version"]["hex"] == f"0x{version:08x}"


def test_a_tcp_connection_has_no_quic_version(run_cli: Callable[..., Any]) -> None:
    path = Path(__file__).resolve().parents[2] / "captures" / "tls12_alert.pcap"
    jsonl = run_cli("pcap", path, "--jsonl")
    conns = [d for d in map(json.loads, jsonl.stdout.splitlines()) if d["kind"] == "connection"]
    assert conns and all(d["quic_version"] is None for d in conns)
    details = run_cli("pcap", path, "--details")
    assert "QUIC version" not in details.stdout
