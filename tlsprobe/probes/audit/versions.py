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

The same minimal hello is tried when the full offer got no answer at all (a reset, a
timeout, bytes that are not a TLS answer): middleboxes that reset or drop hellos above a
size (the TLS 1.3 versions hello is over 1,000 bytes) must not cost a whole version. Only
when the minimal hello is not answered either is the version left inconclusive. When no
version's full offer was answered or refused (a dead target, or a path that resets every
large hello), one minimal hello is tried first, and the others only if it established
something: a target that is not there costs one more connection, not five.

A refusal holds only while the server answers at all: when some version was refused, the
hello that established the highest spoken version is asked once more after the others
(one connection, probes/audit/confirm.py still_answered); a server that no longer answers
it (a rate limiter after a few connections) leaves every refused version inconclusive.
"""

from __future__ import annotations

import asyncio

from tlsprobe import registry
from tlsprobe.engine.config import (
    DEFAULT_SIGALGS,
    DEFAULT_SUITES_12,
    DEFAULT_SUITES_13,
    SSL30,
    TLS10,
    TLS11,
    TLS12,
    TLS13,
    ClientConfig,
)
from tlsprobe.errors import FailureKind
from tlsprobe.model.audit import VersionSupport
from tlsprobe.model.probe import Codepoint
from tlsprobe.model.vocab import VersionStatus
from tlsprobe.net.transport import NotApplicable
from tlsprobe.probes.audit.confirm import refusal_stands, still_answered
from tlsprobe.probes.audit.groups import candidate_groups
from tlsprobe.probes.audit.outcome import Stop
from tlsprobe.probes.audit.scheduler import (
    STOP_FLIGHT,
    STOP_HELLO,
    Outcome,
    TargetRunner,
)

ALL_VERSIONS = (TLS13, TLS12, TLS11, TLS10, SSL30)
PHASE = "versions"
COMMON_SHARES = (0x001D, 0x0017)
MINIMAL_GROUPS = (0x001D, 0x0017, 0x0018)
MINIMAL_SHARES = (0x001D,)
PROTOCOL_VERSION_ALERT = 70


def minimal_config(run: TargetRunner, version: int) -> ClientConfig:
    """An ordinary, small, RFC-conformant hello of `version` alone (what any client sends)."""
    if version == TLS13:
        return run.config((TLS13,), groups=MINIMAL_GROUPS, key_share_groups=MINIMAL_SHARES,
                          cipher_suites_13=DEFAULT_SUITES_13, signature_algorithms=DEFAULT_SIGALGS)
    suites = tuple(c for c in DEFAULT_SUITES_12 + (0x000A,)
                   if (info := registry.cipher_suite(c)) is not None and info.applies_to(version))
    return run.config((version,), groups=MINIMAL_GROUPS, cipher_suites_12=suites,
                      signature_algorithms=DEFAULT_SIGALGS)


def established_hello(run: TargetRunner, version: int,
                      support: VersionSupport | None) -> tuple[ClientConfig, Stop]:
    """The hello that established `version` in the versions check: the full offer, or the
    minimal one when the full offer was refused (`support.minimal`): what a later probe of
    this version should start from."""
    config, stop = version_hello(run, version)
    if support is not None and support.minimal:
        return minimal_config(run, version), stop
    return config, stop


def version_hello(run: TargetRunner, version: int) -> tuple[ClientConfig, Stop]:
    """The versions check's hello for `version` and where its connection stops (also the
    audit's reference hello, repeated in later phases: probes/audit/consistency.py)."""
    if version == TLS13:
        return run.config((TLS13, TLS12), groups=tuple(candidate_groups(TLS13)),
                          key_share_groups=COMMON_SHARES,
                          cipher_suites_13=tuple(registry.suites_for_version(TLS13)),
                          cipher_suites_12=tuple(registry.suites_for_version(TLS12))), STOP_HELLO
    return run.config((version,), groups=tuple(candidate_groups(TLS12)),
                      cipher_suites_12=tuple(registry.suites_for_version(version))), STOP_FLIGHT


async def _full_offer(run: TargetRunner, version: int, confirm: frozenset[int],
                      minimal: dict[int, Outcome]) -> tuple[VersionSupport, Outcome, bool]:
    """The full offer's verdict, a refusal confirmed by the minimal hello (its refusal kept
    in `minimal`); the flag says whether that minimal hello was sent."""
    config, stop = version_hello(run, version)
    out = await run.run(config, PHASE, stop, confirm=False)
    verdict = _verdict(version, out)
    # A bare close is always doubtful (alert None): it may be the network's, not the server's.
    if verdict.status == "not_supported" and out.refused and _doubtful(version, out, confirm):
        support, used = await _confirm(run, version, out, minimal)
        return support, used, True
    return verdict, out, False


def _doubtful(version: int, out: Outcome, confirm: frozenset[int]) -> bool:
    """Whether a refusal needs a minimal hello's confirmation before "not spoken"."""
    return version in (TLS13, TLS12) or version in confirm or \
        out.alert != PROTOCOL_VERSION_ALERT


async def _confirm(run: TargetRunner, version: int, first: Outcome,
                   minimal: dict[int, Outcome]) -> tuple[VersionSupport, Outcome]:
    cp, name = Codepoint.version(version), registry.version_name(version)
    stop = STOP_HELLO if version == TLS13 else STOP_FLIGHT
    out = await run.run(minimal_config(run, version), PHASE, stop)
    if out.refused:
        minimal[version] = out
    said = f"the full offer was refused ({first.describe()})"
    if out.answered and out.version == version:
        return VersionSupport(cp, VersionStatus.SUPPORTED, f"{out.describe()} to a minimal hello; "
                              f"{said}", minimal=True), out
    if out.refused and out.alert != PROTOCOL_VERSION_ALERT and _only_version(run, version):
        # QUIC carries TLS 1.3 alone: its refusal is about the hello's groups, suites or ALPN
        return VersionSupport(cp, VersionStatus.INCONCLUSIVE, f"{said}; a minimal {name} hello "
                              f"too ({out.describe()}): the channel carries {name} only, so "
                              "the refusals are about these hellos (groups, suites, ALPN), "
                              "not the version"), first
    if out.answered or out.refused:
        what = out.describe() if out.refused else \
            f"answered with {registry.version_name(out.version or 0)}"
        return VersionSupport(cp, VersionStatus.NOT_SUPPORTED, f"{first.describe()}; a minimal {name} "
                              f"hello too ({what})"), first
    # the unanswered outcome: the one whose failure kind the audit reports
    return VersionSupport(cp, VersionStatus.INCONCLUSIVE, f"{said}; a minimal {name} hello was not "
                          f"answered ({out.describe()})"), out


def _only_version(run: TargetRunner, version: int) -> bool:
    """Whether the channel carries `version` alone (QUIC: TLS 1.3, RFC 9001 4.2), so that
    every server on it speaks that version: a hello of any other is not applicable."""
    return all(isinstance(run.scheduler.channel.adapt(minimal_config(run, v)), NotApplicable)
               for v in ALL_VERSIONS if v != version)


def _verdict(version: int, out: Outcome) -> VersionSupport:
    cp = Codepoint.version(version)
    if out.answered:
        if out.version == version:
            return VersionSupport(cp, VersionStatus.SUPPORTED, out.describe())
        return VersionSupport(cp, VersionStatus.NOT_SUPPORTED, f"the server answered with "
                              f"{registry.version_name(out.version or 0)}")
    if out.refused:
        return VersionSupport(cp, VersionStatus.NOT_SUPPORTED, out.describe())
    return VersionSupport(cp, VersionStatus.INCONCLUSIVE, out.describe())


async def check_versions(run: TargetRunner, versions: tuple[int, ...] = ALL_VERSIONS,
                         confirm: frozenset[int] = frozenset()
                         ) -> list[tuple[VersionSupport, Outcome]]:
    """All versions, concurrently (the scheduler's per-host cap still applies); `confirm`:
    versions whose refusal must always be confirmed (those a policy requires). A version
    whose full offer got no answer is asked again with the minimal hello (`_unanswered`)."""
    minimal: dict[int, Outcome] = {}   # the minimal hellos' refusals
    full = await asyncio.gather(*(_full_offer(run, v, confirm, minimal) for v in versions))
    results = [(support, out) for support, out, _ in full]
    todo = [i for i, (support, out, small) in enumerate(full)
            if not small and _retry_small(support, out)]
    if todo and all(support.status == "inconclusive" for support, _ in results):
        # nothing established yet: one minimal hello decides whether the rest are worth it
        first = todo.pop(0)
        trial = await _unanswered(run, versions[first], results[first][1])
        if trial[0].status == "inconclusive":
            return results   # never reached: the report says what the full offers got
        results[first] = trial
    again = await asyncio.gather(*(_unanswered(run, versions[i], results[i][1]) for i in todo))
    for i, result in zip(todo, again):
        results[i] = result
    return await _refusals_hold(run, results, minimal, confirm)


async def _refusals_hold(run: TargetRunner, results: list[tuple[VersionSupport, Outcome]],
                         minimal: dict[int, Outcome], confirm: frozenset[int]
                         ) -> list[tuple[VersionSupport, Outcome]]:
    """A version refused is "not spoken" only while the server answers at all: when some
    version was refused, the hello that established the highest spoken one is asked once
    more, after every refusal (confirm.still_answered); not answered, each refused version
    is inconclusive. (A version answered with another version keeps its "not spoken".)
    TLS 1.3, TLS 1.2 and the versions in `confirm` (whose "not spoken" can fail CI:
    version.missing) hold by an elimination end's rule (confirm.refusal_stands): that
    established hello, then the minimal hello twice in a row."""
    refused = [i for i, (s, o) in enumerate(results)
               if s.status == VersionStatus.NOT_SUPPORTED and not o.answered]
    spoken = [s for s, o in results if s.status == VersionStatus.SUPPORTED]
    if not refused or not spoken:
        return results
    top = max(spoken, key=lambda s: s.version.id)
    config, stop = established_hello(run, top.version.id, top)
    named = established_name(top.version.id)
    rest = []
    for i in refused:
        v = results[i][0].version.id
        if v not in minimal or not (v in (TLS13, TLS12) or v in confirm):
            rest.append(i)
            continue
        held = await refusal_stands(run, minimal[v], minimal_config(run, v), config, PHASE,
                                    STOP_HELLO if v == TLS13 else STOP_FLIGHT,
                                    names_only=False, named=named)
        support, first = results[i]
        if held.answered and held.version == v:
            results[i] = (VersionSupport(support.version, VersionStatus.SUPPORTED,
                                         f"{held.describe()} to a minimal hello asked again; "
                                         f"{support.detail}", minimal=True), held)
        elif held.answered:
            continue   # answered with another version: not spoken, as before
        elif not held.confirmed:
            results[i] = (VersionSupport(support.version, VersionStatus.INCONCLUSIVE,
                                         f"{support.detail}; the minimal hello's refusal is "
                                         f"{_lower(held.describe())}"), first)
    why = await still_answered(run, config, stop, PHASE, named) if rest else None
    if why is None:
        return results
    for i in rest:
        support, first = results[i]
        results[i] = (VersionSupport(support.version, VersionStatus.INCONCLUSIVE,
                                     f"{support.detail}; {why}"), first)
    return results


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


def established_name(version: int) -> str:
    """How `still_answered` names the hello that established `version`."""
    return f"the hello that established {registry.version_name(version)}"


def _retry_small(support: VersionSupport, out: Outcome) -> bool:
    """Whether the full offer's outcome leaves the version open in a way a minimal hello may
    settle: no answer and no refusal (not a bug of ours, not a hello that was never sent)."""
    return support.status == "inconclusive" and not out.refused and not out.answered and \
        out.attempts > 0 and out.kind != FailureKind.INTERNAL


async def _unanswered(run: TargetRunner, version: int, first: Outcome
                      ) -> tuple[VersionSupport, Outcome]:
    """The full offer of `version` got no answer (`first`): the minimal hello decides;
    answered with the version, it is spoken (and later probes start from that hello);
    refused with protocol_version (twice), it is not spoken; refused otherwise (which may be
    about that hello's few suites and groups) or unanswered too, inconclusive (the first
    failure's kind)."""
    cp, name = Codepoint.version(version), registry.version_name(version)
    stop = STOP_HELLO if version == TLS13 else STOP_FLIGHT
    # refused after a reset: asked twice before "not spoken" (a negative verdict)
    out = await run.run(minimal_config(run, version), PHASE, stop, confirm=True)
    said = f"the full offer was answered with {first.describe()}" \
        if first.violation is not None else f"the full offer was not answered ({first.describe()})"
    if out.answered and out.version == version:
        return VersionSupport(cp, VersionStatus.SUPPORTED, f"{out.describe()} to a minimal hello; "
                              f"{said}", minimal=True), out
    if out.answered:
        return VersionSupport(cp, VersionStatus.NOT_SUPPORTED, f"{said}; a minimal {name} hello was "
                              f"answered with {registry.version_name(out.version or 0)}"), out
    if out.refused and out.alert == PROTOCOL_VERSION_ALERT:
        return VersionSupport(cp, VersionStatus.NOT_SUPPORTED, f"{said}; a minimal {name} hello was "
                              f"refused ({out.describe()})"), out
    if out.refused:   # about that hello's parameters, maybe: the full offer said nothing
        return VersionSupport(cp, VersionStatus.INCONCLUSIVE, f"{said}; a minimal {name} hello was "
                              f"refused ({out.describe()}), not with protocol_version"), first
    if out.violation is not None:
        return VersionSupport(cp, VersionStatus.INCONCLUSIVE, f"{said}; a minimal {name} hello "
                              f"was answered with {out.describe()}"), first
    return VersionSupport(cp, VersionStatus.INCONCLUSIVE, f"{said}; a minimal {name} hello was not "
                          f"answered either ({out.describe()})"), first
