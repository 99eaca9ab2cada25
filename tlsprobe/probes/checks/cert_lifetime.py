"""Certificate lifetime: is the leaf valid for longer than the CA/Browser Forum (398 days)
or Mozilla (366 days) allow?

Since September 2020 the CA/Browser Forum Baseline Requirements (section 6.3.2) cap a
publicly trusted TLS certificate at 398 days, and browsers distrust longer ones; Mozilla's
server-side TLS guidelines recommend 90 and at most 366 days. The validity period counts
from notBefore through notAfter inclusive (BR section 1.6.1), so the leaf is over N days
when notAfter - notBefore + 1 s > N days. The leaf comes from the certificate checks'
shared connection (_cert_chain.py); every other chain's leaf is judged too (_every_chain.py:
from the cert phase's connections, none of its own). Over 398 days: a finding (medium); over 366 only: low.
The reason states the period the verdict counts, exact to the second ("90 days", "398 days
1 s"), never a fraction of a day.
A private CA's certificate is held to the same numbers (the reason says whose they are).
A leaf whose notAfter comes before its notBefore is never valid: not applicable, saying so
(never a negative lifetime "within" the limits).
"""

from __future__ import annotations

from datetime import timedelta

from tlsprobe.model.check_details import LifetimeDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.model.units import duration
from tlsprobe.probes.checks._cert_chain import Served, leaf_in
from tlsprobe.probes.checks._every_chain import every_chain
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

CABF_DAYS, MOZILLA_DAYS = 398, 366


def lifetime_verdict(period: timedelta) -> tuple[Verdict, Severity | None, str]:
    """(verdict, severity, reason) for a validity period (notAfter - notBefore + 1 s)."""
    days = f"{duration(period)} (notBefore to notAfter inclusive)"
    if period > timedelta(days=CABF_DAYS):
        return Verdict.vulnerable, Severity.medium, (
            f"the leaf is valid for {days}: over the {CABF_DAYS} days of the CA/Browser Forum "
            f"Baseline Requirements (6.3.2) and the {MOZILLA_DAYS} of Mozilla's guidelines")
    if period > timedelta(days=MOZILLA_DAYS):
        return Verdict.vulnerable, Severity.low, (
            f"the leaf is valid for {days}: within the CA/Browser Forum's {CABF_DAYS} days, "
            f"over the {MOZILLA_DAYS} of Mozilla's guidelines")
    return Verdict.not_vulnerable, None, (
        f"the leaf is valid for {days}: within the {MOZILLA_DAYS} days of Mozilla's "
        f"guidelines (and the CA/Browser Forum's {CABF_DAYS})")


async def run(ctx: CheckContext) -> CheckResult:
    return await every_chain(ctx, judge)


async def judge(ctx: CheckContext, got: Served) -> CheckResult:
    """The verdict on one chain's leaf."""
    cert = leaf_in(ctx, got)
    if isinstance(cert, CheckResult):
        return cert
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    period = end - start + timedelta(seconds=1)
    evidence = (f"notBefore {start.isoformat()}", f"notAfter {end.isoformat()}")
    details = LifetimeDetails(int(period.total_seconds()), start.isoformat(), end.isoformat())
    if end < start:
        return ctx.result(Verdict.not_applicable, "the leaf is never valid: its notAfter "
                          "comes before its notBefore (RFC 5280 4.1.2.5), so it has no "
                          "lifetime to judge (the trust verdict and the date findings say "
                          "so)", evidence, details=details)
    verdict, severity, reason = lifetime_verdict(period)
    return ctx.result(verdict, reason, evidence, severity=severity, details=details)


CHECK = ActiveCheck("cert_lifetime", "certificate lifetime: over 398 days (CA/Browser Forum) "
                    "or 366 days (Mozilla)", run, LifetimeDetails)
