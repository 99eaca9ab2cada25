"""The rating's rules on model values (policy/rating.py, docs/RATING.md): one test per rule,
each starting from a report that rates A+ (TLS 1.3 and 1.2, ECDHE AEAD suites, a trusted
RSA 2048 certificate, long HSTS, every check run and clean) and changing the one fact the
rule reads; plus the unknowns (a check inconclusive or not run), the labels and the
--fail-under comparison. The lab tests (test_rating_lab.py) serve each trigger for real."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tlsprobe.commands.scan import GRADES
from tlsprobe.model.audit import (
    AuditReport,
    DhParameters,
    DheAudit,
    Finding,
    GroupAudit,
    SuiteAudit,
    TrustCheck,
    VersionSupport,
)
from tlsprobe.model.check_details import HstsDetails, RenegotiationsDetails
from tlsprobe.model.checks import CheckResult, Method, Verdict
from tlsprobe.model.probe import CertificateInfo, Cipher, Codepoint, ServerCertificate
from tlsprobe.model.rating import GRADE_ORDER, Grade, parse_grade
from tlsprobe.model.severity import Severity
from tlsprobe.model.vocab import DheStatus, GroupMethod, TrustStatus, VersionStatus
from tlsprobe.policy.rating import letter, rate

TLS13, TLS12, TLS11, TLS10, SSL3 = 0x0304, 0x0303, 0x0302, 0x0301, 0x0300
GOOD12 = (0xC02F, 0xC030)                 # ECDHE-RSA AES-GCM
GOOD13 = (0x1301, 0x1302)
CHECKS = ("versions", "groups", "pq", "suites", "sigalgs", "cert", "poodle", "heartbleed",
          "ccs", "ticketbleed", "robot", "compression", "sslv2", "renegotiation",
          "client_renegotiation", "hsts")
YEAR = 31536000


def _check(name: str, verdict: Verdict, details: Any = None, reason: str = "r") -> CheckResult:
    return CheckResult(name, name, verdict, reason, method=Method.active, details=details)


def _clean_checks() -> dict[str, CheckResult]:
    out = {n: _check(n, Verdict.not_vulnerable) for n in
           ("poodle", "heartbleed", "ccs", "ticketbleed", "robot", "compression", "sslv2")}
    out["renegotiation"] = _check("renegotiation", Verdict.supported)
    out["client_renegotiation"] = _check("client_renegotiation", Verdict.not_vulnerable)
    out["hsts"] = _check("hsts", Verdict.supported,
                         HstsDetails("200 OK", f"max-age={YEAR}", YEAR, False, False))
    return out


def make(versions: dict[int, str] | None = None, suites: dict[int, tuple[int, ...]] | None = None,
         key: tuple[str, int] = ("RSA", 2048), sig: str = "sha256WithRSAEncryption",
         results: dict[str, CheckResult] | None = None, findings: tuple[Finding, ...] = (),
         trust: TrustStatus = TrustStatus.TRUSTED, dhe: DhParameters | None = None,
         groups13: tuple[int, ...] = (0x001D, 0x0017), checks: tuple[str, ...] = CHECKS,
         ) -> AuditReport:
    versions = versions if versions is not None else {
        TLS13: "supported", TLS12: "supported", TLS11: "not_supported",
        TLS10: "not_supported", SSL3: "not_supported"}
    suites = suites if suites is not None else {TLS13: GOOD13, TLS12: GOOD12}
    cert = CertificateInfo("CN=localhost", "CN=ca", key[0], key[1], sig, "2025-01-01",
                           "2030-01-01", "01", "ab")
    groups = [GroupAudit(Codepoint.version(TLS13), True, GroupMethod.HELLO_RETRY_REQUEST,
                         tuple(Codepoint.group(g) for g in groups13))]
    groups.append(GroupAudit(Codepoint.version(TLS12), True, GroupMethod.SERVER_KEY_EXCHANGE,
                             (Codepoint.group(0x001D),),
                             dhe=DheAudit(DheStatus.FIXED, fixed=dhe) if dhe else None))
    results = {**_clean_checks(), **(results or {})}
    return AuditReport(
        "localhost", 443, checks=checks,
        versions=tuple(VersionSupport(Codepoint.version(v), VersionStatus(s))
                       for v, s in versions.items()),
        suites=tuple(SuiteAudit(Codepoint.version(v), tuple(Cipher.of(c) for c in cs))
                     for v, cs in suites.items() if versions.get(v) == "supported"),
        groups=tuple(groups), certificates=(cert,), trust=TrustCheck(trust),
        check_results=tuple(r for n, r in results.items() if n in checks), findings=findings)


def registry_name(version: int) -> str:
    return {TLS10: "TLS 1.0", TLS11: "TLS 1.1", SSL3: "SSL 3.0"}[version]


def rules(report: AuditReport) -> dict[str, Grade]:
    rating = rate(report)
    assert rating is not None
    return {c.rule: c.cap for c in rating.caps}


def grade(report: AuditReport) -> Grade | None:
    rating = rate(report)
    assert rating is not None
    return rating.grade


def test_the_reference_report_rates_a_plus_with_every_rule_applied() -> None:
    rating = rate(make())
    assert rating is not None
    assert (rating.grade, rating.score, rating.caps, rating.warnings, rating.unknowns) == \
        (Grade.A_PLUS, 93, (), (), ())
    assert rating.protocol_support.score == 100 and rating.key_exchange.score == 90
    assert rating.cipher_strength.score == 90 and not rating.provisional
    assert rating.label() == "A+"


def test_score_letters_follow_the_guides_table() -> None:
    assert [letter(s) for s in (80, 79, 65, 64, 50, 49, 35, 34, 20, 19, 0)] == \
        [Grade.A, Grade.B, Grade.B, Grade.C, Grade.C, Grade.D, Grade.D, Grade.E, Grade.E,
         Grade.F, Grade.F]


@pytest.mark.parametrize(("version", "rule"), [(TLS10, "tls10_offered"),
                                               (TLS11, "tls11_offered"),
                                               (SSL3, "ssl3_offered")])
def test_legacy_versions_cap_at_b(version: int, rule: str) -> None:
    versions = {TLS13: "supported", TLS12: "supported", TLS11: "not_supported",
                TLS10: "not_supported", SSL3: "not_supported", version: "supported"}
    report = make(versions, suites={TLS13: GOOD13, TLS12: GOOD12, version: (0xC013,)})
    assert rules(report)[rule] is Grade.B
    rating = rate(report)
    assert rating is not None and rating.grade is Grade.B
    assert rating.label() == f"B (capped: {registry_name(version)} offered)"


def test_ssl3_as_best_protocol_is_f_and_no_tls12_is_c() -> None:
    only_ssl3 = {TLS13: "not_supported", TLS12: "not_supported", TLS11: "not_supported",
                 TLS10: "not_supported", SSL3: "supported"}
    r = rules(make(only_ssl3, suites={SSL3: (0x0035,)}))
    assert r["ssl3_best"] is Grade.F and r["no_tls12"] is Grade.C
    only_10 = {**only_ssl3, SSL3: "not_supported", TLS10: "supported"}
    report = make(only_10, suites={TLS10: (0xC014,)})
    assert rules(report)["no_tls12"] is Grade.C and grade(report) is Grade.C


def test_no_tls13_is_a_warning_and_gives_a_minus() -> None:
    report = make({TLS13: "not_supported", TLS12: "supported", TLS11: "not_supported",
                   TLS10: "not_supported", SSL3: "not_supported"})
    rating = rate(report)
    assert rating is not None and rating.grade is Grade.A_MINUS
    assert [w.rule for w in rating.warnings] == ["no_tls13"]
    assert rating.label() == "A- (warnings: TLS 1.3 not offered)"


@pytest.mark.parametrize(("suites", "rule", "cap", "final"), [
    ((0xC02F, 0x0005), "rc4", Grade.B, Grade.C),              # RC4 in TLS 1.2: also C
    ((0xC02F, 0x000A), "sweet32", Grade.C, Grade.C),          # 3DES in TLS 1.2
    ((0xC02F, 0x009C), None, None, Grade.A_PLUS),             # static RSA beside ECDHE: fine
    ((0x009C, 0x009D), "no_forward_secrecy", Grade.B, Grade.B),
    ((0xC013, 0xC014), "no_aead", Grade.B, Grade.B),
    ((0xC02F, 0x0003), "export", Grade.F, Grade.F),           # EXP-RC4-MD5
    ((0xC02F, 0x0018), "anonymous", Grade.F, Grade.F),        # ADH-RC4-MD5
    ((0xC02F, 0x003B), "null", Grade.F, Grade.F),             # NULL-SHA256
    ((0xC02F, 0x0009), "weak_cipher", Grade.F, Grade.F),      # DES-CBC-SHA (56 bits)
])
def test_suite_rules(suites: tuple[int, ...], rule: str | None, cap: Grade | None,
                     final: Grade) -> None:
    versions = {TLS13: "not_supported", TLS12: "supported", TLS11: "not_supported",
                TLS10: "not_supported", SSL3: "not_supported"}
    report = make(versions, suites={TLS12: suites})
    found = rules(report)
    if rule is None:
        assert found == {}
        assert grade(report) is Grade.A_MINUS     # no TLS 1.3: the warning
        return
    assert found[rule] is cap
    assert grade(report) is final


def test_rc4_in_tls10_only_caps_at_b() -> None:
    versions = {TLS13: "supported", TLS12: "supported", TLS11: "not_supported",
                TLS10: "supported", SSL3: "not_supported"}
    found = rules(make(versions, suites={TLS13: GOOD13, TLS12: GOOD12, TLS10: (0x0005,)}))
    assert found["rc4"] is Grade.B and "rc4_modern" not in found and "sweet32" not in found


@pytest.mark.parametrize(("key", "dh", "rule", "cap", "points"), [
    (("RSA", 1024), None, "weak_key", Grade.B, 80),
    (("RSA", 512), None, "insecure_key", Grade.F, 40),
    (("RSA", 2048), 1024, "weak_key", Grade.B, 80),
    (("RSA", 2048), 768, "insecure_key", Grade.F, 40),
    (("RSA", 4096), 4096, None, None, 100),
    (("EC secp256r1", 256), None, None, None, 100),
])
def test_key_exchange_rules(key: tuple[str, int], dh: int | None, rule: str | None,
                            cap: Grade | None, points: int) -> None:
    params = DhParameters(f"unknown {dh}-bit prime", dh) if dh else None
    report = make(key=key, dhe=params)
    rating = rate(report)
    assert rating is not None and rating.key_exchange.score == points
    if rule is None:
        assert rules(report) == {}
    else:
        assert rules(report)[rule] is cap


def test_post_quantum_hybrids_count_by_their_classical_part() -> None:
    rating = rate(make(key=("EC secp256r1", 256), groups13=(0x11EC, 0x001D, 0x0200)))
    assert rating is not None and rating.key_exchange.score == 100
    assert "pq" not in {c.rule for c in rating.caps} and rating.grade is Grade.A_PLUS


@pytest.mark.parametrize(("name", "rule", "cap"), [
    ("heartbleed", "heartbleed", Grade.F), ("ccs", "ccs_injection", Grade.F),
    ("ticketbleed", "ticketbleed", Grade.F), ("robot", "robot", Grade.F),
    ("poodle", "poodle", Grade.C), ("compression", "crime", Grade.C),
    ("sslv2", "sslv2", Grade.F),
])
def test_vulnerable_checks_cap(name: str, rule: str, cap: Grade) -> None:
    report = make(results={name: _check(name, Verdict.vulnerable, reason="it is")})
    rating = rate(report)
    assert rating is not None and rating.grade is cap
    found = next(c for c in rating.caps if c.rule == rule)
    assert found.cap is cap and found.evidence == (f"check.{name}: it is",)


@pytest.mark.parametrize("name", ["heartbleed", "robot", "poodle", "hsts"])
def test_an_inconclusive_check_is_an_unknown_never_a_pass(name: str) -> None:
    versions = {TLS13: "supported", TLS12: "supported", TLS11: "not_supported",
                TLS10: "not_supported", SSL3: "inconclusive"}
    report = make(versions, results={name: _check(name, Verdict.inconclusive,
                                                  reason="timed out")})
    rating = rate(report)
    assert rating is not None
    unknown = next(u for u in rating.unknowns if u.reason == f"{name} inconclusive")
    assert unknown.detail == "timed out"          # what the check said, kept apart
    if name == "hsts":      # only A+ was at stake: A, not provisional on its account
        assert unknown.cap is None
    else:
        assert unknown.cap is not None and rating.provisional
        assert "provisional: " in rating.label() and f"{name} inconclusive" in rating.label()


def test_checks_not_run_are_listed_and_tls13_only_needs_none_of_the_legacy_ones() -> None:
    rating = rate(make(checks=("versions", "groups", "suites", "cert")))
    assert rating is not None and rating.provisional
    assert {u.rule for u in rating.unknowns} >= {"heartbleed", "robot", "sslv2", "hsts",
                                                "insecure_renegotiation"}
    only13 = {TLS13: "supported", TLS12: "not_supported", TLS11: "not_supported",
              TLS10: "not_supported", SSL3: "not_supported"}
    rating = rate(make(only13, suites={TLS13: GOOD13},
                       checks=("versions", "groups", "suites", "cert", "sslv2", "hsts")))
    assert rating is not None and rating.unknowns == () and rating.grade is Grade.A_PLUS


def test_no_versions_no_grade() -> None:
    rating = rate(make(checks=("groups",), versions={}))
    assert rating is not None and rating.grade is None
    assert rating.label().startswith("not rated (versions not run; ")
    assert rating.below(Grade.F)     # nothing rated: no gate passes


def test_renegotiation_rules() -> None:
    insecure = _check("client_renegotiation", Verdict.vulnerable,
                      RenegotiationsDetails(10, 3, 3, False, False))
    no5746 = _check("renegotiation", Verdict.not_supported)
    r = make(results={"client_renegotiation": insecure, "renegotiation": no5746})
    rating = rate(r)
    assert rating is not None and rating.grade is Grade.F
    assert {c.rule for c in rating.caps} == {"insecure_renegotiation"}
    assert [w.rule for w in rating.warnings] == ["no_secure_renegotiation"]
    secure = replace(insecure, details=RenegotiationsDetails(10, 3, 3, True, False))
    assert grade(make(results={"client_renegotiation": secure})) is Grade.A_PLUS
    assert grade(make(results={"renegotiation": no5746})) is Grade.A_MINUS


@pytest.mark.parametrize(("code", "cap"), [
    ("certificate.expired", Grade.T), ("certificate.self_signed", Grade.T),
    ("certificate.untrusted", Grade.T), ("certificate.hostname_mismatch", Grade.M),
    ("certificate.md5_signature", Grade.F), ("certificate.sha1_signature", Grade.T),
])
def test_certificate_rules(code: str, cap: Grade) -> None:
    finding = Finding(Severity.high, code, "the message")
    rating = rate(make(findings=(finding,), trust=TrustStatus.UNTRUSTED))
    assert rating is not None and rating.grade is cap
    if cap in (Grade.T, Grade.M):
        assert rating.grade_ignoring_trust is Grade.A_PLUS
        assert rating.label().startswith(f"{cap.value} (if trusted: A+; capped: ")


def test_a_t_grade_names_the_caps_behind_the_grade_it_would_have() -> None:
    versions = {TLS13: "supported", TLS12: "supported", TLS11: "not_supported",
                TLS10: "supported", SSL3: "not_supported"}
    rating = rate(make(versions, findings=(Finding(Severity.high, "certificate.expired", "x"),)))
    assert rating is not None and (rating.grade, rating.grade_ignoring_trust) == (Grade.T, Grade.B)
    assert rating.label() == "T (if trusted: B; capped: TLS 1.0 offered; certificate expired)"


def test_a_chain_not_verified_is_an_unknown_of_t() -> None:
    rating = rate(make(trust=TrustStatus.NOT_CHECKED))
    assert rating is not None and rating.grade is Grade.A_PLUS and rating.provisional
    assert [u.cap for u in rating.unknowns] == [Grade.T]


def test_other_key_types_chains_count_and_one_not_established_is_unknown() -> None:
    """A second chain (ECDSA P-256 here): its key in the key exchange score, its chain not
    verified or its search not established an unknown of T (A+ stays, provisional)."""
    ec = CertificateInfo("CN=localhost", "CN=ca", "EC secp256r1", 256, "ecdsa-with-SHA256",
                         "2025-01-01", "2030-01-01", "02", "cd")
    ecdsa = ServerCertificate("ECDSA", Codepoint.version(TLS12), "TLS 1.2", (ec,),
                              TrustCheck(TrustStatus.NOT_CHECKED, detail="no store"))
    rating = rate(replace(make(key=("RSA", 4096)), other_certificates=(ecdsa,)))
    assert rating is not None and rating.grade is Grade.A_PLUS and rating.provisional
    assert [(u.rule, u.cap, u.detail) for u in rating.unknowns] == [
        ("cert_trust", Grade.T, "ECDSA certificate: no store")]
    small = replace(ecdsa, certificates=(replace(ec, key_type="EC secp160r1", key_bits=160),),
                    trust=TrustCheck(TrustStatus.TRUSTED))
    rating = rate(replace(make(), other_certificates=(small,)))
    assert rating is not None and rating.grade is Grade.B
    assert [(c.rule, c.cap) for c in rating.caps] == [("weak_key", Grade.B)]
    assert rating.key_exchange.detail == "weakest: certificate EC secp160r1 160 bits (80)"
    rating = rate(replace(make(), other_certificates_note="TLS 1.2 hello with ...: reset"))
    assert rating is not None and rating.grade is Grade.A_PLUS and rating.provisional
    assert [(u.rule, u.cap) for u in rating.unknowns] == [("cert_other_chains", Grade.T)]


@pytest.mark.parametrize(("age", "warning"), [(86400, "hsts_short"), (0, "hsts_disabled"),
                                              (None, "hsts_invalid")])
def test_hsts_rules(age: int | None, warning: str) -> None:
    hsts = _check("hsts", Verdict.not_supported,
                  HstsDetails("200 OK", f"max-age={age}", age, False, False))
    rating = rate(make(results={"hsts": hsts}))
    assert rating is not None and rating.grade is Grade.A_MINUS
    assert [w.rule for w in rating.warnings] == [warning]
    none = _check("hsts", Verdict.not_supported, HstsDetails("200 OK", None, None, False, False))
    assert grade(make(results={"hsts": none})) is Grade.A


def test_grades_parse_and_order_for_the_gate() -> None:
    assert GRADES == tuple(g.value for g in GRADE_ORDER)
    assert parse_grade(" a+ ") is Grade.A_PLUS and parse_grade("b") is Grade.B
    with pytest.raises(ValueError, match="unknown grade 'Z'"):
        parse_grade("Z")
    rating = rate(make(versions={TLS13: "supported", TLS12: "supported",
                                 TLS11: "not_supported", TLS10: "supported",
                                 SSL3: "not_supported"}))
    assert rating is not None and rating.grade is Grade.B
    assert rating.below(Grade.A) and not rating.below(Grade.B) and not rating.below(Grade.C)
    t = rate(make(findings=(Finding(Severity.high, "certificate.expired", "x"),)))
    assert t is not None and t.grade is Grade.T and t.below(Grade.F)   # T: below every gate


def test_json_member_only_when_rated() -> None:
    report = make()
    assert "rating" not in report.to_dict()
    from tlsprobe.policy.rating import rated
    d: Any = rated(report).to_dict()
    assert d["rating"]["grade"] == "A+" and d["rating"]["score"] == 93


def test_survey_rows_carry_the_rating() -> None:
    from tlsprobe.policy.rating import rated
    from tlsprobe.survey.rows import COLUMNS, rows_for
    rows = rows_for(rated(make()), shard=0)
    assert {"rating", "rating_score", "rating_provisional", "rating_label"} <= \
        {name for name, _ in COLUMNS} and all(set(r) == {n for n, _ in COLUMNS} for r in rows)
    assert {(r["rating"], r["rating_score"], r["rating_provisional"], r["rating_label"])
            for r in rows} == {("A+", 93, False, "A+")}
    unrated = rows_for(make(), shard=0)          # no rating (an error report has none)
    assert {r["rating"] for r in unrated} == {None}
