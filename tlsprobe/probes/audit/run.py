"""The audit of one server, and of many: plans the checks, runs them concurrently through
one Scheduler, and assembles an AuditReport (policies and findings included).

Order of work per target: protocol versions first (one connection each), then, for the
versions the server speaks and all at once: groups (TLS 1.3 and TLS 1.2; on a server without
TLS 1.2, also the highest of TLS 1.1 and 1.0 it speaks, `_older_groups`), post-quantum
verdicts (after the TLS 1.3 groups, whose order they use), cipher suites per version and
signature schemes; then the active checks asked for (probes/checks/), which read what those
established. When only groups and post-quantum verdicts are asked for, the version phase is
skipped: the group enumeration tells by itself whether a version is spoken.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tlsprobe import registry
from tlsprobe.engine.config import SSL30, TLS10, TLS11, TLS12, TLS13
from tlsprobe.errors import FailureKind
from tlsprobe.model.audit import (
    AuditReport,
    GroupAudit,
    PqVerdict,
    SigalgAudit,
    SuiteAudit,
    VersionSupport,
)
from tlsprobe.model.encode import started_at
from tlsprobe.model.probe import Codepoint, TrustCheck
from tlsprobe.model.vocab import (
    Answer,
    GroupMethod,
    SigalgStatus,
    TrustStatus,
    VersionStatus,
)
from tlsprobe.net.tcp import Target
from tlsprobe.policy.findings import with_findings
from tlsprobe.policy.load import Policy
from tlsprobe.policy.rating import rated
from tlsprobe.probes.audit import consistency, groups, pq, versions
from tlsprobe.probes.audit.boundary import internal_error_report
from tlsprobe.probes.audit.confirm import still_answered
from tlsprobe.probes.audit.scheduler import (
    STOP_FLIGHT,
    STOP_VERIFY,
    Outcome,
    Scheduler,
    TargetRunner,
)
from tlsprobe.probes.checks.catalog import ACTIVE, DERIVED

if TYPE_CHECKING:   # annotations only: the client profiles' types come with --clients
    from tlsprobe.model.clients import ClientProfile, ClientSimulation

ALL_CHECKS = ("versions", "groups", "pq", "suites", "sigalgs", "cert")
CHAIN_PHASE = "certificate"
PhaseHook = Callable[[Target, str], None]


@dataclass(frozen=True)
class AuditOptions:
    checks: tuple[str, ...] = ALL_CHECKS
    #: phases among `checks` run only because other checks read them (their findings are
    #: not reported: probes/checks/catalog.py read_only)
    read_only: tuple[str, ...] = ()
    extra_groups: tuple[int, ...] = ()
    server_name: str | None = None      # None: the host name (no SNI for IP addresses)
    send_sni: bool = True
    policies: tuple[Policy, ...] = ()
    versions: tuple[int, ...] = versions.ALL_VERSIONS
    verify: bool = True                 # check the certificate chain (cert check)
    cafile: str | None = None           # trust store; None: the system bundle
    clients: tuple[ClientProfile, ...] = ()   # scan --clients: the profiles to simulate

    @property
    def tls13_groups(self) -> tuple[int, ...]:
        """The groups the TLS 1.3 group audit offers beyond the registry's audited ranges:
        the extra groups, then each policy's required groups (required in TLS 1.3: asked,
        so that an absence is established, never assumed)."""
        required = (g for p in self.policies for g in p.required_groups)
        return tuple(dict.fromkeys((*self.extra_groups, *required)))


def sni_for(host: str, options: AuditOptions) -> str | None:
    if not options.send_sni:
        return None
    if options.server_name is not None:
        return options.server_name
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        return host


@dataclass
class _Run:
    """Everything one target's audit collects while its checks run."""

    runner: TargetRunner
    options: AuditOptions
    on_phase: PhaseHook | None
    outcomes: list[Outcome] = field(default_factory=list)
    unsure: dict[int, str] = field(default_factory=dict)   # version -> why it is not known
    no_chain: str | None = None     # why the cert phase has no chain, when it has none
    #: the cert phase's search for other key types' chains (probes/audit/certs.py): the
    #: chains found, with their offer, and why the search is not complete
    key_types: dict[str, tuple[Outcome, str]] = field(default_factory=dict)
    key_types_note: str | None = None

    def done(self, phase: str) -> None:
        if self.on_phase is not None:
            self.on_phase(self.runner.target, phase)


def _not_spoken(version: int, why: str) -> GroupAudit:
    return GroupAudit(version=Codepoint.version(version), spoken=False, method=GroupMethod.NOT_RUN,
                      notes=(why,))


def _unsure(v: VersionSupport) -> str:
    """The note of every section of a version whose support was not established."""
    return f"not tested: {v.version.name} support is inconclusive ({v.detail})"


def _not_known(version: int, why: str) -> GroupAudit:
    return GroupAudit(version=Codepoint.version(version), spoken=None, method=GroupMethod.NOT_RUN,
                      notes=(why,))


def _failure(results: list[tuple[VersionSupport, Outcome]]
             ) -> tuple[str, FailureKind] | None:
    """(message, kind) when no version was established: the target is unusable. Only when
    every version was refused is that the server's answer ("alert"); a version left
    inconclusive (reset, timeout) makes it a failure of that kind instead: the kind of the
    outcome that left it so."""
    vs = [v for v, _ in results]
    if not vs or any(v.status == "supported" for v in vs):
        return None
    unsure = [(v, out) for v, out in results if v.status == "inconclusive"]
    if not unsure:
        return ((f"the server accepted no protocol version "
                f"({', '.join(v.version.name for v in vs)}): {vs[0].detail}"),
                FailureKind.ALERT)
    detail = unsure[0][0].detail
    kind = unsure[0][1].kind or FailureKind.PROTOCOL
    if len(unsure) < len(vs):
        refused = ", ".join(v.version.name for v in vs if v.status == "not_supported")
        detail = (f"no protocol version established: "
                  f"{', '.join(v.version.name for v, _ in unsure)} inconclusive ({detail}); "
                  f"{refused} refused")
    return detail, kind


def _unreached(runner: TargetRunner) -> tuple[str, FailureKind] | None:
    """(message, kind) when no connection of the audit established anything (every one
    refused, reset, timed out or not TLS): the target was never reached, which the audit
    must report as that error, not as a server that accepts nothing."""
    if runner.conclusive or runner.first_unsure is None:
        return None
    unsure = runner.first_unsure
    return (f"{unsure.describe()} (no connection of the audit was answered)",
            unsure.kind or FailureKind.PROTOCOL)


async def audit_target(target: Target, scheduler: Scheduler, options: AuditOptions,
                       on_phase: PhaseHook | None = None) -> AuditReport:
    started = time.monotonic()
    run = _Run(TargetRunner(target, scheduler, sni_for(target.host, options),
                            cafile=options.cafile), options, on_phase)
    checks = set(options.checks)
    if checks != {"groups"}:   # a group audit alone reads no certificate (groups.py)
        scheduler.x509_ahead = True
    report = AuditReport(host=target.host, port=target.port, checks=tuple(options.checks),
                         read_only=options.read_only,
                         policies=tuple(p.name for p in options.policies),
                         policy_extends={p.name: p.extends for p in options.policies
                                         if p.extends})
    spoken: set[int] | None = None
    ref: consistency.Reference | None = None
    if checks & {"versions", "suites", "sigalgs", "cert"}:
        required = frozenset(v for p in options.policies for v in p.required_versions)
        results = await versions.check_versions(run.runner, options.versions, required)
        run.done("versions")
        vs = [v for v, _ in results]
        run.outcomes += [o for _, o in results]
        report = replace(report, versions=tuple(vs))
        failed = _failure(results)
        if failed is not None:
            return _finish(report, run, started, error=failed)
        spoken = {v.version.id for v in vs if v.status == "supported"}
        run.unsure = {v.version.id: _unsure(v) for v in vs if v.status != "not_supported"
                      and v.version.id not in spoken}
        ref = _reference(run.runner, results)
    # Each family of phases ends with one repeat of the reference hello (consistency.py).
    tasks: list[Awaitable[AuditReport]] = []
    if "groups" in checks or "pq" in checks:
        tasks.append(_then(ref, run, "groups", _groups_and_pq(run, spoken, checks)))
    if "suites" in checks and spoken is not None:
        tasks.append(_then(ref, run, "suites", *(
            _suites(run, v) for v in (TLS13, TLS12, TLS11, TLS10, SSL30) if v in spoken)))
        report = replace(report, suites=tuple(
            SuiteAudit(Codepoint.version(v), complete=False, notes=(why,))
            for v, why in run.unsure.items()))
    if "sigalgs" in checks and spoken is not None:
        tasks.append(_then(ref, run, "signature schemes", *(
            _sigalgs(run, v) for v in (TLS13, TLS12) if v in spoken)))
        report = replace(report, signature_schemes=tuple(
            SigalgAudit(Codepoint.version(v), SigalgStatus.INCONCLUSIVE, reason=why)
            for v, why in run.unsure.items() if v in (TLS13, TLS12)))
    parts = await asyncio.gather(*tasks)
    for part in parts:
        report = _merge(report, part)
    if "cert" in checks and spoken:
        await _chain(run, report, spoken)
    active = tuple(c for c in options.checks if c in ACTIVE)
    if active:
        # after the phases: the checks read the versions and suites they established (the
        # checks' modules are imported only when some are asked for: scan's start-up)
        from tlsprobe.probes.checks.active import run_active_checks
        report = replace(report, check_results=await run_active_checks(
            active, run.runner, _order_parts(report), last=False))
        run.done("checks")
    if options.clients:
        report = replace(report, clients=await _clients(run, _order_parts(report)))
    if ref is not None and (tasks or active or options.clients or "cert" in checks):
        # right after the last family's repeat: two hellos in a row, which a round-robin
        # balancer always sends to different backends
        await ref.last(run.runner)
        report = _refusals_at_end(run, report, ref.refused_at_end())
    if active and set(active) & set(_last_checks()):
        # the checks after which the server may stay busy: last of all (active.LAST)
        from tlsprobe.probes.checks.active import in_catalog_order, run_active_checks
        report = replace(report, check_results=in_catalog_order(
            report.check_results + await run_active_checks(
                active, run.runner, _order_parts(report), last=True)))
    if spoken is not None:
        report = consistency.mark(report, consistency.verdict(ref, run.runner.disagreements))
    return _finish(report, run, started, error=_unreached(run.runner))


def _refusals_at_end(run: _Run, report: AuditReport, why: str | None) -> AuditReport:
    """The reference hello refused at the very end (`why`): the refusals no family's repeat
    followed are not facts either: the cert phase's search for other key types' chains
    (complete only because its last hellos were refused) is not established, and a client
    profile "failed, refused" for no reason the audit shows is inconclusive."""
    if why is None:
        return report
    from tlsprobe.probes.audit.certs import PHASE as SEARCH
    if run.key_types_note is None and run.runner.connections(SEARCH):
        run.key_types_note = why
    if not report.clients:
        return report
    from tlsprobe.model.clients import FailureReason, SimStatus
    return replace(report, clients=tuple(
        replace(c, status=SimStatus.inconclusive, reason=None,
                detail="; ".join(d for d in (c.detail, why) if d))
        if c.status == SimStatus.failed and c.reason == FailureReason.refused and
        c.version is None else c for c in report.clients))


def _last_checks() -> tuple[str, ...]:
    """active.LAST, read when some check is asked for (the module is not imported
    otherwise: scan's start-up)."""
    from tlsprobe.probes.checks.active import LAST
    return LAST


async def _clients(run: _Run, report: AuditReport) -> tuple[ClientSimulation, ...]:
    """scan --clients, after the checks: every profile simulated (probes/clients), its
    failures' reasons read off this audit, the chains it got checked as the cert phase's."""
    from tlsprobe.probes.clients.simulate import TrustChecker, simulate_clients
    runner, options = run.runner, run.options
    checker = TrustChecker(runner.server_name or runner.target.host, options.cafile,
                           options.verify)
    sims = await simulate_clients(runner, options.clients, report, checker)
    run.done("clients")
    return sims


async def _chain(run: _Run, report: AuditReport, spoken: set[int]) -> None:
    """The certificate chain for the cert phase when no connection so far carried one (the
    versions check reads TLS 1.3 only up to the ServerHello, so a TLS 1.3-only server gave
    none unless the signature schemes were asked for): one connection with the hello that
    established the highest version spoken, read up to the server's certificate (TLS 1.3:
    the flight decrypted up to CertificateVerify). Then the chains of the other key types
    (probes/audit/certs.py search)."""
    if not any(o.certificates for o in run.outcomes):
        top = max(spoken)
        support = next((v for v in report.versions if v.version.id == top), None)
        config, _ = versions.established_hello(run.runner, top, support)
        stop = STOP_VERIFY if top == TLS13 else STOP_FLIGHT
        out = await run.runner.run(config, CHAIN_PHASE, stop)
        run.outcomes.append(out)
        if not out.certificates:
            why = out.reason or "no Certificate message" if out.answered else out.describe()
            run.no_chain = f"the server's certificate could not be read " \
                f"({registry.version_name(top)}: {why})"
        run.done("certificate")
    if run.no_chain is None:
        from tlsprobe.probes.audit import certs
        run.key_types, run.key_types_note = await certs.search(run.runner, report,
                                                               run.outcomes, spoken)
        run.runner.chains = certs.chains_by_type(
            run.outcomes + [o for o, _ in run.key_types.values()])
        run.runner.chains_note = run.key_types_note


def _reference(runner: TargetRunner, results: list[tuple[VersionSupport, Outcome]]
               ) -> consistency.Reference | None:
    """The reference hello: the versions check's TLS 1.3 hello (which offers TLS 1.2 too)
    whenever it was answered, with whatever version: behind a balancer whose backends differ
    in TLS 1.3, their answers to it differ, where their answers to a TLS 1.2 hello may not;
    else its hello of the highest version it answered as such (not one established only by
    the minimal hello). A TLS 1.3 answer of the minimal hello (the full offer refused: a
    limiter, a dropped connection) is repeated with that minimal hello, whose answer it is
    (the full hello's answers picked another group: 'inconsistent')."""
    for support, out in results:
        if support.version.id == TLS13 and out.answered and out.violation is None:
            # repeated up to the certificate (the flight decrypted): backends that answer
            # the same TLS 1.3 hello alike but with an RSA and an ECDSA certificate differ
            config, _ = versions.established_hello(runner, TLS13, support)
            return consistency.Reference(config, STOP_VERIFY, [("versions", out)], "TLS 1.3")
    for support, out in sorted(results, key=lambda r: -r[0].version.id):
        if support.status == VersionStatus.SUPPORTED and out.answered and support.detail == out.describe():
            config, stop = versions.version_hello(runner, support.version.id)
            return consistency.Reference(config, stop, [("versions", out)])
    return None


async def _then(ref: consistency.Reference | None, run: _Run, label: str,
                *work: Awaitable[AuditReport]) -> AuditReport:
    """Run a family of phases together, then repeat the reference hello once."""
    merged = AuditReport(host="", port=0)
    for part in await asyncio.gather(*work):
        merged = _merge(merged, part)
    if ref is not None and work:
        await ref.repeat(run.runner, label)
        merged = consistency.unconfirmed(merged, ref.answers[-1][1])
    return merged


def _merge(report: AuditReport, part: AuditReport) -> AuditReport:
    return replace(report, groups=report.groups + part.groups,
                   suites=report.suites + part.suites,
                   signature_schemes=report.signature_schemes + part.signature_schemes,
                   post_quantum=report.post_quantum + part.post_quantum)


async def _groups_and_pq(run: _Run, spoken: set[int] | None, checks: set[str]) -> AuditReport:
    part = AuditReport(host="", port=0)
    extra = run.options.extra_groups

    async def g13() -> GroupAudit | None:
        if TLS13 in run.unsure:
            return _not_known(TLS13, run.unsure[TLS13])
        if spoken is not None and TLS13 not in spoken:
            return _not_spoken(TLS13, "not tested: the server does not speak TLS 1.3")
        if "groups" not in checks:
            return None
        # the refusal that ends it makes `group.missing` (a policy finding): it holds only
        # while the last offer answered is answered between it and its confirmation, in
        # every scan (confirm.refusal_stands: a limiter refusing a few connections in a row
        # is no "stopped answering" the family's repeat sees); with the group audit alone,
        # the first offer once more after it too
        audit = await groups.tls13_groups(run.runner, groups.candidate_groups(
            TLS13, run.options.tls13_groups), control=spoken is None)
        return await _unless_unspoken(run, TLS13, audit, spoken)

    async def g12() -> GroupAudit | None:
        if "groups" not in checks:
            return None
        if TLS12 in run.unsure:
            return _not_known(TLS12, run.unsure[TLS12])
        if spoken is not None and TLS12 not in spoken:
            return _not_spoken(TLS12, "not tested: the server does not speak TLS 1.2")
        audit = await groups.ske_groups(run.runner, groups.candidate_groups(TLS12, extra),
                                        control=spoken is None)
        return await _unless_unspoken(run, TLS12, audit, spoken)

    async def g_older() -> tuple[GroupAudit | None, GroupAudit | None]:
        a12 = await g12()
        return a12, await _older_groups(run, spoken, a12)

    a13, (a12, older) = await asyncio.gather(g13(), g_older())
    run.done("groups")
    found = tuple(a for a in (a13, a12, older) if a is not None)
    verdicts: tuple[PqVerdict, ...] = ()
    if "pq" in checks and TLS13 in run.unsure:
        verdicts = tuple(PqVerdict(check, subject, Answer.INCONCLUSIVE, run.unsure[TLS13])
                         for check, subject in pq.CHECKS)
    elif "pq" in checks and (a13 is None or a13.spoken is not False):
        verdicts = await pq.pq_verdicts(run.runner, a13 if a13 and "groups" in checks else None)
        run.done("pq")
    return replace(part, groups=found if "groups" in checks else (), post_quantum=verdicts)


async def _older_groups(run: _Run, spoken: set[int] | None,
                        a12: GroupAudit | None) -> GroupAudit | None:
    """The group audit of the highest of TLS 1.1 and 1.0 the server speaks, when it does not
    speak TLS 1.2 (legacy devices): the same ServerKeyExchange elimination, which names
    their ECDHE curves and DH parameters. Without the versions check (groups alone), the
    server's answer to the hello that found TLS 1.2 not spoken tells: a ServerHello of an
    older version is the highest it speaks (no connection more; a server that refuses with
    an alert gets no older audit). None: TLS 1.2 is spoken (or not known not to be), or no
    older version is."""
    if a12 is None or a12.spoken is not False or TLS12 in run.unsure:
        return None
    if spoken is None:
        older = {o.version for o in run.outcomes if o.answered and o.version in (TLS11, TLS10)}
    else:
        older = {v for v in (TLS11, TLS10) if v in spoken}
    if not older:
        return None
    version = max(older)
    audit = await groups.ske_groups(run.runner, groups.candidate_groups(version,
                                                                        run.options.extra_groups),
                                    version=version, control=spoken is None)
    return await _unless_unspoken(run, version, audit, spoken)


async def _unless_unspoken(run: _Run, version: int, audit: GroupAudit,
                           spoken: set[int] | None) -> GroupAudit:
    """A group audit that found nothing, run without the versions check, may have met a
    server that does not speak the version at all (some answer an offer of it with
    handshake_failure rather than protocol_version): one ordinary hello of that version
    decides, so such a server is "not tested", not "supports no group"."""
    name = registry.version_name(version)

    def unspoken(why: str, extra: int = 0) -> GroupAudit:   # the connections stay counted
        return replace(audit, spoken=False, method=GroupMethod.NOT_RUN, supported=(), not_supported=(),
                       inconclusive=(), notes=(why,), connections=audit.connections + extra)

    if audit.spoken is False:
        return unspoken(f"not tested: the server does not speak {name}")
    if audit.supported or spoken is not None:
        return audit
    before = run.runner.answered_hello
    (support, outcome), = await versions.check_versions(run.runner, (version,))
    run.outcomes.append(outcome)
    if support.status != "not_supported":
        return audit
    # refused (nothing answered since `before`): a fact while the server still answers a
    # hello it answered before (another version's: confirm.still_answered)
    why = await still_answered(run.runner, *before, f"groups {name}", "a hello of the audit") \
        if before is not None and run.runner.answered_hello is before else None
    if why is not None:
        return replace(_not_known(version, f"not established whether the server speaks "
                                           f"{name}: {support.detail}; {why}"),
                       connections=audit.connections + 2)
    return unspoken(f"not tested: the server does not speak {name} ({support.detail})", 1)


async def _suites(run: _Run, version: int) -> AuditReport:
    from tlsprobe.probes.audit import ciphers  # with the suites' key exchange table
    audit = await ciphers.enumerate_suites(run.runner, version)
    run.done(f"suites {version:#06x}")
    return AuditReport(host="", port=0, suites=(audit,))


async def _sigalgs(run: _Run, version: int) -> AuditReport:
    from tlsprobe.probes.audit import sigalgs
    audit, chains = await sigalgs.enumerate_sigalgs(run.runner, version)
    run.outcomes += chains
    run.done(f"sigalgs {version:#06x}")
    return AuditReport(host="", port=0, signature_schemes=(audit,))


def _order_parts(report: AuditReport) -> AuditReport:
    by_version = {TLS13: 0, TLS12: 1, TLS11: 2, TLS10: 3, SSL30: 4}
    def key(audit: GroupAudit | SuiteAudit | SigalgAudit) -> int:
        return by_version.get(audit.version.id, 9)
    return replace(report, groups=tuple(sorted(report.groups, key=key)),
                   suites=tuple(sorted(report.suites, key=key)),
                   signature_schemes=tuple(sorted(report.signature_schemes, key=key)))


def _finish(report: AuditReport, run: _Run, started: float,
            error: tuple[str, FailureKind] | None = None) -> AuditReport:
    scheduler, target = run.runner.scheduler, run.runner.target
    counts = scheduler.count(target)
    report = replace(_order_parts(report), **_cert_fields(run), connections=counts,
                     total_connections=sum(counts.values()),
                     retries=scheduler.retried[target.display],
                     one_at_a_time=scheduler.pacing.serial(target) or None,
                     address=scheduler.addresses.get(target.display),
                     starttls=scheduler.channel.preamble(target),   # --starttls: what it said
                     duration_s=round(time.monotonic() - started, 3),
                     started_at=started_at(time.monotonic() - started))
    if error is not None:
        return replace(report, error=f"{target.display}: {error[0]}", error_kind=error[1])
    if any(name in DERIVED for name in report.checks):
        from tlsprobe.probes.checks.derived import derive_checks
        report = replace(report, check_results=derive_checks(report) + report.check_results)
    report = consistency.mark_late(report)
    return rated(with_findings(report, list(run.options.policies)))


def _cert_fields(run: _Run) -> dict[str, Any]:
    """The cert phase's fields of the report: the default chain described and its trust
    check, the other key types' chains with theirs (probes/audit/certs.py, imported only
    when there is a chain), why their search is not complete."""
    if "cert" not in run.options.checks:
        return {}
    chain = next((o.certificates for o in run.outcomes if o.certificates), ())
    if not chain:
        return {} if run.no_chain is None else {
            "trust": TrustCheck(TrustStatus.NOT_CHECKED, detail=run.no_chain)}
    from tlsprobe.model.server_certs import SEARCH
    from tlsprobe.probes.audit import certs
    verify = (run.runner.server_name or run.runner.target.host, run.options.cafile) \
        if run.options.verify else None
    trust = certs.trust_check(list(chain), *verify) if verify is not None else \
        TrustCheck(TrustStatus.NOT_CHECKED, detail="skipped (--no-verify)")
    return {"certificates": certs.describe(chain), "trust": trust,
            "other_certificates": certs.other_certificates(run.outcomes, run.key_types, verify),
            "other_certificates_note": run.key_types_note,
            "other_certificates_search": SEARCH}


async def audit_many(targets: Iterable[Target], options: AuditOptions, scheduler: Scheduler, *,
                     concurrency: int = 4, on_phase: PhaseHook | None = None,
                     on_report: Callable[[AuditReport], None] | None = None
                     ) -> list[AuditReport]:
    """Audit many targets, `concurrency` at a time; reports in input order (and each one
    handed to `on_report` as soon as it is done, for streaming JSON lines)."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(target: Target) -> AuditReport:
        async with gate:
            begun = time.monotonic()
            try:
                report = await audit_target(target, scheduler, options, on_phase)
            except Exception as exc:  # noqa: BLE001 -- a bug: this target's report says so, no other's
                report = replace(internal_error_report(target, scheduler, exc),
                                 started_at=started_at(time.monotonic() - begun),
                                 duration_s=round(time.monotonic() - begun, 3))
        bug = scheduler.internal_errors.get(target.display)
        if bug and report.error_kind != FailureKind.INTERNAL:   # a bug outranks what it caused
            report = replace(report, error=f"{target.display}: {bug}",
                             error_kind=FailureKind.INTERNAL)
        if on_report is not None:
            on_report(report)
        return report

    return list(await asyncio.gather(*(one(t) for t in targets)))


def run_audit(targets: list[Target], options: AuditOptions, scheduler: Scheduler | None = None,
              *, concurrency: int = 4, on_phase: PhaseHook | None = None,
              on_report: Callable[[AuditReport], None] | None = None) -> list[AuditReport]:
    """Blocking entry point (a fresh event loop). The reports are handed over in a list, not
    as the main task's result: at its end asyncio.run restores the SIGINT handler, and the
    signal module formats the old one (which names the task) into an error it discards, the
    task's result included: every report's dataclass repr, twice (54 `__repr__` methods
    compiled for the default scan)."""
    reports: list[AuditReport] = []

    async def main() -> None:
        reports.extend(await audit_many(targets, options, scheduler or Scheduler(),
                                        concurrency=concurrency, on_phase=on_phase,
                                        on_report=on_report))

    asyncio.run(main())
    return reports
