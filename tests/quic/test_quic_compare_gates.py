"""`scan --quic --compare-tcp`: the TCP audit counts toward the exit code, so every report
says why. A TCP server speaking TLS 1.2 (outside Mozilla modern) behind a TLS 1.3-only QUIC
server: the exit code was 1 while the JSON gate passed, JUnit had no failure, SARIF no
result and the text no reason (a single target: no summary)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any


def test_the_tcp_audit_of_compare_tcp_is_gated_everywhere(
        ngtcp2_server: Any, server_cache: Any, run_cli: Callable[..., Any],
        tmp_path: Path) -> None:
    quic = ngtcp2_server()
    tcp = server_cache("openssl", groups="X25519", serverpref=True)
    res = run_cli("scan", quic.target, "--quic", "--compare-tcp", "--tcp-port", str(tcp.port),
                  "--checks", "versions,suites", "--policy", "modern", "--fail-on", "medium",
                  "--no-progress", "--timeout", "5", "--junit", tmp_path / "j.xml",
                  "--sarif", tmp_path / "s.sarif", "--json-out", tmp_path / "o.jsonl")
    assert res.returncode == 1, res.stderr
    tcp_target = f"127.0.0.1:{tcp.port}"
    assert f"Failed: {tcp_target}\n  - " in res.stdout
    assert "version.not_allowed" in res.stdout.split("Summary", 1)[1]
    lines = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    gates = {(d["port"], d.get("transport")): d["gate"]["passed"] for d in lines}
    assert gates == {(quic.port, "quic"): True, (tcp.port, None): False}
    suites = {s.get("name"): s.get("failures") for s in ET.parse(tmp_path / "j.xml").iter(
        "testsuite")}
    assert suites[f"{quic.target} (QUIC)"] == "0" and suites[tcp_target] != "0", suites
    sarif = json.loads((tmp_path / "s.sarif").read_text())
    assert any(x["ruleId"] == "version.not_allowed" and "transport" not in x["properties"]
               for x in sarif["runs"][0]["results"])
