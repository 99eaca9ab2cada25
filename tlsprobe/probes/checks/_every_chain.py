"""A certificate check on a server with several certificate chains (an RSA and an ECDSA one:
`openssl s_server -cert ... -dcert ...`, nginx with two ssl_certificate lines) judges each of
them, as the audit's certificate findings do: the chain of the checks' shared connection
(_cert_chain.py `served`), then the chain of every other key type the cert phase read
(TargetRunner.chains, probes/audit/certs.py), never one inferred.

A check that reads the chain alone (lifetime, key usage, order) judges another chain from the
cert phase's connection that carried it: no connection more. A check that reads what comes
with the chain (a stapled OCSP response, SCTs in the TLS extension) asks for it on one
connection per other key type (`served_as`: the cert phase's hello selecting that
certificate, with status_request and the SCT extension), shared by every such check.

The result is the worst of the chains' verdicts: a finding above info (the most severe),
else inconclusive when one chain's is (a chain that could not be read, or the cert phase's
search for the other chains left unfinished: never "ok" for a chain not judged), else an
info finding, else the default chain's verdict (one not "not applicable" when there is one).
Its reason and evidence name each chain's key type ("RSA certificate: ...; ECDSA
certificate: ..."); `CheckResult.chains` holds each chain's own verdict. A server with one
chain, whose search was complete, gets the default chain's result as it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from tlsprobe.model.checks import ChainVerdict, CheckResult, Severity, Verdict
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._cert_chain import Served, of_phase, served, served_as
from tlsprobe.probes.checks.base import CheckContext

__all__ = ["Judge", "every_chain", "with_other_chains"]

#: a check's verdict on one chain
Judge = Callable[[CheckContext, Served], Awaitable[CheckResult]]

OTHER = "other"


def other_chains(ctx: CheckContext, default: str | None) -> list[tuple[str, Outcome]]:
    """The chains the cert phase read of another key type than `default` (the key type of
    the checks' own chain; None or "unknown": the cert phase's first chain is taken as it)."""
    chains = list(ctx.runner.chains.items())
    if default is None or default == "unknown":
        return chains[1:]
    return [(kind, read) for kind, read in chains if kind != default]


async def every_chain(ctx: CheckContext, judge: Judge, *, stapling: bool = False,
                      lead: str = "") -> CheckResult:
    """`judge` on the checks' shared chain (inconclusive, `lead` + why, when it cannot be
    had) and on every other chain (`with_other_chains`)."""
    got = await served(ctx)
    first = ctx.inconclusive(f"{lead}{got}") if isinstance(got, str) else await judge(ctx, got)
    return await with_other_chains(ctx, first, got.key_type if isinstance(got, Served)
                                   else None, judge, stapling=stapling)


async def with_other_chains(ctx: CheckContext, first: CheckResult, default: str | None,
                            judge: Judge, *, stapling: bool = False) -> CheckResult:
    """`first` (the verdict on the check's own chain, whose leaf's key type is `default`;
    None when it could not be had) with `judge`'s verdict on every other chain; `stapling`:
    the check reads what comes with a chain, so another one is asked for on a connection of
    its own (`served_as`)."""
    others = other_chains(ctx, default)
    note = ctx.runner.chains_note
    if not others and note is None:
        return first
    if default is None:
        default = next(iter(ctx.runner.chains), "default")
    parts = [_part(default, first)]
    for kind, read in others:
        source = await served_as(ctx, kind) if stapling else of_phase(kind, read)
        one = ctx.inconclusive(source) if isinstance(source, str) else await judge(ctx, source)
        parts.append(_part(kind, one))
    if note is not None:
        parts.append(ChainVerdict(OTHER, Verdict.inconclusive, (
            f"the search for the server's other certificate chains is not complete ({note}): "
            "a chain it did not find was not judged")))
    return combined(ctx, first, tuple(parts))


def _part(kind: str, result: CheckResult) -> ChainVerdict:
    return ChainVerdict(kind, result.verdict, result.reason, result.evidence, result.severity,
                        result.details)


def label(part: ChainVerdict) -> str:
    """How a chain's verdict is introduced in the reason and evidence."""
    return "other certificate chains" if part.key_type == OTHER else \
        f"{part.key_type} certificate"


def _rank(part: ChainVerdict) -> int:
    return list(Severity).index(part.severity) if part.severity is not None else -1


def combined(ctx: CheckContext, first: CheckResult, parts: tuple[ChainVerdict, ...]
             ) -> CheckResult:
    """The one result of the chains' verdicts (module text for the rule)."""
    serious = [p for p in parts if p.severity not in (None, Severity.info)]
    info = [p for p in parts if p.severity == Severity.info]
    severity: Severity | None = None
    if serious:
        top = max(serious, key=_rank)
        verdict, severity = top.verdict, top.severity
    elif any(p.verdict == Verdict.inconclusive for p in parts):
        verdict = Verdict.inconclusive
    elif info:
        verdict, severity = info[0].verdict, Severity.info
    else:
        verdict = next((p.verdict for p in parts if p.verdict != Verdict.not_applicable),
                       first.verdict)
    reason = "; ".join(f"{label(p)}: {p.reason}" for p in parts)
    evidence = tuple(f"{label(p)}: {e}" for p in parts for e in p.evidence)
    result = ctx.result(verdict, reason, evidence, severity=severity, details=first.details)
    return replace(result, chains=parts)
