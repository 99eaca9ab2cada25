"""No verdict row contradicts a finding (or a fact) of the same report (issue 30, 2.10).

The derived checks (tlsprobe/policy/checks.py) run over audit models built here, beside the
built-in findings of the same model (policy/findings.py); a negative row ("not vulnerable",
"not applicable") must never sit beside a finding that says the opposite:
  - `dh` beside `dh.not_prime` (a composite modulus of 2048 bits or more said "not
    vulnerable"), beside `dh.weak`, or beside a custom modulus whose primality was not
    checked (`dh.custom`, "primality not checked": not established);
  - `dh` "no DHE key exchange" beside DHE suites the TLS 1.2 suite audit accepted;
  - each suite check beside a `suite.weak` finding naming a suite it is about.
And an active one against a scripted server: ROBOT's "not vulnerable" when every probe,
the valid one included, timed out.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.checks.test_checks_derived import (ANON, DES3, DHE12, EXP_DHE, EXP_RSA, GOOD12, NULL13, RC4,
                                 TLS10, TLS12, TLS13, fixed, report)
from tlsprobe import registry
from tlsprobe.commands.scan import parse_checks
from tlsprobe.model.audit import AuditReport, DheAudit, Finding
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.tcp import Target
from tlsprobe.probes.checks.derived import DERIVED, SUITE_CHECKS, derive_checks
from tlsprobe.policy.findings import builtin_findings
from tlsprobe.probes.audit.run import AuditOptions, run_audit
from tlsprobe.probes.audit.scheduler import Scheduler

NEGATIVE = (Verdict.not_vulnerable, Verdict.not_applicable)
BY_NAME = {s.name: s for s in registry.all_suites()}


def contradictions(r: AuditReport, results: tuple[CheckResult, ...],
                   findings: list[Finding]) -> list[str]:
    """Each negative row of `results` that a finding (or a fact) of `r` contradicts."""
    out = []
    for c in results:
        if c.verdict not in NEGATIVE:
            continue
        against: list[str] = []
        if c.name == "dh":
            against += [f.code for f in findings if f.code in ("dh.weak", "dh.not_prime") or
                        f.code == "dh.custom" and "primality not checked" in f.message]
            a12 = r.suite_audit(TLS12)
            against += [f"DHE suite {s.iana_name} accepted in TLS 1.2"
                        for s in (a12.supported if a12 else ())
                        if (info := registry.cipher_suite(s.id)) and info.kx == "DHE"]
        elif c.name in SUITE_CHECKS:
            spec = SUITE_CHECKS[c.name]
            for f in findings:
                if f.code != "suite.weak":
                    continue
                version = next((v for v in spec.versions
                                if registry.version_name(v) == f.version), None)
                suites = [BY_NAME.get(n) for n in f.items]
                if version is not None and any(s is not None and spec.wants(s)
                                               for s in suites):
                    against.append(f"{f.code} {f.items}")
        out += [f"{c.name} {c.verdict.value} beside {a}" for a in against]
    return out


CASES: dict[str, Callable[[], AuditReport]] = {
    "composite modulus, 3482 bits": lambda: report(dhe=fixed(
        "unknown 3482-bit modulus", 3482, prime="composite")),
    "composite modulus, 2048 bits, to a client without ffdhe": lambda: report(dhe=fixed(
        "unknown 2048-bit modulus", 2048, prime="composite", status="rfc7919",
        negotiated=(0x100,))),
    "composite modulus, 1024 bits": lambda: report(dhe=fixed(
        "unknown 1024-bit modulus", 1024, prime="composite")),
    "custom modulus, primality not checked": lambda: report(dhe=fixed(
        "unknown 9000-bit modulus", 9000, prime="unchecked")),
    "1024-bit well-known prime": lambda: report(dhe=fixed("modp_1024", 1024, "RFC 2409",
                                                         "known")),
    "DHE refused by the group audit, accepted by the suite audit": lambda: report(
        {TLS13: (0x1301,), TLS12: GOOD12 + (DHE12,)}, dhe=DheAudit("none")),
    "weak suites in every version": lambda: report(
        {TLS13: (0x1301, NULL13), TLS12: GOOD12 + (RC4, DES3, ANON, EXP_RSA, EXP_DHE),
         TLS10: (DES3,)}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_no_derived_verdict_contradicts_a_finding_of_the_same_report(case: str) -> None:
    r = CASES[case]()
    results = derive_checks(r)
    assert [c.name for c in results] == list(DERIVED)
    found = builtin_findings(r)
    assert not contradictions(r, results, found), (contradictions(r, results, found),
                                                   [(f.code, f.message) for f in found])
    dh = next(c for c in results if c.name == "dh")
    if "composite" in case:
        assert dh.verdict is Verdict.vulnerable and "not prime" in dh.reason, dh
        assert "dh.not_prime" in {f.code for f in found}
    if "not checked" in case:
        assert dh.verdict is Verdict.inconclusive and "not checked" in dh.reason, dh
    if "suite audit" in case:
        assert dh.verdict is Verdict.inconclusive and \
            dh.evidence == ("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256 (TLS 1.2)",), dh


def test_robot_with_every_probe_timed_out_is_inconclusive(
        script_server: Callable[..., int]) -> None:
    """A server that goes silent after its flight (tests/checks/scripted_tls_server.py
    --after silent): ten timeouts, the valid probe's among them, are no answer to compare
    ("not vulnerable: alike (timeout)" before)."""
    port = script_server("scripted_tls_server.py", "--mode", "plain", "--after", "silent")
    r = run_audit([Target("127.0.0.1", port)], AuditOptions(checks=parse_checks("robot")),
                  Scheduler(retries=0, timeout=1.0))[0]
    c = next(c for c in r.check_results if c.name == "robot")
    assert c.verdict is Verdict.inconclusive, c
    assert "none of the five ClientKeyExchange probes was answered" in c.reason
    assert "valid: timeout" in c.evidence[1] and c.connections == 10
