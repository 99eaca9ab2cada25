"""HTTP compression (the precondition of BREACH): does the server compress its answer when
the client accepts it?

BREACH (2013) recovers secrets from HTTPS bodies compressed together with attacker-chosen
input by watching their compressed length. The check asks GET / with `Accept-Encoding: gzip,
deflate, br` over a completed handshake (_http.py, one connection shared by the HTTP
checks): a Content-Encoding of gzip, deflate, br, zstd or compress in the answer: vulnerable
(a low finding `check.breach`: only the precondition is established, on "/" alone; whether a
secret and reflected input share a compressed body is not tested); none (or identity): not
vulnerable for "/". A server that answers with something other than HTTP: not applicable.
After redirects within the target (_http.py) the final answer is read, and the reason names
it.
"""

from __future__ import annotations

from tlsprobe.model.check_details import HttpCompressionDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._http import cut, http_response
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

COMPRESSING = ("gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress")


async def run(ctx: CheckContext) -> CheckResult:
    got = await http_response(ctx)
    if isinstance(got, CheckResult):
        return got
    trail = got.trail()
    encodings = [e.strip().lower() for v in got.get("content-encoding") for e in v.split(",")
                 if e.strip()]
    used = [e for e in encodings if e in COMPRESSING]
    details = HttpCompressionDetails(got.status, tuple(encodings), tuple(used),
                                     got.redirects())
    sent = "a request with Accept-Encoding: gzip, deflate, br"
    where = "only \"/\" asked" if len(got.chain) == 1 else got.read()
    after = "" if len(got.chain) == 1 else f"; {got.read()}"
    if used:
        header = f"Content-Encoding: {cut(', '.join(got.get('content-encoding')))}"
        return ctx.result(Verdict.vulnerable, f"the answer to {sent} is compressed "
                          f"({cut(', '.join(used))}) on \"/\": the precondition of BREACH (whether "
                          "secrets and reflected input share a compressed body is not "
                          f"tested{after})", (*trail, header), severity=Severity.low,
                          details=details)
    if got.unusual() is not None:
        return ctx.result(Verdict.inconclusive, str(got.unusual()), trail, details=details)
    shown = f"Content-Encoding: {cut(', '.join(encodings))}" if encodings else \
        "no Content-Encoding"
    return ctx.result(Verdict.not_vulnerable, f"the answer to {sent} is not compressed "
                      f"({shown}; {where})", trail, details=details)


CHECK = ActiveCheck("breach", "HTTP compression (BREACH precondition)", run, HttpCompressionDetails)
