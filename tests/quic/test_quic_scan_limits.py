"""`scan` takes the probe's limits (--max-message, --max-chain, --max-records, --max-bytes)
and every connection of the audit holds them, over TCP (openssl s_server) and QUIC (aioquic)
alike: past one, that connection's answer is inconclusive and names the limit and the option
(the probe stops with exit 8 there). Over QUIC --max-records counts the server's packets
with CRYPTO data, as the probe's does."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tlsprobe.errors import EXIT_LIMIT, EXIT_OK, EXIT_USAGE

LIMITED = [("--max-chain", "1", "server sent a chain of 2 certificates, more than tlsprobe's "
            "limit of 1 (--max-chain raises it)"),
           ("--max-records", "1", "server sent more than 1 QUIC packets with CRYPTO data, "
            "tlsprobe's limit (--max-records, which counts them over QUIC, raises it)"),
           ("--max-message", "300", "--max-message raises it")]


def _trust(res: Any) -> dict[str, Any]:
    assert res.returncode == EXIT_OK, res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None
    trust: dict[str, Any] = report["trust"]
    return trust


@pytest.mark.parametrize("option, value, said", LIMITED)
def test_scan_quic_holds_the_limits(quic_server: Any, run_cli: Callable[..., Any],
                                    option: str, value: str, said: str) -> None:
    server = quic_server("x25519,secp256r1")
    args = ("scan", server.target, "--quic", "--checks", "cert", "--json", "--no-progress",
            "--no-policy", "--timeout", "3", "--cafile", server.ca)
    assert _trust(run_cli(*args, timeout=60))["status"] == "trusted"
    trust = _trust(run_cli(*args, option, value, timeout=60))
    assert trust["status"] == "not_checked" and said in trust["detail"], trust


@pytest.mark.parametrize("option, value, said", [LIMITED[0], LIMITED[2]])
def test_scan_over_tcp_holds_the_limits(tls_server: Any, run_cli: Callable[..., Any],
                                        option: str, value: str, said: str) -> None:
    server = tls_server("openssl", proto="tls1_3")
    args = ("scan", f"127.0.0.1:{server.port}", "--checks", "cert", "--json",
            "--no-progress", "--no-policy", "--timeout", "3")
    assert _trust(run_cli(*args, timeout=60))["status"] != "not_checked"
    trust = _trust(run_cli(*args, option, value, timeout=60))
    assert trust["status"] == "not_checked" and said in trust["detail"], trust


def test_a_limit_every_answer_passes_is_exit_8(tls_server: Any,
                                               run_cli: Callable[..., Any]) -> None:
    # the server's whole first flight is over --max-bytes: no version is established, and
    # the scan ends as the probe does, with the limit's exit code and the option named
    server = tls_server("openssl", proto="tls1_3")
    res = run_cli("scan", f"127.0.0.1:{server.port}", "--checks", "versions", "--json",
                  "--no-progress", "--no-policy", "--timeout", "3", "--max-bytes", "500",
                  timeout=60)
    assert res.returncode == EXIT_LIMIT, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert "server sent more than 500 bytes, tlsprobe's limit (--max-bytes raises it)" in line
    assert json.loads(res.stdout)["error_kind"] == "limit"


@pytest.mark.parametrize("option", ["--max-message", "--max-chain", "--max-records",
                                    "--max-bytes"])
def test_scan_limit_options_are_checked_as_the_probes(run_cli: Callable[..., Any],
                                                      option: str) -> None:
    for command in (("scan", "127.0.0.1:9"), ("127.0.0.1:9",)):
        res = run_cli(*command, option, "0")
        assert res.returncode == EXIT_USAGE, res.stderr
        assert option in res.stderr and "1 to " in res.stderr, res.stderr


def test_an_active_checks_connections_hold_the_limits(tls_server: Any,
                                                      run_cli: Callable[..., Any]) -> None:
    # the resumption check drives its own full handshakes (probes/checks/_handshake.py):
    # they hold --max-message as the audit's connections do
    server = tls_server("openssl", proto="tls1_3")
    args = ("scan", f"127.0.0.1:{server.port}", "--checks", "resumption", "--json",
            "--no-progress", "--no-policy", "--timeout", "3")

    def result(*more: str) -> dict[str, Any]:
        res = run_cli(*args, *more, timeout=60)
        assert res.returncode == EXIT_OK, res.stderr
        [check] = json.loads(res.stdout)["check_results"]
        assert isinstance(check, dict)
        return check
    assert result()["verdict"] == "supported"
    limited = result("--max-message", "300")
    assert limited["verdict"] == "inconclusive", limited
    assert "over 300" in limited["reason"] and "--max-message raises it" in limited["reason"]
