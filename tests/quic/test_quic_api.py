"""The Python API over QUIC: `tlsprobe.probe(..., quic=True)` against aioquic's server on
loopback reports what `tlsprobe HOST --quic --json` does (the same calls: probes/quic.py),
and refuses what QUIC cannot carry before sending anything."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import tlsprobe
from tlsprobe.errors import UsageError

#: members that differ from one run to the next (times, connection IDs, packet counts)
VOLATILE = ("timings", "quic", "duration_s", "started_at")   # measured, or when the run began


def _stable(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in VOLATILE}


def test_api_quic_probe_reports_what_the_command_line_does(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    server = quic_server("secp384r1,x25519")
    res = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--groups", "secp384r1:x25519", "--json")
    assert res.returncode == 0, res.stderr
    cli = json.loads(res.stdout)
    result = tlsprobe.probe(server.target, quic=True, cafile=str(server.ca), timeout=5,
                            groups=["secp384r1", "x25519"])
    api = json.loads(result.to_json())
    assert (api["version"]["name"], api["cipher"]["iana_name"]) == (
        cli["version"]["name"], cli["cipher"]["iana_name"]) == ("TLS 1.3",
                                                               cli["cipher"]["iana_name"])
    assert api["key_exchange"]["group"] == cli["key_exchange"]["group"]
    assert api["key_exchange"]["group"]["name"] == "secp384r1"
    assert api["alpn"] == cli["alpn"] == "h3"
    assert _stable(api) == _stable(cli)
    assert api["quic"] is not None and api["quic"]["version"] == cli["quic"]["version"]
    assert set(api["quic"]) == set(cli["quic"])


@pytest.mark.parametrize("kwargs, text", [
    ({"versions": ["1.2"]}, "QUIC carries TLS 1.3 only"),
    ({"versions": ["1.2", "1.3"]}, "QUIC carries TLS 1.3 only"),
    ({"ciphersuites": ["TLS_AES_128_CCM_8_SHA256"]}, "not applicable over QUIC"),
    ({"http_get": "/"}, "cannot be used with quic"),
    ({"ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"]}, "cannot be used with quic"),
    ({"quic": "yes"}, "quic must be a bool")])
def test_api_quic_refuses_what_quic_cannot_carry(kwargs: dict[str, Any], text: str) -> None:
    # 127.0.0.1:9 (discard): refused before any datagram, so nothing answers either way
    with pytest.raises(UsageError) as exc:
        tlsprobe.probe("127.0.0.1:9", **{"quic": True, "timeout": 1, **kwargs})
    assert text in str(exc.value)
