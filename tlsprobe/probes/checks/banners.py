"""Application and proxy banners: the headers beyond Server (server_banner's) that name the
software behind the site or the proxies and caches in front of it.

Read off the shared answer (_http.py: one connection, redirects within the target followed,
the final answer read). The headers are those testssl.sh reads (run_appl_banner and
run_rp_banner) and a few more that name software the same way:
  - application: X-Powered-By, X-AspNet-Version, X-AspNetMvc-Version, X-Generator,
    X-Version, X-Runtime, X-Drupal-Cache, Liferay-Portal, X-TYPO3-Parsetime, X-OWA-Version,
    MicrosoftSharePointTeamServices;
  - proxy: Via, X-Cache (and every X-Cache-*), X-Squid-*, X-Varnish, X-Served-By,
    X-Server-Name, X-Server-Port, X-Backend-Server, X-Forwarded-*, Forwarded.
Verdicts: at least one: supported, an info finding `check.banners` (information disclosure,
CWE-200, as testssl.sh rates its reverse-proxy banner: versions help an attacker pick an
exploit); none: not supported; a server that answers with something other than HTTP: not
applicable. Values are kept as sent in the details (the report escapes them) and cut in the
reason. Kept apart from server_banner so that the Server header's verdict stays what it was.
"""

from __future__ import annotations

from tlsprobe.model.check_details import BannersDetails, HeaderValue
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._http import Response, cut, http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

APPLICATION = ("X-Powered-By", "X-AspNet-Version", "X-AspNetMvc-Version", "X-Generator",
               "X-Version", "X-Runtime", "X-Drupal-Cache", "Liferay-Portal",
               "X-TYPO3-Parsetime", "X-OWA-Version", "MicrosoftSharePointTeamServices")
PROXY = ("Via", "X-Cache", "X-Varnish", "X-Served-By", "X-Server-Name", "X-Server-Port",
         "X-Backend-Server", "Forwarded")
#: name prefixes of proxy headers (X-Cache-Status, X-Squid-Error, X-Forwarded-For, ...)
PROXY_PREFIXES = ("x-cache-", "x-squid-", "x-forwarded-")
#: banners named in the reason at most (the details and evidence list all)
NAMED = 6


def _spelled(name: str, known: tuple[str, ...]) -> str:
    """A header's name as the check writes it (the server's own, title-cased, otherwise)."""
    return next((k for k in known if k.lower() == name), "-".join(
        p.capitalize() for p in name.split("-")))


def banners_of(got: Response) -> tuple[tuple[HeaderValue, ...], tuple[HeaderValue, ...]]:
    """(application banners, proxy banners) of the answer, in header order."""
    app_names = {n.lower() for n in APPLICATION}
    proxy_names = {n.lower() for n in PROXY}
    app = tuple(HeaderValue(_spelled(k, APPLICATION), v) for k, v in got.headers
                if k in app_names)
    proxy = tuple(HeaderValue(_spelled(k, PROXY), v) for k, v in got.headers
                  if k in proxy_names or k.startswith(PROXY_PREFIXES))
    return app, proxy


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    app, proxy = banners_of(got)
    details = BannersDetails(got.status, app, proxy, got.redirects())
    where = f" ({got.read()})"
    if not app and not proxy:
        return ctx.result(Verdict.not_supported, f"no application or proxy banner{where}",
                          got.trail(), details=details)
    found = [*app, *proxy]
    shown = "; ".join(f"{h.name}: {cut(h.value, 80)}" for h in found[:NAMED])
    more = f" and {len(found) - NAMED} more" if len(found) > NAMED else ""
    return ctx.result(Verdict.supported, f"{shown}{more}{where}",
                      (*got.trail(), *(f"{h.name}: {cut(h.value)}" for h in found[:100])),
                      severity=Severity.info, details=details)


CHECK = ActiveCheck("banners", "application and proxy banners (X-Powered-By, Via, ...)", run,
                    BannersDetails)
