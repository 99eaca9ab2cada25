"""The three numeric categories of the SSL Labs rating guide (2009), from an AuditReport:
protocol support (30 %), key exchange (30 %) and cipher strength (40 %), each with the caps
its own facts bring (an insecure key, a suite under 112 bits, SSL 3.0 as the best protocol)
and the rules it could not apply. Model values in, `Notes` out (policy/rating.py assembles
the Rating); the tables and where they come from: docs/RATING.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tlsprobe import registry
from tlsprobe.model.audit import AuditReport, Spoken
from tlsprobe.model.checks import Verdict
from tlsprobe.model.rating import (
    Grade,
    RatingCap,
    RatingUnknown,
    RatingWarning,
    SubScore,
)

__all__ = ["GUIDE", "TESTSSL", "Notes", "cipher_strength", "key_exchange", "protocol_support",
           "spoken_suites"]

GUIDE = "SSL Labs rating guide 2009"        # the numeric method and the original tables
TESTSSL = "testssl.sh run_rating / set_grade_cap"
SSL2, SSL3, TLS10, TLS11, TLS12, TLS13 = 0x0002, 0x0300, 0x0301, 0x0302, 0x0303, 0x0304
#: protocol points of the guide (TLS 1.3, which it predates, scores as TLS 1.2 as in 2009r)
VERSION_POINTS = {TLS13: 100, TLS12: 100, TLS11: 95, TLS10: 90, SSL3: 80, SSL2: 0}
WEIGHTS = {"protocol_support": 30, "key_exchange": 30, "cipher_strength": 40}
#: curve sizes for groups whose name carries none (the rest: the digits of the name)
_EC_BITS = {0x001D: 253, 0x001E: 448, 0x11EC: 253, 0x11EB: 256, 0x11ED: 384}


@dataclass
class Notes:
    """What the rules found while rating one report (assembled into a Rating)."""

    caps: list[RatingCap] = field(default_factory=list)
    warnings: list[RatingWarning] = field(default_factory=list)
    unknowns: list[RatingUnknown] = field(default_factory=list)

    def cap(self, cap: Grade, rule: str, reason: str, source: str, *evidence: str) -> None:
        self.caps.append(RatingCap(cap, rule, reason, source, tuple(evidence)))

    def warn(self, rule: str, reason: str, source: str, *evidence: str) -> None:
        self.warnings.append(RatingWarning(rule, reason, source, tuple(evidence)))

    def unknown(self, rule: str, reason: str, cap: Grade | None, detail: str = "") -> None:
        self.unknowns.append(RatingUnknown(rule, reason, cap, detail))


def sub(category: str, score: int | None, detail: str) -> SubScore:
    weighted = None if score is None else score * WEIGHTS[category] // 100
    return SubScore(category, score, weighted, detail)


def speaks_sslv2(report: AuditReport) -> Spoken:
    """SSL 2.0 from the sslv2 check (the audit's versions stop at SSL 3.0); never over QUIC,
    which carries TLS 1.3 only (RFC 9001 4.2)."""
    if report.transport == "quic":
        return Spoken.NO
    result = next((r for r in report.check_results if r.name == "sslv2"), None)
    if result is None or result.verdict is Verdict.inconclusive:
        return Spoken.UNKNOWN
    return Spoken.YES if result.verdict is Verdict.vulnerable else Spoken.NO


def protocol_support(report: AuditReport, notes: Notes) -> SubScore:
    """(best + worst) / 2 over the versions spoken; SSL 3.0 as the best version caps at F."""
    spoken = [v for v in (TLS13, TLS12, TLS11, TLS10, SSL3) if report.version_spoken(v) is
              Spoken.YES]
    if speaks_sslv2(report) is Spoken.YES:
        spoken.append(SSL2)
    if not spoken:
        return sub("protocol_support", None, "no protocol version established")
    best, worst = spoken[0], spoken[-1]
    if best == SSL3:
        notes.cap(Grade.F, "ssl3_best", "SSL 3.0 is the best protocol offered", TESTSSL,
                  "versions: SSL 3.0 spoken, TLS 1.0 and later not")
    score = (VERSION_POINTS[best] + VERSION_POINTS[worst]) // 2
    name = registry.version_name
    return sub("protocol_support", score, f"best {name(best)} ({VERSION_POINTS[best]}), "
               f"worst {name(worst)} ({VERSION_POINTS[worst]})")


def spoken_suites(report: AuditReport) -> list[tuple[int, registry.CipherSuite]]:
    """(version, suite) for every suite accepted in a version established as spoken."""
    out = []
    for audit in report.suites:
        if report.version_spoken(audit.version.id) is not Spoken.YES:
            continue
        for c in audit.supported:
            suite = registry.cipher_suite(c.id)
            if suite is not None and not suite.is_scsv:
                out.append((audit.version.id, suite))
    return out


def _kx_points(kind: str, bits: int) -> int:
    """The guide's key exchange table (RSA/DH sizes), and testssl.sh's EC equivalents."""
    limits = (110, 123, 163, 225) if kind == "ec" else (512, 1024, 2048, 4096)
    for limit, points in zip(limits, (20, 40, 80, 90)):
        if bits < limit:
            return points
    return 100


def _group_strength(code: int) -> tuple[str, int] | None:
    """(kind, bits) of a named group: EC by curve size, finite-field by prime size; a
    post-quantum hybrid by its classical part, ML-KEM alone as a 256-bit curve (NIST
    category 1 or more); None when the size is not known."""
    group = registry.group(code)
    if group is None:
        return None
    if group.kind == "ffdhe":
        bits = registry.ffdhe_bits(code)
        return ("dh", bits) if bits else None
    if group.kind == "mlkem":
        return ("ec", 256)
    if code in _EC_BITS:
        return ("ec", _EC_BITS[code])
    m = re.search(r"(\d{3})", group.name)
    return ("ec", int(m.group(1))) if group.kind in ("ec", "ecx", "hybrid") and m else None


def _kx_items(report: AuditReport) -> list[tuple[str, str, int]]:
    """(what, kind, bits) of every key the server's key exchange rests on."""
    items: list[tuple[str, str, int]] = []
    chains = [report.certificates] + [c.certificates for c in report.other_certificates]
    for leaf in (chain[0] for chain in chains if chain):   # every chain a client may get
        if leaf.key_bits:
            kind = "rsa" if leaf.rsa_key or leaf.key_type == "DSA" else "ec"
            items.append((f"certificate {leaf.key_type} {leaf.key_bits} bits", kind,
                          leaf.key_bits))
    for audit in report.groups:
        if audit.spoken is False:
            continue
        for c in audit.supported:
            strength = _group_strength(c.id)
            if strength is not None:
                what = f"{registry.version_name(audit.version.id)} group {c.name}"
                items.append((f"{what} ({strength[1]} bits)", *strength))
        dhe = audit.dhe
        if dhe is not None and dhe.fixed is not None:
            items.append((f"DHE parameters {dhe.fixed.label()}", "dh", dhe.fixed.bits))
        for c in dhe.negotiated if dhe is not None else ():
            bits = registry.ffdhe_bits(c.id)
            if bits:
                items.append((f"DHE group {c.name} ({bits} bits)", "dh", bits))
    for suites, row in report.suite_kx_rows():   # read from the suites' own connections
        if row.kx_bits is not None:
            items.append((f"{suites.version.name} suite {row.suite.iana_name} {row.kx_label}",
                          "dh" if row.kx_kind == "DHE" else "ec", row.kx_bits))
    return items


def key_exchange(report: AuditReport, notes: Notes) -> SubScore:
    """The weakest key the key exchange rests on (certificate, DHE parameters, groups);
    anonymous suites score 0, export ones 40. At most 40 caps at F, at most 80 at B."""
    items = [(what, _kx_points(kind, bits)) for what, kind, bits in _kx_items(report)]
    suites = spoken_suites(report)
    items += [(f"anonymous suite {s.name}", 0) for _, s in suites if s.is_anon]
    items += [(f"export suite {s.name}", 40) for _, s in suites if s.is_export and not s.is_anon]
    if not report.certificates:
        why = "not run" if "cert" not in report.checks else "not established"
        notes.unknown("certificate_key", f"certificate key size {why}", Grade.F)
    if "groups" not in report.checks and (suites or not report.suites):
        notes.unknown("ephemeral_keys", "DHE and ECDHE key sizes not established (groups not "
                      "run)", Grade.F)
    if not items:
        return sub("key_exchange", None, "no key size established")
    worst = min(points for _, points in items)
    weakest = [what for what, points in items if points == worst]
    if worst <= 40:
        notes.cap(Grade.F, "insecure_key", f"insecure key: {weakest[0]}",
                  f"{GUIDE} (2014: under 1024 bits F); {TESTSSL}", *weakest)
    elif worst <= 80:
        notes.cap(Grade.B, "weak_key", f"weak key: {weakest[0]}",
                  f"{GUIDE} (2014: under 2048 bits B); {TESTSSL}", *weakest)
    return sub("key_exchange", worst, f"weakest: {weakest[0]} ({worst})")


def _cipher_bits(suite: registry.CipherSuite) -> int:
    """Effective key bits of a suite's bulk cipher: 3DES 112 (its 168 bits of key give 112
    bits of strength, as the guide and testssl.sh count), NULL 0."""
    return 112 if suite.is_3des else suite.enc_bits


def _cipher_points(bits: int) -> int:
    return 100 if bits >= 256 else 80 if bits >= 128 else 20 if bits > 0 else 0


def cipher_strength(report: AuditReport, notes: Notes) -> SubScore:
    """(best + worst) / 2 over the suites accepted in every version spoken; a suite under
    112 bits caps at F."""
    if "suites" not in report.checks:
        notes.unknown("cipher_strength", "cipher strength not established (suites not run)",
                      Grade.F)
        return sub("cipher_strength", None, "suites not run")
    for audit in report.suites:
        if report.version_spoken(audit.version.id) is Spoken.YES and not audit.complete:
            notes.unknown("cipher_strength", f"{audit.version.name} suite list incomplete",
                          Grade.F)
    suites = spoken_suites(report)
    if not suites:
        return sub("cipher_strength", None, "no suite established")
    bits = sorted({_cipher_bits(s) for _, s in suites})
    weak = [f"{s.name} ({registry.version_name(v)}, {_cipher_bits(s)} bits)"
            for v, s in suites if _cipher_bits(s) < 112]
    if weak:
        notes.cap(Grade.F, "weak_cipher", "cipher suites under 112 bits (NULL, export, DES, "
                  "RC2 or 40/56-bit)", TESTSSL + " (set_ciph_str_score)", *weak)
    score = (_cipher_points(bits[-1]) + _cipher_points(bits[0])) // 2
    return sub("cipher_strength", score, f"best {bits[-1]} bits ({_cipher_points(bits[-1])}), "
               f"worst {bits[0]} bits ({_cipher_points(bits[0])})")
