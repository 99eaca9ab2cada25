"""The `--msg` trace of a capture is the live probe's trace, line for line.

The probe talks to a real server on loopback and writes the exchange (`--pcap-out`) and its
secrets (`--keylog`); `tlsprobe pcap --msg --keylog` on that file must print exactly the
lines the probe printed, decrypted records included. One thing may differ: the order
between the two directions. The capture is in wire order, while the live engine answers a
HelloRetryRequest before reading the rest of the server's segment (its middlebox
ChangeCipherSpec), so each direction's entries are compared in order."""

from __future__ import annotations

from pathlib import Path

import pytest


def probe_and_read_back(run_cli, tmp_path: Path, target: str, *probe_args: str) -> tuple[
        list[str], list[str], str]:
    pcap, keys = tmp_path / "probe.pcap", tmp_path / "probe.keys"
    code, live, err = run_cli(target, "--msg", "--pcap-out", pcap, "--keylog", keys,
                              "--no-verify", "--timeout", "5", *probe_args)
    assert code == 0, err
    live_trace = live.split("\n---\n")[0].splitlines()
    code, offline, err = run_cli("pcap", "--msg", "--keylog", keys, pcap)
    assert code == 0, err
    head, _, rest = offline.partition("\n")
    assert head.startswith("=== connection 0: ")
    offline_trace = rest.split("\n---\n")[0].splitlines()
    return live_trace, offline_trace, offline


def entries(trace: list[str]) -> dict[str, list[list[str]]]:
    """Trace entries (a ">>>"/"<<<" line and its indented lines) per direction."""
    out: dict[str, list[list[str]]] = {">>>": [], "<<<": []}
    for line in trace:
        if line[:3] in out:
            out[line[:3]].append([line])
            current = out[line[:3]][-1]
        else:
            current.append(line)
    return out


@pytest.mark.needs_impl("openssl")
def test_seed_case_trace_is_identical(run_cli, server_cache, tmp_path: Path) -> None:
    srv = server_cache("openssl", groups=["X25519"], ciphers="ECDHE-RSA-AES128-GCM-SHA256",
                       proto="tls1_2")
    live, offline, out = probe_and_read_back(run_cli, tmp_path, f"127.0.0.1:{srv.port}",
                                             "--tls1_2")
    assert len(live) > 100
    assert offline == live
    assert "      named_curve x25519 (0x001d) at +6 (bytes +5..+6)" in live
    assert any(line.endswith("Finished (decrypted)") for line in offline)
    assert "x25519" in out and "32/32" in out


@pytest.mark.needs_impl("openssl")
def test_tls13_trace_is_identical(run_cli, server_cache, tmp_path: Path) -> None:
    srv = server_cache("openssl", groups=["P-256"], proto="tls1_3")
    live, offline, _out = probe_and_read_back(run_cli, tmp_path, f"127.0.0.1:{srv.port}",
                                             "--tls1_3", "--groups", "P-256:x25519",
                                             "--key-shares", "x25519", "--http-get", "/")
    assert entries(offline) == entries(live)
    assert sorted(offline) == sorted(live)
    assert any("HelloRetryRequest" in line for line in live)
    assert any("EncryptedExtensions (decrypted)" in line for line in offline)
    assert any("ApplicationData" in line and "(decrypted)" in line for line in offline)
