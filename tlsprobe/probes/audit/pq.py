"""Post-quantum verdicts for TLS 1.3.

- capability: a real share of the PQ group offered alone (the server must compute with it;
  its answering share is checked by the engine);
- hello_retry_request: whether share-less offers reach the PQ groups, and their rank in the
  server's order (taken from the group audit, no extra connection);
- browser_like: X25519MLKEM768 and X25519 shares together, as Chrome and Firefox send them:
  which one does the server pick?
- tolerance: a hello with several large PQ shares (about 6 kB): answered, or refused while
  an ordinary hello works (refused again with the ordinary browser-like hello answered in
  between: the one rule of probes/audit/confirm.py).

A refusal makes "capability" or "browser_like" NO only when it holds: the hello is refused
on a second connection too, and right after it the server still answers a hello it answered
before (confirm.still_answered), or, with nothing answered yet (`scan --checks pq` alone),
an ordinary TLS 1.3 hello. Else the verdict is inconclusive with the reason: a rate
limiter's or a flaky path's refusal says nothing about the groups.
"""

from __future__ import annotations

from tlsprobe import kex, registry
from tlsprobe.engine.config import TLS13, ClientConfig
from tlsprobe.model.audit import ORDER_SERVER, GroupAudit, PqVerdict
from tlsprobe.model.vocab import Answer, PqCheck
from tlsprobe.probes.audit.confirm import (
    Tried,
    confirm_on_path,
    still_answered,
    try_of,
)
from tlsprobe.probes.audit.groups import PROTOCOL_VERSION_ALERT
from tlsprobe.probes.audit.outcome import STOP_HELLO
from tlsprobe.probes.audit.scheduler import (
    HELLO_RETRY,
    SERVER_HELLO,
    Outcome,
    TargetRunner,
)

PHASE = "post-quantum"
X25519MLKEM768, X25519 = 0x11EC, 0x001D
PQ_KINDS = ("hybrid", "mlkem", "draft")
BROWSER_GROUPS = (X25519MLKEM768, X25519, 0x0017, 0x0018)
#: the control hello when no hello was answered before: TLS 1.3 with classical groups only
ORDINARY_GROUPS = (X25519, 0x0017, 0x0018)
TOLERANCE_SHARES = (0x11ED, 0x11EC, 0x11EB, 0x0202, X25519)
TOLERANCE_GROUPS = TOLERANCE_SHARES + (0x0017, 0x0018)
CHECKS = ((PqCheck.CAPABILITY, "X25519MLKEM768"),
          (PqCheck.HELLO_RETRY_REQUEST, "post-quantum groups without a key share"),
          (PqCheck.BROWSER_LIKE, "X25519MLKEM768 + X25519 shares"),
          (PqCheck.TOLERANCE, "large key shares"))


def is_pq(group: int) -> bool:
    info = registry.group(group)
    return info is not None and info.kind in PQ_KINDS


def _config(run: TargetRunner, groups: tuple[int, ...], shares: tuple[int, ...]) -> ClientConfig:
    return run.config((TLS13,), groups=groups, key_share_groups=shares,
                      cipher_suites_13=tuple(registry.suites_for_version(TLS13)))


async def capability(run: TargetRunner, group: int) -> PqVerdict:
    name = registry.group_name(group)
    if not kex.is_computable(group):
        return PqVerdict(PqCheck.CAPABILITY, name, Answer.NOT_TESTED, "no share can be computed here")
    out = await run.run(_config(run, (group,), (group,)), PHASE, confirm=True)
    if out.status == SERVER_HELLO and out.group == group:
        detail = "the server completed the key exchange with a real share"
        if out.share_problem is not None:   # chosen, but no client can finish
            return PqVerdict(PqCheck.CAPABILITY, name, Answer.NO,
                             f"chosen, but the server's key share is invalid ({out.share_problem})")
        if out.reason:
            return PqVerdict(PqCheck.CAPABILITY, name, Answer.INCONCLUSIVE, f"{detail}, then: {out.reason}")
        return PqVerdict(PqCheck.CAPABILITY, name, Answer.YES, detail + " (its share was valid)")
    if out.refused:
        why = await _refusal_holds(run, out)
        verdict = Answer.NO if why is None else Answer.INCONCLUSIVE
        return PqVerdict(PqCheck.CAPABILITY, name, verdict,
                         f"a real share offered alone: {_refused_twice(out)}{_but(why)}")
    return PqVerdict(PqCheck.CAPABILITY, name, Answer.INCONCLUSIVE, out.describe())


def hrr_route(groups13: GroupAudit | None) -> PqVerdict:
    subject = "post-quantum groups without a key share"
    if groups13 is None or groups13.method != "hello_retry_request":
        return PqVerdict(PqCheck.HELLO_RETRY_REQUEST, subject, Answer.NOT_TESTED,
                         "the HelloRetryRequest route was not used for this server")
    ranked = [(i + 1, g.name) for i, g in enumerate(groups13.supported) if is_pq(g.id)]
    if ranked:
        where = "server's order" if groups13.order == ORDER_SERVER else "order of the answers"
        text = ", ".join(f"{name} (rank {rank} of {len(groups13.supported)})"
                         for rank, name in ranked)
        return PqVerdict(PqCheck.HELLO_RETRY_REQUEST, subject, Answer.YES, f"{text}, in the {where}")
    if any(is_pq(g.id) for g in groups13.inconclusive):
        return PqVerdict(PqCheck.HELLO_RETRY_REQUEST, subject, Answer.INCONCLUSIVE,
                         "some post-quantum groups were not established")
    return PqVerdict(PqCheck.HELLO_RETRY_REQUEST, subject, Answer.NO,
                     "no post-quantum group was chosen by a HelloRetryRequest")


def _chosen(out: Outcome) -> str:
    if out.status == SERVER_HELLO and out.group is not None:
        return registry.group_name(out.group)
    if out.status == HELLO_RETRY and out.hrr_group is not None:
        return f"HelloRetryRequest for {registry.group_name(out.hrr_group)}"
    return out.describe()


async def browser_like(run: TargetRunner, pq_capable: bool | None) -> tuple[PqVerdict, Outcome]:
    subject = "X25519MLKEM768 + X25519 shares"
    out = await run.run(_config(run, BROWSER_GROUPS, (X25519MLKEM768, X25519)),
                        PHASE, confirm=True)
    if out.status == SERVER_HELLO and out.group == X25519MLKEM768:
        if out.share_problem is not None:   # no browser finishes that handshake
            return PqVerdict(PqCheck.BROWSER_LIKE, subject, Answer.NO, "the server picked "
                             f"X25519MLKEM768, but its key share is invalid ({out.share_problem})"), out
        return PqVerdict(PqCheck.BROWSER_LIKE, subject, Answer.YES, "the server picked X25519MLKEM768"), out
    if out.answered:
        also = " although it accepts X25519MLKEM768 alone" if pq_capable else ""
        return PqVerdict(PqCheck.BROWSER_LIKE, subject, Answer.NO,
                         f"the server picked {_chosen(out)}{also}"), out
    if out.refused:
        why = await _refusal_holds(run, out)
        verdict = Answer.NO if why is None else Answer.INCONCLUSIVE
        return PqVerdict(PqCheck.BROWSER_LIKE, subject, verdict,
                         f"{_refused_twice(out)}{_but(why)}"), out
    return PqVerdict(PqCheck.BROWSER_LIKE, subject, Answer.INCONCLUSIVE, out.describe()), out


def _refused_twice(out: Outcome) -> str:
    return out.describe() + (" (on two connections)" if out.confirmed else "")


def _but(why: str | None) -> str:
    return "" if why is None else f", {why}"


async def _refusal_holds(run: TargetRunner, refusal: Outcome) -> str | None:
    """Whether a refusal (asked twice) just read holds: a protocol_version alert does (the
    server's word that it does not speak TLS 1.3, which no limiter sends); else the hello
    the server answered last is asked again (confirm.still_answered); with none answered
    yet, an ordinary TLS 1.3 hello, which must be answered. None: it holds; else why not
    ("but ...")."""
    if refusal.alert == PROTOCOL_VERSION_ALERT:
        return None
    if run.answered_hello is not None:
        return await still_answered(run, *run.answered_hello, f"{PHASE} control",
                                    "a hello of the audit")
    return await still_answered(run, _config(run, ORDINARY_GROUPS, (X25519,)), STOP_HELLO,
                                f"{PHASE} control", "an ordinary TLS 1.3 hello (x25519)",
                                before=False)


async def tolerance(run: TargetRunner, ordinary: Outcome | None) -> PqVerdict:
    shares = tuple(g for g in TOLERANCE_SHARES if kex.is_computable(g))
    size = sum(kex.share_size(g) or 0 for g in shares)
    subject = f"{len(shares)} key shares, {size} bytes"
    big = _config(run, TOLERANCE_GROUPS, shares)
    out = await run.run(big, PHASE, confirm=False)
    if out.answered:
        return PqVerdict(PqCheck.TOLERANCE, subject, Answer.YES, f"answered: {_chosen(out)}")
    if ordinary is None or not ordinary.answered or not out.refused:
        return PqVerdict(PqCheck.TOLERANCE, subject, Answer.INCONCLUSIVE, out.describe())
    # "no" becomes a finding (pq.intolerant): the refusal must hold by the rule every
    # tolerance verdict follows (probes/audit/confirm.py), the ordinary browser-like hello
    # answered in between
    browser = _config(run, BROWSER_GROUPS, (X25519MLKEM768, X25519))

    async def again() -> Tried:
        return try_of(await run.run(big, PHASE, confirm=False))

    async def plain() -> Tried:
        return try_of(await run.run(browser, PHASE, confirm=False))

    got = await confirm_on_path(run, try_of(out), again, plain)
    if got.confirmed:
        return PqVerdict(PqCheck.TOLERANCE, subject, Answer.NO, f"{out.describe()} (each time, on "
                         f"{1 + sum(not p for p, _ in got.tries)} connections), while an "
                         "ordinary browser-like hello is answered in between")
    if got.answer is not None:
        return PqVerdict(PqCheck.TOLERANCE, subject, Answer.YES, f"answered on a second connection "
                         f"({got.answer.text}) after {out.describe()}")
    return PqVerdict(PqCheck.TOLERANCE, subject, Answer.INCONCLUSIVE, got.why)


async def pq_verdicts(run: TargetRunner, groups13: GroupAudit | None) -> tuple[PqVerdict, ...]:
    targets = [X25519MLKEM768]
    if groups13 is not None:
        targets += [g.id for g in groups13.supported if is_pq(g.id) and g.id not in targets]
    verdicts = [await capability(run, g) for g in targets]
    capable = verdicts[0].verdict == Answer.YES
    browser, ordinary = await browser_like(run, capable)
    verdicts += [hrr_route(groups13), browser, await tolerance(run, ordinary)]
    return tuple(verdicts)
