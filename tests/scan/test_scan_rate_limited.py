"""`tlsprobe scan` against a rate limiter: a real openssl s_server behind a loopback proxy
(tests/helpers/faultproxy.py) that serves the first N connections and then refuses every
hello, with a fatal handshake_failure alert or a bare close, as rate limiters and overloaded
TLS terminators do. Those refusals say nothing about what the server supports: whatever
they decide must be inconclusive, never "not spoken", "not supported", a complete list,
"not applicable" or "not vulnerable".
"""
from __future__ import annotations

import pytest

from tests.helpers.faultproxy import ALERT, DROP, FaultProxy
from tlsprobe.model.audit import AuditReport
from tlsprobe.net.tcp import Target
from tlsprobe.policy.load import load_policy
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

pytestmark = pytest.mark.needs_impl("openssl")
AUDIT = ("versions", "groups", "suites", "sigalgs")


@pytest.fixture
def limited(server_cache):
    """`limited(after, mode)`: a proxy in front of one openssl s_server (default ciphers:
    CBC suites too) that serves `after` connections, then answers each with `mode`."""
    started: list[FaultProxy] = []

    def start(after: int | None, mode: str = ALERT) -> FaultProxy:
        srv = server_cache("openssl")
        rule = (lambda i, _h: mode if i > after else None) if after is not None else None
        proxy = FaultProxy([(srv.host, srv.port)], rule)
        started.append(proxy)
        return proxy
    yield start
    for p in started:
        p.close()


def scan(proxy: FaultProxy, checks: tuple[str, ...]) -> AuditReport:
    # one connection at a time: the proxy's connection count is the audit's order
    return run_audit([Target("127.0.0.1", proxy.port)],
                     AuditOptions(checks=checks, policies=(load_policy("intermediate"),)),
                     Scheduler(retries=0, timeout=5.0, per_host=1))[0]


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_versions_refused_by_a_limiter_are_not_called_unspoken(limited, mode):
    """Only the first connection (the TLS 1.3 hello) is served: TLS 1.2, which the server
    speaks, was called "not spoken" from the limiter's refusals of its two hellos."""
    clean = scan(limited(None), ("versions",))
    assert clean.version_spoken(0x0303) == "yes"
    r = scan(limited(1, mode), ("versions",))
    assert r.version_spoken(0x0304) == "yes"
    for v in r.versions:
        assert v.status != "not_supported", v
    v12 = next(v for v in r.versions if v.version.id == 0x0303)
    assert v12.status == "inconclusive" and "rate limiting" in v12.detail, v12


@pytest.mark.parametrize("mode", [ALERT, DROP])
@pytest.mark.parametrize("after", [0, 12], ids=["after-versions", "mid-groups"])
def test_phases_cut_by_a_limiter_claim_nothing_the_server_lacks(limited, mode, after):
    """The limiter starts right after the versions check, or a few connections into the
    group audit: no group of the clean scan is "not supported", no suite list is complete
    unless it is the clean one, and no suite check derived from the lists says "not
    vulnerable" where the clean scan could not."""
    checks = AUDIT + ("rc4", "lucky13", "null")
    clean = scan(limited(None), checks)
    start = clean.connections["versions"] + after
    r = scan(limited(start, mode), checks)
    assert [v.status for v in r.versions] == [v.status for v in clean.versions]
    for g in r.groups:
        ok = {c.id for c in clean.group_audit(g.version.id).supported}
        assert not ok & {c.id for c in g.not_supported}, (g.version.name, g.not_supported)
    for s in r.suites:
        if s.complete:
            assert s.supported == clean.suite_audit(s.version.id).supported, s
    clean_verdicts = {c.name: c.verdict for c in clean.check_results}
    for c in r.check_results:
        assert c.verdict in (clean_verdicts[c.name], "inconclusive"), c
    lucky = next(c for c in r.check_results if c.name == "lucky13")
    assert lucky.verdict != "not vulnerable", lucky


@pytest.mark.parametrize("mode", [ALERT, DROP])
@pytest.mark.parametrize("check", ["etm", "sslv2"])
def test_a_check_refused_by_a_limiter_is_inconclusive(limited, mode, check):
    """The limiter starts right after the versions check: the check's own hello is refused
    (etm: a CBC-only hello; sslv2: an SSLv2 CLIENT-HELLO), which was read as "the server
    has no CBC suite" (not applicable) or "does not speak SSLv2" (not vulnerable); the
    server still answering the version's hello is what makes such a refusal a fact."""
    clean = scan(limited(None), ("versions", check))
    assert clean.check_results[0].verdict in ("supported", "not vulnerable")
    r = scan(limited(clean.connections["versions"], mode), ("versions", check))
    result = r.check_results[0]
    assert result.verdict == "inconclusive", result
    assert "rate limiting" in result.reason, result


@pytest.mark.parametrize("mode", [ALERT, DROP])
@pytest.mark.parametrize("after", [2, 6])
def test_the_group_audit_alone_cut_by_a_limiter_misses_no_group(limited, mode, after):
    """`--groups-only` (no versions check, so no reference hello repeated after it): the
    limiter's refusal ended the TLS 1.3 elimination, and every group not yet picked was "not
    supported" (x25519 alone where the server has ten). The first offer, answered before, is
    asked again after the ending refusal: refused too, the rest is inconclusive."""
    clean = scan(limited(None), ("groups",))
    r = scan(limited(after, mode), ("groups",))
    for g in r.groups:
        ok = {c.id for c in clean.group_audit(g.version.id).supported}
        assert not ok & {c.id for c in g.not_supported}, (g.version.name, g.not_supported)
    g13 = r.group_audit(0x0304)
    assert g13 is not None and g13.inconclusive and any("rate limiting" in n
                                                         for n in g13.notes), g13


def test_a_limiter_answering_with_alerts_is_no_second_configuration(limited):
    """A limiter that refuses every hello with an alert from some point on: the reference
    hello's repeats are refused to the last, which made the target "inconsistent" (a medium
    finding, likely several configurations behind one name: --fail-on medium fails) where
    it only stopped answering; the consistency check says so instead."""
    clean = scan(limited(None), AUDIT)
    r = scan(limited(clean.connections["versions"], ALERT), AUDIT)
    assert r.consistency is not None and r.consistency.status != "inconsistent", r.consistency
    assert any("stopped answering" in n for n in r.consistency.notes), r.consistency
    assert not any(f.code == "target.inconsistent" for f in r.findings), r.findings


#: the one sentence of probes/audit/confirm.py still_answered, whoever asks
STILL = "answered before, was not answered right after"


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_every_refusal_control_is_the_one_rule(limited, mode):
    """The versions check, the group audit alone and a check (sslv2) each ask an answered
    hello again after a refusal: three copies of that rule differed in wording (and in what
    they read of the answer); one rule now, one sentence, one connection (a bare close
    asked twice, as every hello)."""
    r = scan(limited(1, mode), ("versions",))
    v12 = next(v for v in r.versions if v.version.id == 0x0303)
    assert STILL in v12.detail and "the hello that established TLS 1.3" in v12.detail, v12
    r = scan(limited(2, mode), ("groups",))
    g13 = r.group_audit(0x0304)
    assert g13 is not None and any(STILL in n for n in g13.notes), g13.notes
    clean = scan(limited(None), ("versions", "sslv2"))
    r = scan(limited(clean.connections["versions"], mode), ("versions", "sslv2"))
    (sslv2,) = r.check_results
    assert sslv2.verdict == "inconclusive" and STILL in sslv2.reason, sslv2
    assert r.connections["check sslv2 control"] == (1 if mode == ALERT else 2)


def from_first(pred, mode: str):
    """A limiter that starts refusing at the first hello `pred` accepts: that hello and
    every one after it get `mode`."""
    started = [False]

    def fault(_index, hello):
        if hello is not None and pred(hello):
            started[0] = True
        return mode if started[0] else None
    return fault


def no_ffdhe_dhe_only(hello) -> bool:
    """The group audit's hello of a client before RFC 7919: DHE suites alone, no groups."""
    from tlsprobe import registry
    kx = {registry.cipher_suite(c).kx for c in hello.cipher_suites
          if registry.cipher_suite(c) is not None}
    return kx - {"SCSV"} == {"DHE"} and not hello.supported_groups and \
        not hello.supported_versions


@pytest.mark.needs_impl("gnutls")
@pytest.mark.parametrize("checks", [("versions", "groups", "dh"), ("groups",)],
                         ids=["scan", "groups-only"])
def test_no_dhe_for_a_client_without_ffdhe_groups_rests_on_a_confirmed_refusal(server_cache,
                                                                               checks):
    """gnutls negotiates RFC 7919 groups and sends fixed parameters to a client that lists
    none. A limiter that starts at that client's hello made `legacy_refused` ("such a client
    gets no DHE at all") from one refusal nothing confirmed, and the dh check "not
    vulnerable" on it. Now the refusal is asked twice and holds only while the server still
    answers (the family's reference repeat, or the first offer asked again)."""
    srv = server_cache("gnutls", groups="ffdhe3072:ffdhe2048:X25519")
    proxy = FaultProxy([(srv.host, srv.port)], from_first(no_ffdhe_dhe_only, ALERT))
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)],
                      AuditOptions(checks=checks, policies=(load_policy("intermediate"),)),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        proxy.close()
    assert proxy.faults(), "the limiter never started"
    dhe = r.group_audit(0x0303).dhe
    assert dhe is not None and dhe.status == "rfc7919", dhe
    assert not dhe.legacy_refused, dhe
    assert any("rate limiting" in n for n in dhe.notes), dhe.notes
    for c in r.check_results:
        assert c.verdict == "inconclusive", c


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_a_limiter_from_the_last_repeat_on_is_no_second_configuration(limited, mode):
    """The limiter starts at the audit's very last connection, the final repeat of the
    reference hello: one refusal at the end, which made the target "inconsistent" (medium,
    --fail-on medium fails) on no more evidence than a limiter gives. The reference hello is
    asked once more: refused again, the server stopped answering, said so."""
    clean = scan(limited(None), AUDIT)
    assert clean.consistency is not None and clean.consistency.status == "consistent"
    r = scan(limited(clean.total_connections - 1, mode), AUDIT)
    assert r.consistency is not None and r.consistency.status == "consistent", r.consistency
    assert any("stopped answering" in n for n in r.consistency.notes), r.consistency
    assert not any(f.code == "target.inconsistent" for f in r.findings), r.findings
    assert r.connections["consistency"] <= clean.connections["consistency"] + 1 + \
        (mode == DROP)


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_a_hello_without_sni_refused_by_a_limiter_is_not_a_fact(limited, mode):
    """Scanned with --sni localhost, every hello names the server but sni_chain's; a limiter
    that starts there made "the server refuses a hello without server_name: clients without
    SNI cannot connect" (check.sni_chain, info). Now the version's hello is asked again
    right after; refused too, inconclusive."""
    proxy = limited(None)
    proxy.fault = from_first(lambda h: h.server_name is None, mode)
    r = run_audit([Target("127.0.0.1", proxy.port)],
                  AuditOptions(checks=("versions", "sni_chain"), server_name="localhost"),
                  Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    assert proxy.faults(), "the limiter never started"
    (sni,) = r.check_results
    assert sni.verdict == "inconclusive" and "rate limiting" in sni.reason, sni


def ecdsa_or_dss_only(hello) -> bool:
    """The cert phase's search for other key types' chains: TLS 1.2 suites of ECDSA and DSS
    authentication alone."""
    from tlsprobe import registry
    auth = {s.auth for c in hello.cipher_suites
            if (s := registry.cipher_suite(c)) is not None and s.kx != "SCSV"}
    return bool(auth) and auth <= {"ECDSA", "DSS"} and not hello.supported_versions


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_the_certificate_search_cut_by_a_limiter_claims_no_single_certificate(
        tls_server, certs, mode):
    """openssl with an RSA and an ECDSA certificate; a limiter starts at the cert phase's
    hello asking for the ECDSA chain: the search ended on its refusal, and the report
    claimed one certificate, the search complete (no note). The reference hello, asked at
    the end, is refused too: the search is not established, said so."""
    srv = tls_server("openssl", extra=["-dcert", str(certs["ecdsa"].cert),
                                       "-dkey", str(certs["ecdsa"].key)])
    proxy = FaultProxy([(srv.host, srv.port)], from_first(ecdsa_or_dss_only, mode))
    try:
        r = run_audit([Target("127.0.0.1", proxy.port)], AuditOptions(checks=("versions", "cert")),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    finally:
        proxy.close()
    assert proxy.faults(), "the limiter never started"
    assert not r.other_certificates
    assert r.other_certificates_note is not None and "rate limiting" in \
        r.other_certificates_note, r.other_certificates_note


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_clients_refused_by_a_limiter_did_not_fail(limited, mode):
    """`scan --clients` with the limiter starting after the versions check: every profile
    was "failed, refused", clients the server serves. The reference hello, asked at the end
    of the audit, is refused too: those refusals prove nothing, the clients inconclusive."""
    from tests.clients.conftest import DATA
    from tlsprobe.probes.clients.profiles import load_profiles
    profiles = load_profiles(DATA)
    options = dict(checks=("versions",), clients=profiles)
    clean = run_audit([Target("127.0.0.1", limited(None).port)], AuditOptions(**options),
                      Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    assert any(c.status == "connected" for c in clean.clients), clean.clients
    proxy = limited(clean.connections["versions"], mode)
    r = run_audit([Target("127.0.0.1", proxy.port)], AuditOptions(**options),
                  Scheduler(retries=0, timeout=5.0, per_host=1))[0]
    for c, was in zip(r.clients, clean.clients):
        if was.status == "connected":
            assert c.status == "inconclusive" and "rate limiting" in c.detail, c


@pytest.mark.parametrize("mode", [ALERT, DROP])
def test_the_group_audit_alone_calls_no_version_unspoken_on_a_limiters_word(limited, mode):
    """`--groups-only`: the limiter lets one TLS 1.2 hello through (the TLS 1.2
    elimination's first offer) and refuses everything else, TLS 1.3 first. The TLS 1.3
    audit found nothing, one versions check of TLS 1.3 was refused too, and TLS 1.3 was
    "not tested: the server does not speak TLS 1.3" although openssl speaks it. The TLS 1.2
    hello answered before is asked again: refused, TLS 1.3 is not established."""
    started = [False]

    def fault(_index, hello):
        if started[0] or hello is None or 0x0304 in hello.supported_versions:
            return mode
        started[0] = True
        return None
    proxy = limited(None)
    proxy.fault = fault
    r = scan(proxy, ("groups",))
    g13 = r.group_audit(0x0304)
    assert g13 is not None and g13.spoken is not False, g13
    assert not g13.not_supported, g13
    assert any("rate limiting" in n for n in g13.notes), g13.notes
