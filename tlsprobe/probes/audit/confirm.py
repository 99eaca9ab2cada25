"""The one rule that turns a refused hello into an intolerance ("not tolerated", the
`check.NAME` findings of the tolerance checks, `pq.intolerant`).

A hello that is legal but unusual (larger, split, with GREASE or unknown values, with large
post-quantum shares) was refused. That is a fact about the change only when the refusal
repeats while the same hello without the change (the *plain* hello) is answered in between:

1. the plain hello is asked: refused too, the change is not shown to be what is refused;
2. the changed hello is asked again: it must be refused the same way (the same alert, a
   close again, a reset again); answered, or refused otherwise, the first refusal was noise;
3. it is asked a third time, with the plain hello answered once more before it, and a
   fourth time right after the third: two asks in a row are never both refused by a rate
   limiter refusing every k-th connection (with an alert as easily as a dropper closes),
   and the plain hello between the others sees one refusing a few connections in a row;
   and on a path that has shown itself flaky (`flaky`: an ordinary hello failed with a
   reset or a timeout and was answered when retried, or was closed and answered when
   asked again) a close, a reset or silence proves nothing at all, and on one whose
   alerts looked like a limiter's (`alerts`: a hello refused with an alert was answered
   when asked again) an alert proves nothing (`TargetRunner.flaky`, `.alerts`;
   `TargetRunner.run` makes two closes on such a path inconclusive).

`confirm_refusal` runs those steps and says what it saw; the caller decides the verdict
(and keeps the tries as evidence); `confirm_on_path` runs it on a TargetRunner's path. The
connections it costs: 5, only when the first one was refused. An elimination's end
(`refusal_stands`) takes one round: the plain hello (the last offer answered), then the
hello twice in a row: 3 connections.

`still_answered` is the lighter rule for a refusal that makes a value "not spoken", "not
supported" or "not applicable" (the versions check, an elimination's end, a check's own
hello): such a refusal holds only while the server answers at all. The hello that was
answered before is asked once more, right after the refusal (one connection); not answered
now, the server may refuse every hello by then (a rate limiter after some connections, an
overloaded one), and the refusal proves nothing: the caller makes its negative
inconclusive with the reason returned. One rule, one wording, for every caller
(probes/audit/versions.py, groups.py, pq.py, probes/checks/base.py
CheckContext.still_answered). With no hello answered yet (`scan --checks pq` alone), an
ordinary hello the server must answer is asked instead (`before=False`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from tlsprobe.errors import FailureKind
from tlsprobe.model.vocab import ReplyKind
from tlsprobe.probes.audit.outcome import INCONCLUSIVE, Outcome, OutcomeStatus

if TYPE_CHECKING:
    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.probes.audit.outcome import Stop
    from tlsprobe.probes.audit.scheduler import TargetRunner

__all__ = [
    "ALERT",
    "ANSWERED",
    "CLOSED",
    "REFUSALS",
    "RESET",
    "SILENT",
    "UNSURE",
    "VIOLATION",
    "Confirmation",
    "Tried",
    "Try",
    "confirm_on_path",
    "confirm_refusal",
    "flaky_path",
    "refusal_stands",
    "still_answered",
    "try_of",
]

ANSWERED, ALERT, CLOSED, RESET, SILENT, UNSURE = (
    ReplyKind.answered, ReplyKind.alert, ReplyKind.closed, ReplyKind.reset, ReplyKind.silent,
    ReplyKind.unsure)
#: a ServerHello whose choice broke a rule (engine.serverhello.check_choice: a suite not
#: offered, or not defined for its version): no answer a client can use, so a refusal of
#: that hello, and the server's own word like an alert (never "tolerated")
VIOLATION = ReplyKind.violation
REFUSALS = (ALERT, CLOSED, RESET, SILENT, VIOLATION)
#: refusals a flaky network or an overloaded balancer makes as well as an intolerant box
PATH_LIKE = (CLOSED, RESET, SILENT)


class Try(Protocol):
    """What the server did with one hello: `kind` (one of the names above) and `text`, for
    people, which also tells two alerts apart."""

    @property
    def kind(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass
class Confirmation:
    """The outcome: `confirmed` (the refusal is the change's), else `why` not (one line);
    `tries`: every hello asked after the first, in order, as (plain?, its Try); `answer`:
    the changed hello's answer when a later try was answered."""

    confirmed: bool = False
    why: str = ""
    tries: list[tuple[bool, Try]] = field(default_factory=list)
    answer: Try | None = None


def _same(a: Try, b: Try) -> bool:
    return a.kind == b.kind and (a.kind != ALERT or a.text == b.text)


async def confirm_refusal(first: Try, again: Callable[[], Awaitable[Try]],
                          plain: Callable[[], Awaitable[Try]], *,
                          flaky: Callable[[], str | None] = lambda: None,
                          alerts: Callable[[], str | None] = lambda: None,
                          answered_after: Callable[[str], None] = lambda kind: None,
                          rounds: int = 2) -> Confirmation:
    """Whether the refusal `first` of the changed hello holds (see the module docstring):
    `again` asks the changed hello once more, `plain` the plain one; `flaky()` says what
    made the path look flaky so far (None: nothing did), `alerts()` what made its alerts
    look like a limiter's (hellos refused with an alert and answered when asked again),
    both asked before and after the tries (the scan's other connections go on meanwhile);
    `answered_after(kind)` is told when the changed hello, refused with `kind`, is
    answered on a later try (what `flaky` and `alerts` then count: TargetRunner).
    `rounds`: how many times the plain hello is asked, each followed by the changed
    hello, which is then asked once more at once."""
    out = Confirmation()
    if first.kind not in REFUSALS:
        out.why = f"the server {first.text}: no refusal"
        return out

    def on_flaky_path() -> bool:
        seen = flaky() if first.kind in PATH_LIKE else alerts() if first.kind == ALERT \
            else None
        if seen:
            what = "silence" if first.kind == SILENT else f"{first.kind} connection" \
                if first.kind != ALERT else "refusal with an alert"
            out.why = f"the server {first.text}, but {seen}: on this path a {what} proves " \
                "nothing"
        return bool(seen)

    if on_flaky_path():
        return out
    for n in range(rounds + 1):
        # the plain hello before each ask but the last, which follows the one before at
        # once: two asks in a row are never both refused by a limiter refusing every k-th
        # connection, and the plain hello between the others sees a limiter refusing a
        # few connections in a row (or everything from some connection on)
        for _ in range(1 if n < rounds else 0):
            base = await plain()
            out.tries.append((True, base))
            if base.kind != ANSWERED:
                out.why = (f"the server {first.text}, but the plain hello is not answered "
                           f"either ({base.text}): the change is not shown to be what is "
                           "refused")
                return out
        nxt = await again()
        out.tries.append((False, nxt))
        if not _same(first, nxt):
            where = ("a second", "a third", "a fourth")[n]
            out.why = f"the server {first.text}, then on {where} connection: {nxt.text}"
            if nxt.kind == ANSWERED:
                out.answer = nxt
                answered_after(first.kind)
            return out
    out.confirmed = not on_flaky_path()
    return out


async def confirm_on_path(run: TargetRunner, first: Try, again: Callable[[], Awaitable[Try]],
                          plain: Callable[[], Awaitable[Try]], *,
                          rounds: int = 2) -> Confirmation:
    """`confirm_refusal` on `run`'s path: what made it look flaky, or its alerts a
    limiter's, so far (TargetRunner.flaky, .alerts), and a refusal answered on a later try
    counted there (TargetRunner.answered_after)."""
    return await confirm_refusal(first, again, plain, flaky=run.flaky, alerts=run.alerts,
                                 answered_after=run.answered_after, rounds=rounds)


def flaky_path(runner: TargetRunner) -> Callable[[], str | None]:
    """What makes the path to `runner`'s target look flaky so far: ordinary hellos that
    failed with a reset or a timeout and were answered when retried, or closed and answered
    when asked again (TargetRunner.flaky); None for none."""
    return runner.flaky


async def still_answered(run: TargetRunner, hello: ClientConfig, stop: Stop, phase: str,
                         named: str, *, before: bool = True) -> str | None:
    """Whether a refusal just read holds (see the module docstring): `hello`, answered
    before (`named`: how to name it, "the TLS 1.3 hello that established the version"), is
    asked once more, under `phase`, reading only what the server names (a bare close is
    asked twice, as every hello: TargetRunner.run). None when it is answered; else why the
    refusal proves nothing, one clause starting with "but", for the caller's inconclusive
    result. `before` False: no hello was answered yet (`scan --checks pq` alone), so `hello`
    is an ordinary one the server must answer for the refusal to hold."""
    out = await run.run(hello, phase, stop, names_only=True)
    if out.answered:
        return None
    if not before:
        return (f"but {named} was not answered either ({out.describe()}): the server may "
                "refuse every hello by now (rate limiting), or not speak that version, so "
                "the refusal proves nothing")
    return _not_answered_after(named, out.describe())


def _not_answered_after(named: str, what: str) -> str:
    return (f"but {named}, answered before, was not answered right after ({what}): the "
            "server may refuse every hello by now (rate limiting), so the refusal proves "
            "nothing")


@dataclass(frozen=True)
class Tried:
    """An audit connection's outcome as `confirm_refusal` reads it (`try_of`)."""

    kind: str
    text: str


def try_of(out: Outcome) -> Tried:
    """A reset or a timeout, retried by the scheduler and still failing, is "unsure": never
    a refusal here."""
    kind = ANSWERED if out.answered else ALERT if out.status == OutcomeStatus.ALERT else \
        CLOSED if out.status == OutcomeStatus.CLOSED else UNSURE
    return Tried(kind, out.describe())


async def refusal_stands(run: TargetRunner, first: Outcome, hello: ClientConfig,
                         plain: ClientConfig, phase: str, stop: Stop, *,
                         names_only: bool = True,
                         named: str = "the last offer the server answered") -> Outcome:
    """The refusal `first` of `hello` that ends an elimination (what is left becomes "not
    supported", which can fail CI), by `confirm_refusal`'s rule with one round: `plain`
    (an offer the server answered before) asked, then `hello` twice in a row (3
    connections more); a close proves nothing on a flaky path (an alert still does: one
    limiter's alert answered when asked again should not cost every later list its end).
    Returns `first` marked
    confirmed; or the answer of a later ask of `hello` (the elimination goes on with it);
    or an inconclusive outcome saying why (`named`: how to name `plain` when it is not
    answered, in still_answered's words)."""
    asked: list[Outcome] = []

    def ask(config: ClientConfig) -> Callable[[], Awaitable[Try]]:
        async def go() -> Try:
            out = await run.run(config, phase, stop, confirm=False, names_only=names_only)
            asked.append(out)
            return try_of(out)
        return go

    got = await confirm_refusal(try_of(first), ask(hello), ask(plain), flaky=run.flaky,
                                answered_after=run.answered_after, rounds=1)
    if got.confirmed:
        return replace(first, confirmed=True)
    if got.answer is not None:
        return asked[-1]
    why = f"not confirmed: {got.why}"
    if got.tries and got.tries[-1][0] and got.tries[-1][1].kind != ANSWERED:
        why = f"{first.describe()}, {_not_answered_after(named, got.tries[-1][1].text)}"
    return _unsure(first, why)


def _unsure(first: Outcome, why: str) -> Outcome:
    return replace(first, status=INCONCLUSIVE, kind=FailureKind.NETWORK, reason=why,
                   confirmed=False)
