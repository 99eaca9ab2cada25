"""Vulnerability checks derived from what the audit already enumerated (no extra connection).

POODLE, FREAK, Logjam, DH parameters, RC4, SWEET32, BEAST, NULL and anonymous suites: each
is a question about the protocol versions, cipher suites and DHE parameters (the group
audit's: TLS 1.2's, or the highest older version's on a server without TLS 1.2) that
`scan` enumerates anyway, so the verdict is read off the AuditReport: model values in,
`CheckResult`s out (their findings: policy/checks.py). Each is a `DerivedCheck` of CHECKS,
the shape of every check (probes/checks/base.py) with the audit report for a context:
name, title, `judge(report)`, details type (model/check_details.py: the accepted suites the
suite checks are about, the DH parameters and groups).

Why here, beside the active checks, and not in policy/: they are checks of the same catalog
(model/check_catalog.py DERIVED), asked for with the same `--checks`, and give the same
CheckResult; policy/ keeps only what turns any check's verdict into findings.

Honesty rules: `vulnerable` when a suite (or parameter) it is about was accepted, whatever
else is unknown; `not vulnerable` only when every version the check is about was either
refused or had its suite list enumerated completely (or, for DH, its parameters read: and
a custom modulus checked prime); otherwise `inconclusive`, saying which version or phase
was not established. A verdict never contradicts a finding of the same report: a DH
modulus that is not prime (`dh.not_prime`) is `vulnerable`, DHE suites the TLS 1.2 suite
audit accepted are never "no DHE key exchange".

Findings: the facts behind most of these checks already have a finding of their own
(`suite.weak` for NULL, anonymous, export, RC4, DES and 3DES suites; `dh.weak` for DH
parameters under 2048 bits), so those checks add none; POODLE and BEAST, which no other
finding covers, add `check.poodle` and `check.beast`.

LUCKY13 (CVE-2013-0169) is a timing side channel of the CBC MAC-then-encrypt record check:
no scanner can see it from the outside without a timing attack, and tlsprobe makes none. Its
rule is testssl.sh's: CBC suites accepted in TLS 1.0-1.2 make the server "potentially
vulnerable" (whether it leaks depends on its TLS library being patched, as every major one
was in 2013), which tlsprobe states as `inconclusive` with an informational finding
(`check.lucky13`); no CBC suite in complete suite lists: not vulnerable; suites not
enumerated: inconclusive without a finding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from tlsprobe import registry
from tlsprobe.model import check_catalog as catalog
from tlsprobe.model.audit import AuditReport, DheAudit, GroupAudit
from tlsprobe.model.check_details import (
    AcceptedSuite,
    CheckDetails,
    DhDetails,
    SuiteCheckDetails,
)
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.policy.checks import OWN_FINDINGS
from tlsprobe.registry.model import CipherSuite

SSL30, TLS10, TLS11, TLS12, TLS13 = 0x0300, 0x0301, 0x0302, 0x0303, 0x0304
LEGACY = (TLS12, TLS11, TLS10, SSL30)           # versions with pre-TLS 1.3 suites
ALL = (TLS13, *LEGACY)
SMALL_BLOCK = frozenset({"3DES", "DES", "IDEA", "RC2"})   # 64-bit block ciphers

__all__ = ["ALIASES", "CHECKS", "DERIVED", "PREREQUISITES", "SUITE_CHECKS", "DerivedCheck",
           "derive_checks", "expand"]


@dataclass(frozen=True)
class DerivedCheck:
    """A check read off the audit: `name` as in model/check_catalog.py DERIVED, `title` for
    people, `judge` the verdict on an AuditReport, `details` its results' details type."""

    name: str
    title: str
    judge: Callable[[AuditReport], CheckResult]
    details: type[CheckDetails]


@dataclass(frozen=True)
class _SuiteCheck:
    """A check that asks: is any suite of `versions` with property `wants` accepted?"""

    title: str
    versions: tuple[int, ...]
    wants: Callable[[CipherSuite], bool]
    what: str                   # "RC4 suites", for the reason


SUITE_CHECKS: dict[str, _SuiteCheck] = {
    "poodle": _SuiteCheck("SSL 3.0 with CBC suites (POODLE, CVE-2014-3566)", (SSL30,),
                          lambda s: s.is_cbc, "CBC suites in SSL 3.0"),
    "freak": _SuiteCheck("export RSA suites (FREAK, CVE-2015-0204)", LEGACY,
                         lambda s: s.export and s.kx == "RSA", "export RSA suites"),
    "logjam": _SuiteCheck("export DHE suites (Logjam, CVE-2015-4000)", LEGACY,
                          lambda s: s.export and s.kx in ("DHE", "DH"), "export DH(E) suites"),
    "rc4": _SuiteCheck("RC4 suites (RFC 7465)", LEGACY, lambda s: s.is_rc4, "RC4 suites"),
    "sweet32": _SuiteCheck("64-bit block ciphers: 3DES, DES, IDEA, RC2 (SWEET32, "
                           "CVE-2016-2183)", LEGACY, lambda s: s.cipher in SMALL_BLOCK,
                           "64-bit block cipher suites"),
    "beast": _SuiteCheck("CBC suites in TLS 1.0 and SSL 3.0 (BEAST, CVE-2011-3389)",
                         (TLS10, SSL30), lambda s: s.is_cbc, "CBC suites in TLS 1.0 or SSL 3.0"),
    "null": _SuiteCheck("NULL encryption suites", ALL, lambda s: s.is_null,
                        "NULL encryption suites"),
    "anon": _SuiteCheck("anonymous suites (no server authentication)", LEGACY,
                        lambda s: s.is_anon and not s.is_null and not s.is_scsv,
                        "anonymous suites"),
}
LUCKY13_TITLE = "CBC suites in TLS 1.0-1.2 (LUCKY13, CVE-2013-0169; not a timing test)"
LUCKY13_VERSIONS = (TLS12, TLS11, TLS10)
DH_TITLE = "DHE parameters under 2048 bits, a well-known shared prime under 2048 bits, or a " \
    "modulus that is not prime"

#: the audit phases (`scan --checks` names) a derived check reads
PREREQUISITES = {**{name: ("versions", "suites") for name in SUITE_CHECKS},
                 "dh": ("versions", "groups", "suites"), "lucky13": ("versions", "suites")}


def expand(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` with aliases replaced and the audit phases the derived checks read added
    (in the order given, each once)."""
    out: list[str] = []
    for name in names:
        for item in ALIASES.get(name, (name,)):
            out += [*PREREQUISITES.get(item, ()), item]
    return tuple(dict.fromkeys(out))


def derive_checks(report: AuditReport) -> tuple[CheckResult, ...]:
    """The verdicts of the derived checks asked for in `report.checks`, in DERIVED order."""
    asked = set(report.checks)
    return tuple(check.judge(report) for name, check in CHECKS.items() if name in asked)


def _version_gap(report: AuditReport, version: int) -> str | None:
    """Why the suites of `version` are not known conclusively (None: they are, or the
    version is refused). The suite list is read from the audit of that version."""
    name = registry.version_name(version)
    support = next((v for v in report.versions if v.version.id == version), None)
    if support is None:
        return f"{name} support not tested"
    if support.status == "not_supported":
        return None
    if support.status != "supported":
        return f"{name} support not established ({support.detail})"
    audit = report.suite_audit(version)
    if audit is None:
        return f"{name} cipher suites not audited"
    if not audit.complete:
        notes = "; ".join(audit.notes)
        return f"{name} cipher suite list incomplete" + (f" ({notes})" if notes else "")
    return None


def _accepted(report: AuditReport, versions: tuple[int, ...],
              wants: Callable[[CipherSuite], bool]) -> list[AcceptedSuite]:
    """Each accepted suite of `versions` with property `wants` (the evidence shows them as
    'SUITE (VERSION)')."""
    hits = []
    for version in versions:
        audit = report.suite_audit(version)
        if audit is None:
            continue
        for c in audit.supported:
            suite = registry.cipher_suite(c.id)
            if suite is not None and wants(suite):
                hits.append(AcceptedSuite(c.iana_name, audit.version.name))
    return hits


def _shown(hits: list[AcceptedSuite]) -> tuple[str, ...]:
    return tuple(f"{h.suite} ({h.version})" for h in hits)


def _suite_check(name: str, spec: _SuiteCheck, report: AuditReport) -> CheckResult:
    hits = _accepted(report, spec.versions, spec.wants)
    details = SuiteCheckDetails(tuple(hits))
    if hits:
        own = OWN_FINDINGS.get(name)
        return CheckResult(name, spec.title, Verdict.vulnerable,
                           f"the server accepts {spec.what} ({len(hits)})", _shown(hits),
                           code=own[0] if own else None, severity=own[1] if own else None,
                           details=details)
    gaps = [g for g in (_version_gap(report, v) for v in spec.versions) if g]
    if gaps:
        return CheckResult(name, spec.title, Verdict.inconclusive,
                           f"no {spec.what} seen, but " + "; ".join(gaps), tuple(gaps))
    return CheckResult(name, spec.title, Verdict.not_vulnerable,
                       f"no {spec.what}: {_basis(report, spec.versions)}",
                       tuple(_facts(report, spec.versions)), details=details)


def _lucky13(report: AuditReport) -> CheckResult:
    """LUCKY13 by testssl.sh's rule (see the module docstring): CBC suites accepted in TLS
    1.0-1.2 are stated, never judged exploitable; none on complete lists: not vulnerable."""
    hits = _accepted(report, LUCKY13_VERSIONS, lambda s: s.is_cbc)
    details = SuiteCheckDetails(tuple(hits))
    if hits:
        code, severity = OWN_FINDINGS["lucky13"]
        return CheckResult("lucky13", LUCKY13_TITLE, Verdict.inconclusive,
                           f"potentially vulnerable: the server accepts CBC suites in TLS "
                           f"1.0-1.2 ({len(hits)}); LUCKY13 is a timing side channel of their "
                           "MAC-then-encrypt record check, which this check does not measure: "
                           "whether it leaks depends on the server's TLS library being "
                           "patched (2013 and later)", _shown(hits), code=code,
                           severity=severity, details=details)
    gaps = [g for g in (_version_gap(report, v) for v in LUCKY13_VERSIONS) if g]
    if gaps:
        return CheckResult("lucky13", LUCKY13_TITLE, Verdict.inconclusive,
                           "no CBC suites in TLS 1.0-1.2 seen, but " + "; ".join(gaps),
                           tuple(gaps))
    return CheckResult("lucky13", LUCKY13_TITLE, Verdict.not_vulnerable,
                       f"no CBC suites in TLS 1.0-1.2: {_basis(report, LUCKY13_VERSIONS)}",
                       tuple(_facts(report, LUCKY13_VERSIONS)), details=details)


def _refused(report: AuditReport) -> str:
    """How a version not spoken is said: refused by the server, or (over QUIC, which
    carries TLS 1.3 only, RFC 9001 4.2) never asked for."""
    return "not carried over QUIC" if report.transport == "quic" else "refused"


def _facts(report: AuditReport, versions: tuple[int, ...]) -> list[str]:
    """What a `not vulnerable` verdict rests on, per version."""
    out = []
    for version in versions:
        audit = report.suite_audit(version)
        name = registry.version_name(version)
        if audit is not None and version in report.spoken_versions():
            out.append(f"{name}: {len(audit.supported)} suite(s) accepted, list complete")
        else:
            out.append(f"{name}: {_refused(report)}")
    return out


def _basis(report: AuditReport, versions: tuple[int, ...]) -> str:
    spoken = [registry.version_name(v) for v in versions if v in report.spoken_versions()]
    refused = [registry.version_name(v) for v in versions if v not in report.spoken_versions()]
    parts = [f"the complete suite list of {', '.join(spoken)} has none"] if spoken else []
    parts += [f"{', '.join(refused)} {_refused(report)}"] if refused else []
    return "; ".join(parts)


def _dhe_elsewhere(report: AuditReport, older: tuple[int, ...]
                   ) -> tuple[list[AcceptedSuite], list[str]]:
    """DHE suites accepted in the `older` versions (whose parameters only the suite audit
    reads, unchecked for primality), and why that is not known for a version."""
    hits = _accepted(report, older, lambda s: s.kx == "DHE")
    gaps = [g for g in (_version_gap(report, v) for v in older) if g]
    return hits, gaps


def _dh_source(report: AuditReport) -> GroupAudit | None:
    """The group audit whose DH parameters the check judges: TLS 1.2's, or, on a server
    that does not speak TLS 1.2, the older version's (probes/audit/run.py _older_groups)."""
    g12 = report.group_audit(TLS12)
    older = next((g for g in report.ske_group_audits() if g.version.id < TLS12), None)
    return older if older is not None and (g12 is None or g12.spoken is False) else g12


def _dh_check(report: AuditReport) -> CheckResult:
    """DHE parameters: read from the group audit (ServerKeyExchange) of TLS 1.2, or of the
    highest older version on a server without TLS 1.2."""
    def result(verdict: Verdict, reason: str, evidence: tuple[str, ...] = ()) -> CheckResult:
        return CheckResult("dh", DH_TITLE, verdict, reason, evidence)

    g = _dh_source(report)
    name, version = (g.version.name, g.version.id) if g is not None else ("TLS 1.2", TLS12)
    dhe = g.dhe if g is not None else None
    small = _small_suite_dh(report)
    if dhe is not None and dhe.status in ("fixed", "rfc7919"):
        judged = _dh_parameters(dhe, name)
        return judged if judged.verdict is Verdict.vulnerable or small is None else small
    if small is not None:   # vulnerable whatever else is unknown
        return small
    if dhe is not None and dhe.status == "none" or g is not None and g.spoken is False:
        if report.transport == "quic":   # never asked: QUIC carries TLS 1.3 only
            return result(Verdict.not_applicable, "no DHE key exchange: TLS 1.2 and older "
                          "versions are not carried over QUIC")
        older = tuple(v for v in (TLS11, TLS10, SSL30) if v < version)
        hits, gaps = _dhe_elsewhere(report, older)
        where = "TLS 1.2 is not spoken" if dhe is None else \
            ("TLS 1.2 is not spoken and " if version < TLS12 else "") + \
            f"the server refuses every DHE offer in {name}"
        here = _accepted(report, (version,), lambda s: s.kx == "DHE")
        if here:   # the suite audit saw what the group audit did not
            return result(Verdict.inconclusive, f"the group audit found that {where}, but the "
                          f"{name} suite audit saw DHE suites accepted; "
                          + _suite_dh_sizes(report, (version,), name), _shown(here))
        if hits:
            return result(Verdict.inconclusive, f"{where}, but it accepts DHE suites in older "
                          "versions; " + _suite_dh_sizes(report, older, name), _shown(hits))
        if gaps:
            return result(Verdict.inconclusive, f"{where}; " + "; ".join(gaps), tuple(gaps))
        return result(Verdict.not_applicable, f"no DHE key exchange: {where} and no older "
                      "version accepts a DHE suite")
    if g is None:
        return result(Verdict.inconclusive, "the TLS 1.2 group audit did not run")
    if dhe is None:
        why = "; ".join(g.notes) or f"{name} DHE not audited"
        return result(Verdict.inconclusive, why)
    return result(Verdict.inconclusive, f"{name} DHE parameters not established "
                  f"({dhe.status}{': ' + '; '.join(dhe.notes) if dhe.notes else ''})")


def _small_suite_dh(report: AuditReport) -> CheckResult | None:
    """`vulnerable` when an accepted DHE suite's own ServerKeyExchange (read by the suite
    audit, AuditReport.suite_kx_rows) carried a prime under 2048 bits, else None."""
    small = [(audit, row, bits) for audit, row, bits in report.suite_dh_rows() if bits < 2048]
    if not small:
        return None
    sizes = sorted({bits for _, _, bits in small})
    versions = list(dict.fromkeys(audit.version.name for audit, _, _ in small))
    bits = " and ".join(f"{b}-bit" for b in sizes)
    return CheckResult("dh", DH_TITLE, Verdict.vulnerable, f"the server sends a {bits} DH "
                       f"modulus with DHE suites in {', '.join(versions)} (each suite's "
                       "ServerKeyExchange, read by the suite audit)",
                       tuple(f"{row.suite.iana_name} ({audit.version.name})"
                             for audit, row, _ in small))


def _suite_dh_sizes(report: AuditReport, versions: tuple[int, ...], checked: str) -> str:
    """What the suite audit read of the DH parameters of `versions`' DHE suites (`checked`:
    the version whose group audit checks its DH parameters)."""
    sizes = sorted({bits for audit, _, bits in report.suite_dh_rows()
                    if audit.version.id in versions})
    if not sizes:
        return "their DH parameters were not read"
    return (f"their ServerKeyExchange carried a {' and a '.join(map(str, sizes))}-bit DH "
            f"modulus, not checked prime (only {checked}'s DH parameters are)")


def _group_bits(name: str) -> int:
    """The size of an RFC 7919 group ("ffdhe2048" -> 2048; 0 for a private codepoint)."""
    return int(name[5:]) if name.startswith("ffdhe") and name[5:].isdigit() else 0


def _dh_parameters(dhe: DheAudit, version: str) -> CheckResult:
    """The verdict on what a DHE server sends in `version` (TLS 1.2, or the older version
    audited): fixed parameters (to every client, or to one that lists no ffdhe group) and
    the RFC 7919 groups it negotiates."""
    sizes = [(g.name, _group_bits(g.name)) for g in dhe.negotiated]
    p = dhe.fixed
    details = DhDetails(p.bits if p else None, p.standard if p else None,
                        p.prime if p else None, tuple(n for n, _ in sizes),
                        min((b for _, b in sizes if b), default=None))

    def result(verdict: Verdict, reason: str, evidence: tuple[str, ...]) -> CheckResult:
        return CheckResult("dh", DH_TITLE, verdict, reason, evidence, details=details)

    small = [f"{n} ({version})" for n, b in sizes if b < 2048]
    if p is not None:
        shared = f", the well-known shared {p.standard} prime" if p.standard else ""
        when = "whatever the client offers" if dhe.status == "fixed" else \
            "to a client that lists no ffdhe group"
        if version != "TLS 1.2":   # a server without TLS 1.2: name the version audited
            when = f"in {version}, {when}"
        evidence = (f"{p.label()} ({version})", *small)
        if p.prime == "composite":   # the finding dh.not_prime says the same (high)
            return result(Verdict.vulnerable, f"the server sends a {p.bits}-bit DH modulus "
                          f"that is not prime ({p.prime_detail}) {when}: the discrete "
                          "logarithm splits over its factors", evidence)
        if p.bits < 2048:
            word = "prime" if p.standard or p.prime in ("known", "safe", "not_safe") \
                else "modulus"
            return result(Verdict.vulnerable, f"the server sends a {p.bits}-bit DH "
                          f"{word}{shared} {when}", evidence)
    if small:   # no RFC 7919 group is under 2048 bits: a private codepoint with its name
        return result(Verdict.vulnerable, "the server negotiates DH groups under 2048 bits",
                      tuple(small))
    if p is not None and p.prime == "unchecked" and p.standard is None:
        return result(Verdict.inconclusive, f"the server sends a custom {p.bits}-bit DH "
                      f"modulus {when}, whose primality was not checked ({p.prime_detail})",
                      (f"{p.label()} ({version})", *(n for n, _ in sizes)))
    if p is not None:
        return result(Verdict.not_vulnerable, f"the server sends {p.bits}-bit DH "
                      f"parameters{shared} {when}"
                      + (" and negotiates RFC 7919 groups of 2048 bits or more" if sizes
                         else ""), (f"{p.label()} ({version})", *(n for n, _ in sizes)))
    if dhe.legacy_refused:
        return result(Verdict.not_vulnerable, "the server negotiates RFC 7919 groups of 2048 "
                      "bits or more and refuses DHE to a client that lists no ffdhe group",
                      tuple(n for n, _ in sizes))
    return result(Verdict.inconclusive, "the server negotiates RFC 7919 groups of 2048 bits "
                  "or more with a client that lists them; what it sends to a client that "
                  "lists no ffdhe group was not seen", tuple(n for n, _ in sizes))


#: every derived check, in report order (model/check_catalog.py DERIVED)
CHECKS: dict[str, DerivedCheck] = {
    name: DerivedCheck("dh", DH_TITLE, _dh_check, DhDetails) if name == "dh" else
    DerivedCheck("lucky13", LUCKY13_TITLE, _lucky13, SuiteCheckDetails) if name == "lucky13"
    else DerivedCheck(name, SUITE_CHECKS[name].title,
                      partial(_suite_check, name, SUITE_CHECKS[name]), SuiteCheckDetails)
    for name in catalog.DERIVED}
DERIVED = tuple(CHECKS)
#: `scan --checks` names that stand for several checks
ALIASES = {"vulns": DERIVED}
