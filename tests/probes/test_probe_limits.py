"""A server that sends more than one of tlsprobe's own limits allows (`--max-chain` here,
a real `openssl s_server` on loopback sending a chain of 21 certificates).

The server breaks no rule: the limit is ours (as `openssl s_client -verify_depth`'s is
its own, code 22 "certificate chain too long"). So the probe's one stderr line names the
limit and the option that raises it, the exit code is 8 (documented: a limit of tlsprobe's,
not 6, "the server broke the protocol"), JSON `error_kind` is "limit", and the alert sent
is internal_error (80), not bad_certificate (42), which would blame the certificates.
Raising --max-chain past the chain's length completes the same handshake.
"""

from __future__ import annotations

import json

CHAIN = 20          # copies of the CA certificate after the leaf: 21 certificates in all


def _long_chain_server(tls_server, certs, tmp_path):  # type: ignore[no-untyped-def]
    chain = tmp_path / "long-chain.pem"
    chain.write_text(certs.ca.read_text() * CHAIN)
    return tls_server("openssl", proto="tls1_3", extra=["-cert_chain", str(chain)])


def test_a_chain_over_max_chain_is_a_limit_not_a_protocol_error(
        tls_server, certs, tmp_path, run_cli) -> None:  # type: ignore[no-untyped-def]
    srv = _long_chain_server(tls_server, certs, tmp_path)
    target = f"127.0.0.1:{srv.port}"
    res = run_cli(target, "--no-verify")
    assert res.returncode == 8, res.stderr
    assert res.stderr.splitlines() == [
        f"tlsprobe: {target}: server sent a chain of {CHAIN + 1} certificates, more than "
        "tlsprobe's limit of 16 (--max-chain raises it)"], res.stderr
    assert "Alert              sent fatal internal_error (80)" in res.stdout, res.stdout
    assert "bad_certificate" not in res.stdout
    doc = json.loads(run_cli(target, "--no-verify", "--max-chain", "3", "--json").stdout)
    assert doc["error_kind"] == "limit"
    assert doc["error"].endswith("more than tlsprobe's limit of 3 (--max-chain raises it)")


def test_raising_max_chain_reads_the_same_chain(tls_server, certs, tmp_path,
                                                run_cli) -> None:  # type: ignore[no-untyped-def]
    srv = _long_chain_server(tls_server, certs, tmp_path)
    res = run_cli(f"127.0.0.1:{srv.port}", "--no-verify", "--max-chain", str(CHAIN + 1),
                  "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["error"] is None and len(doc["certificates"]) == CHAIN + 1
