"""The grade caps and warnings of the rating that the numeric score cannot express: protocol
versions (SSL 3.0, TLS 1.0/1.1 at B, no TLS 1.2 at C, no TLS 1.3 a warning), suites (RC4,
64-bit blocks, export, anonymous, no forward secrecy, no AEAD), the vulnerability checks
(Heartbleed, CCS, Ticketbleed, ROBOT, POODLE, CRIME, insecure renegotiation, SSL 2.0), the
certificate (T, M, MD5, SHA-1) and HSTS (A+). Each rule names its source (docs/RATING.md);
a rule whose input was not established is an unknown, never a pass. Model values in,
`Notes` out.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.model.audit import AuditReport, Spoken
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.model.rating import Grade
from tlsprobe.policy.rating_scores import (
    GUIDE,
    SSL3,
    TESTSSL,
    TLS10,
    TLS11,
    TLS12,
    TLS13,
    Notes,
    speaks_sslv2,
    spoken_suites,
)

__all__ = ["HSTS_MIN_AGE", "certificate_rules", "check_rules", "hsts_rule", "suite_rules",
           "version_rules"]

#: the max-age SSL Labs asks for A+ (about six months)
HSTS_MIN_AGE = 15768000
_LEGACY = (TLS12, TLS11, TLS10, SSL3)
#: checks whose vulnerable verdict caps the grade: name, cap, rule, reason, source
_CHECK_CAPS = (
    ("heartbleed", Grade.F, "heartbleed", "vulnerable to Heartbleed (CVE-2014-0160)",
     f"SSL Labs 2014; {TESTSSL}"),
    ("ccs", Grade.F, "ccs_injection", "vulnerable to CCS injection (CVE-2014-0224)",
     f"SSL Labs 2014; {TESTSSL}"),
    ("ticketbleed", Grade.F, "ticketbleed", "vulnerable to Ticketbleed (CVE-2016-9244)",
     f"SSL Labs 2017; {TESTSSL}"),
    ("robot", Grade.F, "robot", "vulnerable to ROBOT (RSA padding oracle)",
     f"SSL Labs 2018; {TESTSSL}"),
    ("poodle", Grade.C, "poodle", "vulnerable to POODLE (SSL 3.0 with CBC suites)",
     f"SSL Labs 2014; {TESTSSL}"),
    ("compression", Grade.C, "crime", "TLS compression (CRIME, CVE-2012-4929)", TESTSSL),
    ("sslv2", Grade.F, "sslv2", "SSL 2.0 offered", f"SSL Labs 2014; {TESTSSL}"),
)


def _legacy_unknown(report: AuditReport) -> bool:
    """Whether some version up to TLS 1.2 may be spoken (the checks of TLS 1.2 and older
    then apply): spoken or not known; a TLS 1.3-only server needs none of them."""
    return any(report.version_spoken(v) is not Spoken.NO for v in _LEGACY)


def version_rules(report: AuditReport, notes: Notes) -> None:
    """SSL 3.0 and TLS 1.0/1.1 offered (B), neither TLS 1.2 nor 1.3 (C), no TLS 1.3 (a
    warning); an unknown version is an unknown of the cap it would bring."""
    said = {v.version.id: v.detail for v in report.versions}
    for version, name, rule, source in (
            (SSL3, "SSL 3.0", "ssl3_offered", TESTSSL + " (SSL Labs 2014, after POODLE)"),
            (TLS10, "TLS 1.0", "tls10_offered", f"SSL Labs 2020; {TESTSSL}"),
            (TLS11, "TLS 1.1", "tls11_offered", f"SSL Labs 2020; {TESTSSL}")):
        spoken = report.version_spoken(version)
        if spoken is Spoken.YES:
            notes.cap(Grade.B, rule, f"{name} offered", source,
                      f"versions: {name} {said.get(version) or 'spoken'}")
        elif spoken is Spoken.UNKNOWN:
            notes.unknown(rule, f"{name} support {_why_unknown(report, version)}", Grade.B)
    modern = [report.version_spoken(v) for v in (TLS13, TLS12)]
    if Spoken.YES not in modern and report.spoken_versions():
        if modern == [Spoken.NO, Spoken.NO]:
            notes.cap(Grade.C, "no_tls12", "neither TLS 1.2 nor TLS 1.3 offered",
                      f"SSL Labs 2014 (B), 2015 (C); {TESTSSL}",
                      "versions: TLS 1.2 and TLS 1.3 refused")
        else:
            notes.unknown("no_tls12", "TLS 1.2 and TLS 1.3 support not established", Grade.C)
    tls13 = report.version_spoken(TLS13)
    intolerant = _result(report, "tls13_intolerance")
    if tls13 is Spoken.NO and report.spoken_versions():
        notes.warn("no_tls13", "TLS 1.3 not offered", f"SSL Labs guide 2009r; {TESTSSL}",
                   "versions: TLS 1.3 refused")
    elif tls13 is Spoken.UNKNOWN and intolerant is not None and \
            intolerant.verdict is Verdict.not_tolerated:
        # a hello offering TLS 1.3 is refused or broken, the plain one answered: no client
        # that offers TLS 1.3 gets it (a conforming one does not fall back)
        notes.warn("no_tls13", "TLS 1.3 not usable: a hello offering it is not answered "
                   "as the protocol requires", f"SSL Labs guide 2009r; {TESTSSL}",
                   f"versions: TLS 1.3 {said.get(TLS13) or 'inconclusive'}",
                   f"check.tls13_intolerance: {intolerant.reason}")
    elif tls13 is Spoken.UNKNOWN:
        notes.unknown("no_tls13", f"TLS 1.3 support {_why_unknown(report, TLS13)}", None)


def _why_unknown(report: AuditReport, version: int) -> str:
    if "versions" not in report.checks:
        return "not established (versions not run)"
    return "inconclusive"


def suite_rules(report: AuditReport, notes: Notes) -> None:
    """RC4 (B; C in TLS 1.1 and later), 64-bit block ciphers in TLS 1.1 and later (C,
    SWEET32), export and anonymous suites (F), no forward secrecy (B), no AEAD (B)."""
    if "suites" not in report.checks:
        for rule, cap in (("rc4", Grade.B), ("sweet32", Grade.C), ("export", Grade.F),
                          ("no_forward_secrecy", Grade.B), ("no_aead", Grade.B)):
            notes.unknown(rule, f"{rule.replace('_', ' ')}: suites not run", cap)
        return
    suites = spoken_suites(report)

    def named(pairs: list[tuple[int, str]]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f"{n} ({_vname(v)})" for v, n in pairs))

    rc4 = [(v, s.name) for v, s in suites if s.is_rc4]
    if rc4:
        notes.cap(Grade.B, "rc4", "RC4 suites offered", f"SSL Labs 2015; {TESTSSL}",
                  *named(rc4))
    if [p for p in rc4 if p[0] >= TLS11]:
        notes.cap(Grade.C, "rc4_modern", "RC4 with TLS 1.1 or later", TESTSSL,
                  *named([p for p in rc4 if p[0] >= TLS11]))
    blocks64 = [(v, s.name) for v, s in suites if v >= TLS11 and s.cipher in
                ("3DES", "DES", "IDEA", "RC2")]
    if blocks64:
        notes.cap(Grade.C, "sweet32", "64-bit block ciphers with TLS 1.1 or later (SWEET32)",
                  f"SSL Labs 2017; {TESTSSL}", *named(blocks64))
    for attr, rule, reason in (("is_export", "export", "export suites offered"),
                               ("is_anon", "anonymous", "anonymous suites offered"),
                               ("is_null", "null", "NULL encryption offered")):
        hit = [(v, s.name) for v, s in suites if getattr(s, attr)]
        if hit:
            notes.cap(Grade.F, rule, reason, f"{GUIDE} (score 0 or 40); {TESTSSL}", *named(hit))
    _fs_and_aead(report, suites, notes)


def _vname(version: int) -> str:
    return registry.version_name(version)


def _fs_and_aead(report: AuditReport, suites: list[tuple[int, registry.CipherSuite]],
                 notes: Notes) -> None:
    """No suite with forward secrecy (B), no AEAD suite (B): absences, so each rests on
    complete suite lists of every version that may be spoken."""
    whole = all(a.complete for a in report.suites) and not report.unknown_versions()
    for rule, attr, reason, source in (
            ("no_forward_secrecy", "forward_secret", "no forward secrecy",
             f"SSL Labs 2017-2018; {TESTSSL}"),
            ("no_aead", "is_aead", "no AEAD suites", TESTSSL)):
        if any(getattr(s, attr) or (attr == "forward_secret" and s.is_tls13)
               for _, s in suites):
            continue
        if whole and suites:
            notes.cap(Grade.B, rule, reason, source,
                      f"suites: none of {len(suites)} accepted suite(s)")
        else:
            notes.unknown(rule, f"{reason}: suite lists incomplete", Grade.B)


def _result(report: AuditReport, name: str) -> CheckResult | None:
    return next((r for r in report.check_results if r.name == name), None)


def _check_unknown(report: AuditReport, name: str, result: CheckResult | None
                   ) -> tuple[str, str] | None:
    """Why a check's verdict is not established (a few words, and what the check said), or
    None when it is."""
    if result is None:
        return f"{name} not run", ""
    if result.verdict is Verdict.inconclusive:
        return f"{name} inconclusive", result.reason
    return None


def check_rules(report: AuditReport, notes: Notes) -> None:
    """The vulnerability checks' caps; insecure renegotiation (F) and no secure
    renegotiation (a warning). A check not run or inconclusive is an unknown of its cap,
    unless what it is about cannot be there (SSL 3.0 refused: no POODLE; TLS 1.3 only: none
    of the TLS 1.2 and older checks)."""
    legacy = _legacy_unknown(report)
    for name, cap, rule, reason, source in _CHECK_CAPS:
        result = _result(report, name)
        if result is not None and result.verdict is Verdict.vulnerable:
            notes.cap(cap, rule, reason, source, f"check.{name}: {result.reason}")
            continue
        if name == "poodle" and report.version_spoken(SSL3) is Spoken.NO:
            continue
        if name == "sslv2" and speaks_sslv2(report) is Spoken.NO:
            continue
        why = _check_unknown(report, name, result)
        if why is not None and (legacy or name == "sslv2"):
            notes.unknown(rule, why[0], cap, why[1])
    if legacy:
        _renegotiation(report, notes)


def _insecure(details: object) -> bool:
    """Whether client_renegotiation's details say its renegotiation was not RFC 5746's
    (the details types are imported with the checks that made them: scan's start-up)."""
    if details is None:
        return False
    from tlsprobe.model.check_details import RenegotiationsDetails
    return isinstance(details, RenegotiationsDetails) and not details.secure


def _renegotiation(report: AuditReport, notes: Notes) -> None:
    secure = _result(report, "renegotiation")
    client = _result(report, "client_renegotiation")
    if client is not None and client.verdict is Verdict.vulnerable and \
            _insecure(client.details):
        notes.cap(Grade.F, "insecure_renegotiation", "insecure client-initiated "
                  "renegotiation (CVE-2009-3555)", "SSL Labs rating guide (insecure renegotiation: F)",
                  f"check.client_renegotiation: {client.reason}")
    elif secure is not None and secure.verdict is Verdict.supported:
        pass    # RFC 5746 binds every renegotiation: nothing insecure to find
    elif (why := _check_unknown(report, "client_renegotiation", client)) is not None:
        notes.unknown("insecure_renegotiation", why[0], Grade.F, why[1])
    if secure is not None and secure.verdict is Verdict.not_supported:
        notes.warn("no_secure_renegotiation", "secure renegotiation (RFC 5746) not "
                   "supported", f"SSL Labs 2014; {TESTSSL}",
                   f"check.renegotiation: {secure.reason}")
    elif (why := _check_unknown(report, "renegotiation", secure)) is not None:
        notes.unknown("no_secure_renegotiation", why[0], None, why[1])


#: certificate findings and the grade they bring: code -> (grade, rule, reason, source)
_CERT_CAPS = {
    "certificate.expired": (Grade.T, "cert_expired", "certificate expired",
                            f"{GUIDE} (certificate step); {TESTSSL}"),
    "certificate.not_yet_valid": (Grade.T, "cert_not_yet_valid", "certificate not yet valid",
                                  f"{GUIDE} (certificate step)"),
    "certificate.self_signed": (Grade.T, "cert_self_signed", "self-signed certificate",
                                f"{GUIDE} (certificate step); {TESTSSL}"),
    "certificate.untrusted": (Grade.T, "cert_untrusted", "certificate chain not trusted",
                              f"{GUIDE} (certificate step); {TESTSSL}"),
    "certificate.hostname_mismatch": (Grade.M, "cert_mismatch", "certificate name mismatch",
                                      f"{GUIDE} (certificate step); {TESTSSL}"),
    "certificate.md5_signature": (Grade.F, "cert_md5", "certificate signed with MD5",
                                  f"SSL Labs 2014; {TESTSSL}"),
    "certificate.sha1_signature": (Grade.T, "cert_sha1", "certificate signed with SHA-1",
                                   f"SSL Labs 2017; {TESTSSL}"),
}


def certificate_rules(report: AuditReport, notes: Notes) -> None:
    """The certificate findings of every chain the server presents (the default one and
    each other key type's: a client may get any of them, so the worst caps the grade; a
    policy's waiver does not change the rating): not trusted, expired, self-signed T; name
    mismatch M; MD5 F; SHA-1 T. A chain not verified (--no-verify, no trust store) is an
    unknown of T, and so are the other key types' chains when their search was not
    established (`AuditReport.other_certificates_note`)."""
    for finding in report.findings + report.waived:
        hit = _CERT_CAPS.get(finding.code)
        if hit is not None:
            notes.cap(hit[0], hit[1], hit[2], hit[3], f"{finding.code}: {finding.message}")
    if "cert" not in report.checks:
        notes.unknown("cert_trust", "certificate trust not established (cert not run)",
                      Grade.T)
        return
    chains = [("", report.trust)]
    chains += [(f"{c.key_type} certificate: ", c.trust) for c in report.other_certificates]
    for label, trust in chains:     # one unknown: the first chain not verified says why
        if trust is None or trust.status == "not_checked":
            detail = trust.detail if trust is not None else "no certificate"
            notes.unknown("cert_trust", "certificate chain not verified", Grade.T,
                          label + detail)
            break
    if report.other_certificates_note is not None:
        notes.unknown("cert_other_chains", "certificates of other key types not established "
                      "(their trust and key sizes)", Grade.T, report.other_certificates_note)


def hsts_rule(report: AuditReport, notes: Notes) -> bool:
    """Whether HSTS with a max-age of at least HSTS_MIN_AGE was seen (the guide's A+
    condition); a shorter max-age, max-age=0 or an invalid header is a warning; the hsts
    check not run or inconclusive an unknown that could only change A+."""
    result = _result(report, "hsts")
    why = _check_unknown(report, "hsts", result)
    if why is not None:
        notes.unknown("hsts", why[0], None, why[1])
        return False
    details = result.details if result is not None else None
    if details is None:
        return False        # no header, or not HTTP: no A+, and no warning (the guide)
    from tlsprobe.model.check_details import HstsDetails  # imported with the checks
    if not isinstance(details, HstsDetails) or details.header is None:
        return False        # no header, or not HTTP: no A+, and no warning (the guide)
    source = f"SSL Labs 2014: A+ needs long HSTS; {TESTSSL}"
    evidence = f"check.hsts: Strict-Transport-Security: {details.header}"
    if details.max_age is None:
        notes.warn("hsts_invalid", "HSTS header without a valid max-age", source, evidence)
    elif details.max_age == 0:
        notes.warn("hsts_disabled", "HSTS switched off (max-age=0)", source, evidence)
    elif details.max_age < HSTS_MIN_AGE:
        notes.warn("hsts_short", f"HSTS max-age {details.max_age} s is under "
                   f"{HSTS_MIN_AGE} s (six months)", source, evidence)
    else:
        return True
    return False
