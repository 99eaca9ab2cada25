"""What the tolerance checks share: one variant hello on a connection of its own, what the
server did with it, and the verdict over a check's variants.

A tolerance check asks whether the server (or whatever sits in front of it) still answers a
ClientHello that is legal but unusual: larger than usual, split over two records or two TCP
segments, carrying GREASE or unknown version values. Each variant is the audit's minimal
conformant hello of the highest version the server speaks (probes/audit/versions.py
minimal_config), changed in one respect: its `config`, an `edit` of the ClientHello (the
transcript keeps the hello as sent), or a `shape` of the bytes on the wire. The engine
reads the answer up to the ServerHello; the server's doing is kept as a `Reply`: answered
(version, group or suite), an alert, a clean close, a reset, or silence until the per-read
timeout.

The verdict (`judge`): every variant answered, "tolerated". A variant refused (alert,
close, reset, silence, or a ServerHello whose suite breaks the protocol: not offered, or
not defined for its version, RFC 8446 B.4) is "not tolerated" only when the refusal holds by the one rule of
probes/audit/confirm.py (also pq.intolerant's): the plain hello (the same hello without the
change) answered in between, the variant refused the same way again (a close, a reset or
silence: a third time, after the plain hello once more; and never on a path that reset or
timed out an ordinary hello a retry then answered). Anything else is inconclusive, with what
was seen. An answer that picks a value it must ignore (a GREASE suite, the unknown version)
is "not tolerated" at once: that is an answer, not a refusal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.common import TLS10
from tlsprobe.engine.config import TLS13, BuiltHello, ClientConfig, build_client_hello
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.model.check_details import ReplyKind, ToleranceDetails, VariantAnswer
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.driver import Progress, adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.confirm import (
    ALERT,
    ANSWERED,
    CLOSED,
    REFUSALS,
    RESET,
    SILENT,
    UNSURE,
    VIOLATION,
    confirm_on_path,
)
from tlsprobe.probes.audit.outcome import STOP_HELLO, Outcome, finished, outcome_of
from tlsprobe.probes.audit.scheduler import check_limits
from tlsprobe.probes.audit.versions import minimal_config
from tlsprobe.probes.checks._shared import PassThrough
from tlsprobe.probes.checks.base import CheckContext
from tlsprobe.wire.hello import ClientHello

__all__ = ["Reply", "Variant", "ask", "describe_answer", "edited_handshake", "judge",
           "judge_split", "no_tls", "plain_config", "plain_hello", "top_versions"]

Edit = Callable[[ClientHello], ClientHello]
Shape = Callable[[bytes], list[bytes]]
#: what an answer did wrong (a value it must not pick), or None
Sanity = Callable[[Outcome], "str | None"]

#: seconds between the sends of a shaped first flight (two TCP segments) at most, and on a
#: channel that cannot tell when the server's TCP acknowledged the first
PAUSE = 0.2
#: seconds between them at least once the first was acknowledged: the server (or a box that
#: terminates TCP) reads it alone, as it would the first segment of a larger hello
GAP = 0.05


@dataclass(frozen=True)
class Variant:
    """One hello to try: `what` it is for people, its config, an optional edit of the
    ClientHello and an optional shape of its bytes (a list of sends, `_Shaped`); `plain`
    the same hello without the change when it is not the check's common one."""

    what: str
    config: ClientConfig
    edit: Edit | None = None
    shape: Shape | None = None
    label: str = ""
    plain: Variant | None = None


@dataclass(frozen=True)
class Reply:
    """What the server did with one hello: `kind` (answered, alert, closed, reset, silent,
    unsure), `text` for people, the `outcome` of an answer and the size of the ClientHello
    handshake message sent (header included) and of the sends it went out in."""

    kind: ReplyKind
    text: str
    outcome: Outcome | None = None
    size: int = 0
    sends: tuple[int, ...] = ()

    @property
    def refused(self) -> bool:
        return self.kind in REFUSALS


def edited_handshake(config: ClientConfig, edit: Edit, *,
                     read_server_flight: bool = False) -> ClientHandshake:
    """The engine's handshake (stopping after the server's first flight; `read_server_flight`
    as ClientHandshake's), its first ClientHello changed by `edit` before it is sent (the
    transcript holds the hello as sent)."""
    built = build_client_hello(config)
    return ClientHandshake(config, annotate=False, stop_after_first_flight=True,
                           read_server_flight=read_server_flight,
                           prebuilt=BuiltHello(edit(built.hello), built.shares),
                           limits=check_limits())


class _Shaped(PassThrough):
    """A transport whose first send goes out as `shape` cuts it: separate sends (with
    TCP_NODELAY, set by the connector, each is a TCP segment of its own), each after the
    server's TCP acknowledged the one before and at least GAP after it, or PAUSE after it
    when the channel cannot tell or no acknowledgement came by then. The evidence is a
    first segment that arrived alone; a fixed PAUSE held a server that serves one
    connection at a time (and every connection queued behind it) for 0.2 s."""

    def __init__(self, inner: AsyncTransport, shape: Shape | None) -> None:
        super().__init__(inner)
        self.shape = shape
        self.sends: list[int] = []

    async def send(self, data: bytes) -> None:
        parts = self.shape(data) if self.shape is not None and not self.sends else [data]
        sent = 0.0
        for i, part in enumerate(parts):
            if i:
                await self._apart(sent)
            sent = time.monotonic()
            self.sends.append(len(part))
            await self.inner.send(part)

    async def _apart(self, sent: float) -> None:
        """Wait until the send made at `sent` (time.monotonic()) stands alone."""
        acked = await self.inner.delivered(PAUSE - (time.monotonic() - sent))
        wait = (GAP if acked else PAUSE) - (time.monotonic() - sent)
        if wait > 0:
            await asyncio.sleep(wait)


def describe_answer(out: Outcome) -> str:
    """'ServerHello TLS 1.3, x25519, TLS_AES_128_GCM_SHA256' (what was negotiated)."""
    parts = [out.describe()]
    if out.group is not None:
        parts.append(registry.group_label(out.group))
    if out.cipher_suite is not None:
        parts.append(registry.suite_name(out.cipher_suite))
    return ", ".join(parts)


async def _talk(variant: Variant, transport: AsyncTransport, deadline: float) -> Reply:
    hs = edited_handshake(variant.config, variant.edit) if variant.edit is not None else \
        ClientHandshake(variant.config, annotate=False, stop_after_first_flight=True,
                        limits=check_limits())
    shaped = _Shaped(transport, variant.shape)

    def reply(kind: ReplyKind, text: str, outcome: Outcome | None = None) -> Reply:
        size = 4 + len(hs.messages.hellos[0].serialize()) if hs.messages.hellos else 0
        return Reply(kind, text, outcome, size, tuple(shaped.sends[:2]))

    def answered(reason: str = "") -> Reply:
        out = outcome_of(hs, reason)
        return reply(ANSWERED, f"answered with {describe_answer(out)}", out)

    try:
        await adrive(hs, shaped, deadline, until=lambda h: finished(h, STOP_HELLO),
                     progress=Progress())
    except HandshakeFailure as exc:
        if hs.hello_violation is not None:
            return reply(VIOLATION, f"broke the protocol: {hs.hello_violation}")
        if hs.messages.server_hello is not None or hs.messages.hrr is not None:
            return answered(str(exc))
        if exc.kind == FailureKind.ALERT and exc.alert is not None:
            return reply(ALERT, f"sent alert {registry.alert_name(exc.alert)} ({exc.alert})")
        if exc.kind == FailureKind.CLOSED:
            return reply(CLOSED, "closed the connection without an answer")
        return reply(UNSURE, str(exc))
    except NetworkError as exc:
        if hs.messages.server_hello is not None or hs.messages.hrr is not None:
            return answered(exc.reason)
        if exc.cause == "reset":
            return reply(RESET, "reset the connection without an answer")
        if exc.cause in ("timeout", "deadline"):
            return reply(SILENT, "sent nothing until the read timed out")
        return reply(UNSURE, exc.reason)
    if hs.messages.server_hello is not None or hs.messages.hrr is not None:
        return answered()
    return reply(UNSURE, "no ServerHello")


async def ask(ctx: CheckContext, variant: Variant) -> Reply:
    """One connection with `variant`'s hello and what the server did with it."""
    async def talk(transport: AsyncTransport, deadline: float) -> Reply:
        return await _talk(variant, transport, deadline)
    got = await ctx.converse(talk, variant.label)
    if isinstance(got, Outcome):
        return Reply(UNSURE, f"no connection: {got.describe()}")
    return got


def top_versions(ctx: CheckContext) -> list[int]:
    """The TLS versions (1.0 and later) the audit found spoken, highest first."""
    return sorted((v for v in ctx.spoken if v >= TLS10), reverse=True)


def no_tls(ctx: CheckContext) -> CheckResult:
    """The result when the audit found no TLS version spoken: SSL 3.0 only (not
    applicable: these checks are about TLS hellos), or none at all (inconclusive)."""
    if ctx.spoken:
        return ctx.result(Verdict.not_applicable, "the server speaks SSL 3.0 only: the "
                          "check is about TLS ClientHellos")
    return ctx.inconclusive("no TLS version is known to be spoken (the versions phase "
                            "established none)")


def plain_config(ctx: CheckContext, version: int) -> ClientConfig:
    """The plain hello of the tolerance checks: the audit's minimal conformant hello of
    `version` (a few suites, x25519/P-256/P-384, one x25519 share, padded to 512 bytes);
    for a server that accepts none of those groups, the groups it accepts added and the
    first one's share (CheckContext.server_groups)."""
    config = minimal_config(ctx.runner, version)
    found = ctx.server_groups((version,))
    if not found:
        return config
    shares = found[:1] if version == TLS13 else config.key_share_groups
    return replace(config, groups=config.groups + found, key_share_groups=shares)


def plain_hello(ctx: CheckContext) -> tuple[list[int], ClientConfig] | CheckResult:
    """The TLS versions spoken (highest first) and the plain hello of the highest, which a
    tolerance check changes; `no_tls` (the result to return) when no TLS version is
    spoken."""
    versions = top_versions(ctx)
    if not versions:
        return no_tls(ctx)
    return versions, plain_config(ctx, versions[0])


async def judge_split(ctx: CheckContext, shape: Shape, over: str, whole: str) -> CheckResult:
    """The verdict of a check that sends the plain hello cut by `shape` ("split over
    `over`"), a refusal set against the same hello sent whole ("in `whole`")."""
    got = plain_hello(ctx)
    if isinstance(got, CheckResult):
        return got
    versions, config = got
    name = registry.version_name(versions[0])
    variant = Variant(f"the plain {name} ClientHello split over {over}", config, shape=shape)
    plain = Variant(f"the plain {name} ClientHello in {whole}", config)
    return await judge(ctx, [variant], plain, severity=Severity.medium)


def _line(variant: Variant, r: Reply, again: str = "") -> str:
    size = f" ({r.size} bytes" + (f", sent as {' + '.join(map(str, r.sends))} bytes"
                                  if len(r.sends) > 1 else "") + ")" if r.size else ""
    return f"{variant.what}{size}{' ' + again if again else ''}: {r.text}"


def _asker(ctx: CheckContext, variant: Variant, word: str) -> Callable[[], Awaitable[Reply]]:
    """Asks `variant` on a new connection each call, labelled `word` and its count."""
    count = [0]

    async def go() -> Reply:
        count[0] += 1
        label = f"{word}{' ' + str(count[0]) if count[0] > 1 else ''} {variant.label}"
        return await ask(ctx, replace(variant, label=label.strip()))
    return go


async def judge(ctx: CheckContext, variants: list[Variant], plain: Variant, *,
                severity: Severity, sanity: Sanity | None = None) -> CheckResult:
    """The check's verdict over `variants` (see the module docstring); `plain` is the same
    hello without the change (a variant's own `plain` when it has one), asked only to
    confirm a refusal (probes/audit/confirm.py)."""
    firsts = await asyncio.gather(*(ask(ctx, v) for v in variants))
    evidence: list[str] = []
    refused: list[tuple[Variant, str, str]] = []
    wrong: list[str] = []
    unsure: list[str] = []
    confirmed: set[int] = set()
    for i, (variant, first) in enumerate(zip(variants, firsts)):
        evidence.append(_line(variant, first))
        if first.kind == ANSWERED:
            bad = sanity(first.outcome) if sanity is not None and first.outcome else None
            if bad:
                wrong.append(f"{variant.what}: {bad}")
            continue
        if not first.refused:
            unsure.append(f"{variant.what}: {first.text}")
            continue
        base = variant.plain or plain
        got = await confirm_on_path(ctx.runner, first, _asker(ctx, variant, "again"),
                                    _asker(ctx, base, "plain"))
        times = 0
        for is_plain, r in got.tries:
            assert isinstance(r, Reply)
            times += not is_plain
            evidence.append(_line(base, r) if is_plain else
                            _line(variant, r, ("again", "a third time", "a fourth time")[
                                min(times, 3) - 1]))
        if not got.confirmed:
            unsure.append(f"{variant.what}: {got.why}")
            continue
        answers = ", ".join(dict.fromkeys(r.text for is_plain, r in got.tries if is_plain))
        again = ("and again on a second connection",
                 "and again on a second and a third connection",
                 "and again on a second, a third and a fourth connection")[min(times, 3) - 1]
        refused.append((variant, f"{variant.what}: the server {first.text}, {again}", answers))
        confirmed.add(i)
    details = ToleranceDetails(tuple(VariantAnswer(v.what, r.size, r.kind, i in confirmed)
                                     for i, (v, r) in enumerate(zip(variants, firsts))))
    if wrong:
        return ctx.result(Verdict.not_tolerated, "; ".join(wrong), tuple(evidence),
                          severity=severity, details=details)
    if refused:
        said = "; ".join(text for _, text, _ in refused)
        answers = ", ".join(dict.fromkeys(a for _, _, a in refused))
        return ctx.result(Verdict.not_tolerated, f"{said}; the plain hello, asked in "
                          f"between, is {answers}", tuple(evidence), severity=severity,
                          details=details)
    if unsure:
        return ctx.inconclusive("; ".join(unsure), tuple(evidence), details)
    answers = "; ".join(f"{v.what}: {r.text}" for v, r in zip(variants, firsts))
    return ctx.result(Verdict.tolerated, answers, tuple(evidence), details=details)
