"""The Server banner: what the server says it runs, in its answer to GET / over a completed
handshake (_http.py, one connection shared by the HTTP checks). Shown as sent (the report
escapes it); "supported" when there is a Server header (it is information, not a finding:
a banner can be anything), "not supported" when there is none. A server that answers with
something other than HTTP: not applicable.
"""

from __future__ import annotations

from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.checks._http import Response, on_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


@on_response
def run(ctx: CheckContext, got: Response) -> CheckResult:
    status = f"GET / answered {got.status}"
    banners = got.get("server")
    if not banners:
        return ctx.result(Verdict.not_supported, f"no Server header ({status})", (status,))
    return ctx.result(Verdict.supported, f"Server: {banners[0][:200]}",
                      (status, *(f"Server: {b[:200]}" for b in banners)))


CHECK = ActiveCheck("server_banner", "the HTTP Server banner", run)
