"""The certificate checks of `tlsprobe scan` (cert_lifetime, key_usage, chain, sni_chain,
sct, must_staple, ocsp_response, ocsp_stapling) on servers with several certificates (an RSA
and an ECDSA one): each chain the scan established is judged, a problem of another chain is
stated with its key type ("ECDSA certificate: ..."), in every output; a chain the search
could not establish makes the verdict inconclusive, never "ok". Real peers: openssl
s_server -dcert and nginx with two ssl_certificate lines, certificates made per test.
"""
from __future__ import annotations

import csv
import io
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from tests.lab_servers.certs import signed_leaf

SIGN, ENCIPHER = "digital_signature", "key_encipherment"


def scan(run_cli, port: int, certs, *args: str) -> dict:
    code, out, err = run_cli("scan", f"127.0.0.1:{port}", "--json", "--no-progress",
                             "--cafile", str(certs.ca), "--sni", "localhost", *args)
    assert code in (0, 1), err
    assert err == "", err
    return json.loads(out)


def results(r: dict) -> dict[str, dict]:
    return {c["name"]: c for c in r["check_results"]}


def kinds(check: dict) -> dict[str, dict]:
    return {c["key_type"]: c for c in check["chains"]}


@pytest.mark.needs_impl("openssl")
def test_openssl_dcert_each_chain_judged_by_the_certificate_checks(tls_server, certs, run_cli,
                                                                    tmp_path):
    """ECDSA: 90 days, in order, digitalSignature (the chain of the checks' own TLS 1.3
    connection); RSA: 500 days, a keyUsage without digitalSignature (the server still signs
    ECDHE_RSA with it), sent with an extra certificate (the Ed25519 leaf). The RSA chain is
    judged too: lifetime over 398 days, key usage, extra certificate, each stated as the RSA
    certificate's (they said "ok" before); the checks that read what comes with a chain get
    one connection for it, shared, sni_chain one more without SNI."""
    rsa = signed_leaf(certs, tmp_path, "rsa500", "rsa", 500, (ENCIPHER,))
    ecdsa = signed_leaf(certs, tmp_path, "ec90", "ecdsa", 90, (SIGN,))
    extra = tmp_path / "extra.pem"
    extra.write_bytes(certs["ed25519"].cert.read_bytes() + certs.ca.read_bytes())
    srv = tls_server("openssl", extra=["-cert", str(rsa.cert), "-key", str(rsa.key),
                                       "-cert_chain", str(extra),
                                       "-dcert", str(ecdsa.cert), "-dkey", str(ecdsa.key)])
    r = scan(run_cli, srv.port, certs, "--checks", "certs,ocsp_stapling")
    got = results(r)
    life = got["cert_lifetime"]
    assert life["verdict"] == "vulnerable" and life["severity"] == "medium", life
    assert "RSA certificate: the leaf is valid for 500 days" in life["reason"], life
    assert "ECDSA certificate: the leaf is valid for 90 days" in life["reason"], life
    assert kinds(life)["RSA"]["details"]["seconds"] > 500 * 86400 - 10
    assert kinds(life)["ECDSA"]["verdict"] == "not vulnerable"
    ku = got["key_usage"]
    assert ku["verdict"] == "vulnerable" and "RSA certificate: " in ku["reason"], ku
    assert kinds(ku)["RSA"]["details"]["violations"] == ["digitalSignature"]
    assert kinds(ku)["ECDSA"]["verdict"] == "not vulnerable"
    chain = got["chain"]
    assert chain["verdict"] == "vulnerable" and chain["severity"] == "low", chain
    assert "RSA certificate: extra certificates not on the path" in chain["reason"]
    assert kinds(chain)["ECDSA"]["verdict"] == "not vulnerable"
    for name in ("sni_chain", "sct", "must_staple", "ocsp_response", "ocsp_stapling"):
        assert set(kinds(got[name])) == {"RSA", "ECDSA"}, got[name]
        assert got[name]["verdict"] != "inconclusive", got[name]
    assert got["sct"]["reason"].count("certificate: no SCT") == 2
    assert life["chains"][0]["key_type"] == "ECDSA"   # the checks' own (TLS 1.3) chain
    conns = r["connections"]
    mine = {p: n for p, n in conns.items() if p.endswith(" RSA")}
    assert sum(n for p, n in mine.items() if p.endswith(" chain RSA")) == 1, conns
    assert conns["check sni_chain without SNI RSA"] == 1, conns
    assert conns["check key_usage digitalSignature RSA"] == 1, conns   # ECDHE_RSA alone
    assert sum(mine.values()) == 3, conns
    found = {f["code"]: f["message"] for f in r["findings"]}
    assert "RSA certificate: the leaf is valid for 500 days" in found["check.cert_lifetime"]


@pytest.mark.needs_impl("nginx")
def test_nginx_two_certificates_other_chain_problem_in_every_output(tls_server, certs,
                                                                    run_cli, tmp_path):
    """nginx with an RSA certificate of 500 days and an ECDSA one of 90 (the chain of the
    checks' own TLS 1.3 connection): the lifetime check fails on the RSA chain, and says so
    in text, HTML, CSV, SARIF and JUnit (it said "ok")."""
    rsa = signed_leaf(certs, tmp_path, "rsa500", "rsa", 500, (SIGN, ENCIPHER))
    ecdsa = signed_leaf(certs, tmp_path, "ec90", "ecdsa", 90, (SIGN,))
    srv = tls_server("nginx", extra=[
        f"ssl_certificate {rsa.chain}; ssl_certificate_key {rsa.key};",
        f"ssl_certificate {ecdsa.chain}; ssl_certificate_key {ecdsa.key};"])
    r = scan(run_cli, srv.port, certs, "--checks", "cert_lifetime")
    (life,) = r["check_results"]
    assert life["verdict"] == "vulnerable" and set(kinds(life)) == {"RSA", "ECDSA"}, life
    sarif, junit, table = (tmp_path / "s.sarif", tmp_path / "j.xml", tmp_path / "c.csv")
    page = tmp_path / "scan.html"
    code, text, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--no-progress", "--checks",
                              "cert_lifetime", "--cafile", str(certs.ca), "--sarif",
                              str(sarif), "--junit", str(junit), "--csv", str(table),
                              "--html", str(page))
    assert err == "", err
    flat = " ".join(text.split())
    said = "RSA certificate: the leaf is valid for 500 days"
    assert said in flat and said in sarif.read_text() and said in junit.read_text()
    assert said in page.read_text()
    rows = list(csv.reader(io.StringIO(table.read_text())))
    assert any(said in cell
               for row in rows for cell in row)


def _no_rsa_suite(hello) -> bool:
    """A TLS 1.2 hello of the cert phase's search: (EC)DHE suites without RSA ones."""
    from tlsprobe import registry
    auths = {s.auth for c in hello.cipher_suites if (s := registry.cipher_suite(c))}
    return hello.legacy_version == 0x0303 and not hello.supported_versions \
        and "ECDSA" in auths and "RSA" not in auths


@pytest.mark.needs_impl("openssl")
def test_an_unfinished_search_leaves_the_certificate_checks_inconclusive(tls_server, certs,
                                                                          run_cli, tmp_path):
    """The cert phase's search for the ECDSA chain reset (--retries 0): the lifetime check,
    whose chains seen are all within 90 days, cannot say "ok" of a server whose other chains
    the search did not finish: inconclusive, saying why, each chain seen keeping its own
    verdict."""
    from tests.helpers.faultproxy import RESET, FaultProxy
    rsa = signed_leaf(certs, tmp_path, "rsa90", "rsa", 90, (SIGN, ENCIPHER))
    ecdsa = signed_leaf(certs, tmp_path, "ec90", "ecdsa", 90, (SIGN,))
    srv = tls_server("openssl", extra=["-cert", str(rsa.cert), "-key", str(rsa.key),
                                       "-dcert", str(ecdsa.cert), "-dkey", str(ecdsa.key)])
    proxy = FaultProxy([(srv.host, srv.port)],
                       lambda _i, h: RESET if h is not None and _no_rsa_suite(h) else None)
    try:
        r = scan(run_cli, proxy.port, certs, "--checks", "cert_lifetime", "--retries", "0")
    finally:
        proxy.close()
    assert r["other_certificates_note"], r["other_certificates"]
    (life,) = r["check_results"]
    assert life["verdict"] == "inconclusive", life
    assert "the search for the server's other certificate chains is not complete" in \
        life["reason"]
    assert [c["key_type"] for c in life["chains"]][-1] == "other"
    assert all(c["verdict"] == "not vulnerable" for c in life["chains"][:-1]), life


@pytest.mark.needs_impl("openssl")
def test_survey_row_keeps_the_other_chains(tls_server, certs, run_cli, tmp_path):
    """A survey's Parquet row: the cert_ columns are the default chain's; other_certs lists
    each other key type's leaf, and the lifetime check's verdict and details cover every
    chain (the RSA one of 500 days, outside the checks' own TLS 1.3 chain)."""
    import pandas as pd
    rsa = signed_leaf(certs, tmp_path, "rsa500", "rsa", 500, (SIGN, ENCIPHER))
    ecdsa = signed_leaf(certs, tmp_path, "ec90", "ecdsa", 90, (SIGN,))
    srv = tls_server("openssl", extra=["-cert", str(rsa.cert), "-key", str(rsa.key),
                                       "-dcert", str(ecdsa.cert), "-dkey", str(ecdsa.key)])
    out = tmp_path / "survey"
    code, text, err = run_cli("survey", "-", "--out", str(out), "--checks", "cert_lifetime",
                              "--no-progress", input=f"127.0.0.1:{srv.port}\n", timeout=300)
    assert code == 0, err
    row = pd.read_parquet(out).iloc[0]
    assert row["cert_key_type"].startswith("RSA")
    (other,) = list(row["other_certs"])
    assert other["key_type"] == "ECDSA" and other["subject"] == "CN=localhost"
    assert pd.isna(row["other_certs_note"])
    assert row["check_cert_lifetime"] == "vulnerable"
    details = json.loads(row["check_cert_lifetime_details"])
    assert {c["key_type"]: c["verdict"] for c in details["chains"]} == {
        "RSA": "vulnerable", "ECDSA": "not vulnerable"}



@pytest.mark.needs_impl("openssl")
def test_ocsp_stapling_alone_judges_each_chain_and_reports_no_certificate_finding(
        tls_server, certs, run_cli, tmp_path):
    """`--checks ocsp_stapling` (a hygiene check) runs the cert phase to learn the other
    chains, read-only as `--checks heartbleed` runs the versions phase: each chain's
    stapling is judged, and the self-signed ECDSA certificate's findings are not reported."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from tests.lab_servers.certs import named_set
    odd = named_set(tmp_path, "odd.test", "localhost", "odd", ec.SECP256R1())["ecdsa"]
    srv = tls_server("openssl", extra=["-dcert", str(odd.cert), "-dkey", str(odd.key)])
    r = scan(run_cli, srv.port, certs, "--checks", "ocsp_stapling")
    (stapling,) = r["check_results"]
    assert set(kinds(stapling)) == {"RSA", "ECDSA"}, stapling
    assert stapling["verdict"] == "not supported" and stapling["severity"] == "info"
    assert "cert" in r["read_only"], r["read_only"]
    assert not [f for f in r["findings"] if f["code"].startswith("certificate.")]


@pytest.mark.needs_impl("nginx")
def test_sni_chain_of_every_chain_that_changes_per_sni(tls_server, certs, run_cli, tmp_path):
    """nginx whose default server (a hello without SNI) has an RSA and an ECDSA
    certificate, and whose server_name localhost has two others: sni_chain compares each
    key type's chain with the one the same hello gets without SNI, and names the other leaf
    of the non-default (ECDSA) chain as well as the default one's. The leaves have one
    subject: the reason said "another certificate: CN=localhost, where localhost gets
    CN=localhost"; it now names them by their fingerprints."""
    made = {name: signed_leaf(certs, tmp_path, name, kind, 90, (SIGN, ENCIPHER) if kind == "rsa"
                              else (SIGN,))
            for name, kind in (("rsa_default", "rsa"), ("ec_default", "ecdsa"),
                               ("rsa_sni", "rsa"), ("ec_sni", "ecdsa"))}
    pair = "ssl_certificate {0.chain}; ssl_certificate_key {0.key};".format
    srv = tls_server("nginx", extra=[
        pair(made["rsa_default"]), pair(made["ec_default"]),
        f"sni-server localhost {pair(made['rsa_sni'])} {pair(made['ec_sni'])}"])
    r = scan(run_cli, srv.port, certs, "--checks", "sni_chain")
    (check,) = r["check_results"]
    chains = kinds(check)
    assert set(chains) == {"RSA", "ECDSA"}, check
    for kind, sni, default in (("RSA", "rsa_sni", "rsa_default"),
                               ("ECDSA", "ec_sni", "ec_default")):
        with_sni = x509.load_pem_x509_certificate(made[sni].cert.read_bytes())
        without = x509.load_pem_x509_certificate(made[default].cert.read_bytes())
        fingerprints = [c.fingerprint(hashes.SHA256()).hex() for c in (with_sni, without)]
        said = json.dumps(chains[kind])
        assert chains[kind]["verdict"] == "not vulnerable", (kind, chains[kind])
        assert "without SNI the server sends another certificate" in chains[kind]["reason"], \
            (kind, chains[kind])
        assert all(f in said for f in fingerprints), (kind, fingerprints, chains[kind])
        assert all(f[:16] in chains[kind]["reason"] for f in fingerprints), chains[kind]
    assert check["verdict"] == "not vulnerable" and check["severity"] == "info", check
