"""The flags of the cookies the server sets in its answer to GET /: per Set-Cookie, its name,
Secure, HttpOnly and SameSite (RFC 6265 4.1.2; SameSite from RFC 6265bis).

Read off the shared answer (_http.py: one connection, redirects within the target
followed); the cookies of EVERY answer along the redirects count (a browser stores a cookie
set by a redirect as well as by the final page), each with the path whose answer set it.
Attributes are matched by name, case-insensitively, as RFC 6265 5.2 reads them (not as a
substring of the whole line, which testssl.sh's run_cookie_flags counts: a cookie whose
value holds "secure" is not Secure here).

Verdicts:
  - no Set-Cookie: not applicable (nothing to judge);
  - a cookie without Secure, set over HTTPS: vulnerable, a low finding `check.cookies`
    (RFC 6265 8.6: the browser sends it over plain http too, where anyone on the path reads
    it; testssl.sh marks "NOT secure" in its medium colour but reports it as information);
  - every cookie Secure: not vulnerable; cookies without HttpOnly (readable by scripts) or
    without SameSite (browsers then default to Lax; SameSite=None needs Secure) are noted
    in the reason, no finding, as testssl.sh notes HttpOnly.
Names are kept as sent in the details (the report escapes them) and cut in the reason.
"""

from __future__ import annotations

from tlsprobe.model.check_details import Cookie, CookiesDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._http import Response, cut, http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

#: cookies named in the reason at most (the details list all)
NAMED = 10


def parse_cookie(path: str, line: str) -> Cookie:
    """One Set-Cookie value: name=value, then ;-separated attributes (RFC 6265 5.2)."""
    pair, *attributes = line.split(";")
    name = pair.partition("=")[0].strip() if "=" in pair else ""
    flags: dict[str, str] = {}
    for attribute in attributes:
        key, _, value = attribute.partition("=")
        flags.setdefault(key.strip().lower(), value.strip())
    return Cookie(path, name, "secure" in flags, "httponly" in flags, flags.get("samesite"))


def cookies_of(got: Response) -> tuple[Cookie, ...]:
    """Every cookie set along the chain, in order."""
    return tuple(parse_cookie(r.path, line) for r in got.chain for line in r.get("set-cookie"))


def _names(cookies: list[Cookie], final: str) -> str:
    """The cookies' names (with the path whose answer set each, when not the final one)."""
    shown = ", ".join(cut(c.name or "(no name)", 60) +
                      ("" if c.path == final else f" (set by GET {cut(c.path, 60)})")
                      for c in cookies[:NAMED])
    return shown + (f" and {len(cookies) - NAMED} more" if len(cookies) > NAMED else "")


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    cookies = cookies_of(got)
    details = CookiesDetails(got.status, cookies, got.redirects())
    where = f" ({got.read()})"
    if not cookies and got.unusual() is not None:
        return ctx.result(Verdict.inconclusive, str(got.unusual()), got.trail(),
                          details=details)
    if not cookies:
        return ctx.result(Verdict.not_applicable, f"no Set-Cookie{where}", got.trail(),
                          details=details)
    evidence = (*got.trail(), *(
        f"{cut(c.name, 60)}: {'Secure' if c.secure else 'no Secure'}, "
        f"{'HttpOnly' if c.http_only else 'no HttpOnly'}, "
        f"{'SameSite=' + cut(c.same_site, 20) if c.same_site is not None else 'no SameSite'}"
        for c in cookies[:50]))
    n = len(cookies)
    counts = f"{n} cookie{'' if n == 1 else 's'} set"
    notes = [f"without {flag}: {_names(without, got.path)}" for flag, without in (
        ("HttpOnly", [c for c in cookies if not c.http_only]),
        ("SameSite", [c for c in cookies if c.same_site is None])) if without]
    insecure = [c for c in cookies if not c.secure]
    if insecure:
        return ctx.result(Verdict.vulnerable, f"{counts}, without Secure: "
                          f"{_names(insecure, got.path)} (sent over plain http too){''.join('; ' + note for note in notes)}"
                          f"{where}", evidence, severity=Severity.low, details=details)
    return ctx.result(Verdict.not_vulnerable, f"{counts}, each Secure"
                      f"{''.join('; ' + note for note in notes)}{where}", evidence, details=details)


CHECK = ActiveCheck("cookies", "cookie flags (Secure, HttpOnly, SameSite)", run,
                    CookiesDetails)
