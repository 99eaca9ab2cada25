"""ALPN (RFC 7301): which application protocols does the server accept, in which order?

A client lists the protocols it speaks (h2, http/1.1, ...) and the server picks one; what a
server accepts decides whether browsers get HTTP/2, and an acme-tls/1 or a mail protocol
on a web port tells what else listens there. The check offers PROTOCOLS (the IANA registry
of ALPN protocol IDs, and spdy/3.1, which servers still name) in the versions check's hello
for the highest version spoken (TLS 1.3: read up to the server's Finished, where the choice
is in EncryptedExtensions; TLS 1.2 and older: the ServerHello), then the same list without
each protocol chosen, one connection each, until the server chooses none of what is left:
the protocols it accepts, in the order it chose them. With two or more, one more connection
offers them in the reverse order: the same first choice means the server chooses by its own
order (its preference is that list), our first means it follows the client's.

Verdicts: a protocol chosen: supported, with the list (and the preference); the first hello
answered without ALPN: not supported (the server ignores the extension); refused with the
no_application_protocol alert (120, RFC 7301 3.2): supported, none of the offered protocols
accepted; no answer to the first hello: inconclusive. A later connection that fails leaves
the list as seen, said so. No finding: ALPN is a feature, not a fault. At most MAX_ROUNDS
connections to enumerate, one more for the preference.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tlsprobe import registry
from tlsprobe.engine.config import TLS13, ClientConfig
from tlsprobe.engine.facts import negotiated_alpn
from tlsprobe.errors import FailureKind
from tlsprobe.model.check_details import AlpnDetails
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._handshake import handshake
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

#: h2 and http/1.1 first (as browsers offer them), then the IANA "TLS Application-Layer
#: Protocol Negotiation (ALPN) Protocol IDs" registry and spdy/3.1
PROTOCOLS = (
    "h2", "http/1.1", "http/1.0", "http/0.9", "spdy/3.1", "spdy/3", "spdy/2", "spdy/1", "h2c",
    "h3", "acme-tls/1", "imap", "pop3", "managesieve", "xmpp-client", "xmpp-server", "ftp",
    "smb", "irc", "nntp", "nnsp", "sip/2", "mqtt", "coap", "dot", "doq", "ntske/1", "sunrpc",
    "tds/8.0", "dicom", "postgresql", "radius/1.0", "radius/1.1", "stun.turn",
    "stun.nat-discovery", "webrtc", "c-webrtc",
)
MAX_ROUNDS = 8
NO_APPLICATION_PROTOCOL = 120


@dataclass
class _Walk:
    """What the enumeration saw: the protocols chosen in order, how it ended, the evidence."""

    accepted: list[str] = field(default_factory=list)
    refuses_unknown: bool | None = None
    problem: str | None = None      # why the list may be incomplete (None: it is not)
    evidence: list[str] = field(default_factory=list)


async def _choice(ctx: CheckContext, config: ClientConfig, label: str
                  ) -> tuple[str | None, str] | tuple[bool, str]:
    """What one hello offering `config.alpn` got: (the protocol chosen or None, what came
    back), or (True, ...) for no_application_protocol, (False, why) for no answer."""
    hs = await handshake(ctx, config, label=label, read_flight=TLS13 in config.versions)
    if isinstance(hs, Outcome):
        return False, hs.reason
    failure, sh = hs.failure, hs.engine.messages.server_hello
    if hs.engine.hello_violation is not None:   # no answer (server_hello None), a broken one
        return False, f"the server broke the protocol: {hs.engine.hello_violation}"
    if sh is None:
        if failure is not None and failure.kind == FailureKind.ALERT and \
                failure.alert == NO_APPLICATION_PROTOCOL:
            return True, "alert no_application_protocol (120)"
        return False, hs.describe()
    chosen = negotiated_alpn(hs.engine)
    if chosen is None and sh.selected_version >= TLS13 and \
            hs.engine.messages.flight.encrypted_extensions is None:
        return False, f"{hs.describe()}; EncryptedExtensions not read"
    return chosen, hs.describe()


async def _walk(ctx: CheckContext, config: ClientConfig) -> _Walk:
    """Offer the protocols not yet chosen until the server chooses none of them."""
    walk = _Walk()
    left = list(PROTOCOLS)
    for n in range(1, MAX_ROUNDS + 1):
        got, said = await _choice(ctx, replace(config, alpn=tuple(left)), str(n))
        offered = f"{len(left)} protocols" if len(left) > 3 else ", ".join(left)
        walk.evidence.append(f"offered {offered}: {said}" +
                             (f", ALPN {got}" if isinstance(got, str) else
                              ", no ALPN" if got is None else ""))
        if got is True:
            walk.refuses_unknown = True
            return walk
        if got is False:
            walk.problem = f"connection {n}: {said}"
            return walk
        if got is None or got not in left:
            return walk
        walk.accepted.append(got)
        left.remove(got)
        if not left:
            return walk
    walk.problem = f"still choosing after {MAX_ROUNDS} connections"
    return walk


async def _preference(ctx: CheckContext, config: ClientConfig, walk: _Walk) -> str | None:
    """"server" or "client": who decides the order of two or more accepted protocols."""
    if len(walk.accepted) < 2:
        return None
    backwards = tuple(reversed(walk.accepted))
    got, said = await _choice(ctx, replace(config, alpn=backwards), "order")
    walk.evidence.append(f"offered {', '.join(backwards)}: {said}" +
                         (f", ALPN {got}" if isinstance(got, str) else ""))
    if got == walk.accepted[0]:
        return "server"
    return "client" if got == backwards[0] else None


async def run(ctx: CheckContext) -> CheckResult:
    spoken = sorted(ctx.spoken, reverse=True)
    if not spoken:
        return ctx.inconclusive("no protocol version is known to be spoken (the versions "
                                "phase established none)")
    top = spoken[0]
    name = registry.version_name(top)
    config, _ = ctx.version_hello(top)
    walk = await _walk(ctx, config)
    if not walk.accepted and walk.problem is not None:
        return ctx.inconclusive(f"a {name} hello offering ALPN: {walk.problem}",
                                tuple(walk.evidence))
    preference = await _preference(ctx, config, walk)
    details = AlpnDetails(name, PROTOCOLS, tuple(walk.accepted), preference,
                          walk.refuses_unknown)
    evidence = tuple(walk.evidence)
    if not walk.accepted and walk.refuses_unknown:
        return ctx.result(Verdict.supported, f"the server refuses every offered protocol "
                          f"({len(PROTOCOLS)}) with no_application_protocol (RFC 7301 3.2)",
                          evidence, details=details)
    if not walk.accepted:
        return ctx.result(Verdict.not_supported, f"a {name} hello offering {len(PROTOCOLS)} "
                          "protocols is answered without ALPN: the server ignores it",
                          evidence, details=details)
    order = {"server": ", the server's preference in that order",
             "client": ", chosen in the client's order"}.get(preference or "", "")
    tail = f" (the list may be incomplete: {walk.problem})" if walk.problem else \
        "; the rest refused with no_application_protocol" if walk.refuses_unknown else ""
    return ctx.result(Verdict.supported, f"{name}: the server accepts "
                      f"{', '.join(walk.accepted)}{order}{tail}", evidence, details=details)


CHECK = ActiveCheck("alpn", "application protocols (ALPN, RFC 7301)", run, AlpnDetails)
