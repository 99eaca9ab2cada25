"""`tlsprobe scan` on servers with certificates of key types one TLS 1.2 suite serves alike
(ECDSA, Ed25519 and Ed448 keys all serve ECDHE_ECDSA suites; rsaEncryption and RSA-PSS keys
both serve ECDHE_RSA suites): the server picks among them by the client's
signature_algorithms, so the search for the other chains (`--checks cert`) and the TLS 1.2
signature schemes per certificate (`--checks sigalgs,cert`) tell them apart by those. Real
peers: openssl s_server with -dcert/-dkey (TLS 1.2 only, where TLS 1.3 cannot help) and
nginx with one ssl_certificate line per key type.
"""
from __future__ import annotations

import json

import pytest

from tests.lab_servers.certs import ed448_set, rsa_pss_set
from tests.scan.test_scan_dual_cert import fingerprint


def scan(run_cli, port: int, certs, checks: str) -> dict:
    code, out, err = run_cli("scan", f"127.0.0.1:{port}", "--json", "--no-progress",
                             "--cafile", str(certs.ca), "--checks", checks)
    assert code in (0, 1) and err == "", err
    return json.loads(out)


def others(r: dict) -> dict[str, dict]:
    return {o["key_type"]: o for o in r["other_certificates"]}


def tls12_by_key_type(r: dict) -> dict[str, list[str]]:
    tls12 = next(s for s in r["signature_schemes"] if s["version"]["name"] == "TLS 1.2")
    assert tls12["status"] == "established", tls12
    return {k["key_type"]: [c["name"] for c in k["supported"]] for k in tls12["by_key_type"]}


@pytest.mark.needs_impl("openssl")
def test_tls12_ecdsa_and_ed25519_certificates_are_both_found(tls_server, certs, run_cli):
    """ECDSA default, Ed25519 beside it, TLS 1.2 only: the search finds the Ed25519 chain
    (it was 'complete' with none: the ECDHE_ECDSA suites it had offered were answered with
    the ECDSA one): three connections (the RSA and DSS suites, refused; the ECDSA suites with
    the EdDSA schemes, twice: Ed25519, then refused); the
    TLS 1.2 schemes list ed25519 under the Ed25519 certificate, not the ECDSA one."""
    srv = tls_server("openssl", proto="tls1_2", cert="ecdsa", extra=[
        "-dcert", str(certs["ed25519"].cert), "-dkey", str(certs["ed25519"].key)])
    r = scan(run_cli, srv.port, certs, "cert")
    assert r["certificates"][0]["sha256"] == fingerprint(certs["ecdsa"].cert)
    assert set(others(r)) == {"Ed25519"}, r["other_certificates"]
    ed = others(r)["Ed25519"]
    assert ed["certificates"][0]["sha256"] == fingerprint(certs["ed25519"].cert)
    assert ed["trust"]["status"] == "trusted"
    assert r["other_certificates_note"] is None
    assert r["connections"]["certificate key types"] == 3
    r = scan(run_cli, srv.port, certs, "sigalgs,cert")
    assert set(others(r)) == {"Ed25519"} and r["other_certificates_note"] is None
    kinds = tls12_by_key_type(r)
    assert kinds["Ed25519"] == ["ed25519"], kinds
    assert "ecdsa_secp256r1_sha256" in kinds["ECDSA"] and "ed25519" not in kinds["ECDSA"]
    assert "certificate key types" not in r["connections"]


@pytest.mark.needs_impl("openssl")
def test_tls12_rsa_and_rsa_pss_certificates_are_both_found(tls_server, certs, run_cli,
                                                          tmp_path):
    """rsaEncryption default, an RSA-PSS key beside it (TLS 1.2 only): its chain is found,
    and the rsa_pss_pss_* schemes are its own. Two connections: the ECDSA and DSS suites,
    refused; the RSA suites with the rsa_pss_pss_* schemes only."""
    pss = rsa_pss_set(certs, tmp_path / "pss")["rsa-pss"]
    srv = tls_server("openssl", proto="tls1_2",
                     extra=["-dcert", str(pss.cert), "-dkey", str(pss.key)])
    r = scan(run_cli, srv.port, certs, "cert")
    assert set(others(r)) == {"RSA-PSS"}, r["other_certificates"]
    assert others(r)["RSA-PSS"]["certificates"][0]["sha256"] == fingerprint(pss.cert)
    assert r["other_certificates_note"] is None
    assert r["connections"]["certificate key types"] == 2
    kinds = tls12_by_key_type(scan(run_cli, srv.port, certs, "sigalgs,cert"))
    assert kinds["RSA-PSS"] == ["rsa_pss_pss_sha256", "rsa_pss_pss_sha384",
                                "rsa_pss_pss_sha512"], kinds
    assert not [n for n in kinds["RSA"] if n.startswith("rsa_pss_pss")], kinds


@pytest.mark.needs_impl("nginx")
def test_nginx_a_certificate_per_key_type(tls_server, certs, run_cli, tmp_path):
    """nginx with RSA, RSA-PSS, ECDSA, Ed25519 and Ed448 certificates (TLS 1.2 and 1.3):
    the search finds the four others, one connection each, and the DSS suites are refused."""
    more = ed448_set(rsa_pss_set(certs, tmp_path / "pss"), tmp_path / "ed448")
    kinds = ("rsa-pss", "ecdsa", "ed25519", "ed448")
    srv = tls_server("nginx", extra=[f"ssl_certificate {more[k].chain}; "
                                     f"ssl_certificate_key {more[k].key};" for k in kinds])
    r = scan(run_cli, srv.port, certs, "cert")
    assert r["certificates"][0]["sha256"] == fingerprint(certs["rsa"].cert)
    found = others(r)
    assert set(found) == {"RSA-PSS", "ECDSA", "Ed25519", "Ed448"}, r["other_certificates"]
    for kind in kinds:
        leaf = found[{"rsa-pss": "RSA-PSS", "ecdsa": "ECDSA", "ed25519": "Ed25519",
                      "ed448": "Ed448"}[kind]]
        assert leaf["certificates"][0]["sha256"] == fingerprint(more[kind].cert)
        assert leaf["trust"]["status"] == "trusted"
    assert r["other_certificates_note"] is None
    assert r["connections"]["certificate key types"] == 5
    # with the signature-scheme phase: each certificate's TLS 1.2 schemes, its own only
    r = scan(run_cli, srv.port, certs, "sigalgs,cert")
    assert set(others(r)) == {"RSA-PSS", "ECDSA", "Ed25519", "Ed448"}, r["other_certificates"]
    kinds = tls12_by_key_type(r)
    assert set(kinds) == {"RSA", "RSA-PSS", "ECDSA", "Ed25519", "Ed448"}, kinds
    assert kinds["Ed25519"] == ["ed25519"] and kinds["Ed448"] == ["ed448"], kinds
    assert all(n.startswith("rsa_pss_pss") for n in kinds["RSA-PSS"]), kinds
    assert all(n.startswith("ecdsa") for n in kinds["ECDSA"]), kinds
