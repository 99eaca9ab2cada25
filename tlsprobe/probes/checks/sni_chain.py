"""The chain served without SNI compared with the one served with it: what does a client
that sends no server_name get?

Clients without SNI (old Android and Java, embedded stacks, scripts that connect by
address, some monitoring) get the server's default certificate, which on a host with
several names is often another site's, and then a name mismatch. The chain with SNI comes
from the certificate checks' shared connection (_cert_chain.py); one more connection sends
the same hello without the server_name extension. Verdicts:
  - the same leaf (SHA-256 of its DER) and the same chain: not vulnerable;
  - another leaf, or the same leaf with another chain: not vulnerable, info, naming both
    leaves' subjects (their fingerprints when the subjects are the same; or the chains'
    lengths);
  - the hello without server_name refused with an alert or a close: not vulnerable, info
    (clients without SNI cannot connect; said so, with the alert), when the hello that
    established the version is answered right after (one connection more,
    CheckContext.still_answered); not answered, inconclusive (a rate limiter);
  - no SNI sent to this target at all (an IP address without --sni, or --no-sni): not
    applicable; either chain not had for another reason: inconclusive.
Every other chain (another key type's) is compared too: the cert phase's connection got it
with SNI, one more connection sends the hello that selects it without server_name
(_every_chain.py).
"""

from __future__ import annotations

import hashlib

from tlsprobe.engine.certtwin import readable_certificate
from tlsprobe.model.check_details import SniChainDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._cert_chain import NoChain, Served, again
from tlsprobe.probes.checks._every_chain import every_chain
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


def _subject(der: bytes) -> str:
    try:
        return readable_certificate(der).subject.rfc4514_string() or "(empty)"
    except ValueError as exc:
        return f"(unparsable certificate: {exc})"


async def run(ctx: CheckContext) -> CheckResult:
    name = ctx.runner.server_name
    if not name:
        return ctx.result(Verdict.not_applicable, "no server_name is sent to this target "
                          "(an IP address without --sni, or --no-sni): every connection "
                          "is already one without SNI")
    return await every_chain(ctx, judge, lead=f"with SNI {name}: ")


async def judge(ctx: CheckContext, got: Served) -> CheckResult:
    """One chain with SNI compared with the chain the same hello gets without it."""
    name = ctx.runner.server_name or ""
    leaf = hashlib.sha256(got.chain[0]).hexdigest()
    subject = _subject(got.chain[0])
    without: Served | str = await again(ctx, got, "without SNI", without_sni=True)
    evidence = [(f"with SNI {name}: {subject} (SHA-256 {leaf}), {len(got.chain)} "
                "certificates")]
    if isinstance(without, NoChain) and without.refused:
        # a refusal is a fact only while the server still answers (confirm.still_answered)
        unsure = await ctx.still_answered(got.version)
        if unsure:
            return ctx.inconclusive(f"without SNI: refused ({without}), {unsure}",
                                    (*evidence, f"without SNI: {without}"))
        return ctx.result(Verdict.not_vulnerable, f"the server refuses a hello without "
                          f"server_name ({without}): clients without SNI cannot connect",
                          (*evidence, f"without SNI: {without}"), severity=Severity.info,
                          details=SniChainDetails(name, leaf, subject, None, None, None,
                                                  str(without)))
    if isinstance(without, str):
        return ctx.inconclusive(f"without SNI: {without}", tuple(evidence))
    other = hashlib.sha256(without.chain[0]).hexdigest()
    other_subject = _subject(without.chain[0])
    same_chain = without.chain == got.chain
    details = SniChainDetails(name, leaf, subject, other, other_subject, same_chain, None)
    evidence.append(f"without SNI: {other_subject} (SHA-256 {other}), {len(without.chain)} "
                    "certificates")
    if other != leaf:
        told = (other_subject, subject) if other_subject != subject else \
            (f"SHA-256 {other[:16]}..., of the same subject", f"SHA-256 {leaf[:16]}...")
        return ctx.result(Verdict.not_vulnerable, f"without SNI the server sends another "
                          f"certificate: {told[0]}, where {name} gets {told[1]}",
                          tuple(evidence), severity=Severity.info, details=details)
    if not same_chain:
        return ctx.result(Verdict.not_vulnerable, f"the same leaf without SNI, with another "
                          f"chain ({len(without.chain)} certificates, not "
                          f"{len(got.chain)})", tuple(evidence), severity=Severity.info,
                          details=details)
    return ctx.result(Verdict.not_vulnerable, f"the same chain with and without SNI "
                      f"({subject})", tuple(evidence), details=details)


CHECK = ActiveCheck("sni_chain", "the certificate chain without SNI compared with SNI", run,
                    SniChainDetails)
