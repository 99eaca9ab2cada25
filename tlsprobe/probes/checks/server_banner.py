"""The Server banner: what the server says it runs, in its answer to GET / over a completed
handshake (_http.py, one connection shared by the HTTP checks). Shown as sent (the report
escapes it); "supported" when there is a Server header (it is information, not a finding:
a banner can be anything), "not supported" when there is none. A server that answers with
something other than HTTP: not applicable.
"""

from __future__ import annotations

from tlsprobe.model.check_details import BannerDetails
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.checks._http import http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    status = f"GET / answered {got.status}"
    banners = got.get("server")
    details = BannerDetails(got.status, tuple(banners))
    if not banners:
        return ctx.result(Verdict.not_supported, f"no Server header ({status})", (status,),
                          details=details)
    return ctx.result(Verdict.supported, f"Server: {banners[0][:200]}",
                      (status, *(f"Server: {b[:200]}" for b in banners)), details=details)


CHECK = ActiveCheck("server_banner", "the HTTP Server banner", run, BannerDetails)
