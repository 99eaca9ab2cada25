"""Protocol versions: one connection per version, each offering only that version.

TLS 1.3 is offered together with TLS 1.2 (and the TLS 1.2 suites), so a server without
TLS 1.3 answers with a TLS 1.2 ServerHello, a clear "no", instead of an ambiguous alert.
The TLS 1.2 and older connections run to the end of the server's first flight, so their
Certificate message gives the certificate summary at no extra cost.
"""

from __future__ import annotations

import asyncio

from tlsprobe import registry
from tlsprobe.engine.config import SSL30, TLS10, TLS11, TLS12, TLS13
from tlsprobe.probes.groups import candidate_groups
from tlsprobe.probes.scheduler import STOP_FLIGHT, STOP_HELLO, Outcome, TargetRunner
from tlsprobe.report.audit_model import VersionSupport
from tlsprobe.report.model import Codepoint

ALL_VERSIONS = (TLS13, TLS12, TLS11, TLS10, SSL30)
PHASE = "versions"
COMMON_SHARES = (0x001D, 0x0017)


async def check_version(run: TargetRunner, version: int) -> tuple[VersionSupport, Outcome]:
    """Is `version` spoken? The outcome is kept for the certificate summary."""
    if version == TLS13:
        config = run.config((TLS13, TLS12), groups=tuple(candidate_groups(TLS13)),
                            key_share_groups=COMMON_SHARES,
                            cipher_suites_13=tuple(registry.suites_for_version(TLS13)),
                            cipher_suites_12=tuple(registry.suites_for_version(TLS12)))
        out = await run.run(config, PHASE, STOP_HELLO)
    else:
        groups = candidate_groups(TLS12)
        config = run.config((version,), groups=tuple(groups),
                            cipher_suites_12=tuple(registry.suites_for_version(version)))
        out = await run.run(config, PHASE, STOP_FLIGHT)
    return _verdict(version, out), out


def _verdict(version: int, out: Outcome) -> VersionSupport:
    cp = Codepoint.version(version)
    if out.answered:
        if out.version == version:
            return VersionSupport(cp, "supported", out.describe())
        return VersionSupport(cp, "not_supported", f"the server answered with "
                              f"{registry.version_name(out.version or 0)}")
    if out.refused:
        return VersionSupport(cp, "not_supported", out.describe())
    return VersionSupport(cp, "inconclusive", out.describe())


async def check_versions(run: TargetRunner, versions: tuple[int, ...] = ALL_VERSIONS
                         ) -> list[tuple[VersionSupport, Outcome]]:
    """All versions, concurrently (the scheduler's per-host cap still applies)."""
    return list(await asyncio.gather(*(check_version(run, v) for v in versions)))
