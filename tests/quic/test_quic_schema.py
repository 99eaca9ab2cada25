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
