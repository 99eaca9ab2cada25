"""The downgrade sentinel (RFC 8446 4.1.3): does the server mark a lower version's
ServerHello.random?

RFC 8446 4.1.3: "If negotiating TLS 1.2, TLS 1.3 servers MUST set the last 8 bytes of their
Random value to the bytes 44 4F 57 4E 47 52 44 01" ("DOWNGRD\\x01"), and "If negotiating
TLS 1.1 or below, TLS 1.3 servers MUST, and TLS 1.2 servers SHOULD, set the last 8 bytes of
their ServerHello.Random value to the bytes 44 4F 57 4E 47 52 44 00" ("DOWNGRD\\x00"). A
client that supports the higher version then sees a downgrade forced by an attacker, who
cannot change the random (the signature covers it). So the requirement, and the severity
of a missing sentinel, follows the highest version the server speaks:
  - TLS 1.3: the check sends the versions check's hello for the highest TLS 1.0-1.2 version
    the server speaks (TLS 1.3 not offered) and, when it also speaks TLS 1.1 or 1.0, one for
    the highest of those; a missing sentinel breaks a MUST (finding, low);
  - TLS 1.2 (TLS 1.3 refused): one hello for the highest of TLS 1.1 and 1.0 it speaks; a
    missing "DOWNGRD\\x00" breaks a SHOULD (finding, info);
and reads the last 8 bytes of each ServerHello.random: the sentinel in each: supported;
missing in one: not supported, with the bytes that were there; no ServerHello: inconclusive.
Not applicable when no lower version is spoken (a TLS 1.2 server without TLS 1.1 and 1.0,
a TLS 1.3-only server) or the server's highest version is TLS 1.1 or below (no sentinel is
asked of it); inconclusive instead whenever that rests on a version the audit could not
establish. One or two connections.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS11, TLS12, TLS13
from tlsprobe.escaping import quoted_bytes
from tlsprobe.model.audit import Spoken
from tlsprobe.model.check_details import DowngradeSentinelDetails, SentinelAnswer
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.audit.outcome import STOP_HELLO
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

TLS12_SENTINEL = b"DOWNGRD\x01"
TLS11_SENTINEL = b"DOWNGRD\x00"
#: severity of a missing sentinel by the server's highest version: RFC 8446 4.1.3's MUST
#: for a TLS 1.3 server, its SHOULD for a TLS 1.2 server
SEVERITY = {TLS13: Severity.low, TLS12: Severity.info}


def expected(version: int) -> bytes:
    """The sentinel RFC 8446 4.1.3 asks for when a server negotiates `version`."""
    return TLS12_SENTINEL if version == TLS12 else TLS11_SENTINEL


def _asked(ctx: CheckContext) -> tuple[int, list[int]] | CheckResult:
    """(the server's highest version, the lower versions to ask) or the check's result
    when there is nothing to ask."""
    state = ctx.report.version_spoken
    if state(TLS13) is Spoken.YES:
        top = TLS13
    elif state(TLS13) is Spoken.UNKNOWN:
        return ctx.inconclusive(f"{ctx.undetermined(TLS13, TLS13)} (a TLS 1.3 server MUST "
                                "mark a TLS 1.2 ServerHello, a TLS 1.2 server SHOULD only "
                                "mark TLS 1.1 and below)")
    elif state(TLS12) is Spoken.YES:
        top = TLS12
    else:
        return ctx.unless_unknown(TLS12, TLS12, "the server speaks neither TLS 1.3 nor TLS 1.2: "
                                  "the sentinel is asked of TLS 1.3 and TLS 1.2 servers")
    lower = [v for v in (TLS12, TLS11, TLS10) if v < top and state(v) is Spoken.YES]
    asked = [v for v in lower if v == TLS12][:1] + [v for v in lower if v < TLS12][:1]
    if top == TLS12 and not asked:
        return ctx.unless_unknown(TLS10, TLS11, "the server speaks TLS 1.2 but neither TLS 1.1 "
                                  "nor TLS 1.0: there is no lower version to mark")
    if top == TLS13 and not asked:
        return ctx.unless_unknown(TLS10, TLS12, "the server speaks TLS 1.3 only: there is no "
                                  "lower version to be downgraded to")
    return top, asked


async def run(ctx: CheckContext) -> CheckResult:
    got = _asked(ctx)
    if isinstance(got, CheckResult):
        return got
    top, asked = got
    server = f"a {registry.version_name(top)} server"
    rule = "MUST" if top == TLS13 else "SHOULD"
    evidence: list[str] = []
    missing: list[str] = []
    answers: list[SentinelAnswer] = []
    for version in asked:
        name = registry.version_name(version)
        config, _ = ctx.version_hello(version)
        out = await ctx.hello(config, STOP_HELLO, label=name)
        if out.status != "server_hello" or out.version is None:
            return ctx.inconclusive(f"a {name} hello (max {name}): {out.describe()}",
                                    tuple(evidence))
        tail, want = out.server_random[-8:], expected(out.version)
        answer = registry.version_name(out.version)
        evidence.append(f"sent: a {name} hello (max {name}); received: ServerHello {answer}, "
                        f"random ends {quoted_bytes(tail)}")
        if out.version >= top:   # an answer above the hello's version: no downgrade to mark
            return ctx.inconclusive(f"a {name} hello was answered with {answer}",
                                    tuple(evidence))
        answers.append(SentinelAnswer(answer, tail == want))
        if tail != want:
            missing.append(f"{answer} (expected {quoted_bytes(want)})")
    details = DowngradeSentinelDetails(registry.version_name(top), tuple(answers))
    if missing:
        return ctx.result(Verdict.not_supported, f"{server} answered a lower-version hello "
                          f"without the downgrade sentinel: {'; '.join(missing)} (RFC 8446 "
                          f"4.1.3: {server} {rule} set it)", tuple(evidence),
                          severity=SEVERITY[top], details=details)
    return ctx.result(Verdict.supported, f"ServerHello.random ends with the RFC 8446 4.1.3 "
                      f"sentinel for {', '.join(registry.version_name(v) for v in asked)} "
                      f"({server}: {rule})", tuple(evidence), details=details)


CHECK = ActiveCheck("downgrade_sentinel", "downgrade sentinel in ServerHello.random "
                    "(RFC 8446 4.1.3)", run, DowngradeSentinelDetails)
