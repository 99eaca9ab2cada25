"""`tlsprobe HOST --quic --json` (with its `quic` object) and `scan --quic --json` (with
`transport`) against aioquic's and ngtcp2's servers validate against the shipped JSON
Schemas (tlsprobe/data/schemas, docs/SCHEMAS.md): the QUIC members are in them too."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.schemas.validate import assert_valid


def test_probe_quic_json_matches_the_probe_schema(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    server = quic_server()
    res = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["quic"], doc
    assert_valid("probe", doc, "probe --quic --json")


def test_scan_quic_json_matches_the_scan_schema(
        ngtcp2_server: Any, run_cli: Callable[..., Any]) -> None:
    server = ngtcp2_server("-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:%SERVER_PRECEDENCE")
    res = run_cli("scan", server.target, "--quic", "--checks", "groups", "--json",
                  "--no-progress", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["transport"] == "quic"
    assert_valid("scan", doc, "scan --quic --json")


def test_compare_tcp_json_matches_the_scan_and_comparison_schemas(
        ngtcp2_server: Any, server_cache: Any, run_cli: Callable[..., Any]) -> None:
    quic = ngtcp2_server("-GROUP-ALL:+GROUP-SECP384R1:+GROUP-X25519:+GROUP-SECP256R1:"
                         "%SERVER_PRECEDENCE")
    tcp = server_cache("openssl", groups="P-384:X25519", serverpref=True, proto="tls1_3")
    res = run_cli("scan", quic.target, "--quic", "--compare-tcp", "--tcp-port", str(tcp.port),
                  "--checks", "groups,pq", "--json", "--no-progress", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    quic_report, tcp_report, comparison = (json.loads(x) for x in res.stdout.splitlines())
    assert_valid("scan", quic_report, "scan --quic (compared)")
    assert_valid("scan", tcp_report, "scan over TCP (compared)")
    assert comparison["rows"]
    assert_valid("scan-comparison", comparison, "the comparison line")
