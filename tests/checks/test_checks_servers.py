"""Vulnerability checks derived from the audit, against real loopback servers: a weak
openssl s_server (DHE with the 1536-bit RFC 3526 prime, anonymous and NULL suites, CBC in
TLS 1.0, through @SECLEVEL=0), a weak gnutls-serv (RC4 and 3DES, which this openssl no
longer has), an SSL 3.0 tlslite-ng server (tests/checks/ssl3_server.py) with and without
CBC suites, the scripted server of tests/checks/scripted_tls_server.py with an RSA export
suite (FREAK; its ServerKeyExchange carries a temporary 512-bit RSA key) and with single DES
(no export suite: FREAK not vulnerable), a modern openssl s_server (nothing vulnerable), and
a modern server behind a proxy that resets the TLS 1.2 version check (what that hides is
inconclusive, never "not vulnerable")."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.faultproxy import RESET, FaultProxy, nth_matching
from tests.helpers.servers import Server
from tlsprobe.model.audit import AuditReport
from tlsprobe.model.checks import Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.checks.derived import DERIVED, expand
from tlsprobe.probes.checks import catalog
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler
from tlsprobe.wire.hello import ClientHello

ServerFactory = Callable[..., Server]
WEAK_OPENSSL = dict(proto="all", dhparam="modp1536",
                    ciphers="ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256:AES128-SHA"
                            ":ADH-AES128-GCM-SHA256:NULL-SHA256:@SECLEVEL=0")
WEAK_GNUTLS = dict(proto="all", ciphers="NORMAL:+3DES-CBC:+ARCFOUR-128:+RSA")


def audit(host: str, port: int, retries: int = 2) -> AuditReport:
    return run_audit([Target(host, port)], AuditOptions(checks=expand(("vulns",))),
                     Scheduler(retries=retries, timeout=5.0))[0]


def verdicts(r: AuditReport) -> dict[str, Verdict]:
    assert r.error is None, r.error
    return {c.name: c.verdict for c in r.check_results}


@pytest.mark.needs_impl("openssl")
def test_weak_openssl_server(server_cache: ServerFactory) -> None:
    srv = server_cache("openssl", **WEAK_OPENSSL)
    r = audit(srv.host, srv.port)
    got = verdicts(r)
    assert got == {"poodle": Verdict.not_vulnerable, "freak": Verdict.not_vulnerable,
                   "logjam": Verdict.not_vulnerable, "dh": Verdict.vulnerable,
                   "rc4": Verdict.not_vulnerable, "sweet32": Verdict.not_vulnerable,
                   "beast": Verdict.vulnerable, "null": Verdict.vulnerable,
                   "anon": Verdict.vulnerable, "lucky13": Verdict.inconclusive}, r.check_results
    found = {c.name: c for c in r.check_results}
    assert found["dh"].evidence == ("modp_1536 (RFC 3526), 1536 bits (TLS 1.2)",)
    assert "well-known shared RFC 3526 prime" in found["dh"].reason
    assert "TLS_DH_anon_WITH_AES_128_GCM_SHA256 (TLS 1.2)" in found["anon"].evidence
    assert "TLS_RSA_WITH_NULL_SHA256 (TLS 1.2)" in found["null"].evidence
    assert "TLS_RSA_WITH_AES_128_CBC_SHA (TLS 1.0)" in found["beast"].evidence
    assert {"TLS_RSA_WITH_AES_128_CBC_SHA (TLS 1.2)", "TLS_RSA_WITH_AES_128_CBC_SHA (TLS 1.0)"} \
        <= set(found["lucky13"].evidence)
    assert found["lucky13"].reason.startswith("potentially vulnerable")
    assert all(c.connections == 0 for c in r.check_results)
    codes = {f.code for f in r.findings}
    assert {"dh.weak", "suite.weak", "check.beast", "check.lucky13"} <= codes
    assert "check.poodle" not in codes


@pytest.mark.needs_impl("gnutls")
def test_weak_gnutls_server_rc4_and_3des(server_cache: ServerFactory) -> None:
    srv = server_cache("gnutls", **WEAK_GNUTLS)
    r = audit(srv.host, srv.port)
    got = verdicts(r)
    assert got["rc4"] is got["sweet32"] is got["beast"] is Verdict.vulnerable, r.check_results
    assert got["freak"] is got["logjam"] is got["null"] is got["anon"] is \
        got["poodle"] is Verdict.not_vulnerable, r.check_results
    found = {c.name: c for c in r.check_results}
    assert "TLS_RSA_WITH_RC4_128_SHA (TLS 1.2)" in found["rc4"].evidence
    assert "TLS_RSA_WITH_3DES_EDE_CBC_SHA (TLS 1.0)" in found["sweet32"].evidence
    # gnutls negotiates RFC 7919 groups, and the audit asks what an old client without
    # ffdhe groups gets: one of them (2048 bits or more)
    assert got["dh"] is Verdict.not_vulnerable, found["dh"]
    assert "to a client that lists no ffdhe group" in found["dh"].reason, found["dh"]


@pytest.mark.needs_impl("openssl")
def test_modern_server_is_not_vulnerable_and_scan_prints_it(server_cache: ServerFactory,
                                                           run_cli: Callable[..., Any]) -> None:
    srv = server_cache("openssl", proto="both")
    target = f"{srv.host}:{srv.port}"
    res = run_cli("scan", target, "--no-progress", "--no-verify", "--json",
                  "--checks", "vulns", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout.splitlines()[0])
    vulns = catalog.ALIASES["vulns"]
    assert d["checks"] == ["versions", "groups", "suites", *DERIVED,
                           *(n for n in vulns if n not in DERIVED)]
    got = {c["name"]: c["verdict"] for c in d["check_results"]}
    assert list(got) == list(vulns), d["check_results"]
    # OpenSSL's default suites include CBC ones: LUCKY13 states them, informational
    assert {n: got[n] for n in DERIVED} == {**{n: "not vulnerable" for n in DERIVED},
                                            "lucky13": "inconclusive"}
    # every active check answers, and none finds this patched server vulnerable
    assert {got[n] for n in vulns if n != "lucky13"} <= {"not vulnerable", "not applicable"}, \
        d["check_results"]
    assert [f["code"] for f in d["findings"] if f["code"].startswith("check.")] == \
        ["check.lucky13"]
    assert {f["severity"] for f in d["findings"] if f["code"] == "check.lucky13"} == {"info"}
    res = run_cli("scan", target, "--no-progress", "--no-verify", "--checks", "rc4,dh",
                  "--timeout", "5")
    assert res.returncode == 0, res.stderr
    assert "Vulnerability checks (read from the audit above, no connection of their own)" \
        in res.stdout
    line = next(x for x in res.stdout.splitlines() if x.startswith("RC4 suites"))
    assert "not vulnerable" in line
    # a scan that asks for no vulnerability check has no such member or section
    res = run_cli("scan", target, "--no-progress", "--no-verify", "--json", "--checks",
                  "versions", "--timeout", "5")
    assert res.returncode == 0 and "check_results" not in json.loads(res.stdout), res.stderr


@pytest.mark.needs_impl("openssl")
def test_lucky13_on_both_sides(server_cache: ServerFactory) -> None:
    """CBC suites accepted (TLS 1.2 with AES-CBC): potentially vulnerable, informational;
    AEAD suites only, and a TLS 1.3-only server: not vulnerable, on complete suite lists."""
    cbc = server_cache("openssl", proto="tls1_2",
                       ciphers="ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-SHA384")
    r = run_audit([Target(cbc.host, cbc.port)], AuditOptions(checks=expand(("lucky13",))),
                  Scheduler(retries=2, timeout=5.0))[0]
    c = next(x for x in r.check_results if x.name == "lucky13")
    assert c.verdict is Verdict.inconclusive and c.code == "check.lucky13", c
    assert c.evidence == ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384 (TLS 1.2)",), c
    assert [f.severity for f in r.findings if f.code == "check.lucky13"] == ["info"]
    for kw in (dict(proto="tls1_2", ciphers="ECDHE-RSA-AES128-GCM-SHA256:"
                    "ECDHE-RSA-CHACHA20-POLY1305"), dict(proto="tls1_3")):
        srv = server_cache("openssl", **kw)
        r = run_audit([Target(srv.host, srv.port)], AuditOptions(checks=expand(("lucky13",))),
                      Scheduler(retries=2, timeout=5.0))[0]
        c = next(x for x in r.check_results if x.name == "lucky13")
        assert c.verdict is Verdict.not_vulnerable and c.code is None, (kw, c)
        assert not [f for f in r.findings if f.code == "check.lucky13"]


def tls12_only(h: ClientHello) -> bool:
    return not h.supported_versions and h.legacy_version == 0x0303


@pytest.mark.needs_impl("openssl")
def test_a_reset_version_check_makes_the_checks_inconclusive(server_cache: ServerFactory
                                                             ) -> None:
    srv = server_cache("openssl", proto="both")
    proxy = FaultProxy([(srv.host, srv.port)], nth_matching(tls12_only, RESET, which=(1, 2)))
    try:
        r = audit("127.0.0.1", proxy.port, retries=0)
    finally:
        proxy.close()
    assert proxy.faults()
    found = {c.name: c for c in r.check_results}
    for name in ("freak", "logjam", "rc4", "sweet32", "anon", "null", "dh"):
        assert found[name].verdict is Verdict.inconclusive, found[name]
    assert "TLS 1.2 support not established" in found["rc4"].reason
    # what the reset did not touch is still established
    assert found["poodle"].verdict is found["beast"].verdict is Verdict.not_vulnerable


@pytest.fixture
def ssl3_server(script_server: Callable[..., int]) -> Callable[[str], int]:
    """Factory: an SSL 3.0-only tlslite-ng server with these cipher names; its port."""
    return lambda ciphers: script_server("ssl3_server.py", "--ciphers", ciphers)


@pytest.mark.needs_impl("tlslite")
def test_ssl3_server_with_and_without_cbc(ssl3_server: Callable[[str], int]) -> None:
    r = audit("127.0.0.1", ssl3_server("aes128,rc4"))
    got = verdicts(r)
    assert got["poodle"] is got["beast"] is got["rc4"] is Verdict.vulnerable, r.check_results
    found = {c.name: c for c in r.check_results}
    assert found["poodle"].evidence == ("TLS_RSA_WITH_AES_128_CBC_SHA (SSL 3.0)",)
    assert "check.poodle" in {f.code for f in r.findings}
    r = audit("127.0.0.1", ssl3_server("rc4"))
    got = verdicts(r)
    assert got["poodle"] is got["beast"] is Verdict.not_vulnerable, r.check_results
    assert got["rc4"] is Verdict.vulnerable
    assert "check.poodle" not in {f.code for f in r.findings}


def test_export_rsa_server_is_freak_vulnerable_and_single_des_is_not(
        script_server: Callable[..., int]) -> None:
    """FREAK on a real flight: tests/checks/scripted_tls_server.py answering with
    TLS_RSA_EXPORT_WITH_DES40_CBC_SHA (its ServerKeyExchange: a temporary 512-bit RSA key,
    signed with the certificate's), and the same server with single DES (not export)."""
    names = ("freak", "logjam", "sweet32")
    exp = script_server("scripted_tls_server.py", "--mode", "plain", "--suite", "0x0008")
    r = run_audit([Target("127.0.0.1", exp)], AuditOptions(checks=expand(names)),
                  Scheduler(retries=2, timeout=5.0))[0]
    got = verdicts(r)
    assert got == {"freak": Verdict.vulnerable, "logjam": Verdict.not_vulnerable,
                   "sweet32": Verdict.vulnerable}, r.check_results
    freak = next(c for c in r.check_results if c.name == "freak")
    assert freak.evidence == tuple(f"TLS_RSA_EXPORT_WITH_DES40_CBC_SHA (TLS 1.{n})"
                                   for n in (2, 1, 0)), freak
    assert freak.connections == 0, freak
    # the finding is the weak suite's (critical), not one of the check's own
    assert {f.code for f in r.findings} >= {"suite.weak"}
    # each flight read whole (its ServerKeyExchange signature checked: a bad one is a note)
    assert [row.kx_label for a in r.suites for row in a.rows] == ["RSA 512"] * 3
    assert [a.notes for a in r.suites] == [()] * 3, r.suites
    des = script_server("scripted_tls_server.py", "--mode", "plain", "--suite", "0x0009")
    r = run_audit([Target("127.0.0.1", des)], AuditOptions(checks=expand(names)),
                  Scheduler(retries=2, timeout=5.0))[0]
    got = verdicts(r)
    assert got == {"freak": Verdict.not_vulnerable, "logjam": Verdict.not_vulnerable,
                   "sweet32": Verdict.vulnerable}, r.check_results
    assert "the complete suite list of TLS 1.2, TLS 1.1, TLS 1.0 has none" in \
        next(c.reason for c in r.check_results if c.name == "freak")


@pytest.mark.needs_impl("openssl")
def test_dh_parameters_of_a_server_without_tls12_are_judged(server_cache: ServerFactory,
                                                            run_cli: Callable[..., Any]) -> None:
    """A TLS 1.0-only server with 1536-bit DHE: the suite audit reads the prime's size from
    each DHE suite's ServerKeyExchange ("DH 1536" in the suites table), and the group audit
    of TLS 1.0 (the highest version it speaks) names the parameters, so the dh check, the
    dh.weak finding and the rating's key exchange state them once, for TLS 1.0, not
    "parameters not read"."""
    srv = server_cache("openssl", proto="tls1_0", dhparam="modp1536",
                       ciphers="DHE-RSA-AES128-SHA:ECDHE-RSA-AES128-SHA:@SECLEVEL=0")
    res = run_cli("scan", f"{srv.host}:{srv.port}", "--no-progress", "--no-verify", "--json",
                  "--checks", "audit,dh", "--timeout", "5")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout.splitlines()[0])
    rows = [r for s in d["suites"] for r in s["rows"]]
    assert [r["kx_label"] for r in rows] == ["DH 1536", "ECDH 253"], rows
    dh = next(c for c in d["check_results"] if c["name"] == "dh")
    assert dh["verdict"] == "vulnerable", dh
    assert "1536-bit" in dh["reason"] and "TLS 1.0" in dh["reason"], dh
    assert dh["evidence"] == ["modp_1536 (RFC 3526), 1536 bits (TLS 1.0)"], dh
    weak = [f for f in d["findings"] if f["code"] == "dh.weak"]
    assert [(f["severity"], f["version"], f["items"]) for f in weak] == \
        [("medium", "TLS 1.0", ["modp_1536"])], d["findings"]
    kx = d["rating"]["key_exchange"]
    assert kx["score"] == 80 and "1536" in kx["detail"], d["rating"]
    assert "weak_key" in [c["rule"] for c in d["rating"]["caps"]], d["rating"]
