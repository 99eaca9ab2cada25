"""A TLS 1.2 CertificateRequest's certificate_types (RFC 5246 7.4.4) are reported by name
and id, as `openssl s_client` lists "Client Certificate Types": in the probe's text and
JSON and in the scan's client_auth check. tlsprobe said only "requested by the server"
(the CA names were reported, the types nowhere). TLS 1.3's request has no types."""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from typing import Any

import pytest


def _s_client_types(port: int) -> list[str]:
    proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2"],
                          input="", capture_output=True, text=True, timeout=30, check=False)
    found = re.search(r"^Client Certificate Types: (.*)$", proc.stdout, re.MULTILINE)
    assert found, proc.stdout + proc.stderr
    return found.group(1).split(", ")


@pytest.mark.needs_impl("openssl")
def test_the_certificate_types_of_the_request(tls_server: Callable[..., Any],
                                              run_cli: Callable[..., Any]) -> None:
    srv = tls_server("openssl", extra=["-verify", "1"])
    assert _s_client_types(srv.port) == ["RSA sign", "DSA sign", "ECDSA sign"]
    res = run_cli(f"127.0.0.1:{srv.port}", "--tls1_2", "--no-verify", "--json")
    assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
    data = json.loads(res.stdout)
    assert data["client_certificate_requested"] is True
    assert [(t["id"], t["hex"], t["name"]) for t in data["client_certificate_types"]] == [
        (1, "0x01", "rsa_sign"), (2, "0x02", "dss_sign"), (64, "0x40", "ecdsa_sign")]
    res = run_cli(f"127.0.0.1:{srv.port}", "--tls1_2", "--no-verify")
    assert re.search(r"^Client certificate +requested by the server \(CertificateRequest; "
                     r"certificate types rsa_sign \(1\), dss_sign \(2\), ecdsa_sign \(64\)\); "
                     r"none sent$", res.stdout, re.MULTILINE), res.stdout
    res = run_cli(f"127.0.0.1:{srv.port}", "--tls1_3", "--no-verify", "--json")
    data = json.loads(res.stdout)
    assert data["client_certificate_requested"] is True, data
    assert data["client_certificate_types"] == [], data
    srv = tls_server("openssl", extra=["-verify", "1", "-no_tls1_3"])   # the scan asks in 1.2
    res = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "client_auth", "--json",
                  "--no-progress", "--no-policy", "--no-verify", timeout=180)
    assert res.stderr == "", res.stderr
    (check,) = [c for c in json.loads(res.stdout)["check_results"]
                if c["name"] == "client_auth"]
    assert check["details"]["version"] == "TLS 1.2", check
    assert check["details"]["certificate_types"] == ["rsa_sign (1)", "dss_sign (2)",
                                                     "ecdsa_sign (64)"], check
    assert "certificate types: rsa_sign (1), dss_sign (2), ecdsa_sign (64)" in \
        check["evidence"], check
