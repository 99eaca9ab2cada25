"""`tlsprobe scan` on servers with several certificates (an RSA and an ECDSA one, or an
Ed25519 one): every chain is shown and checked, each from a connection that got it, and
the TLS 1.2 signature schemes are listed per certificate. Real peers: openssl s_server
with -dcert/-dkey and nginx with two ssl_certificate lines; a server with one certificate
keeps its report (one connection more to establish that it has no other).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from tests.lab_servers.certs import named_set


def fingerprint(pem: Path) -> str:
    return x509.load_pem_x509_certificate(pem.read_bytes()).fingerprint(hashes.SHA256()).hex()


def scan_json(run_cli, port: int, certs, *args: str) -> dict:
    code, out, err = run_cli("scan", f"127.0.0.1:{port}", "--json", "--no-progress",
                             "--cafile", str(certs.ca), *args)
    assert code in (0, 1), err
    assert err == "", err
    return json.loads(out)


def by_version(r: dict, name: str) -> dict:
    return next(s for s in r["signature_schemes"] if s["version"]["name"] == name)


def dual(certs, kind: str = "ecdsa") -> list[str]:
    """openssl s_server's options of a second certificate (from the test CA)."""
    return ["-dcert", str(certs[kind].cert), "-dkey", str(certs[kind].key)]


@pytest.mark.needs_impl("openssl")
def test_openssl_dcert_both_chains_and_tls12_schemes_per_certificate(tls_server, certs, run_cli):
    srv = tls_server("openssl", extra=dual(certs))
    r = scan_json(run_cli, srv.port, certs, "--checks", "sigalgs,cert")
    assert r["certificates"][0]["sha256"] == fingerprint(certs["rsa"].cert)
    assert r["trust"]["status"] == "trusted"
    (ecdsa,) = r["other_certificates"]
    assert ecdsa["key_type"] == "ECDSA"
    assert ecdsa["certificates"][0]["sha256"] == fingerprint(certs["ecdsa"].cert)
    assert ecdsa["certificates"][0]["key_type"] == "EC secp256r1"
    assert ecdsa["trust"]["status"] == "trusted" and ecdsa["trust"]["hostname_ok"] is True
    assert r["other_certificates_note"] is None
    tls12 = by_version(r, "TLS 1.2")
    assert tls12["status"] == "established"
    kinds = {k["key_type"]: k for k in tls12["by_key_type"]}
    assert set(kinds) == {"RSA", "ECDSA"}
    ec_names = [c["name"] for c in kinds["ECDSA"]["supported"]]
    rsa_names = [c["name"] for c in kinds["RSA"]["supported"]]
    assert "ecdsa_secp256r1_sha256" in ec_names and all("ecdsa" in n for n in ec_names)
    assert "rsa_pss_rsae_sha256" in rsa_names and not any("ecdsa" in n for n in rsa_names)
    assert {c["name"] for c in tls12["supported"]} == set(ec_names) | set(rsa_names)
    assert tls12["connections"] == sum(k["connections"] for k in kinds.values()) + 1
    assert not [f for f in r["findings"] if f["code"].startswith("certificate.")]


@pytest.mark.needs_impl("openssl")
def test_second_certificate_is_judged_from_itself(tls_server, certs, run_cli, tmp_path):
    """A self-signed ECDSA certificate on secp521r1 that expires within 2 days beside a
    trusted RSA one: its findings (built-in and the policy's curve rule) name it, the RSA
    chain has none; found with --checks cert alone (the cert phase's own hellos: ECDSA and
    DSS suites, then DSS suites alone, refused; then the RSA suites with RSA-PSS schemes and
    the ECDSA suites with EdDSA schemes, each refused)."""
    odd = named_set(tmp_path, "dual-ecdsa.test", "localhost", "odd", ec.SECP521R1())["ecdsa"]
    srv = tls_server("openssl", extra=["-dcert", str(odd.cert), "-dkey", str(odd.key)])
    r = scan_json(run_cli, srv.port, certs, "--checks", "cert")
    assert r["trust"]["status"] == "trusted"
    (other,) = r["other_certificates"]
    assert other["key_type"] == "ECDSA" and other["version"]["name"] == "TLS 1.2"
    assert other["certificates"][0]["subject"] == "CN=dual-ecdsa.test"
    assert other["trust"]["status"] == "untrusted" and other["trust"]["code"] == 18
    assert r["connections"]["certificate key types"] == 4
    found = {f["code"]: f for f in r["findings"] if f["code"].startswith("certificate.")}
    assert set(found) == {"certificate.self_signed", "certificate.expires_soon",
                          "certificate.curve_not_allowed"}, found
    for f in found.values():
        assert f["message"].startswith("ECDSA certificate: ")
        assert f["items"] == ["CN=dual-ecdsa.test"]
    assert found["certificate.curve_not_allowed"]["message"].startswith(
        "ECDSA certificate: certificate key on secp521r1 (policy: ")
    code, text, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--no-progress", "--checks",
                              "cert", "--cafile", str(certs.ca))
    assert "Certificate chain (RSA)" in text
    assert ("Certificate chain (ECDSA; TLS 1.2, ECDHE_ECDSA and DHE_DSS suites, signature "
            "schemes of ECDSA, Ed25519, Ed448 and DSA keys only)") in " ".join(text.split())
    assert "CN=dual-ecdsa.test" in text and "Trust: NOT trusted" in text


@pytest.mark.needs_impl("nginx")
def test_nginx_two_certificates_text_and_html(tls_server, certs, run_cli, tmp_path):
    extra = [f"ssl_certificate {certs['ecdsa'].chain}; "
             f"ssl_certificate_key {certs['ecdsa'].key};"]
    srv = tls_server("nginx", extra=extra)
    page = tmp_path / "scan.html"
    code, text, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--no-progress", "--checks",
                              "sigalgs,cert", "--cafile", str(certs.ca), "--html", str(page))
    assert code == 0 and err == "", err
    sig12 = text[text.index("Signature schemes, TLS 1.2"):text.index("Certificate chain")]
    assert "RSA certificate (ECDHE_RSA and DHE_RSA suites): " in sig12
    assert "ECDSA certificate (ECDHE_ECDSA suites): ecdsa_secp256r1_sha256" in sig12
    assert "Certificate chain (RSA)" in text and "Certificate chain (ECDSA; TLS 1.2" in text
    assert text.count("Trust: chain verified") == 2
    html = page.read_text()
    assert "<h3>Certificate chain (RSA)</h3>" in html
    assert "<h3>Certificate chain (ECDSA; TLS 1.2, ECDHE_ECDSA suites)</h3>" in html
    assert html.count("Trust: chain verified") == 2
    assert "<td>ECDSA</td><td>ECDHE_ECDSA suites</td>" in html


@pytest.mark.needs_impl("openssl")
def test_tls13_only_server_with_an_ed25519_certificate(tls_server, certs, run_cli):
    """TLS 1.3 only, --checks cert: the search offers the other key types' signature schemes
    (one hello finds the Ed25519 chain, one more is refused)."""
    srv = tls_server("openssl", proto="tls1_3", extra=dual(certs, "ed25519"))
    r = scan_json(run_cli, srv.port, certs, "--checks", "cert")
    assert r["certificates"][0]["sha256"] == fingerprint(certs["rsa"].cert)
    (ed,) = r["other_certificates"]
    assert ed["key_type"] == "Ed25519" and ed["version"]["name"] == "TLS 1.3"
    assert ed["certificates"][0]["sha256"] == fingerprint(certs["ed25519"].cert)
    assert ed["trust"]["status"] == "trusted"
    assert r["connections"]["certificate key types"] == 2


@pytest.mark.needs_impl("openssl")
def test_single_certificate_report_unchanged(tls_server, certs, run_cli):
    """One certificate: no other chain, no note, the plain chain title; the TLS 1.2 schemes
    cost one connection more (the other suites offered alone, refused) and the cert phase
    then none of its own; with --checks cert alone, its two refused hellos (the ECDSA and DSS
    suites; the RSA suites with the schemes of RSA-PSS keys only)."""
    srv = tls_server("openssl")
    r = scan_json(run_cli, srv.port, certs, "--checks", "sigalgs,cert")
    assert r["other_certificates"] == [] and r["other_certificates_note"] is None
    tls12 = by_version(r, "TLS 1.2")
    (rsa,) = tls12["by_key_type"]
    assert rsa["key_type"] == "RSA" and rsa["supported"] == tls12["supported"]
    assert tls12["connections"] == rsa["connections"] + 1
    assert "certificate key types" not in r["connections"]
    r = scan_json(run_cli, srv.port, certs, "--checks", "cert")
    assert r["other_certificates"] == [] and r["connections"]["certificate key types"] == 2
    assert not [f for f in r["findings"] if f["code"].startswith("certificate.")]
    code, text, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--no-progress", "--checks",
                              "sigalgs,cert", "--cafile", str(certs.ca))
    assert "\nCertificate chain\n" in text and "Certificate chain (" not in text
    assert "RSA certificate (" not in text


def _no_rsa_suite(hello) -> bool:
    """A TLS 1.2 hello of the cert phase's search: (EC)DHE suites without RSA ones."""
    from tlsprobe import registry
    auths = {s.auth for c in hello.cipher_suites if (s := registry.cipher_suite(c))}
    return hello.legacy_version == 0x0303 and not hello.supported_versions \
        and "ECDSA" in auths and "RSA" not in auths


@pytest.mark.needs_impl("openssl")
def test_a_reset_search_is_not_established_never_no_other_certificate(tls_server, certs,
                                                                       run_cli):
    """The search's hello reset (every time, --retries 0): no second certificate is
    claimed, and none is denied: the report says the search is not established."""
    from tests.helpers.faultproxy import RESET, FaultProxy
    srv = tls_server("openssl")
    proxy = FaultProxy([(srv.host, srv.port)],
                       lambda _i, h: RESET if h is not None and _no_rsa_suite(h) else None)
    try:
        r = scan_json(run_cli, proxy.port, certs, "--checks", "cert", "--retries", "0")
        code, text, err = run_cli("scan", f"127.0.0.1:{proxy.port}", "--no-progress",
                                  "--checks", "cert", "--retries", "0", "--cafile",
                                  str(certs.ca))
    finally:
        proxy.close()
    assert r["other_certificates"] == []
    assert r["other_certificates_note"].startswith(
        "TLS 1.2 hello with ECDHE_ECDSA and DHE_DSS suites, signature schemes of ECDSA, "
        "Ed25519, Ed448 and DSA keys only: ")
    assert [f["message"] for f in r["findings"] if f["code"] == "audit.inconclusive"] == [
        "certificates of other key types not established: " + r["other_certificates_note"]]
    assert "Certificate chain (RSA)" in text
    assert "Certificates of other key types: not established: TLS 1.2 hello with" in text


@pytest.mark.needs_impl("openssl")
def test_one_server_with_two_certificates_is_consistent(tls_server, certs, run_cli):
    """An RSA and an ECDSA certificate on one openssl s_server: the reference hello's
    repeats read its certificate, always the same for the same hello; no second
    configuration (an RSA backend beside an ECDSA one is: tests/scan/test_scan_flaky.py)."""
    srv = tls_server("openssl", extra=dual(certs))
    r = scan_json(run_cli, srv.port, certs)
    assert r["consistency"]["status"] == "consistent", r["consistency"]
    assert [c["key_type"] for c in r["other_certificates"]] == ["ECDSA"]
    assert not [f for f in r["findings"] if f["code"] == "target.inconsistent"]


@pytest.mark.needs_impl("nginx")
def test_nginx_with_two_certificates_is_consistent(tls_server, certs, run_cli):
    """nginx with two ssl_certificate lines (it picks by the suite, or by the signature
    schemes in TLS 1.3): one configuration throughout."""
    extra = [f"ssl_certificate {certs['ecdsa'].chain}; "
             f"ssl_certificate_key {certs['ecdsa'].key};"]
    srv = tls_server("nginx", extra=extra)
    r = scan_json(run_cli, srv.port, certs)
    assert r["consistency"]["status"] == "consistent", r["consistency"]
    assert [c["key_type"] for c in r["other_certificates"]] == ["ECDSA"]
    assert not [f for f in r["findings"] if f["code"] == "target.inconsistent"]
