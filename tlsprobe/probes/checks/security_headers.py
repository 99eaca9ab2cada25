"""The HTTP security headers of the answer to GET /: which are present (with their values),
which are missing, and which carry a value that does not protect.

Read off the shared answer (_http.py: one connection, redirects within the target followed,
the final answer read). The headers are those of the OWASP Secure Headers Project
(owasp.org/www-project-secure-headers) and MDN's HTTP headers reference:
Content-Security-Policy, X-Frame-Options, X-Content-Type-Options, Referrer-Policy,
Permissions-Policy, Cross-Origin-Opener-Policy, Cross-Origin-Embedder-Policy,
Cross-Origin-Resource-Policy (Content-Security-Policy-Report-Only is listed when present,
but enforces nothing). The weak values, each a documented rule and nothing more:
  - X-Content-Type-Options other than `nosniff` (the Fetch standard reads the first value
    only; MDN: `nosniff` is its one directive);
  - X-Frame-Options other than DENY or SAMEORIGIN (HTML standard: ALLOW-FROM, ALLOWALL or
    anything else, and conflicting values, are ignored: no protection; MDN marks ALLOW-FROM
    obsolete);
  - a Content-Security-Policy whose script sources (script-src, else default-src) allow
    'unsafe-inline' (without a nonce, hash or 'strict-dynamic', which make browsers ignore
    it) or 'unsafe-eval', or whose default-src or script-src holds `*` (MDN CSP, OWASP CSP
    Cheat Sheet); with several policies (all enforced: a resource must pass each) a
    weakness counts when every policy has it;
  - Referrer-Policy `unsafe-url` (MDN: sends the full URL, path and query, even to plain
    http; the last policy the browser knows wins).
Clickjacking protection is X-Frame-Options or CSP frame-ancestors (which supersedes it).

Verdicts (severity as testssl.sh's users read its header section, at most low here: a
missing header is hardening, not an exploit):
  - a weak value, or none of the headers at all: not supported, a low finding
    `check.security_headers`;
  - no weak value, but Content-Security-Policy, X-Content-Type-Options or clickjacking
    protection missing: not supported, an info finding;
  - those three present and none weak: supported (the other missing ones named);
  - a server that answers with something other than HTTP: not applicable; no answer:
    inconclusive.
Values are kept as sent in the details (the report escapes them) and cut in the reason.
"""

from __future__ import annotations

from tlsprobe.model.check_details import HeaderValue, SecurityHeadersDetails, WeakHeader
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._http import Response, cut, http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

#: the headers judged, in report order (lower-case name -> as written)
HEADERS = {n.lower(): n for n in (
    "Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy",
    "Permissions-Policy", "Cross-Origin-Opener-Policy", "Cross-Origin-Embedder-Policy",
    "Cross-Origin-Resource-Policy")}
REPORT_ONLY = "Content-Security-Policy-Report-Only"
#: Referrer-Policy tokens the browsers know (W3C Referrer Policy 3)
REFERRER_POLICIES = ("no-referrer", "no-referrer-when-downgrade", "same-origin", "origin",
                     "strict-origin", "origin-when-cross-origin",
                     "strict-origin-when-cross-origin", "unsafe-url")


def csp_directives(policy: str) -> dict[str, list[str]]:
    """One serialized policy's directives (name lower-cased -> source list; the first of a
    repeated name counts, CSP 3 section 2.2.1)."""
    out: dict[str, list[str]] = {}
    for part in policy.split(";"):
        tokens = part.split()
        if tokens and tokens[0].lower() not in out:
            out[tokens[0].lower()] = [t.lower() for t in tokens[1:]]
    return out


def csp_weaknesses(policy: str) -> set[str]:
    """The weaknesses of one policy: 'unsafe-inline', 'unsafe-eval', a wildcard source."""
    d = csp_directives(policy)
    scripts = d.get("script-src", d.get("default-src", []))
    found = set()
    overridden = any(s.startswith(("'nonce-", "'sha256-", "'sha384-", "'sha512-")) or
                     s == "'strict-dynamic'" for s in scripts)
    if "'unsafe-inline'" in scripts and not overridden:
        found.add("'unsafe-inline' in its script sources")
    if "'unsafe-eval'" in scripts:
        found.add("'unsafe-eval' in its script sources")
    if "*" in d.get("default-src", []) or "*" in d.get("script-src", []):
        found.add("'*' as a source of default-src or script-src")
    return found


def weaknesses(got: Response) -> list[WeakHeader]:
    """The weak values among the headers present (the rules of the docstring)."""
    weak: list[WeakHeader] = []
    xcto = got.get("x-content-type-options")
    if xcto and xcto[0].split(",")[0].strip().lower() != "nosniff":
        weak.append(WeakHeader("X-Content-Type-Options", "not nosniff"))
    xfo = {v.strip().lower() for value in got.get("x-frame-options") for v in value.split(",")}
    if xfo and (len(xfo) > 1 or not xfo <= {"deny", "sameorigin"}):
        weak.append(WeakHeader("X-Frame-Options", "not DENY or SAMEORIGIN (ignored by "
                               "browsers: no protection)"))
    policies = [p for value in got.get("content-security-policy") for p in value.split(",")
                if p.strip()]
    if policies:
        common = set.intersection(*(csp_weaknesses(p) for p in policies))
        weak += [WeakHeader("Content-Security-Policy", w) for w in sorted(common)]
    known = [t.strip().lower() for value in got.get("referrer-policy")
             for t in value.split(",") if t.strip().lower() in REFERRER_POLICIES]
    if known and known[-1] == "unsafe-url":
        weak.append(WeakHeader("Referrer-Policy", "unsafe-url sends the full URL to every "
                               "origin, plain http included"))
    return weak


def _clickjacking(got: Response) -> bool:
    return bool(got.get("x-frame-options")) or any(
        "frame-ancestors" in csp_directives(p) for v in got.get("content-security-policy")
        for p in v.split(","))


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    present = tuple(HeaderValue(HEADERS.get(k, REPORT_ONLY), v) for k, v in got.headers
                    if k in HEADERS or k == REPORT_ONLY.lower())
    names = {h.name for h in present}
    missing = tuple(n for n in HEADERS.values() if n not in names)
    weak = tuple(weaknesses(got))
    details = SecurityHeadersDetails(got.status, present, missing, weak, got.redirects())
    evidence = (*got.trail(), *(f"{h.name}: {cut(h.value)}" for h in present))
    essential = [n for n, there in (("Content-Security-Policy", "Content-Security-Policy"
                                     in names),
                                    ("X-Content-Type-Options", "X-Content-Type-Options"
                                     in names),
                                    ("X-Frame-Options or CSP frame-ancestors",
                                     _clickjacking(got))) if not there]
    where = f" ({got.read()})"
    if (weak or essential) and got.unusual() is not None:
        return ctx.result(Verdict.inconclusive, str(got.unusual()), evidence, details=details)
    shown = f"present: {', '.join(sorted(names, key=_order))}" if names else ""
    if weak or len(names - {REPORT_ONLY}) == 0:
        why = "; ".join(f"{w.name}: {w.why}" for w in weak) if weak else \
            "none of the security headers"
        return ctx.result(Verdict.not_supported, f"{why}{'; ' + shown if shown else ''}"
                          f"{where}", evidence, severity=Severity.low, details=details)
    if essential:
        return ctx.result(Verdict.not_supported, f"missing: {', '.join(essential)}; {shown}"
                          f"{where}", evidence, severity=Severity.info, details=details)
    rest = f"; missing: {', '.join(missing)}" if missing else ""
    return ctx.result(Verdict.supported, f"{shown}{rest}{where}", evidence, details=details)


def _order(name: str) -> int:
    return list(HEADERS.values()).index(name) if name in HEADERS.values() else len(HEADERS)


CHECK = ActiveCheck("security_headers", "HTTP security headers (CSP, X-Frame-Options, ...)",
                    run, SecurityHeadersDetails)
