"""NPN (draft-agl-tls-nextprotoneg, extension 13172): does the server still advertise
protocols by Next Protocol Negotiation, and which?

NPN was SPDY's way to agree on a protocol, replaced by ALPN (RFC 7301) and removed from the
browsers in 2016; a server that still answers it runs an old stack or keeps an old option
on. Unlike ALPN, the server lists its protocols in the ServerHello (the client chooses
later, in an encrypted message), so one hello shows the whole list. The check sends the
versions check's hello for the highest of TLS 1.0-1.2 the server speaks, without ALPN (a
server that negotiates ALPN sends no NPN) and with an empty next_protocol_negotiation
extension, and reads the ServerHello (the connection stops after the server's first
flight, before the client would have to choose). One connection.

Verdicts: the extension in the ServerHello: supported, with the protocols it lists (an empty
list too: it speaks NPN); a ServerHello without it: not supported; no ServerHello or a
list that does not parse: inconclusive, with what came back. Not applicable when no TLS
1.0-1.2 version is spoken (NPN is not defined for TLS 1.3; inconclusive when the audit
could not establish that). No finding: what is advertised is a fact for the report.
"""

from __future__ import annotations

from dataclasses import replace

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS12
from tlsprobe.model.check_details import NpnDetails
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.model.facts import wire_text
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._handshake import handshake, legacy_versions
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

NPN = 13172


def protocols(data: bytes) -> list[str] | None:
    """The protocols of a ServerHello's NPN extension (8-bit length-prefixed strings, each
    non-empty), escaped as text from the network; None when the bytes do not parse."""
    out, at = [], 0
    while at < len(data):
        n = data[at]
        if n == 0 or at + 1 + n > len(data):
            return None
        out.append(wire_text(data[at + 1:at + 1 + n]))
        at += 1 + n
    return out


async def run(ctx: CheckContext) -> CheckResult:
    legacy = legacy_versions(ctx)
    if not legacy:
        return ctx.unless_unknown(TLS10, TLS12, "the server speaks no TLS 1.0-1.2 version "
                                  "(NPN is not defined for TLS 1.3)")
    name = registry.version_name(legacy[0])
    config, _ = ctx.version_hello(legacy[0])
    config = replace(config, alpn=(), extra_extensions=(*config.extra_extensions, (NPN, b"")))
    sent = f"a {name} hello offering next_protocol_negotiation (no ALPN)"
    hs = await handshake(ctx, config)
    if isinstance(hs, Outcome):
        return ctx.inconclusive(f"{sent}: {hs.reason}")
    sh = hs.engine.messages.server_hello
    if sh is None:
        return ctx.inconclusive(f"{sent}: {hs.describe()}", (f"sent: {sent}",
                                                             f"received: {hs.describe()}"))
    ext = sh.extension(NPN)
    if ext is None:
        return ctx.result(Verdict.not_supported, f"{sent} is answered without it",
                          (f"sent: {sent}", f"received: {hs.describe()}, without NPN"),
                          details=NpnDetails(name, False, ()))
    listed = protocols(ext.data)
    if listed is None:
        return ctx.inconclusive(f"{sent}: the ServerHello's NPN extension does not parse "
                                f"({len(ext.data)} bytes)")
    shown = ", ".join(listed) if listed else "an empty list"
    return ctx.result(Verdict.supported, f"the server advertises NPN: {shown}",
                      (f"sent: {sent}", f"received: {hs.describe()}, NPN {shown}"),
                      details=NpnDetails(name, True, tuple(listed)))


CHECK = ActiveCheck("npn", "protocols advertised by NPN (draft-agl-tls-nextprotoneg, "
                    "replaced by ALPN)", run, NpnDetails)
