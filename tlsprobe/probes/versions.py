"""Protocol versions: one connection per version, each offering only that version.

TLS 1.3 is offered together with TLS 1.2 (and the TLS 1.2 suites), so a server without
TLS 1.3 answers with a TLS 1.2 ServerHello, a clear "no", instead of an ambiguous alert.
The TLS 1.2 and older connections run to the end of the server's first flight, so their
Certificate message gives the certificate summary at no extra cost.

A refusal of these large offers answers that hello, not the version: before TLS 1.3 or
TLS 1.2 (or a version in `confirm`, e.g. one a policy requires) is called "not spoken", and
whenever an older version is refused other than with a protocol_version alert, one minimal
conformant hello of that version (few suites, x25519/P-256/P-384, one x25519 share) must
be refused too; answered, the version is spoken; unanswered, it is inconclusive.
"""

from __future__ import annotations

import asyncio

from tlsprobe import registry
from tlsprobe.engine.config import (DEFAULT_SIGALGS, DEFAULT_SUITES_12, DEFAULT_SUITES_13, SSL30,
                                    TLS10, TLS11, TLS12, TLS13, ClientConfig)
from tlsprobe.probes.groups import candidate_groups
from tlsprobe.probes.scheduler import STOP_FLIGHT, STOP_HELLO, Outcome, TargetRunner
from tlsprobe.model.audit import VersionSupport
from tlsprobe.model.probe import Codepoint

ALL_VERSIONS = (TLS13, TLS12, TLS11, TLS10, SSL30)
PHASE = "versions"
COMMON_SHARES = (0x001D, 0x0017)
MINIMAL_GROUPS = (0x001D, 0x0017, 0x0018)
PROTOCOL_VERSION_ALERT = 70


def minimal_config(run: TargetRunner, version: int) -> ClientConfig:
    """An ordinary, small, RFC-conformant hello of `version` alone (what any client sends)."""
    if version == TLS13:
        return run.config((TLS13,), groups=MINIMAL_GROUPS, key_share_groups=(0x001D,),
                          cipher_suites_13=DEFAULT_SUITES_13, signature_algorithms=DEFAULT_SIGALGS)
    suites = tuple(c for c in DEFAULT_SUITES_12 + (0x000A,)
                   if (info := registry.cipher_suite(c)) is not None and info.applies_to(version))
    return run.config((version,), groups=MINIMAL_GROUPS, cipher_suites_12=suites,
                      signature_algorithms=DEFAULT_SIGALGS)


def established_hello(run: TargetRunner, version: int,
                      support: VersionSupport | None) -> tuple[ClientConfig, str]:
    """The hello that established `version` in the versions check: the full offer, or the
    minimal one when the full offer was refused (`support.minimal`): what a later probe of
    this version should start from."""
    config, stop = version_hello(run, version)
    if support is not None and support.minimal:
        return minimal_config(run, version), stop
    return config, stop


def version_hello(run: TargetRunner, version: int) -> tuple[ClientConfig, str]:
    """The versions check's hello for `version` and where its connection stops (also the
    audit's reference hello, repeated in later phases: probes/consistency.py)."""
    if version == TLS13:
        return run.config((TLS13, TLS12), groups=tuple(candidate_groups(TLS13)),
                          key_share_groups=COMMON_SHARES,
                          cipher_suites_13=tuple(registry.suites_for_version(TLS13)),
                          cipher_suites_12=tuple(registry.suites_for_version(TLS12))), STOP_HELLO
    return run.config((version,), groups=tuple(candidate_groups(TLS12)),
                      cipher_suites_12=tuple(registry.suites_for_version(version))), STOP_FLIGHT


async def check_version(run: TargetRunner, version: int, confirm: frozenset[int] = frozenset()
                        ) -> tuple[VersionSupport, Outcome]:
    """Is `version` spoken? The outcome is kept for the certificate summary."""
    config, stop = version_hello(run, version)
    out = await run.run(config, PHASE, stop, confirm=False)
    verdict = _verdict(version, out)
    # A bare close is always doubtful (alert None): it may be the network's, not the server's.
    if verdict.status == "not_supported" and out.refused and _doubtful(version, out, confirm):
        return await _confirm(run, version, out)
    return verdict, out


def _doubtful(version: int, out: Outcome, confirm: frozenset[int]) -> bool:
    """Whether a refusal needs a minimal hello's confirmation before "not spoken"."""
    return version in (TLS13, TLS12) or version in confirm or \
        out.alert != PROTOCOL_VERSION_ALERT


async def _confirm(run: TargetRunner, version: int, first: Outcome
                   ) -> tuple[VersionSupport, Outcome]:
    cp, name = Codepoint.version(version), registry.version_name(version)
    stop = STOP_HELLO if version == TLS13 else STOP_FLIGHT
    out = await run.run(minimal_config(run, version), PHASE, stop)
    said = f"the full offer was refused ({first.describe()})"
    if out.answered and out.version == version:
        return VersionSupport(cp, "supported", f"{out.describe()} to a minimal hello; "
                              f"{said}", minimal=True), out
    if out.answered or out.refused:
        what = out.describe() if out.refused else \
            f"answered with {registry.version_name(out.version or 0)}"
        return VersionSupport(cp, "not_supported", f"{first.describe()}; a minimal {name} "
                              f"hello too ({what})"), first
    # the unanswered outcome: the one whose failure kind the audit reports
    return VersionSupport(cp, "inconclusive", f"{said}; a minimal {name} hello was not "
                          f"answered ({out.describe()})"), out


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


async def check_versions(run: TargetRunner, versions: tuple[int, ...] = ALL_VERSIONS,
                         confirm: frozenset[int] = frozenset()
                         ) -> list[tuple[VersionSupport, Outcome]]:
    """All versions, concurrently (the scheduler's per-host cap still applies); `confirm`:
    versions whose refusal must always be confirmed (those a policy requires)."""
    return list(await asyncio.gather(*(check_version(run, v, confirm) for v in versions)))
