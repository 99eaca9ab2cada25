"""The TLS 1.3 downgrade sentinel (RFC 8446 4.1.3): does a TLS 1.3 server mark a lower
version's ServerHello.random?

A TLS 1.3 server that negotiates TLS 1.2 must end ServerHello.random with "DOWNGRD\\x01", and
with "DOWNGRD\\x00" when it negotiates TLS 1.1 or below, so that a TLS 1.3 client sees a
downgrade forced by an attacker (who cannot change the random: the signature covers it). The
check sends the versions check's hello for the highest TLS 1.0-1.2 version the server speaks
(TLS 1.3 not offered) and, when the server also speaks TLS 1.1 or 1.0, one for the highest
of those, and reads the last 8 bytes of each ServerHello.random:
  - the sentinel in each: supported;
  - missing in one: not supported (a finding), with the bytes that were there;
  - no ServerHello: inconclusive.
Not applicable when the server does not speak TLS 1.3, or speaks nothing below it. One or
two connections.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS12, TLS13
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.probes.checks.renegotiation import undetermined
from tlsprobe.probes.outcome import STOP_HELLO

TLS12_SENTINEL = b"DOWNGRD\x01"
TLS11_SENTINEL = b"DOWNGRD\x00"


def expected(version: int) -> bytes:
    """The sentinel RFC 8446 4.1.3 asks for when a TLS 1.3 server negotiates `version`."""
    return TLS12_SENTINEL if version == TLS12 else TLS11_SENTINEL


async def run(ctx: CheckContext) -> CheckResult:
    spoken = ctx.spoken
    if TLS13 not in spoken:
        why = undetermined(ctx, TLS13, TLS13)
        return ctx.inconclusive(why) if why else ctx.result(
            Verdict.not_applicable, "the server does not speak TLS 1.3: the sentinel is a "
            "TLS 1.3 server's")
    lower = sorted((v for v in spoken if 0x0301 <= v <= TLS12), reverse=True)
    if not lower:
        why = undetermined(ctx, 0x0301, TLS12)
        return ctx.inconclusive(why) if why else ctx.result(
            Verdict.not_applicable, "the server speaks TLS 1.3 only: there is no lower "
            "version to be downgraded to")
    asked = [lower[0]] + [v for v in lower[1:] if v < TLS12][:1]
    evidence: list[str] = []
    missing: list[str] = []
    for version in asked:
        name = registry.version_name(version)
        config, _ = ctx.version_hello(version)
        out = await ctx.hello(config, STOP_HELLO, label=name)
        if out.status != "server_hello" or out.version is None:
            return ctx.inconclusive(f"a {name} hello without TLS 1.3: {out.describe()}",
                                    tuple(evidence))
        tail, want = out.server_random[-8:], expected(out.version)
        got = registry.version_name(out.version)
        evidence.append(f"sent: a {name} hello; received: ServerHello {got}, random ends "
                        f"{tail!r}")
        if tail != want:
            missing.append(f"{got} (expected {want!r})")
    if missing:
        return ctx.result(Verdict.not_supported, "a TLS 1.3 server answered a lower-version "
                          f"hello without the downgrade sentinel: {'; '.join(missing)}",
                          tuple(evidence), code="check.downgrade_sentinel", severity="low")
    return ctx.result(Verdict.supported, "ServerHello.random ends with the RFC 8446 4.1.3 "
                      "sentinel for " + ", ".join(registry.version_name(v) for v in asked),
                      tuple(evidence))


CHECK = ActiveCheck("downgrade_sentinel", "TLS 1.3 downgrade sentinel (RFC 8446 4.1.3)", run)
