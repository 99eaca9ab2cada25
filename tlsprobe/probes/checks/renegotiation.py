"""Secure renegotiation (RFC 5746): does the server bind a renegotiation to the handshake
before it?

Without RFC 5746 a man in the middle can splice his own handshake and requests in front of a
client's (CVE-2009-3555). A server that implements it answers a TLS 1.0-1.2 hello that offers
renegotiation_info (or TLS_EMPTY_RENEGOTIATION_INFO_SCSV, 0x00FF: the hello sends both, as
browsers do) with an empty renegotiation_info in its ServerHello. The check sends the
versions check's hello for the highest TLS 1.0-1.2 version the server speaks and reads the
ServerHello's extensions:
  - renegotiation_info present: supported;
  - absent: not supported (a finding), confirmed on a second connection, since the verdict
    rests on something missing;
  - no ServerHello: inconclusive, with what came back.
A server that speaks only TLS 1.3 has no renegotiation (not applicable). One connection (two
when the extension is missing).
"""

from __future__ import annotations

from tlsprobe.model.check_details import RenegotiationDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.audit.outcome import STOP_HELLO
from tlsprobe.probes.checks._legacy import RENEGOTIATION_INFO, legacy_hello
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


async def run(ctx: CheckContext) -> CheckResult:
    got = legacy_hello(ctx, "TLS 1.3 has no renegotiation")
    if isinstance(got, CheckResult):
        return got
    name, config = got
    sent = f"a {name} hello with renegotiation_info and TLS_EMPTY_RENEGOTIATION_INFO_SCSV"
    outs = []
    for label in ("", "again"):
        out = await ctx.hello(config, STOP_HELLO, label=label)
        outs.append(out)
        if out.status != "server_hello":
            return ctx.inconclusive(f"{sent}: {out.describe()}", (f"sent: {sent}",))
        if RENEGOTIATION_INFO in out.extensions:
            return ctx.result(Verdict.supported, f"the {name} ServerHello carries "
                              "renegotiation_info (RFC 5746)",
                              (f"sent: {sent}",
                               "received: ServerHello with an empty renegotiation_info"),
                              details=RenegotiationDetails(name, True, len(outs)))
    seen = ", ".join(hex(t) for t in outs[-1].extensions) or "none"
    return ctx.result(Verdict.not_supported, f"the {name} ServerHello carries no "
                      "renegotiation_info on two connections: renegotiations are not bound "
                      "to the handshake before them (CVE-2009-3555)",
                      (f"sent: {sent}",
                       f"received: ServerHello without renegotiation_info (extensions: {seen})"),
                      severity=Severity.medium,
                      details=RenegotiationDetails(name, False, len(outs)))


CHECK = ActiveCheck("renegotiation", "secure renegotiation (RFC 5746)", run, RenegotiationDetails)
