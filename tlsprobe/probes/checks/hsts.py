"""HTTP Strict Transport Security (RFC 6797): does the server tell browsers to use HTTPS only?

Read off the answer to GET / over a completed handshake (_http.py, one connection shared by
the HTTP checks). A Strict-Transport-Security header with a valid max-age above 0:
supported, with max-age (as a duration), includeSubDomains and preload (the hstspreload.org list
wants max-age of at least a year, includeSubDomains and preload); absent, without a valid
max-age (RFC 6797 6.1.1: ignored) or max-age=0 (HSTS switched off): not supported, a low
finding `check.hsts`. A server that answers with something other than HTTP: not applicable.
Text from the server is kept as it came (the report shows it escaped).

When GET / is redirected within the target (_http.py), the header is read from the FIRST
answer, the redirect itself, as browsers do (RFC 6797 8.1: a Strict-Transport-Security
header in any answer received over a secure connection from the host counts, a redirect's
included); when that answer has none, the first later answer along the chain that carries
one (the same host: a browser following the redirect records it there). The evidence names
the answer the header came from and the chain.
"""

from __future__ import annotations

import re

from tlsprobe.model.check_details import HstsDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.model.units import duration
from tlsprobe.probes.checks._http import cut, http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

_MAX_AGE = re.compile(r'^\s*max-age\s*=\s*"?(\d+)"?\s*$', re.IGNORECASE)
YEAR = 31536000


def parse_hsts(value: str) -> tuple[int | None, bool, bool]:
    """(max-age or None when missing or invalid, includeSubDomains, preload)."""
    age: int | None = None
    directives = [d.strip() for d in value.split(";")]
    for d in directives:
        m = _MAX_AGE.match(d)
        if m:
            age = int(m.group(1))
    names = {d.lower() for d in directives}
    return age, "includesubdomains" in names, "preload" in names


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    carrier = next((r for r in got.chain if r.get("strict-transport-security")), None)
    trail = got.trail()
    if carrier is None and got.unusual() is not None:
        return ctx.result(Verdict.inconclusive, str(got.unusual()), trail)
    if carrier is None:
        return ctx.result(Verdict.not_supported, f"no Strict-Transport-Security header "
                          f"({got.read()})", trail, severity=Severity.low,
                          details=HstsDetails(got.status, None, None, False, False,
                                              got.redirects()))
    value = carrier.get("strict-transport-security")[0]
    age, subdomains, preload = parse_hsts(value)
    header = f"Strict-Transport-Security: {cut(value)}"
    if len(got.chain) > 1 or got.unfollowed is not None:
        header += f" (in the answer to GET {cut(carrier.path)}, {carrier.status})"
    details = HstsDetails(carrier.status, value, age, subdomains, preload, got.redirects())
    if age is None or age == 0:
        why = "max-age=0 switches HSTS off" if age == 0 else "it has no valid max-age " \
            "(RFC 6797 6.1.1: the header is ignored)"
        return ctx.result(Verdict.not_supported, f"{header}: {why}", (*trail, header),
                          severity=Severity.low, details=details)
    parts = [f"max-age {age} s ({duration(age)})",
             "includeSubDomains" if subdomains else "no includeSubDomains",
             "preload" if preload else "no preload"]
    if preload and (age < YEAR or not subdomains):
        parts.append("preload asked but the preload list wants max-age of a year and "
                     "includeSubDomains")
    if len(got.chain) > 1 or got.unfollowed is not None:
        parts.append(f"in the answer to GET {cut(carrier.path)}, {carrier.status}")
    return ctx.result(Verdict.supported, ", ".join(parts), (*trail, header), details=details)


CHECK = ActiveCheck("hsts", "HTTP Strict Transport Security (RFC 6797)", run, HstsDetails)
