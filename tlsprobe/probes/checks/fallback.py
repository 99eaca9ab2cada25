"""TLS_FALLBACK_SCSV (RFC 7507): does the server refuse a downgraded hello?

A client that retries with a lower version after a failure (the "downgrade dance" POODLE
used) lists TLS_FALLBACK_SCSV (0x5600) among its suites; a server that speaks a higher
version must then refuse with inappropriate_fallback (86). The check sends the versions
check's hello for the second-highest version the server speaks, plus the SCSV:
  - alert inappropriate_fallback: protected (not vulnerable);
  - a ServerHello: the downgrade goes through (vulnerable);
  - another refusal: asked again without the SCSV; if that is answered, the server refuses
    the downgrade, only not with the alert RFC 7507 names (not vulnerable, said so); if it is
    refused too, the hello itself is the problem (inconclusive).
A server that speaks one version has nowhere to be downgraded to (not applicable; but
inconclusive when the audit could not establish whether another version is spoken). Two
connections at most (three when a bare close is asked again).
"""

from __future__ import annotations

from dataclasses import replace

from tlsprobe import registry
from tlsprobe.engine.config import SSL30, TLS13
from tlsprobe.model.check_details import FallbackAnswer, FallbackDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

FALLBACK_SCSV = 0x5600
INAPPROPRIATE_FALLBACK = 86


async def run(ctx: CheckContext) -> CheckResult:
    spoken = sorted(ctx.spoken, reverse=True)
    if len(spoken) < 2:
        # one version known: any version left unknown may be the other end of a downgrade
        only = ", ".join(registry.version_name(v) for v in spoken) or "no version"
        return ctx.unless_unknown(SSL30, TLS13, f"the server speaks {only} only: there is "
                                  "no lower version to fall back to")
    top, lower = spoken[0], spoken[1]
    config, stop = ctx.version_hello(lower)
    scsv = replace(config, cipher_suites_12=config.cipher_suites_12 + (FALLBACK_SCSV,))
    sent = (f"a {registry.version_name(lower)} hello with TLS_FALLBACK_SCSV (the server "
            f"speaks {registry.version_name(top)})")
    out = await ctx.hello(scsv, stop)

    def details(answer: FallbackAnswer) -> FallbackDetails:
        return FallbackDetails(registry.version_name(lower), registry.version_name(top),
                               answer)
    if out.status == "alert" and out.alert == INAPPROPRIATE_FALLBACK:
        return ctx.result(Verdict.not_vulnerable, f"{sent} is refused with "
                          "inappropriate_fallback", (f"sent: {sent}",
                                                     f"received: {out.describe()}"),
                          details=details(FallbackAnswer.inappropriate_fallback))
    if out.answered:
        suite = registry.suite_name(out.cipher_suite) if out.cipher_suite is not None else "?"
        return ctx.result(Verdict.vulnerable, f"{sent} is answered: {out.describe()} with "
                          f"{suite}", (f"sent: {sent}", f"received: {out.describe()}"),
                          severity=Severity.low, details=details(FallbackAnswer.accepted))
    if not out.refused:
        return ctx.inconclusive(f"{sent}: {out.describe()}")
    plain = await ctx.hello(config, stop, label="without SCSV")
    if plain.answered:
        return ctx.result(Verdict.not_vulnerable, f"{sent} is refused ({out.describe()}, not "
                          "inappropriate_fallback as RFC 7507 says), and the same hello "
                          "without the SCSV is answered", (f"sent: {sent}",
                                                           f"received: {out.describe()}"),
                          details=details(FallbackAnswer.refused_otherwise))
    return ctx.inconclusive(f"{sent}: {out.describe()}; without the SCSV: {plain.describe()}")


CHECK = ActiveCheck("fallback", "downgrade protection: TLS_FALLBACK_SCSV (RFC 7507)", run,
                    FallbackDetails)
