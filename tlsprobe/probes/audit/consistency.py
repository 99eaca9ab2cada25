"""Several servers behind one name: is the target one configuration throughout the audit?

A load balancer that spreads connections over differently configured backends makes every
result built from many connections (an elimination over suites or groups) a merge of sets
that no single backend has. The versions check's hello of the highest spoken version is the
reference: its answer there is kept, and the same hello is sent once more when each later
phase (groups and post-quantum, suites, signature schemes) ends and at the end of the audit
(once more when only that last one is refused: `Reference.last`), a few connections in all.
The answers are compared on version, cipher suite, group and leaf certificate; two
different answers mean the target answers inconsistently. Answers that differ only by
alerts (a repeat refused with an alert, a hello refused with an alert and then answered on
a second connection: TargetRunner disagreements) decide nothing: a rate limiter refusing
some connections gives them as well as a second configuration (not_checked, said why).

A repeat refused (an alert or a close, what an elimination reads as "not supported") says
more: the server now refuses the very hello it answered, as a rate limiter or an overloaded
server does after some connections. Then no refusal of that family's phases shows what the
server does not support (`unconfirmed`): their "not supported" values, complete lists and
"no" answers become inconclusive before any check reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tlsprobe import registry
from tlsprobe.engine.config import ClientConfig
from tlsprobe.model.audit import AuditReport, ConsistencyCheck, DheAudit
from tlsprobe.model.checks import Verdict
from tlsprobe.model.vocab import (
    Answer,
    ConsistencyStatus,
    DheStatus,
    SigalgStatus,
    VersionStatus,
)
from tlsprobe.probes.audit.outcome import Stop
from tlsprobe.probes.audit.scheduler import ALERT, Job, Outcome, TargetRunner

PHASE = "consistency"
#: the answers in the audit's order of its phases, not in the order their concurrent
#: families happened to end (a load-dependent order would make one scan's JSON differ from
#: the next's)
_ORDER = ("versions", "groups", "suites", "signature schemes", "end of the audit")
MARK = ("the target answered inconsistently (likely several configurations behind one "
        "name): this result may merge them")


@dataclass
class Reference:
    """The reference hello and its answers, phase by phase."""

    config: ClientConfig
    stop: Stop
    answers: list[tuple[str, Outcome]] = field(default_factory=list)
    #: the version the hello is named by ("TLS 1.3"; "": the version of its first answer)
    version: str = ""
    #: the target's connections so far right after the last repeat (-1: none yet): other
    #: connections since then mean the final repeat does not follow it directly
    seen: int = -1
    #: whether the last two answers are two hellos in a row (nothing between them)
    in_a_row: bool = False

    async def repeat(self, run: TargetRunner, after: str) -> None:
        """Send the reference hello once more (no confirmation connection: a bare close is
        simply not compared, and an alert differs from the first answer by itself)."""
        self.in_a_row = self.seen == _total(run)
        out = await run.scheduler.run(run.target, Job(self.config, PHASE, self.stop))
        self.answers.append((after, out))
        self.seen = _total(run)

    async def last(self, run: TargetRunner) -> None:
        """The final repeats, at the end of the audit: two hellos in a row (one when the
        last family's repeat came right before: nothing ran since), which a round-robin
        balancer over two backends always sends to different ones; without them, the
        repeats could all reach one backend (`scan --checks versions,cert`: two answers,
        the same backend) and another backend's certificate go unseen. Refused where the
        repeat before it was not, once more: a single refusal at the end is what a rate
        limiter that starts there gives as well as a second configuration, so one more
        connection tells them apart (refused again: the server stopped answering,
        `_stopped`; answered: the refusal is compared as any other answer)."""
        await self.repeat(run, "end of the audit")
        if not self.in_a_row:
            await self.repeat(run, "end of the audit")
        if len(self.answers) >= 2 and self.answers[-1][1].refused and \
                not self.answers[-2][1].refused:
            await self.repeat(run, "end of the audit")

    def refused_at_end(self) -> str | None:
        """Why the refusals of the audit's last connections (the cert phase's search, the
        client profiles) prove nothing: the reference hello's final repeat was refused too,
        so the server may refuse every hello by then; None when it was answered (or failed
        otherwise: a reset, silence)."""
        last = self.answers[-1][1] if len(self.answers) > 1 else None
        if last is None or not last.refused:
            return None
        return (f"the hello the versions check got answered was refused at the end of the "
                f"audit ({last.describe()}): the server may refuse every hello by then "
                "(rate limiting), so a refusal then proves nothing")


def _total(run: TargetRunner) -> int:
    return sum(run.scheduler.count(run.target).values())


def _key(out: Outcome) -> tuple[object, ...]:
    """What one configuration answers the same way every time. A HelloRetryRequest and a
    ServerHello for the same group count as one answer (a server may ask for a cookie
    under load); an alert has no version, suite or group."""
    group = out.group if out.group is not None else out.hrr_group
    return (out.status == ALERT, out.alert, out.version, out.cipher_suite, group)


def unconfirmed(part: AuditReport, repeat: Outcome) -> AuditReport:
    """`part` (one family's results) when the reference hello's repeat after it was answered
    (or failed in a way no elimination reads as a refusal: a reset, silence); else the same
    results with every negative that rests on refusals made inconclusive, said why."""
    if not repeat.refused:
        return part
    why = (f"not established: the hello the versions check got answered was refused when "
           f"repeated after this phase ({repeat.describe()}), so the server may refuse "
           "every hello by then (rate limiting): its refusals here prove nothing")
    groups = tuple(replace(g, not_supported=(), inconclusive=g.inconclusive + g.not_supported,
                           spoken=g.spoken or None, notes=g.notes + (why,), dhe=_dhe(g.dhe, why))
                   if g.not_supported or g.spoken is False or g.dhe != _dhe(g.dhe, why)
                   else g for g in part.groups)
    suites = tuple(replace(s, complete=False, notes=s.notes + (why,)) if s.complete else s
                   for s in part.suites)
    sigalgs = tuple(replace(s, status=SigalgStatus.INCONCLUSIVE,
                            reason="; ".join(r for r in (s.reason, why) if r))
                    if s.status == SigalgStatus.ESTABLISHED else s
                    for s in part.signature_schemes)
    pq = tuple(replace(v, verdict=Answer.INCONCLUSIVE,
                       detail="; ".join(d for d in (v.detail, why) if d))
               if v.verdict == Answer.NO else v for v in part.post_quantum)
    return replace(part, groups=groups, suites=suites, signature_schemes=sigalgs,
                   post_quantum=pq)


def _dhe(dhe: DheAudit | None, why: str) -> DheAudit | None:
    """A DHE audit without the negatives a refusal gave it ("none", not supported groups,
    "a client that lists no ffdhe group gets no DHE")."""
    if dhe is None or dhe.status != DheStatus.NONE and not dhe.not_supported and \
            not dhe.legacy_refused:
        return dhe
    status = DheStatus.INCONCLUSIVE if dhe.status == DheStatus.NONE else dhe.status
    return replace(dhe, status=status, not_supported=(), legacy_refused=False,
                   inconclusive=dhe.inconclusive + dhe.not_supported, notes=dhe.notes + (why,))


def answer_text(out: Outcome) -> str:
    """'TLS 1.3, TLS_AES_128_GCM_SHA256, x25519', or the refusal / failure."""
    if not out.answered:
        return out.describe()
    parts = [registry.version_name(out.version or 0), registry.suite_name(out.cipher_suite or 0)]
    if out.hrr_group is not None:   # a repeat read on after it: the same answer
        parts.append(f"HelloRetryRequest for {registry.group_name(out.hrr_group)}")
    elif out.group is not None:
        parts.append(registry.group_name(out.group))
    return ", ".join(parts)


def _stopped(ref: Reference) -> int:
    """How many of the last repeats (in the order they were sent) were refused with no
    answer after them, the first answer aside; 0 unless at least the last two were: the
    last family's repeat and the final one are two hellos in a row, which a round-robin
    balancer sends to different backends, so one of them is answered unless the target
    refuses every hello by then."""
    n = 0
    for _, out in reversed(ref.answers[1:]):
        if not out.refused:
            break
        n += 1
    return n if n >= 2 else 0


def _leaves(answers: list[Outcome]) -> str | None:
    """What differs when the same hello was answered with different leaf certificates (the
    repeats read it: TLS 1.2's flight, TLS 1.3's decrypted up to CertificateVerify), else
    None. One server picks its certificate by the hello (a server with an RSA and an ECDSA
    one, by the suite or the signature schemes), so the same hello always gets the same;
    two backends with different certificates answer it differently."""
    seen = list(dict.fromkeys(o.certificates[0] for o in answers
                              if o.answered and o.certificates))
    if len(seen) < 2:
        return None
    from tlsprobe.probes.audit.certs import leaf_type  # only then: certificates parsed
    kinds = list(dict.fromkeys(leaf_type((leaf,)) for leaf in seen))
    what = f"{' and '.join(kinds)} certificates" if len(kinds) > 1 else \
        f"{len(seen)} different {kinds[0]} certificates"
    return f"the same hello was answered with {what}: one server picks its certificate by " \
        "the hello, so the same hello gets the same one"


def _seen_alike(ref: Reference, known: list[Outcome]) -> str:
    """What "consistent" rests on: the answers compared agree, which shows no second
    configuration; it does not show that there is none (a balancer that keeps a client on
    one backend, or whose other backends no repeat reached)."""
    certs = sum(1 for o in known if o.answered and o.certificates)
    what = "version, suite, group and leaf certificate" if certs == len(known) else \
        f"version, suite and group; the leaf certificate of the {certs} that read it" \
        if certs >= 2 else "version, suite and group"
    row = ", the last two from consecutive connections (which a round-robin balancer sends " \
        "to different backends)" if ref.in_a_row else ""
    return (f"no second configuration seen: {len(known)} answers of the reference hello agree "
            f"({what}){row}; a balancer that keeps this client on one backend, or whose "
            "other backends no repeat reached, would not show here")


def _only_alerts(alerts: int, disagreements: int) -> str:
    """Why answers that differ only by some alerts are no verdict: a rate limiter refusing
    some connections with an alert gives the same as a backend that refuses the hello."""
    seen = [f"the reference hello got an alert {alerts} time(s) and the same answer otherwise"
            ] if alerts else []
    seen += [f"{disagreements} hello(s) got an alert, then an answer when asked again"
             ] if disagreements else []
    return (f"not established: {' and '.join(seen)}, with no two different answers; a rate "
            "limiter that refuses some connections with an alert does that as well as a "
            "second configuration that refuses those hellos")


def verdict(ref: Reference | None, disagreements: list[str]) -> ConsistencyCheck:
    if disagreements and (ref is None or len(ref.answers) < 2):
        return ConsistencyCheck(ConsistencyStatus.NOT_CHECKED, notes=tuple(disagreements) + (
            _only_alerts(0, len(disagreements)),))
    if ref is None or len(ref.answers) < 2:
        why = "no later phase to compare with" if ref is not None else \
            "no answered reference hello from the versions check"
        return ConsistencyCheck(ConsistencyStatus.NOT_CHECKED, notes=(why,) + tuple(disagreements))
    ordered = sorted(ref.answers, key=lambda a: _ORDER.index(a[0]) if a[0] in _ORDER
                     else len(_ORDER) - 1)
    answers = tuple(f"{phase}: {answer_text(out)}" for phase, out in ordered)
    # A bare close or a reset may be the network's: only answers and alerts are compared;
    # and refusals from some repeat to the last (no answer after them) are a server that
    # stopped answering (a rate limiter), not a second configuration: not compared either.
    stopped = _stopped(ref)
    known = [out for _, out in ref.answers[:len(ref.answers) - stopped]
             if out.answered or out.status == ALERT]
    unanswered = len(ref.answers) - stopped - len(known)
    notes = tuple(disagreements)
    if unanswered:
        notes += ((f"{unanswered} repeat(s) of the reference hello got no answer (not "
                  "compared)"),)
    if stopped:
        notes += ((f"the last {stopped} repeats of the reference hello were refused: the "
                   "server stopped answering it (rate limiting?), so the phases they follow "
                   "are inconclusive where they rest on refusals"),)
    leaves = _leaves(known)
    if leaves:
        notes += (leaves,)
    answers_differ = len({_key(o) for o in known if o.answered}) > 1 or leaves
    alerts = sum(1 for o in known if o.status == ALERT)
    status = ConsistencyStatus.INCONSISTENT if answers_differ \
        else ConsistencyStatus.NOT_CHECKED if alerts and len(known) > alerts or disagreements \
        else ConsistencyStatus.CONSISTENT if len(known) > 1 else ConsistencyStatus.NOT_CHECKED
    if status == ConsistencyStatus.NOT_CHECKED and (disagreements or alerts):
        notes += (_only_alerts(alerts, len(disagreements)),)
    if status == ConsistencyStatus.CONSISTENT:
        notes += (_seen_alike(ref, known),)
    first = ref.answers[0][1]
    offered = f"the versions check's {ref.version or registry.version_name(first.version or 0)}" \
        " hello"
    return ConsistencyCheck(status, offered, answers, notes=notes)


def mark(report: AuditReport, check: ConsistencyCheck) -> AuditReport:
    """An inconsistent target: note it in every result built from several connections."""
    if check.status != "inconsistent":
        return replace(report, consistency=check)
    # each version is one connection's answer: a "not spoken" may be one backend's only
    versions = tuple(replace(v, detail="; ".join(d for d in (v.detail, MARK) if d))
                     if v.status != VersionStatus.SUPPORTED else v for v in report.versions)
    groups = tuple(replace(g, notes=g.notes + (MARK,)) if g.method != "not_run" else g
                   for g in report.groups)
    suites = tuple(replace(s, notes=s.notes + (MARK,)) if s.connections else s
                   for s in report.suites)
    sigalgs = tuple(replace(s, reason="; ".join(r for r in (s.reason, MARK) if r))
                    if s.connections else s for s in report.signature_schemes)
    affected = (("versions",) if versions != report.versions else ()) + \
        tuple(f"groups {g.version.name}" for g in groups if g.method != "not_run") + \
        tuple(f"suites {s.version.name}" for s in suites if s.connections) + \
        tuple(f"signature schemes {s.version.name}" for s in sigalgs if s.connections) + \
        (("post-quantum",) if report.post_quantum else ())
    return replace(report, versions=versions, groups=groups, suites=suites,
                   signature_schemes=sigalgs, consistency=replace(check, affected=affected))


#: verdicts that state what the server does not do or have: on an inconsistent target one
#: backend's answer (a check's own connections) or read off marked versions and lists
NEGATIVE = (Verdict.not_vulnerable, Verdict.not_applicable, Verdict.not_supported,
            Verdict.not_tolerated)


def mark_late(report: AuditReport) -> AuditReport:
    """An inconsistent target, once every check (derived ones included) has its result and
    the cert phase its chains (run.py _finish): every check whose verdict is a negative
    carries the note, as a version not spoken does (a derived check reads the versions and
    lists, an active one the versions spoken and its own connections, each maybe one
    backend's); they are among the affected results, and so are the other certificates
    (a server's second certificate, or another backend's)."""
    check = report.consistency
    if check is None or check.status != ConsistencyStatus.INCONSISTENT:
        return report
    marked = tuple(replace(r, reason=f"{r.reason}; {MARK}")
                   if r.verdict in NEGATIVE and MARK not in r.reason else r
                   for r in report.check_results)
    names = tuple(f"check {r.name}" for r, was in zip(marked, report.check_results)
                  if r is not was)
    if report.other_certificates:
        names = ("other certificates",) + names
    return replace(report, check_results=marked,
                   consistency=replace(check, affected=check.affected + names))
