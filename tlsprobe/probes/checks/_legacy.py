"""What the checks about TLS 1.0-1.2 only share (renegotiation, client renegotiation,
compression, ROBOT): the highest TLS 1.0-1.2 version spoken, the versions check's hello for
it, and the result when none is (not applicable, or inconclusive when the audit left one of
them open). RENEGOTIATION_INFO is the RFC 5746 extension's type."""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS12, ClientConfig
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.checks.base import CheckContext

__all__ = ["RENEGOTIATION_INFO", "legacy_hello", "legacy_top", "no_legacy"]

RENEGOTIATION_INFO = 0xFF01


def legacy_top(ctx: CheckContext) -> int | None:
    """The highest TLS 1.0-1.2 version the server speaks (None: only TLS 1.3 or nothing)."""
    legacy = [v for v in ctx.spoken if 0x0301 <= v <= TLS12]
    return max(legacy) if legacy else None


def no_legacy(ctx: CheckContext, what: str) -> CheckResult:
    """The result when no TLS 1.0-1.2 version is spoken: not applicable, or inconclusive when
    the audit left one of them open."""
    why = ctx.undetermined(0x0301, TLS12)
    if why is not None:
        return ctx.inconclusive(why)
    return ctx.result(Verdict.not_applicable, f"the server speaks no TLS 1.0-1.2 version "
                      f"({what})")


def legacy_hello(ctx: CheckContext, what: str) -> tuple[str, ClientConfig] | CheckResult:
    """The name of the highest TLS 1.0-1.2 version spoken and the versions check's hello
    for it; or the result to return when none is (`no_legacy(ctx, what)`)."""
    version = legacy_top(ctx)
    if version is None:
        return no_legacy(ctx, what)
    config, _ = ctx.version_hello(version)
    return registry.version_name(version), config
