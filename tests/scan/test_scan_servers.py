"""`tlsprobe scan` against real loopback servers configured with known groups and orders.

Each server is started once per session (server_cache). The expected sets and orders follow
from each server's configuration; where a library decides the order by itself, the reason
is given next to the assertion.
"""
from __future__ import annotations

import json

import pytest

from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.model.audit import AuditReport

GROUPS_PQ = ("groups", "pq")


def audit(server, checks=("groups",)) -> AuditReport:
    return run_audit([Target(server.host, server.port)], AuditOptions(checks=checks),
                     Scheduler(timeout=5.0))[0]


def names(codepoints) -> list[str]:
    return [c.name for c in codepoints]


def within_budget(report: AuditReport) -> None:
    """The bound README.md states: at most (supported groups + 5) connections per version
    for the group audit: one per group found, the refusal that ends the elimination and its
    confirmation (the last offer answered, then the ending hello twice in a row), and at
    most one to decide the order;
    in TLS 1.2 one more for fixed DH parameters, two more for a server that negotiates RFC
    7919 groups (their order, and what a client that lists none of them gets) and one more
    when an ECDSA certificate's curve had to be listed again; and one more, the first offer
    asked again after the ending refusal, for the group audit alone (no versions check)."""
    g13, g12 = report.group_audit(0x0304), report.group_audit(0x0303)
    alone = 0 if report.versions else 1
    if g13 is not None and g13.spoken:
        assert g13.connections <= len(g13.supported) + 5 + alone, g13
    if g12 is not None and g12.spoken:
        dhe = g12.dhe
        relisted = any("requires in the client's list" in note for note in g12.notes)
        n = len(g12.supported) + (len(dhe.negotiated) if dhe else 0) + \
            (1 if dhe and dhe.fixed and not dhe.negotiated else 0) + \
            (2 if dhe and dhe.status == "rfc7919" else 0) + (1 if relisted else 0)
        assert g12.connections <= n + 5 + alone, g12


@pytest.mark.needs_impl("openssl", "gnutls")
def test_the_documented_connection_bound_holds_with_dhe_and_ecdsa(server_cache):
    """README's bound on servers where TLS 1.2 costs more than (supported + 5): fixed DH
    parameters (openssl, RSA), two RFC 7919 groups and two curves in the client's order
    (gnutls: 9 connections for 4 groups, which the bound without the ffdhe order's
    connection refused), an ECDSA certificate's curve listed again (7 for 3 curves)."""
    for impl, options in (("openssl", {"groups": "X25519:P-256:P-384"}),
                          ("gnutls", {"groups": "X25519:P-256:ffdhe2048:ffdhe3072"}),
                          ("openssl", {"groups": "X25519:P-256:P-384", "cert": "ecdsa"})):
        report = audit(server_cache(impl, **options))
        assert report.error is None, report.error
        within_budget(report)


@pytest.mark.needs_impl("openssl")
def test_acceptance_openssl_serverpref_cli(server_cache, run_cli):
    """The issue's case: -groups X25519:P-384:ffdhe2048 -serverpref."""
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    code, out, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--json", "--no-progress")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    r = json.loads(lines[0])
    g13, g12 = r["groups"]
    assert g13["version"]["name"] == "TLS 1.3" and g13["method"] == "hello_retry_request"
    assert [g["name"] for g in g13["supported"]] == ["x25519", "secp384r1", "ffdhe2048"]
    assert g13["order"] == "server" and g13["inconclusive"] == []
    assert g12["version"]["name"] == "TLS 1.2"
    assert [g["name"] for g in g12["supported"]] == ["x25519", "secp384r1"]
    assert g12["order"] == "server"
    # OpenSSL 3.0 without -dhparam sends the RFC 3526 2048-bit prime whatever is offered.
    assert g12["dhe"]["status"] == "fixed"
    assert g12["dhe"]["fixed"]["name"] == "modp_2048" and g12["dhe"]["fixed"]["bits"] == 2048
    # each: the last offer answered asked after the ending refusal, then that hello twice
    assert g13["connections"] <= 3 + 5 and g12["connections"] <= 3 + 4
    assert r["total_connections"] == sum(r["connections"].values()) > 0
    versions = {v["version"]["name"]: v["status"] for v in r["versions"]}
    assert versions["TLS 1.3"] == versions["TLS 1.2"] == "supported"
    assert versions["TLS 1.0"] == versions["TLS 1.1"] == "not_supported"
    assert r["certificates"] and r["certificates"][0]["subject"] == "CN=localhost"
    # The table says the same, names the order and the connection count.
    code, text, err = run_cli("scan", f"127.0.0.1:{srv.port}", "--checks", "groups",
                              "--no-progress")
    assert code == 0, err
    t13 = text[text.index("Groups, TLS 1.3"):text.index("Groups, TLS 1.2")]
    assert t13.index("x25519") < t13.index("secp384r1") < t13.index("ffdhe2048")
    assert "the server enforces its own order" in t13
    assert "DHE: fixed parameters modp_2048 (RFC 3526), 2048 bits" in text
    assert "Connections: " in text and "groups TLS 1.3" in text


@pytest.mark.needs_impl("openssl")
def test_openssl_client_order_in_tls12(server_cache):
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048")
    r = audit(srv)
    g13, g12 = r.group_audit(0x0304), r.group_audit(0x0303)
    # OpenSSL 3.0 picks the HelloRetryRequest group from its own list in every case
    # (final_key_share walks the server's groups), so TLS 1.3 shows the configured order.
    assert names(g13.supported) == ["x25519", "secp384r1", "ffdhe2048"]
    assert g13.order == "server"
    # Without -serverpref TLS 1.2 follows the client: listed in candidate (code) order.
    assert names(g12.supported) == ["secp384r1", "x25519"] and g12.order == "client"
    within_budget(r)


@pytest.mark.needs_impl("openssl")
def test_openssl_fixed_ffdhe_parameters_are_not_negotiation(server_cache):
    srv = server_cache("openssl", groups="P-256:X25519", dhparam="ffdhe3072")
    g12 = audit(srv).group_audit(0x0303)
    assert g12.dhe.status == "fixed" and g12.dhe.negotiated == ()
    assert g12.dhe.fixed.name == "ffdhe3072" and g12.dhe.fixed.standard == "RFC 7919"
    assert set(names(g12.supported)) == {"secp256r1", "x25519"}


@pytest.mark.needs_impl("nginx")
def test_nginx_server_order(server_cache):
    srv = server_cache("nginx", groups="P-384:X25519", serverpref=True)
    r = audit(srv)
    g13, g12 = r.group_audit(0x0304), r.group_audit(0x0303)
    assert names(g13.supported) == ["secp384r1", "x25519"] and g13.order == "server"
    assert names(g12.supported) == ["secp384r1", "x25519"] and g12.order == "server"
    assert g12.dhe.status == "none"   # no ssl_dhparam: nginx offers no DHE
    assert len(g13.not_supported) == len(g13.not_supported + g13.supported) - 2
    within_budget(r)


@pytest.mark.parametrize("impl", ["openssl", "gnutls"])
def test_groups_only_on_a_tls12_only_server_leave_tls13_not_tested(server_cache, impl):
    """Without the versions check, a server that does not speak TLS 1.3 (gnutls answers a
    TLS 1.3 offer with handshake_failure, openssl with protocol_version) is "not tested" in
    TLS 1.3, never "supports no group" with a list of refusals."""
    from tests.helpers.servers import missing_reason, peer_unavailable
    if missing_reason(impl):
        peer_unavailable(missing_reason(impl))
    srv = server_cache(impl, groups="P-256:X25519", proto="tls1_2")
    r = audit(srv)
    g13, g12 = r.group_audit(0x0304), r.group_audit(0x0303)
    assert g13.spoken is False and g13.method == "not_run"
    assert g13.not_supported == () and g13.inconclusive == ()
    assert set(names(g12.supported)) == {"secp256r1", "x25519"}
    assert not [f for f in r.findings if f.code == "audit.inconclusive"]


@pytest.mark.needs_impl("gnutls")
@pytest.mark.parametrize("serverpref", [True, False])
def test_gnutls_rfc7919_ffdhe_in_tls12(server_cache, serverpref):
    srv = server_cache("gnutls", groups="ffdhe3072:ffdhe2048:X25519", serverpref=serverpref)
    r = audit(srv)
    g13, g12 = r.group_audit(0x0304), r.group_audit(0x0303)
    assert names(g12.supported) == ["x25519"] and g12.order == "single"
    # and a client that lists no ffdhe group (asked once more) gets one of them as fixed
    # parameters (gnutls' first allowed prime)
    assert g12.dhe.status == "rfc7919" and g12.dhe.fixed is not None
    assert g12.dhe.fixed.name in ("ffdhe3072", "ffdhe2048") and not g12.dhe.legacy_refused
    assert any("lists no ffdhe group" in n for n in g12.dhe.notes), g12.dhe.notes
    assert set(names(g13.supported)) == {"x25519", "ffdhe3072", "ffdhe2048"}
    if serverpref:   # %SERVER_PRECEDENCE: the priority string's order
        assert names(g12.dhe.negotiated) == ["ffdhe3072", "ffdhe2048"]
        assert g12.dhe.order == "server" and g13.order == "server"
        assert names(g13.supported).index("ffdhe3072") < names(g13.supported).index("ffdhe2048")
    else:
        assert names(g12.dhe.negotiated) == ["ffdhe2048", "ffdhe3072"]
        assert g12.dhe.order == "client" and g13.order == "client"
    within_budget(r)


@pytest.mark.needs_impl("pyopenssl")
@pytest.mark.parametrize("serverpref", [True, False])
def test_pyopenssl_only_post_quantum_groups(server_cache, serverpref):
    srv = server_cache("pyopenssl", groups="X25519MLKEM768:MLKEM768", serverpref=serverpref)
    r = audit(srv, ("versions", "groups", "pq"))
    g13, g12 = r.group_audit(0x0304), r.group_audit(0x0303)
    if serverpref:
        assert names(g13.supported) == ["X25519MLKEM768", "MLKEM768"] and g13.order == "server"
    else:   # candidate order is by codepoint: MLKEM768 (0x0201) before 0x11ec
        assert names(g13.supported) == ["MLKEM768", "X25519MLKEM768"] and g13.order == "client"
    assert g12.supported == () and g12.dhe.status == "none" and g12.inconclusive == ()
    verdicts = {(v.check, v.subject): v.verdict for v in r.post_quantum}
    assert verdicts[("capability", "X25519MLKEM768")] == "yes"
    assert verdicts[("capability", "MLKEM768")] == "yes"
    assert verdicts[("hello_retry_request", "post-quantum groups without a key share")] == "yes"
    assert verdicts[("browser_like", "X25519MLKEM768 + X25519 shares")] == "yes"
    tolerance = next(v for v in r.post_quantum if v.check == "tolerance")
    assert tolerance.verdict == "yes"
    assert not any(f.code == "pq.none" for f in r.findings)
    within_budget(r)


@pytest.mark.needs_impl("tlslite")
@pytest.mark.parametrize("groups", [
    ("brainpoolP384r1tls13", "brainpoolP256r1tls13", "X25519"),
    ("X25519", "brainpoolP256r1tls13", "brainpoolP384r1tls13")])
def test_tlslite_brainpool_tls13_codepoints(server_cache, groups):
    """tlslite-ng always answers in its own order (it has no client-order mode), so the
    result follows the configured list, whichever way round it is."""
    srv = server_cache("tlslite", groups=":".join(groups))
    r = audit(srv)
    g13, g12 = r.group_audit(0x0304), r.group_audit(0x0303)
    expected = [g if g != "X25519" else "x25519" for g in groups]
    assert names(g13.supported) == expected and g13.order == "server"
    # The TLS 1.3-only brainpool codepoints (0x1f-0x21) are not offered in TLS 1.2.
    assert names(g12.supported) == ["x25519"]
    within_budget(r)


@pytest.mark.needs_impl("openssl")
def test_full_audit_suites_sigalgs_and_findings(server_cache):
    srv = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True,
                       ciphers="ECDHE-RSA-AES128-GCM-SHA256:AES256-SHA:ADH-AES128-GCM-SHA256"
                               ":@SECLEVEL=0",
                       ciphersuites="TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256")
    from tlsprobe.policy.load import load_policy
    r = run_audit([Target(srv.host, srv.port)],
                  AuditOptions(policies=(load_policy("intermediate"),)), Scheduler())[0]
    s13, s12 = r.suite_audit(0x0304), r.suite_audit(0x0303)
    assert [c.iana_name for c in s13.supported] == ["TLS_CHACHA20_POLY1305_SHA256",
                                                     "TLS_AES_128_GCM_SHA256"]
    assert [c.openssl_name for c in s12.supported] == ["ECDHE-RSA-AES128-GCM-SHA256",
                                                        "AES256-SHA", "ADH-AES128-GCM-SHA256"]
    assert s13.order == s12.order == "server" and s12.complete
    sig13 = next(s for s in r.signature_schemes if s.version.id == 0x0304)
    assert sig13.status == "established" and sig13.order == "server"
    assert names(sig13.supported) == ["rsa_pss_rsae_sha256", "rsa_pss_rsae_sha384",
                                      "rsa_pss_rsae_sha512"]
    sig12 = next(s for s in r.signature_schemes if s.version.id == 0x0303)
    assert sig12.status == "established" and "rsa_pss_rsae_sha256" in names(sig12.supported)
    assert all(n.startswith("rsa_") for n in names(sig12.supported))
    codes = {f.code: f for f in r.findings}
    assert codes["suite.weak"].severity == "critical"
    assert "TLS_DH_anon_WITH_AES_128_GCM_SHA256 (anon)" in codes["suite.weak"].message
    assert "AES256-SHA" not in codes["suite.not_allowed"].message  # IANA names are used
    assert "TLS_RSA_WITH_AES_256_CBC_SHA" in codes["suite.not_allowed"].message
    assert codes["group.missing"].message.startswith("X25519MLKEM768")
    assert r.total_connections == sum(r.connections.values())


@pytest.mark.needs_impl("openssl")
def test_ecdsa_certificate_curve_in_tls12(server_cache):
    """TLS 1.2 needs the ECDSA certificate's curve in the client's list: once it is
    eliminated, later offers keep it (last). A client-order server then shows the rest; a
    server that prefers that curve to everything leaves the rest not established."""
    client = server_cache("openssl", groups="X25519:P-384:P-256", cert="ecdsa")
    r = audit(client, ("groups", "sigalgs", "versions"))
    g12 = r.group_audit(0x0303)
    assert names(g12.supported) == ["secp256r1", "secp384r1", "x25519"]
    assert g12.order == "client" and g12.inconclusive == ()
    assert "x448" in names(g12.not_supported)
    assert g12.certificate_curve is not None and g12.certificate_curve.name == "secp256r1"
    assert r.group_audit(0x0304).certificate_curve is None      # a TLS 1.2 matter only
    sig13 = next(s for s in r.signature_schemes if s.version.id == 0x0304)
    assert sig13.status == "established"
    assert names(sig13.supported) == ["ecdsa_secp256r1_sha256"]   # TLS 1.3 binds the curve
    server = server_cache("openssl", groups="P-256:X25519", cert="ecdsa", serverpref=True)
    g12 = audit(server).group_audit(0x0303)
    assert names(g12.supported) == ["secp256r1"]
    assert "x25519" in names(g12.inconclusive) and "x25519" not in names(g12.not_supported)


@pytest.mark.needs_impl("openssl")
def test_ipv6_target_and_user_given_group_ids(server_cache, run_cli):
    srv = server_cache("openssl", groups="X25519", host="::1")
    code, out, err = run_cli("scan", f"[::1]:{srv.port}", "--groups-only", "--json",
                             "--extra-groups", "0xfe30,0x2f3a")
    assert code == 0, err
    r = json.loads(out)
    assert r["host"] == "::1" and r["address"] == "::1"
    g13, g12 = r["groups"]
    assert [g["name"] for g in g13["supported"]] == ["x25519"] and g13["order"] == "single"
    for audit in (g13, g12):
        rejected = {g["hex"] for g in audit["not_supported"]}
        assert {"0xfe30", "0x2f3a"} <= rejected


@pytest.mark.needs_impl("tlslite")
def test_tlslite_strict_key_share_order_tls13_found(server_cache):
    """tlslite-ng refuses key shares out of supported_groups' order (RFC 8446 4.2.8) with
    illegal_parameter: every audit hello must be conformant, or TLS 1.3 is "not spoken",
    version.missing is reported and every TLS 1.3 section is skipped."""
    from tlsprobe.policy.load import load_policy
    srv = server_cache("tlslite", groups="X25519MLKEM768:X25519:P-256")
    r = run_audit([Target(srv.host, srv.port)],
                  AuditOptions(checks=("versions", "groups", "pq", "suites"),
                               policies=(load_policy("intermediate"),)),
                  Scheduler(timeout=5.0))[0]
    v13 = next(v for v in r.versions if v.version.id == 0x0304)
    assert v13.status == "supported" and v13.detail == "ServerHello TLS 1.3"
    g13 = r.group_audit(0x0304)
    assert names(g13.supported) == ["X25519MLKEM768", "x25519", "secp256r1"]
    assert r.suite_audit(0x0304).supported
    assert {v.check: v.verdict for v in r.post_quantum}["browser_like"] == "yes"
    assert not any(f.code == "version.missing" for f in r.findings)


@pytest.mark.needs_impl("openssl")
@pytest.mark.parametrize("checks", ["cert", "certs"])
def test_tls13_only_server_gets_its_chain_and_trust_verdict(server_cache, certs, run_cli,
                                                            checks):
    """`scan --checks cert` (and `certs`) on a TLS 1.3-only server: the versions check reads
    TLS 1.3 only up to the ServerHello, so the chain used to be missing, with no trust verdict
    and exit 0. The chain now comes from a TLS 1.3 handshake decrypted up to its Certificate,
    verified against the test CA: trusted, shown in text and JSON."""
    srv = server_cache("openssl", proto="tls1_3")
    target = f"127.0.0.1:{srv.port}"
    code, text, err = run_cli("scan", target, "--checks", checks, "--cafile", str(certs.ca),
                              "--no-progress")
    assert code == 0, err
    assert "Certificate chain" in text and "CN=localhost" in text, text
    assert "Trust: chain verified" in text, text
    code, out, err = run_cli("scan", target, "--checks", checks, "--cafile", str(certs.ca),
                             "--json", "--no-progress")
    doc = json.loads(out)
    assert [v["status"] for v in doc["versions"] if v["version"]["name"] == "TLS 1.3"] == \
        ["supported"]
    assert all(v["status"] == "not_supported" for v in doc["versions"]
               if v["version"]["name"] != "TLS 1.3")
    assert doc["certificates"] and doc["certificates"][0]["subject"] == "CN=localhost"
    assert doc["trust"]["status"] == "trusted" and doc["trust"]["hostname_ok"] is True
    assert doc["connections"].get("certificate") == 1


@pytest.mark.needs_impl("openssl")
def test_tls13_only_chain_that_cannot_be_read_is_said(server_cache):
    """The cert phase's own TLS 1.3 connection reset (retries 0): no chain, and the report
    says so (Trust "not checked" with the reason, an info finding), not silence."""
    from tests.helpers.faultproxy import RESET, FaultProxy, nth_matching
    srv = server_cache("openssl", proto="tls1_3")
    # the fourth TLS 1.3 hello: the versions check's, the answered hello of TLS 1.2's
    # confirmation (confirm.refusal_stands), its control after the other refused versions
    # (versions.py _refusals_hold), then the cert phase's
    proxy = FaultProxy([(srv.host, srv.port)], nth_matching(
        lambda h: 0x0304 in h.supported_versions, RESET, which=(4,)))
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)], AuditOptions(checks=("cert",)),
                      Scheduler(retries=0, timeout=5.0))[0]
    finally:
        proxy.close()
    assert proxy.faults() and r.error is None and r.certificates == ()
    assert r.trust is not None and r.trust.status == "not_checked"
    assert "the server's certificate could not be read (TLS 1.3: connection reset" in \
        r.trust.detail, r.trust
    assert any(f.code == "certificate.not_verified" and "could not be read" in f.message
               for f in r.findings), r.findings


@pytest.mark.needs_impl("nginx")
@pytest.mark.parametrize("serverpref", [False, True])
def test_tls12_signature_scheme_order_with_rsa_and_ecdsa_certificates(server_cache, certs,
                                                                       serverpref):
    """nginx with an RSA and an ECDSA certificate: in TLS 1.2 the suite chooses the
    certificate, so while an ECDSA scheme is offered the server signs with one whatever the
    RSA schemes before it. That is no order of its own: without ssl_prefer_server_ciphers it
    follows the client's order within each key type (as openssl s_client shows), and the
    report says so (it said "the server enforces its own order", listing RSA schemes
    interleaved by the offers)."""
    ecdsa = certs["ecdsa"]
    srv = server_cache("nginx", proto="tls1_2", serverpref=serverpref, extra=(
        f"ssl_certificate {ecdsa.chain}; ssl_certificate_key {ecdsa.key};",))
    r = audit(srv, checks=("versions", "sigalgs"))
    sig12 = next(s for s in r.signature_schemes if s.version.id == 0x0303)
    found = names(sig12.supported)
    assert {"ecdsa_secp256r1_sha256", "rsa_pss_rsae_sha256", "rsa_pkcs1_sha256"} <= set(found)
    if not serverpref:
        assert sig12.order == "client", sig12
    else:   # OpenSSL's own list: PSS before PKCS #1 v1.5, each by hash
        rsa = [n for n in found if n.startswith("rsa_")]
        assert sig12.order == "server" and rsa[:3] == [
            "rsa_pss_rsae_sha256", "rsa_pss_rsae_sha384", "rsa_pss_rsae_sha512"], sig12
