"""The server's clock in ServerHello.random: random bytes, or a Unix time?

SSL 3.0 to TLS 1.2 defined the first 4 bytes of the random as gmt_unix_time; servers that
still put their clock there (OpenSSL before 1.0.1f, 2014, and others) tell anyone who
connects what their clock says, which fingerprints and tracks them
(draft-mathewson-no-gmtunixtime); RFC 8446 4.1.2 makes the ServerHello.random 32 random
bytes (its last 8 the downgrade sentinel when a TLS 1.3 server negotiates an older version,
RFC 8446 4.1.3: a different question, the `downgrade_sentinel` check's, and bytes this check
does not read). testssl.sh reads the same 4 bytes ("TLS clock skew") on one connection and
calls them random when they are more than about a day from its clock.

What is sent: the versions check's hello for the highest version the server speaks and, when
that is TLS 1.3, for the highest of TLS 1.2 to SSL 3.0 it speaks too (a server may fill the
random per version), two connections each, stopped at the ServerHello (a HelloRetryRequest,
whose random is fixed, is answered once with a key share for the group it asks for). Each
first 4 bytes are read as a big-endian Unix time and set against our clock before and after
that connection. The rule rests on two connections, not on the distance from our clock (a
server's clock may be years off and still leak):
  - the second value minus the first equals the time between the two connections (to the
    second, within the connections' own spans): a clock. Two equal values within one second
    could also be fixed bytes: a third connection after PAUSE seconds decides (equal again:
    fixed bytes, not a clock);
  - otherwise: random (a random value passes the rule by chance with odds of about one in
    a hundred million).
Verdicts: a clock in some version: not supported (finding `check.tls_timestamp`, info), with
its skew against our clock; random (or fixed bytes) in every version asked: supported; a
version without two ServerHellos: inconclusive (unless another showed a clock). Two
connections per version (three when the values agree), four to six in all.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, replace

from tlsprobe import registry
from tlsprobe.engine.config import SSL30, TLS12, TLS13
from tlsprobe.model.check_details import RandomKind, RandomSample, TimestampDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.audit.outcome import HELLO_RETRY, SERVER_HELLO, STOP_HELLO
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

PAUSE = 1.5     # seconds before a third connection when two values agree
SLACK = 1       # seconds of rounding each side (the server's clock ticks in whole seconds)


@dataclass(frozen=True)
class _Sample:
    """The first 4 bytes of one ServerHello.random and our clock around its connection."""

    value: int
    before: float
    after: float


def _clock_like(a: _Sample, b: _Sample) -> bool:
    """Did the value advance as our clock did between the two connections?"""
    low = math.floor(b.before - a.after) - SLACK
    high = math.ceil(b.after - a.before) + SLACK
    return low <= b.value - a.value <= high


def clock_skew(sample: _Sample) -> int:
    """Seconds from our clock to the server's, which ticks in whole seconds: 0 when its
    value is one of the seconds our clock read during the connection (cut to the second as
    its is), else the distance to the nearest of them (it said -1 s of a right clock whose
    answer came late in a second, rounding the gap to our clock's fractions)."""
    first, last = math.floor(sample.before), math.floor(sample.after)
    return 0 if first <= sample.value <= last else \
        sample.value - first if sample.value < first else sample.value - last


async def _sample(ctx: CheckContext, version: int, label: str) -> _Sample | str:
    """One ServerHello of `version`'s established hello: its sample, or why there is none."""
    config, _ = ctx.version_hello(version)
    before = time.time()
    out = await ctx.hello(config, STOP_HELLO, label=label)
    if out.status == HELLO_RETRY and out.hrr_group is not None:
        out = await ctx.hello(replace(config, key_share_groups=(out.hrr_group,)), STOP_HELLO,
                              label=label + " after HelloRetryRequest")
    after = time.time()
    if out.status != SERVER_HELLO or len(out.server_random) != 32:
        return out.describe()
    if out.version != version:
        return f"answered with {registry.version_name(out.version or 0)}"
    return _Sample(int.from_bytes(out.server_random[:4], "big"), before, after)


async def _judge_version(ctx: CheckContext, version: int) -> tuple[RandomSample, str] | str:
    """The kind of `version`'s first 4 bytes and an evidence line, or why not known."""
    name = registry.version_name(version)
    samples: list[_Sample] = []
    for i in range(2):
        got = await _sample(ctx, version, f"{name} {i + 1}")
        if isinstance(got, str):
            return f"{name} hello {i + 1}: {got}"
        samples.append(got)
    a, b = samples
    if _clock_like(a, b) and a.value == b.value:
        await asyncio.sleep(max(0.0, PAUSE - (time.time() - b.after)))
        got = await _sample(ctx, version, f"{name} 3")
        if isinstance(got, str):
            return f"{name} hello 3: {got}"
        samples.append(got)
        b = got
    if a.value == b.value:
        kind = RandomKind.fixed
    else:
        kind = RandomKind.clock if _clock_like(a, b) else RandomKind.random
    skew = clock_skew(a) if kind is RandomKind.clock else None
    values = tuple(s.value for s in samples)
    shown = ", ".join(f"0x{v:08x}" for v in values)
    if kind is RandomKind.random:   # the values are in the details; nothing to show here
        line = f"{name}: the first 4 bytes of ServerHello.random on {len(values)} " \
            "connections: random"
        return RandomSample(name, kind, values, skew), line
    said = f"a clock, {skew:+d} s from ours" if skew is not None else \
        "the same bytes each time, not a clock"
    line = f"{name}: ServerHello.random begins {shown} on {len(values)} connections " \
        f"{b.after - a.before:.1f} s apart: {said}"
    return RandomSample(name, kind, values, skew), line


def _asked(ctx: CheckContext) -> list[int]:
    """The highest version spoken and, when it is TLS 1.3, the highest older one."""
    spoken = sorted((v for v in ctx.spoken if v >= SSL30), reverse=True)
    older = [v for v in spoken if v <= TLS12]
    return spoken[:1] + (older[:1] if spoken and spoken[0] == TLS13 and older else [])


async def run(ctx: CheckContext) -> CheckResult:
    asked = _asked(ctx)
    if not asked:
        return ctx.inconclusive("no protocol version is known to be spoken (the versions "
                                "phase established none)")
    got = await asyncio.gather(*(_judge_version(ctx, v) for v in asked))
    samples = [g[0] for g in got if not isinstance(g, str)]
    evidence = tuple(g if isinstance(g, str) else g[1] for g in got)
    details = TimestampDetails(tuple(samples), next(
        (s.skew_seconds for s in samples if s.kind is RandomKind.clock), None))
    clocks = [s for s in samples if s.kind is RandomKind.clock]
    if clocks:
        where = ", ".join(f"{s.version} ({s.skew_seconds:+d} s from our clock)" for s in clocks)
        return ctx.result(Verdict.not_supported, f"ServerHello.random begins with the "
                          f"server's clock (gmt_unix_time) in {where}: anyone can read and "
                          "track it (draft-mathewson-no-gmtunixtime; RFC 8446 4.1.2: 32 "
                          "random bytes)", evidence, severity=Severity.info, details=details)
    if len(samples) < len(asked):
        return ctx.inconclusive("; ".join(g for g in got if isinstance(g, str)), evidence,
                                details if samples else None)
    return ctx.result(Verdict.supported, "ServerHello.random carries no clock in "
                      f"{', '.join(s.version for s in samples)}: its first 4 bytes do not "
                      "follow our clock from one connection to the next", evidence,
                      details=details)


CHECK = ActiveCheck("tls_timestamp", "no clock in ServerHello.random (gmt_unix_time)", run,
                    TimestampDetails)
