"""`tlsprobe scan` through a fault-injecting loopback proxy (tests/helpers/faultproxy.py) in front of
a real openssl s_server: resets and dropped connections, with no retries, must never turn
into facts ("not spoken", "intolerant", a complete list); what they hide is inconclusive.
"""
from __future__ import annotations

import pytest

from tests.helpers.faultproxy import DROP, RESET, FaultProxy, every, nth_matching
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler, broad_sigalgs
from tlsprobe.model.audit import AuditReport
from tlsprobe.policy.load import load_policy
from tlsprobe.wire.hello import ClientHello

pytestmark = pytest.mark.needs_impl("openssl")
SERVER = dict(groups="X25519:P-256", serverpref=True,
              ciphers="ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:AES128-SHA")


@pytest.fixture
def proxied(server_cache):
    started: list[FaultProxy] = []

    def start(fault=None, **kw) -> FaultProxy:
        srv = server_cache("openssl", **{**SERVER, **kw})
        proxy = FaultProxy([(srv.host, srv.port)], fault)
        started.append(proxy)
        return proxy
    yield start
    for p in started:
        p.close()


def scan(proxy: FaultProxy, checks=("versions", "groups", "pq", "suites", "sigalgs"),
         **sched) -> AuditReport:
    sched = {"retries": 0, "timeout": 5.0, **sched}
    return run_audit([Target("127.0.0.1", proxy.port)],
                     AuditOptions(checks=checks, policies=(load_policy("intermediate"),)),
                     Scheduler(**sched))[0]


def tls12_only(h: ClientHello) -> bool:
    return not h.supported_versions and h.legacy_version == 0x0303


def status(report: AuditReport, version: int) -> str:
    return next(v.status for v in report.versions if v.version.id == version)


def test_a_reset_version_check_leaves_that_version_inconclusive_everywhere(proxied):
    """The first two TLS 1.2-only hellos are the versions check's (its full offer, then its
    minimal hello); both reset, with --retries 0, TLS 1.2 is inconclusive, and so is every
    section that depends on it (it used to say "the server does not speak TLS 1.2" and show
    no suites)."""
    from tlsprobe.report.audit_tables import render_audit
    import io
    proxy = proxied(nth_matching(tls12_only, RESET, which=(1, 2)))
    r = scan(proxy)
    assert len(proxy.faults()) == 2 and status(r, 0x0303) == "inconclusive"
    assert "a minimal TLS 1.2 hello was not answered either" in \
        next(v.detail for v in r.versions if v.version.id == 0x0303)
    g12 = r.group_audit(0x0303)
    assert g12.spoken is None and "TLS 1.2 support is inconclusive" in g12.notes[0]
    s12 = r.suite_audit(0x0303)
    assert s12.complete is False and "inconclusive" in s12.notes[0]
    sig12 = next(s for s in r.signature_schemes if s.version.id == 0x0303)
    assert sig12.status == "inconclusive"
    codes = {(f.code, f.version) for f in r.findings}
    assert ("audit.inconclusive", "TLS 1.2") in codes
    assert not any(f.code == "version.missing" for f in r.findings)
    text = io.StringIO()
    render_audit(r, text, width=200)
    assert "does not speak TLS 1.2" not in text.getvalue()
    assert "TLS 1.2 support is inconclusive" in text.getvalue()
    # TLS 1.3 is untouched by the fault.
    assert status(r, 0x0304) == "supported" and r.suite_audit(0x0304).complete


def test_a_dropped_tls13_check_is_confirmed_not_reported_missing(proxied):
    """A connection closed without an answer is no refusal until a second one says so."""
    proxy = proxied(nth_matching(lambda h: 0x0304 in h.supported_versions, DROP))
    r = scan(proxy, checks=("versions",))
    assert proxy.faults() and status(r, 0x0304) == "supported"
    assert "minimal hello" in next(v.detail for v in r.versions if v.version.id == 0x0304)
    assert not any(f.code == "version.missing" for f in r.findings)


def five_shares(h: ClientHello) -> bool:
    return len(h.key_shares) >= 5


@pytest.mark.parametrize("mode,verdict", [(RESET, "inconclusive"), (DROP, "yes")])
def test_one_fault_on_the_big_hello_is_no_intolerance(proxied, mode, verdict):
    """A reset is inconclusive; a drop is asked again (and answered): neither is the medium
    pq.intolerant finding a single fault used to give."""
    proxy = proxied(nth_matching(five_shares, mode))
    r = scan(proxy, checks=("versions", "pq"))
    assert proxy.faults()
    tolerance = next(v for v in r.post_quantum if v.check == "tolerance")
    assert tolerance.verdict == verdict
    assert not any(f.code == "pq.intolerant" for f in r.findings)
    if verdict == "inconclusive":
        assert any(f.code == "audit.inconclusive" and "tolerance" in f.message
                   for f in r.findings)


def test_a_reset_inside_the_sigalgs_elimination_is_not_established(proxied):
    """Reset on the second TLS 1.2 signature-scheme hello: one scheme known, the rest not;
    the list is "inconclusive", not "established" from one answer."""
    full = len(broad_sigalgs())
    proxy = proxied(nth_matching(lambda h: tls12_only(h) and
                                 len(h.signature_algorithms) < full, RESET))
    r = scan(proxy, checks=("versions", "sigalgs"))
    assert proxy.faults()
    sig12 = next(s for s in r.signature_schemes if s.version.id == 0x0303)
    assert sig12.status == "inconclusive" and len(sig12.supported) == 1
    assert "reset" in sig12.reason
    assert any(f.code == "audit.inconclusive" and "signature" in f.message for f in r.findings)


def test_a_dropped_suite_hello_is_asked_again_and_the_list_stays_whole(proxied):
    """Hellos still offering AES128-SHA (0x002f, the server's last choice): the versions
    check, then the suite elimination's steps; dropping step 2 used to end the elimination
    as if refused, with a "complete" list of one suite."""
    proxy = proxied(nth_matching(lambda h: tls12_only(h) and 0x002F in h.cipher_suites,
                                 DROP, which=(3,)))
    r = scan(proxy, checks=("versions", "suites"))
    assert proxy.faults()
    s12 = r.suite_audit(0x0303)
    assert [c.openssl_name for c in s12.supported] == [
        "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "AES128-SHA"]
    assert s12.complete


def _facts(r: AuditReport) -> dict:
    return {"versions": {v.version.name: v.status for v in r.versions},
            "groups": {g.version.name: [c.name for c in g.supported] for g in r.groups},
            "suites": {s.version.name: [c.iana_name for c in s.supported] for s in r.suites},
            "pq": {v.check: v.verdict for v in r.post_quantum}}


@pytest.mark.parametrize("fault", [every(3, RESET), every(5, DROP, 2)],
                         ids=["reset-every-3rd", "drop-every-5th"])
def test_regular_faults_never_produce_failing_findings_the_clean_scan_lacks(proxied, fault):
    """Whatever a fault hides is inconclusive: no version, suite or verdict differs from a
    clean scan's except by being inconclusive, and no medium+ finding is new."""
    clean = scan(proxied())
    r = scan(proxied(fault), per_host=1)
    base, got = _facts(clean), _facts(r)
    for version, st in got["versions"].items():
        assert st in (base["versions"][version], "inconclusive"), (version, st)
    for check, verdict in got["pq"].items():
        assert verdict in (base["pq"][check], "inconclusive"), (check, verdict)
    for s in r.suites:
        names = [c.iana_name for c in s.supported]
        if s.complete:
            assert names == base["suites"][s.version.name], s
        else:
            assert set(names) <= set(base["suites"].get(s.version.name, ()))
    worse = {(f.code, f.message) for f in r.findings if f.severity in ("medium", "high")} - \
        {(f.code, f.message) for f in clean.findings}
    assert not worse


# -- several servers behind one name -----------------------------------------------------------
BACKEND_A = dict(groups="X25519:P-256", ciphersuites="TLS_AES_128_GCM_SHA256",
                 ciphers="ECDHE-RSA-AES128-GCM-SHA256")
BACKEND_B = dict(groups="P-384", ciphersuites="TLS_AES_256_GCM_SHA384",
                 ciphers="ECDHE-RSA-AES256-GCM-SHA384")


@pytest.fixture
def balanced(server_cache):
    """A proxy alternating connections between two openssl s_server backends."""
    started: list[FaultProxy] = []

    def start(a: dict, b: dict) -> FaultProxy:
        backends = [server_cache("openssl", **cfg) for cfg in (a, b)]
        proxy = FaultProxy([(s.host, s.port) for s in backends], choose=lambda i: i % 2)
        started.append(proxy)
        return proxy
    yield start
    for p in started:
        p.close()


def test_two_differently_configured_backends_are_reported_inconsistent(balanced):
    """Alternating backends: the merged sets (both backends' groups and suites) are no
    configuration either backend has; the audit says the target answers inconsistently,
    as a finding, in the JSON and on every affected result."""
    import io
    import json
    from tlsprobe.report.audit_tables import render_audit
    proxy = balanced(BACKEND_A, BACKEND_B)
    r = scan(proxy, per_host=1)
    c = r.consistency
    assert c is not None and c.status == "inconsistent"
    assert len({a.split(": ", 1)[1] for a in c.answers}) == 2
    assert "groups TLS 1.3" in c.affected and "suites TLS 1.3" in c.affected
    assert any("answered inconsistently" in n for n in r.group_audit(0x0304).notes)
    assert any("answered inconsistently" in n for n in r.suite_audit(0x0304).notes)
    finding = next(f for f in r.findings if f.code == "target.inconsistent")
    assert finding.severity == "medium" and "suites TLS 1.3" in finding.items
    assert json.loads(r.to_json())["consistency"]["status"] == "inconsistent"
    text = io.StringIO()
    render_audit(r, text, width=200)
    assert "the target answers inconsistently" in text.getvalue()
    # Few extra connections: one repeat of the reference hello per later family of phases,
    # and one more right after the last (two in a row: a round robin splits them).
    assert r.connections["consistency"] <= 4


def test_a_version_one_backend_lacks_is_marked_as_maybe_one_backends(balanced):
    """Backend A speaks TLS 1.3 and 1.2, backend B TLS 1.2 only: the versions check's TLS 1.3
    hello may reach B, and "TLS 1.3 not spoken" is then one backend's answer, not the
    target's; it carries the inconsistency note, as the merged lists do, and the versions
    are among the affected results (they had no note: a CI required-version finding on one
    backend's word, unmarked)."""
    proxy = balanced(dict(BACKEND_A), dict(BACKEND_A, proto="tls1_2"))
    r = scan(proxy, per_host=1)
    assert r.consistency is not None and r.consistency.status == "inconsistent"
    for v in r.versions:
        if v.status != "supported":
            assert "answered inconsistently" in v.detail, v
    if any(v.status != "supported" for v in r.versions):
        assert "versions" in r.consistency.affected, r.consistency


def test_two_identical_backends_are_consistent(balanced):
    proxy = balanced(BACKEND_A, BACKEND_A)
    r = scan(proxy, per_host=1)
    assert r.consistency is not None and r.consistency.status == "consistent"
    assert not any(f.code == "target.inconsistent" for f in r.findings)
    assert [c.name for c in r.group_audit(0x0304).supported] == ["x25519", "secp256r1"]


def test_resets_on_the_modern_versions_are_no_alert_verdict(proxied):
    """TLS 1.3 and 1.2 checks reset, the old versions refused: that is no "the server accepted
    no protocol version" (exit 5), but a network failure naming what was inconclusive."""
    # each version's full offer and its minimal hello
    first13 = nth_matching(lambda h: 0x0304 in h.supported_versions, RESET, which=(1, 2))
    first12 = nth_matching(tls12_only, RESET, which=(1, 2))
    proxy = proxied(lambda i, h: first13(i, h) or first12(i, h))
    r = scan(proxy, checks=("versions",))
    assert len(proxy.faults()) == 4
    assert r.error_kind == "network" and "accepted no protocol version" not in r.error
    assert "TLS 1.3, TLS 1.2 inconclusive" in r.error and "reset" in r.error


def checks_of(r: AuditReport) -> dict[str, object]:
    return {c.name: c for c in r.check_results}


def test_a_path_resetting_large_hellos_keeps_the_tls13_section(proxied):
    """A middlebox that resets every ClientHello over 1,000 bytes: the TLS 1.3 versions hello
    (about 1,060 bytes) is reset, the minimal TLS 1.3 hello answered. TLS 1.3 is spoken, its
    groups, suites and signature schemes are audited, and the checks that used to read the
    missing answer as "not spoken" (fallback: "the server speaks TLS 1.2 only", early_data:
    "does not speak TLS 1.3") test it, with small hellos where the default one is large."""
    from tlsprobe.commands.scan import parse_checks
    from tlsprobe.model.audit import Spoken
    from tlsprobe.model.checks import Verdict
    sizes: list[int] = []

    def over_1000(_index: int, hello: ClientHello | None) -> str | None:
        size = len(hello.serialize()) + 4 if hello is not None else 0
        sizes.append(size)
        return RESET if size > 1000 else None
    proxy = proxied(over_1000)
    r = run_audit([Target("127.0.0.1", proxy.port)],
                  AuditOptions(checks=parse_checks(
                      "audit,fallback,early_data,ocsp_stapling,resumption,hsts")),
                  Scheduler(retries=0, timeout=5.0))[0]
    assert proxy.faults() and max(sizes) > 1000 and r.error is None, r.error
    v13 = next(v for v in r.versions if v.version.id == 0x0304)
    assert v13.status == "supported" and v13.minimal and v13.spoken is Spoken.YES
    assert "to a minimal hello; the full offer was not answered" in v13.detail
    assert r.version_spoken(0x0304) is Spoken.YES
    assert [c.name for c in r.group_audit(0x0304).supported] == ["x25519", "secp256r1"]
    assert r.suite_audit(0x0304).complete and r.suite_audit(0x0304).supported
    assert next(s for s in r.signature_schemes if s.version.id == 0x0304).status == \
        "established"
    got = checks_of(r)
    assert got["fallback"].verdict is Verdict.not_vulnerable, got["fallback"]
    assert "inappropriate_fallback" in got["fallback"].reason
    assert "does not speak" not in got["early_data"].reason
    assert got["early_data"].verdict is not Verdict.inconclusive, got["early_data"]
    for name in ("ocsp_stapling", "resumption", "hsts"):
        assert got[name].verdict is not Verdict.inconclusive, got[name]
    assert "TLS 1.3 ticket" in got["resumption"].reason


def test_an_unknown_tls13_is_never_read_as_not_spoken(proxied):
    """Every hello offering TLS 1.3 reset (the full one and the minimal one): TLS 1.3 is
    unknown, and the checks that need it or need a second version say so (inconclusive),
    not "not applicable: the server speaks TLS 1.2 only"."""
    from tlsprobe.model.audit import Spoken
    from tlsprobe.model.checks import Verdict
    proxy = proxied(lambda _i, h: RESET if h is not None and 0x0304 in h.supported_versions
                    else None)
    r = scan(proxy, checks=("versions", "fallback", "early_data", "resumption"))
    assert r.version_spoken(0x0304) is Spoken.UNKNOWN
    assert r.version_spoken(0x0303) is Spoken.YES
    assert r.version_spoken(0x0302) is Spoken.NO
    got = checks_of(r)
    for name in ("fallback", "early_data"):
        assert got[name].verdict is Verdict.inconclusive, got[name]
        assert "could not establish whether TLS 1.3 is spoken" in got[name].reason
        assert "does not speak" not in got[name].reason.split("(")[0]
    # TLS 1.2 resumes: that much is a fact whatever TLS 1.3 does
    assert got["resumption"].verdict is Verdict.supported


def test_every_full_offer_reset_each_version_settled_by_its_minimal_hello(proxied):
    """A box that resets hellos with many cipher suites: every versions hello (each lists
    all suites of its version) reset, the minimal hellos (a few suites) pass. The minimal
    hellos settle each version: TLS 1.3 and 1.2 spoken, TLS 1.1 and 1.0 not spoken only
    because their minimal hellos got protocol_version (asked twice), never from the reset."""
    def many_suites(_index: int, hello: ClientHello | None) -> str | None:
        return RESET if hello is not None and len(hello.cipher_suites) > 40 else None
    proxy = proxied(many_suites)
    r = scan(proxy, checks=("versions",))
    assert len(proxy.faults()) >= 5 and r.error is None, r.error
    for version in (0x0304, 0x0303):
        v = next(v for v in r.versions if v.version.id == version)
        assert v.status == "supported" and v.minimal, v
    for version in (0x0302, 0x0301):
        v = next(v for v in r.versions if v.version.id == version)
        assert v.status == "not_supported", v
        assert v.detail.startswith("the full offer was not answered (connection reset") and \
            "hello was refused (alert protocol_version (70))" in v.detail, v
    # SSL 3.0's minimal hello gets handshake_failure (twice), which may be about its few
    # suites: with the full offer unanswered, that is no "not spoken"
    ssl3 = next(v for v in r.versions if v.version.id == 0x0300)
    assert ssl3.status == "inconclusive" and "not with protocol_version" in ssl3.detail, ssl3
    # 5 full offers, a minimal hello each, refusals asked twice, and the TLS 1.3 hello
    # that was answered asked once more after the refusals (they hold only if it still is)
    assert r.connections["versions"] == 5 + 2 + 2 * 3 + 1


def test_an_incomplete_suite_list_names_no_most_preferred_suite(proxied):
    """The server's first choice is AES128-SHA (static RSA); the suite elimination is reset
    after it, so the list is incomplete and its order not established: the no-forward-secrecy
    finding must not call AES128-SHA "the most preferred" (it did, for any order but the
    client's), as the text's "Order: order not established" says nothing of the kind."""
    proxy = proxied(nth_matching(lambda h: tls12_only(h) and 0x002F not in h.cipher_suites
                                 and 0x0035 in h.cipher_suites, RESET),
                    ciphers="AES128-SHA:ECDHE-RSA-AES128-GCM-SHA256:AES256-SHA")
    r = scan(proxy, checks=("versions", "suites"))
    assert proxy.faults()
    s12 = r.suite_audit(0x0303)
    assert not s12.complete and s12.order == "unknown", s12
    assert s12.supported[0].openssl_name == "AES128-SHA", s12
    (no_fs,) = [f for f in r.findings if f.code == "suite.no_forward_secrecy"]
    assert "most preferred" not in no_fs.message, no_fs.message


def test_the_consistency_answers_come_in_the_audits_phase_order_whatever_ended_first():
    """The families of phases run together and repeat the reference hello as each ends:
    their answers are listed in the audit's order, not in the order they ended, which
    depends on the load (a golden scan's JSON differed between two runs of a loaded CI)."""
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.probes.audit import consistency
    from tlsprobe.probes.audit.outcome import SERVER_HELLO, STOP_HELLO, Outcome
    answer = Outcome(SERVER_HELLO, version=0x0304, cipher_suite=0x1301, group=0x0017)
    ref = consistency.Reference(ClientConfig(), STOP_HELLO, [("versions", answer)])
    for ended in ("signature schemes", "suites", "groups", "end of the audit"):
        ref.answers.append((ended, answer))
    check = consistency.verdict(ref, [])
    assert [a.split(":", 1)[0] for a in check.answers] == [
        "versions", "groups", "suites", "signature schemes", "end of the audit"]
    assert check.status == "consistent"


def test_checks_on_an_inconsistent_target_say_what_they_rest_on(balanced):
    """Backend B (TLS 1.2 only) answers the versions check's TLS 1.3 hello: "TLS 1.3 not
    spoken" carries the inconsistency note, but the checks that read it said "not
    applicable: the server does not speak TLS 1.3" (early_data) and "not vulnerable" from
    versions refused (the derived checks) as facts, without it. Every negative verdict of
    such a target now carries the note, as the versions do, and the checks are among the
    affected results; a positive one stays a fact (some backend has it)."""
    proxy = balanced(dict(BACKEND_A, ciphers="ECDHE-RSA-AES128-GCM-SHA256:AES128-SHA"),
                     dict(BACKEND_A, proto="tls1_2"))
    r = scan(proxy, checks=("versions", "groups", "suites", "early_data", "poodle", "rc4",
                            "dh", "lucky13"), per_host=1)
    assert r.consistency is not None and r.consistency.status == "inconsistent", r.consistency
    assert r.version_spoken(0x0304) == "no", r.versions
    early = next(c for c in r.check_results if c.name == "early_data")
    assert early.verdict == "not applicable" and "does not speak TLS 1.3" in early.reason
    negative = ("not vulnerable", "not applicable", "not supported", "not tolerated")
    for c in r.check_results:
        if c.verdict in negative:
            assert "answered inconsistently" in c.reason, c
            assert f"check {c.name}" in r.consistency.affected, r.consistency.affected
    assert {c.name for c in r.check_results if c.verdict in negative} >= {"early_data",
                                                                          "poodle", "rc4"}


def test_an_rsa_backend_and_an_ecdsa_backend_are_two_configurations(balanced):
    """One backend with an RSA certificate, one with an ECDSA one, otherwise alike: they
    answer the reference TLS 1.3 hello with the same version, suite and group, so the scan
    read one server with two certificates, "consistent". The reference's repeats read the
    certificate now: the same hello answered with an RSA and an ECDSA leaf is no one server
    (which picks its certificate by the hello), and the target is inconsistent."""
    proxy = balanced(dict(cert="rsa"), dict(cert="ecdsa"))   # openssl's defaults else
    r = scan(proxy, checks=("versions", "groups", "suites", "sigalgs", "cert"), per_host=1)
    c = r.consistency
    assert c is not None and c.status == "inconsistent", c
    assert any("RSA" in n and "ECDSA" in n and "same hello" in n for n in c.notes), c.notes
    finding = next(f for f in r.findings if f.code == "target.inconsistent")
    assert "same hello" in finding.message
    if r.other_certificates:
        assert "other certificates" in c.affected, c.affected
    assert r.connections["consistency"] <= 4
