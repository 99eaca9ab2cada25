"""TLS 1.3 intolerance: does a server without TLS 1.3 still answer a hello that offers it?

Every current client offers TLS 1.3 (supported_versions, key_share, the TLS 1.3 suites) with
legacy_version TLS 1.2. A server without TLS 1.3 must ignore what it does not know and
answer with its own version; one that refuses such a hello cannot be reached by any modern
client (browsers no longer fall back). A server the audit found speaking TLS 1.3 answered a
hello offering it already (tolerated, no connection). Otherwise the check sends tolerance's
plain hello of the highest version spoken with TLS 1.3 added to its versions; answered:
tolerated; refused: confirmed and set against the plain hello (_tolerance.py). One
connection when tolerated, six at most.
"""

from __future__ import annotations

from dataclasses import replace

from tlsprobe.engine.config import TLS13
from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._tolerance import (
    Variant,
    judge,
    no_tls,
    plain_config,
    top_versions,
)
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.registry import version_name


async def run(ctx: CheckContext) -> CheckResult:
    versions = top_versions(ctx)
    if not versions:
        return no_tls(ctx)
    if TLS13 in versions:
        return ctx.result(Verdict.tolerated, "the server speaks TLS 1.3: the audit's hello "
                          "offering TLS 1.3 was answered with TLS 1.3",
                          details=ToleranceDetails(()))
    top = versions[0]
    config = plain_config(ctx, top)
    name = version_name(top)
    variant = Variant(f"a {name} ClientHello offering TLS 1.3 too (supported_versions, "
                      "key_share, TLS 1.3 suites)",
                      replace(config, versions=(TLS13,) + config.versions))
    plain = Variant(f"the plain {name} ClientHello", config)
    return await judge(ctx, [variant], plain, severity=Severity.high)


CHECK = ActiveCheck("tls13_intolerance", "a server without TLS 1.3 answers a hello offering "
                    "it", run, ToleranceDetails)
