"""Vulnerability checks derived from the audit (tlsprobe/policy/checks.py), on audit reports
built in the test: every verdict branch of the suite checks (POODLE, FREAK, Logjam, RC4,
SWEET32, BEAST, NULL, anonymous) and of the DH parameter check, their findings, the
`scan --checks` names, the JSON member (absent when no check was asked for) and the text
section."""
from __future__ import annotations

from typing import Any

import argparse
import io
import json

import pytest

from tlsprobe.commands.scan import CHECKS, _checks
from tlsprobe.errors import UsageError
from tlsprobe.model.audit import (AuditReport, DheAudit, DhParameters, GroupAudit, SuiteAudit,
                                  VersionSupport)
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.model.check_details import AcceptedSuite, SuiteCheckDetails
from tlsprobe.model.probe import Cipher, Codepoint
from tlsprobe.policy.checks import check_findings
from tlsprobe.probes.checks.derived import DERIVED, derive_checks, expand
from tlsprobe.policy.findings import findings_for
from tlsprobe.report.audit_tables import render_audit

V, G = Codepoint.version, Codepoint.group
TLS13, TLS12, TLS11, TLS10, SSL30 = 0x0304, 0x0303, 0x0302, 0x0301, 0x0300
GOOD12 = (0xC02F, 0xC030)                     # ECDHE-RSA AES-GCM
RC4 = 0x0005                                  # TLS_RSA_WITH_RC4_128_SHA
DES3 = 0x000A                                 # TLS_RSA_WITH_3DES_EDE_CBC_SHA
AES_CBC = 0x002F                              # TLS_RSA_WITH_AES_128_CBC_SHA
EXP_RSA = 0x0003                              # TLS_RSA_EXPORT_WITH_RC4_40_MD5
EXP_DHE = 0x0014                              # TLS_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA
ANON = 0x00A6                                 # TLS_DH_anon_WITH_AES_128_GCM_SHA256
NULL13 = 0xC0B4                               # TLS_SHA256_SHA256 (RFC 9150, no encryption)
DHE12 = 0x009E                                # TLS_DHE_RSA_WITH_AES_128_GCM_SHA256


def report(suites: dict[int, tuple[int, ...]] | None = None,
           status: dict[int, str] | None = None, incomplete: tuple[int, ...] = (),
           dhe: DheAudit | None = None, g12: bool | None = True,
           checks: tuple[str, ...] = DERIVED) -> AuditReport:
    """A report whose versions are supported when they have suites (else refused) unless
    `status` says otherwise; suite lists complete unless listed in `incomplete`."""
    suites = {TLS13: (0x1301,), TLS12: GOOD12} if suites is None else suites
    status = status or {}
    versions = tuple(VersionSupport(V(v), status.get(v, "supported" if v in suites
                                                     else "not_supported"), "detail")
                     for v in (TLS13, TLS12, TLS11, TLS10, SSL30))
    audits = tuple(SuiteAudit(V(v), tuple(Cipher.of(c) for c in cs), "server",
                              complete=v not in incomplete,
                              notes=("stopped, not established: timed out",)
                              if v in incomplete else ())
                   for v, cs in suites.items())
    groups = (GroupAudit(V(TLS12), g12, "server_key_exchange", (G(0x1D),), dhe=dhe),) \
        if g12 is not False or dhe else (GroupAudit(V(TLS12), False, "not_run"),)
    return AuditReport("127.0.0.1", 443, versions=versions, suites=audits, groups=groups,
                       checks=checks)


def verdicts(r: AuditReport) -> dict[str, CheckResult]:
    return {c.name: c for c in derive_checks(r)}


def test_a_modern_server_is_not_vulnerable_to_any_suite_check() -> None:
    found = verdicts(report(dhe=DheAudit("fixed", fixed=DhParameters(
        "modp_2048", 2048, None, "RFC 3526", "known"))))
    assert {n: c.verdict for n, c in found.items()} == {n: Verdict.not_vulnerable
                                                        for n in DERIVED}
    assert found["rc4"].evidence == ("TLS 1.2: 2 suite(s) accepted, list complete",
                                     "TLS 1.1: refused", "TLS 1.0: refused", "SSL 3.0: refused")
    assert found["rc4"].connections == 0 and found["rc4"].method == "derived"
    assert "SSL 3.0 refused" in found["poodle"].reason


@pytest.mark.parametrize("name, version, suite", [
    ("rc4", TLS11, RC4), ("sweet32", TLS12, DES3), ("freak", TLS10, EXP_RSA),
    ("logjam", TLS12, EXP_DHE), ("anon", TLS12, ANON), ("null", TLS13, NULL13),
    ("beast", TLS10, AES_CBC), ("poodle", SSL30, AES_CBC)])
def test_an_accepted_suite_makes_its_check_vulnerable(name: str, version: int,
                                                      suite: int) -> None:
    base = {TLS13: (0x1301,), TLS12: GOOD12}
    r = report({**base, version: base.get(version, ()) + (suite,)})
    found = verdicts(r)[name]
    assert found.verdict is Verdict.vulnerable, found
    assert found.evidence == (f"{Cipher.of(suite).iana_name} ({V(version).name})",)
    others = [c for n, c in verdicts(r).items() if c.verdict is Verdict.vulnerable]
    assert name in {c.name for c in others}


def test_export_rsa_and_export_dhe_are_told_apart_and_cbc_counts_only_where_it_matters() -> None:
    r = report({TLS12: GOOD12 + (EXP_RSA, AES_CBC), TLS10: (AES_CBC,)})
    found = verdicts(r)
    assert found["freak"].verdict is Verdict.vulnerable
    assert found["logjam"].verdict is Verdict.not_vulnerable
    assert found["beast"].evidence == ("TLS_RSA_WITH_AES_128_CBC_SHA (TLS 1.0)",)
    # CBC in TLS 1.2 alone is no BEAST, and SSL 3.0 with RC4 only is no POODLE
    r = report({TLS12: (AES_CBC,), SSL30: (RC4,)})
    assert verdicts(r)["beast"].verdict is Verdict.not_vulnerable
    assert verdicts(r)["poodle"].verdict is Verdict.not_vulnerable
    assert verdicts(r)["rc4"].verdict is Verdict.vulnerable


def test_a_hit_is_vulnerable_even_where_another_version_is_unknown() -> None:
    r = report({TLS12: GOOD12 + (RC4,)}, status={TLS10: "inconclusive"})
    assert verdicts(r)["rc4"].verdict is Verdict.vulnerable


@pytest.mark.parametrize("kw, why", [
    (dict(status={TLS10: "inconclusive"}), "TLS 1.0 support not established (detail)"),
    (dict(incomplete=(TLS12,)), "TLS 1.2 cipher suite list incomplete (stopped, not "
                                "established: timed out)"),
    (dict(suites={TLS12: GOOD12, TLS11: ()}, status={TLS11: "supported"},
          incomplete=(TLS11,)), "TLS 1.1 cipher suite list incomplete"),
])
def test_what_the_audit_did_not_establish_is_inconclusive_with_why(kw: dict[str, Any],
                                                                  why: str) -> None:
    found = verdicts(report(**kw))["sweet32"]
    assert found.verdict is Verdict.inconclusive
    assert why in found.reason and found.reason.startswith("no 64-bit block cipher suites")


def test_an_unaudited_or_untested_version_is_inconclusive() -> None:
    r = report({TLS12: GOOD12})
    r = AuditReport(r.host, r.port, versions=r.versions[:-1], suites=r.suites,
                    checks=r.checks)                     # SSL 3.0 never tried
    assert verdicts(r)["poodle"].verdict is Verdict.inconclusive
    assert verdicts(r)["poodle"].reason.endswith("SSL 3.0 support not tested")
    r = AuditReport(r.host, r.port, versions=report().versions, checks=r.checks)  # no suites
    found = verdicts(r)["rc4"]
    assert found.verdict is Verdict.inconclusive
    assert "TLS 1.2 cipher suites not audited" in found.reason


def fixed(name: str, bits: int, standard: str | None = None, prime: str | None = "safe",
          status: str = "fixed", negotiated: tuple[int, ...] = ()) -> DheAudit:
    return DheAudit(status, tuple(G(g) for g in negotiated),
                    DhParameters(name, bits, None, standard, prime))


@pytest.mark.parametrize("dhe, verdict, words", [
    (fixed("modp_1536", 1536, "RFC 3526", "known"), Verdict.vulnerable,
     "1536-bit DH prime, the well-known shared RFC 3526 prime whatever the client offers"),
    (fixed("unknown 1024-bit prime", 1024), Verdict.vulnerable,
     "1024-bit DH prime whatever"),
    (fixed("unknown 1024-bit modulus", 1024, prime="unchecked"), Verdict.vulnerable,
     "1024-bit DH modulus"),
    (fixed("unknown 2048-bit prime", 2048), Verdict.not_vulnerable, "2048-bit DH parameters"),
    (fixed("modp_1024", 1024, "RFC 2409", "known", status="rfc7919", negotiated=(0x100,)),
     Verdict.vulnerable, "to a client that lists no ffdhe group"),
    (fixed("ffdhe2048", 2048, "RFC 7919", "known", status="rfc7919", negotiated=(0x100,)),
     Verdict.not_vulnerable, "and negotiates RFC 7919 groups"),
    (DheAudit("rfc7919", (G(0x100), G(0x101))), Verdict.inconclusive,
     "what it sends to a client that lists no ffdhe group was not seen"),
    (DheAudit("inconclusive", notes=("timed out",)), Verdict.inconclusive,
     "not established (inconclusive: timed out)"),
    (DheAudit("none"), Verdict.not_applicable, "no DHE key exchange"),
])
def test_dh_parameter_verdicts(dhe: DheAudit, verdict: Verdict, words: str) -> None:
    found = verdicts(report(dhe=dhe))["dh"]
    assert found.verdict is verdict and words in found.reason, found


def test_dh_when_tls12_dhe_is_absent_or_unknown() -> None:
    # no DHE in TLS 1.2, but a DHE suite in TLS 1.0: its parameters are not read
    r = report({TLS12: GOOD12, TLS10: (DHE12 - 0x9E + 0x33,)}, dhe=DheAudit("none"))
    found = verdicts(r)["dh"]
    assert found.verdict is Verdict.inconclusive and found.evidence == (
        "TLS_DHE_RSA_WITH_AES_128_CBC_SHA (TLS 1.0)",)
    r = report({TLS12: GOOD12}, dhe=DheAudit("none"), status={TLS11: "inconclusive"})
    assert verdicts(r)["dh"].verdict is Verdict.inconclusive
    r = report({TLS13: (0x1301,)}, g12=False)              # TLS 1.3 only
    assert verdicts(r)["dh"].verdict is Verdict.not_applicable
    assert "TLS 1.2 is not spoken" in verdicts(r)["dh"].reason
    r = report(g12=None)                                     # TLS 1.2 not known
    r = AuditReport(r.host, r.port, versions=r.versions, suites=r.suites, checks=r.checks,
                    groups=(GroupAudit(V(TLS12), None, "not_run", notes=("not tested: x",)),))
    assert verdicts(r)["dh"].reason == "not tested: x"
    r = AuditReport(r.host, r.port, versions=r.versions, suites=r.suites, checks=r.checks)
    assert verdicts(r)["dh"].verdict is Verdict.inconclusive


def test_only_the_checks_asked_for_run_in_report_order() -> None:
    assert [c.name for c in derive_checks(report(checks=("suites", "beast", "rc4")))] == \
        ["rc4", "beast"]
    assert derive_checks(report(checks=("versions", "suites"))) == ()


def test_findings_poodle_and_beast_only_the_rest_reuse_existing_codes() -> None:
    r = report({TLS12: GOOD12 + (RC4,), TLS10: (AES_CBC,), SSL30: (AES_CBC,)},
               checks=expand(("vulns",)))
    r = AuditReport(r.host, r.port, versions=r.versions, suites=r.suites, groups=r.groups,
                    checks=r.checks, check_results=derive_checks(r))
    own = {f.code: f for f in check_findings(r.check_results)}
    assert set(own) == {"check.poodle", "check.beast", "check.lucky13"}
    # LUCKY13: informational, on an inconclusive verdict (no timing is measured)
    assert own["check.lucky13"].severity == "info"
    assert own["check.lucky13"].items == ("TLS_RSA_WITH_AES_128_CBC_SHA",)
    assert own["check.lucky13"].version == "TLS 1.0"
    assert own["check.poodle"].severity == "high" and own["check.poodle"].version == "SSL 3.0"
    assert own["check.beast"].severity == "low"
    assert own["check.beast"].items == ("TLS_RSA_WITH_AES_128_CBC_SHA",)   # once, by name
    assert own["check.beast"].version is None                  # TLS 1.0 and SSL 3.0
    assert own["check.poodle"].message == ("SSL 3.0 with CBC suites (POODLE, CVE-2014-3566): "
                                           "TLS_RSA_WITH_AES_128_CBC_SHA")
    codes = [f.code for f in findings_for(r, [])]
    assert "check.poodle" in codes and "check.beast" in codes
    assert "suite.weak" in codes            # RC4: the existing finding, not a second one
    assert not any(c.startswith("check.rc4") for c in codes)
    # a check that was not asked for keeps its finding out
    r2 = AuditReport(r.host, r.port, versions=r.versions, suites=r.suites,
                     checks=("versions", "suites", "poodle"), check_results=r.check_results)
    codes = [f.code for f in findings_for(r2, [])]
    assert "check.poodle" in codes and "check.beast" not in codes
    clean = report(checks=expand(("vulns",)))
    assert check_findings(derive_checks(clean)) == []


def args(checks: str | None, groups_only: bool = False) -> argparse.Namespace:
    return argparse.Namespace(checks=checks, groups_only=groups_only)


def test_catalog_writes_out_the_same_names_as_the_derived_checks() -> None:
    """probes/checks/catalog.py spells the derived names out (building scan's parser
    imports no model); its `vulns` alias covers derived.py's."""
    from tlsprobe.probes.checks import catalog, derived
    assert catalog.DERIVED == derived.DERIVED
    assert set(derived.ALIASES["vulns"]) <= set(catalog.ALIASES["vulns"])


def test_scan_checks_names_bring_the_phases_they_read() -> None:
    from tlsprobe.probes.checks.catalog import ACTIVE as EVERY_ACTIVE
    # the default: the key-exchange audit and every check; `audit` alone: the phases
    assert _checks(args(None)) == (*CHECKS, *DERIVED, *EVERY_ACTIVE)
    assert _checks(args("audit")) == CHECKS
    assert _checks(args("rc4")) == ("versions", "suites", "rc4")
    assert _checks(args("dh")) == ("versions", "groups", "suites", "dh")
    from tlsprobe.probes.checks.catalog import ACTIVE
    vulns = tuple(n for n, e in ACTIVE.items() if e.category == "vulnerability")
    assert _checks(args("vulns,cert")) == ("versions", "groups", "suites", "cert", *DERIVED,
                                           *vulns)
    with pytest.raises(UsageError, match="unknown check 'nosuchcheck'.*poodle.*vulns"):
        _checks(args("rc4,nosuchcheck"))


def test_json_has_check_results_only_when_checks_were_asked_for() -> None:
    plain = report(checks=("versions", "suites"))
    d = plain.to_dict()
    assert "check_results" not in d and list(d)[-2:] == ["index", "started_at"]
    assert json.loads(plain.to_json()) == d
    asked = report(checks=expand(("rc4",)), suites={TLS12: (RC4,)})
    asked = AuditReport(asked.host, asked.port, versions=asked.versions, suites=asked.suites,
                        checks=asked.checks, check_results=derive_checks(asked))
    d = json.loads(asked.to_json())
    assert list(d)[list(d).index("index") + 1] == "check_results"   # in its place
    assert d["check_results"] == [{
        "name": "rc4", "title": "RC4 suites (RFC 7465)", "verdict": "vulnerable",
        "reason": "the server accepts RC4 suites (1)",
        "evidence": ["TLS_RSA_WITH_RC4_128_SHA (TLS 1.2)"], "method": "derived",
        "connections": 0, "category": "vulnerability", "code": None, "severity": None,
        "details": {"accepted": [{"suite": "TLS_RSA_WITH_RC4_128_SHA", "version": "TLS 1.2"}]}}]


def test_text_section_shows_verdicts_and_the_evidence_of_vulnerable_ones() -> None:
    r = report({TLS12: GOOD12 + (RC4,)}, checks=expand(("rc4", "poodle")))
    r = AuditReport(r.host, r.port, versions=r.versions, suites=r.suites, checks=r.checks,
                    check_results=derive_checks(r))
    out = io.StringIO()
    render_audit(r, out, width=160)
    text = out.getvalue()
    assert "Vulnerability checks (read from the audit above, no connection of their own)" in text
    row = next(line for line in text.splitlines() if line.startswith("RC4 suites"))
    assert "vulnerable" in row and "the server accepts RC4 suites (1)" in row
    assert "TLS_RSA_WITH_RC4_128_SHA (TLS 1.2)" in text
    assert "not vulnerable" in next(line for line in text.splitlines()
                                    if line.startswith("SSL 3.0 with CBC"))
    plain = io.StringIO()
    render_audit(AuditReport(r.host, r.port, versions=r.versions, suites=r.suites), plain,
                 width=160)
    assert "Vulnerability" not in plain.getvalue()


def test_lucky13_states_cbc_suites_and_never_claims_a_timing_result() -> None:
    """testssl.sh's rule: CBC suites accepted in TLS 1.0-1.2 -> "potentially vulnerable"
    (inconclusive here: the timing side channel is not measured) with an info finding; no
    CBC suite on complete lists -> not vulnerable; lists not enumerated -> inconclusive
    without a finding. SSL 3.0 CBC is POODLE's, not this check's."""
    cbc = verdicts(report({TLS12: GOOD12 + (AES_CBC,), TLS10: (DES3,)}))["lucky13"]
    assert cbc.verdict is Verdict.inconclusive and cbc.code == "check.lucky13"
    assert cbc.severity == "info" and cbc.reason.startswith("potentially vulnerable")
    assert "does not measure" in cbc.reason
    assert cbc.evidence == ("TLS_RSA_WITH_AES_128_CBC_SHA (TLS 1.2)",
                            "TLS_RSA_WITH_3DES_EDE_CBC_SHA (TLS 1.0)")
    assert cbc.details == SuiteCheckDetails((
        AcceptedSuite("TLS_RSA_WITH_AES_128_CBC_SHA", "TLS 1.2"),
        AcceptedSuite("TLS_RSA_WITH_3DES_EDE_CBC_SHA", "TLS 1.0")))
    clean = verdicts(report({TLS13: (0x1301,), TLS12: GOOD12, SSL30: (AES_CBC,)}))["lucky13"]
    assert clean.verdict is Verdict.not_vulnerable and clean.code is None, clean
    assert clean.details == SuiteCheckDetails(())
    assert "TLS 1.1, TLS 1.0 refused" in clean.reason
    gap = verdicts(report({TLS12: GOOD12, TLS11: GOOD12}, incomplete=(TLS11,)))["lucky13"]
    assert gap.verdict is Verdict.inconclusive and gap.code is None and gap.details is None
    assert "TLS 1.1 cipher suite list incomplete" in gap.reason
