"""TLS compression (CRIME, CVE-2012-4929): does the server compress records?

With compression on, the length of an encrypted record leaks how well a secret (a cookie)
compresses together with text the attacker chooses, which recovers the secret byte by byte.
The check sends the versions check's hello for the highest TLS 1.0-1.2 version the server
speaks, with legacy_compression_methods DEFLATE (1) then null (0), as clients of 2012 did,
and reads the ServerHello's legacy_compression_method:
  - 1 (DEFLATE): vulnerable;
  - 0 (null): not vulnerable (DEFLATE was offered and declined);
  - no ServerHello: asked again with null alone; answered, the server refuses a hello that
    offers compression (not vulnerable, said so); refused too, inconclusive.
TLS 1.3 has no compression (RFC 8446 4.1.2): a server that speaks only TLS 1.3 is not
applicable. One connection (two when the first hello is refused).
"""

from __future__ import annotations

from dataclasses import replace

from tlsprobe.model.check_details import CompressionDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.audit.outcome import STOP_HELLO
from tlsprobe.probes.checks._legacy import legacy_hello
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

DEFLATE, NULL = 1, 0


async def run(ctx: CheckContext) -> CheckResult:
    got = legacy_hello(ctx, "TLS 1.3 has no compression")
    if isinstance(got, CheckResult):
        return got
    name, config = got
    sent = f"a {name} hello offering DEFLATE and null compression"
    out = await ctx.hello(replace(config, compression_methods=bytes([DEFLATE, NULL])),
                          STOP_HELLO)
    evidence = (f"sent: {sent}", f"received: {out.describe()}" + (
        f", compression method {out.compression_method}" if out.answered else ""))
    if out.status == "server_hello" and out.compression_method == DEFLATE:
        return ctx.result(Verdict.vulnerable, f"the server chose DEFLATE compression for "
                          f"{name} (CRIME)", evidence, severity=Severity.medium,
                          details=CompressionDetails(DEFLATE))
    if out.status == "server_hello" and out.compression_method == NULL:
        return ctx.result(Verdict.not_vulnerable, "the server declined DEFLATE: it chose "
                          "null compression", evidence,
                          details=CompressionDetails(NULL))
    if not out.refused:
        return ctx.inconclusive(f"{sent}: {out.describe()}", evidence)
    plain = await ctx.hello(config, STOP_HELLO, label="null only")
    if plain.answered:
        return ctx.result(Verdict.not_vulnerable, f"{sent} is refused ({out.describe()}), "
                          "and the same hello with null compression alone is answered",
                          evidence, details=CompressionDetails(None))
    return ctx.inconclusive(f"{sent}: {out.describe()}; with null alone: {plain.describe()}",
                            evidence)


CHECK = ActiveCheck("compression", "TLS compression (CRIME)", run, CompressionDetails)
