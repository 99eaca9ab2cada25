"""The Server banner: what the server says it runs, in its answer to GET / over a completed
handshake (_http.py, one connection shared by the HTTP checks). Shown as sent (the report
escapes it); "supported" when there is a Server header (it is information, not a finding:
a banner can be anything), "not supported" when there is none. A server that answers with
something other than HTTP: not applicable. After redirects within the target (_http.py)
the final answer is read (the reason names it); the application and proxy banners
(X-Powered-By, Via, ...) are the `banners` check's.
"""

from __future__ import annotations

from tlsprobe.model.check_details import BannerDetails
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.checks._http import cut, http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    trail = got.trail()
    banners = got.get("server")
    details = BannerDetails(got.status, tuple(banners), got.redirects())
    if not banners:
        return ctx.result(Verdict.not_supported, f"no Server header ({got.read()})", trail,
                          details=details)
    where = "" if len(got.chain) == 1 else f" ({got.read()})"
    return ctx.result(Verdict.supported, f"Server: {cut(banners[0])}{where}",
                      (*trail, *(f"Server: {cut(b)}" for b in banners)), details=details)


CHECK = ActiveCheck("server_banner", "the HTTP Server banner", run, BannerDetails)
