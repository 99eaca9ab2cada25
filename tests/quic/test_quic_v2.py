"""QUIC v2 (RFC 9369) and compatible version negotiation (RFC 9368) with `--quic-version`:
against aioquic's server (which speaks v1 and v2 and takes the client's preferred version)
and ngtcp2's (v1 only here: it answers a v2 Initial with Version Negotiation)."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tlsprobe.errors import EXIT_PROTOCOL, EXIT_USAGE


def _probe(run_cli: Callable[..., Any], server: Any, *args: str) -> Any:
    return run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5", *args)


def _packets(out: str) -> list[str]:
    return [x for x in out.splitlines() if x[:2] in ("> ", "< ")]


def test_v2_handshake_after_a_v2_retry(quic_server: Any, run_cli: Callable[..., Any]) -> None:
    # v2's salt, "quicv2" labels, long-header type bits and Retry integrity key, all at once
    server = quic_server("x25519", retry=True)
    res = _probe(run_cli, server, "--quic-version", "2", "--msg")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "QUIC version: 0x6b3343cf (v2)" in out
    assert "Compatible version negotiation" not in out
    assert re.search(r"^Retry: yes \(server connection ID [0-9a-f]+, integrity tag checked\)$",
                     out, re.M)
    assert "Group              x25519 (0x001d), from TLS 1.3 key_share" in out
    packets = _packets(out)
    assert packets and all(x.split()[2] == "v2" for x in packets), packets
    assert any(x.startswith("< Handshake v2 ") and "CRYPTO(" in x for x in packets)
    assert any(x.startswith("< 1-RTT v2 ") and "HANDSHAKE_DONE" in x for x in packets)
    assert "HANDSHAKE_DONE received: yes" in out


def test_compatible_negotiation_from_v1_to_v2(quic_server: Any,
                                              run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1")
    # --json with --msg: the JSON on stdout, the packets and the trace on stderr
    res = _probe(run_cli, server, "--quic-version", "1,2", "--msg", "--json")
    assert res.returncode == 0, res.stderr
    quic = json.loads(res.stdout)["quic"]
    assert (quic["version"], quic["version_name"], quic["compatible_from"]) == (
        "0x6b3343cf", "v2", "v1")
    params = {p["name"]: p["value"] for p in quic["transport_parameters"]}
    assert params["version_information"].startswith("6b3343cf")    # chosen: v2
    assert quic["handshake_done"] is True and quic["closed_by_us"] == 0
    packets = _packets(res.stderr)
    assert packets[0].startswith("> Initial v1 ")       # we start in v1 ...
    assert any(x.startswith("< Initial v2 ") and "CRYPTO(offset=0" in x for x in packets)
    assert any(x.startswith("> Handshake v2 ") for x in packets)   # ... and go on in v2
    text = _probe(run_cli, server, "--quic-version", "1,2")
    assert "QUIC version: 0x6b3343cf (v2)" in text.stdout
    assert "Compatible version negotiation: from v1 (RFC 9368)" in text.stdout
    assert "  version_information: chosen 0x6b3343cf, available " in text.stdout


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


def test_quic_version_usage_errors(run_cli: Callable[..., Any]) -> None:
    for args, text in ((["--quic", "--quic-version", "3"], "'3' is not 1 or 2"),
                       (["--quic-version", "2"], "--quic-version needs --quic")):
        res = run_cli("127.0.0.1:9", *args)
        assert res.returncode == EXIT_USAGE, (args, res.stderr)
        [line] = res.stderr.strip().splitlines()
        assert text in line
