"""QUIC v2 (RFC 9369) and compatible version negotiation (RFC 9368) with `--quic-version`:
against aioquic's server (which speaks v1 and v2 and takes the client's preferred version)
and ngtcp2's (v1 only here: it answers a v2 Initial with Version Negotiation)."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tlsprobe.errors import EXIT_PROTOCOL


def _probe(run_cli: Callable[..., Any], server: Any, *args: str) -> Any:
    return run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5", *args)


def _packets(out: str) -> list[str]:
    return [x for x in out.splitlines() if x[:2] in ("> ", "< ")]


def test_v2_handshake_after_a_v2_retry(quic_server: Any, run_cli: Callable[..., Any]) -> None:
    # v2's salt, "quicv2" labels, long-header type bits and Retry integrity key, all at once;
    # --json with --msg: the JSON on stdout, the packets and the trace on stderr
    server = quic_server("x25519", retry=True)
    res = _probe(run_cli, server, "--quic-version", "2", "--msg", "--json")
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout)
    quic = probe["quic"]
    assert (quic["version"], quic["version_name"], quic["compatible_from"]) == (
        "0x6b3343cf", "v2", None)
    assert re.fullmatch(r"[0-9a-f]+", quic["retry_source_connection_id"])
    params = {p["name"]: p["value"] for p in quic["transport_parameters"]}
    assert params["retry_source_connection_id"] == quic["retry_source_connection_id"]
    assert quic["handshake_done"] is True and quic["closed_by_us"] == 0
    assert probe["key_exchange"]["group"]["name"] == "x25519"
    packets = _packets(res.stderr)
    assert packets and all(x.split()[2] == "v2" for x in packets), packets
    assert any(x.startswith("< Handshake v2 ") and "CRYPTO(" in x for x in packets)
    assert any(x.startswith("< 1-RTT v2 ") and "HANDSHAKE_DONE" in x for x in packets)


def test_compatible_negotiation_from_v1_to_v2(quic_server: Any,
                                              run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1")
    res = _probe(run_cli, server, "--quic-version", "1,2", "--msg")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "QUIC version: 0x6b3343cf (v2)" in out
    assert "Compatible version negotiation: from v1 (RFC 9368)" in out
    assert "  version_information: chosen 0x6b3343cf, available " in out
    packets = _packets(out)
    assert packets[0].startswith("> Initial v1 ")       # we start in v1 ...
    assert any(x.startswith("< Initial v2 ") and "CRYPTO(offset=0" in x for x in packets)
    assert any(x.startswith("> Handshake v2 ") for x in packets)   # ... and go on in v2
    assert "HANDSHAKE_DONE received: yes" in out


def test_v2_to_a_v1_only_server_is_its_version_negotiation(
        ngtcp2_server: Any, run_cli: Callable[..., Any]) -> None:
    server = ngtcp2_server("-GROUP-ALL:+GROUP-X25519")
    res = _probe(run_cli, server, "--quic-version", "2", "--json")
    assert res.returncode == EXIT_PROTOCOL
    [line] = res.stderr.strip().splitlines()
    assert line.startswith(f"tlsprobe: {server.target}: server does not speak QUIC v2 (its "
                           "Version Negotiation offers: ")
    assert "0x00000001" in line
    quic = json.loads(res.stdout)["quic"]
    assert "0x00000001" in quic["version_negotiation"] and quic["version_name"] == "v2"


def test_v2_offering_v1_to_a_v1_only_server_says_what_to_do(
        ngtcp2_server: Any, run_cli: Callable[..., Any]) -> None:
    # `2,1`: start in v2, offer v1. A v1-only server's Version Negotiation lists v1, which
    # we named; no new connection is started in it (RFC 9368 2.4 incompatible negotiation),
    # and the error said only that the server does not speak v2
    server = ngtcp2_server("-GROUP-ALL:+GROUP-X25519")
    res = _probe(run_cli, server, "--quic-version", "2,1")
    assert res.returncode == EXIT_PROTOCOL
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("; it offers v1, which tlsprobe would speak, but a connection is "
                         "not started again in another version (RFC 9368 2.4): give "
                         "--quic-version 1"), line
