"""Extended master secret (RFC 7627): does the server bind the master secret to the handshake?

Without it a TLS 1.0-1.2 master secret depends only on the randoms and the pre-master
secret, which a man in the middle can make equal on two connections (the triple handshake
attack, then resumption or renegotiation under the victim's session). The check sends one
hello of the highest TLS 1.0-1.2 version the server speaks, offering extended_master_secret
as every current client does, and reads the ServerHello: the extension echoed means
supported; a ServerHello without it, not supported (a finding). TLS 1.3 binds the whole
transcript into its key schedule, so a server that speaks TLS 1.3 only is not applicable.
One connection, stopped at the server's first flight.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS12
from tlsprobe.model.check_details import EchoDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._handshake import echo, legacy_versions
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

EXTENDED_MASTER_SECRET = 23


async def run(ctx: CheckContext) -> CheckResult:
    legacy = legacy_versions(ctx)
    if not legacy:
        return ctx.unless_unknown(TLS10, TLS12, "the server speaks no TLS 1.0-1.2 version "
                                  "(TLS 1.3 binds the transcript into its key schedule by "
                                  "design)")
    sent = f"a {registry.version_name(legacy[0])} hello offering extended_master_secret"
    got = await echo(ctx, ctx.config((legacy[0],), extended_master_secret=True), sent,
                     "extended_master_secret", EXTENDED_MASTER_SECRET)
    if isinstance(got, CheckResult):
        return got
    sh, echoed, evidence = got
    details = EchoDetails(registry.version_name(legacy[0]), echoed,
                          registry.suite_name(sh.cipher_suite))
    if echoed:
        return ctx.result(Verdict.supported, f"{sent} is answered with "
                          "extended_master_secret (RFC 7627)", evidence, details=details)
    return ctx.result(Verdict.not_supported, f"{sent} is answered without it: the master "
                      "secret is not bound to the handshake (RFC 7627; triple handshake "
                      "attack)", evidence, severity=Severity.low, details=details)


CHECK = ActiveCheck("ems", "extended master secret (RFC 7627)", run, EchoDetails)
