"""A refusal of what every hello of the audit has in common (the server name, the ALPN
protocols) is no answer to the audit's questions: nginx whose default server rejects
handshakes (`ssl_reject_handshake on`: alert unrecognized_name to a hello without a name it
serves) made the group audit list every group "not supported". The scan now says why no
hello was answered and what to do (--sni); with the server's name it is audited. (Over
QUIC the same for ALPN: tests/quic/test_quic_scan.py.)"""
from __future__ import annotations

import json

import pytest

from tlsprobe.errors import EXIT_ALERT


@pytest.mark.needs_impl("nginx")
def test_a_server_name_refused_is_no_group_refused(tls_server, certs, run_cli) -> None:
    leaf = certs.leaves["ecdsa"]
    srv = tls_server("nginx", groups=["X25519", "P-256"], extra=[
        "ssl_reject_handshake on;",
        f"sni-server localhost ssl_certificate {leaf.chain}; ssl_certificate_key {leaf.key};"])
    base = ("scan", f"127.0.0.1:{srv.port}", "--json", "--no-progress", "--checks", "groups")
    code, out, err = run_cli(*base)
    report = json.loads(out)
    assert code == EXIT_ALERT, err
    assert not any(g["not_supported"] for g in report["groups"]), report["groups"]
    assert "unrecognized_name (112)" in report["error"]
    assert "--sni NAME sends another" in report["error"]
    code, out, err = run_cli(*base, "--sni", "localhost")
    assert code == 0, err
    (g13, g12) = json.loads(out)["groups"]
    assert [g["name"] for g in g13["supported"]] == ["x25519", "secp256r1"]
