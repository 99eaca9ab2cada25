"""One engine handshake on a connection a hygiene check drives itself, kept whole.

The ordinary `ctx.hello` answers with an `Outcome`, a summary that does not keep what the
hygiene checks read: the ServerHello's extensions (extended_master_secret, encrypt_then_mac,
session_ticket, pre_shared_key), the server's CertificateStatus or Certificate entry
extensions, the session it set up (session ID, master secret, tickets, resumption secret).
`handshake` runs the engine over `ctx.converse` and hands back the engine itself, with the
failure that ended it (if any) and every byte the client sent, so that a check can resume
that session or replay those bytes. After a completed handshake it can send close_notify
and read what the server still sends (TLS 1.3 NewSessionTickets come after the handshake),
each read bounded as every other read: by the transport's per-read timeout (the scan's
--timeout) and the connection's deadline. A shorter wait would make "no ticket" the answer
of a server that was only slow.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import TLS10, TLS12, BuiltHello, ClientConfig, Resumption
from tlsprobe.engine.interface import Handshake as EngineHandshake
from tlsprobe.engine.keyschedule import resumption_psk
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.driver import aclose, adrive
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.audit.scheduler import check_limits
from tlsprobe.probes.checks._shared import PassThrough
from tlsprobe.probes.checks.base import CheckContext
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import SERVER, MessageEvent
from tlsprobe.wire.hello import ServerHello
from tlsprobe.wire.messages import NewSessionTicket

__all__ = ["Handshake", "echo", "handshake", "legacy_versions", "max_early_data"]


@dataclass
class Handshake:
    """The engine after one connection, the failure that ended it (None: it ended as
    asked), and every byte the client sent on that connection, in order (`opening`: its
    first flight, the ClientHello and any 0-RTT data)."""

    engine: EngineHandshake
    failure: HandshakeFailure | None = None
    sent: bytearray = field(default_factory=bytearray)
    ended: float = 0.0   # time.monotonic() when the connection's last read was done
    opening: bytes = b""

    @property
    def tickets(self) -> list[NewSessionTicket]:
        """Every NewSessionTicket the server sent, in order."""
        return [ev.decoded.message for ev in self.engine.events
                if isinstance(ev, MessageEvent) and ev.direction == SERVER
                and ev.msg_type == HandshakeType.new_session_ticket
                and ev.decoded is not None
                and isinstance(ev.decoded.message, NewSessionTicket)]

    def tls12_session(self, *, session_id: bytes = b"",
                      ticket: bytes | None = None) -> Resumption | None:
        """The TLS 1.2 session this full handshake set up, to offer with `session_id`
        (default: the one the server gave) or `ticket`; None when there is none."""
        keys = self.engine.session_keys()
        sh = self.engine.messages.server_hello
        if not self.engine.handshake_complete or keys is None or keys.tls13 or \
                keys.master_secret is None or sh is None:
            return None
        return Resumption(ticket=ticket, session_id=session_id or sh.legacy_session_id_echo,
                          master_secret=keys.master_secret)

    def tls13_resumption(self, config: ClientConfig, ticket: NewSessionTicket,
                         early_data: bytes | None = None) -> ClientConfig | None:
        """`config` offering the PSK of `ticket` (and `early_data` as 0-RTT), with a key
        share for the group this handshake used (no HelloRetryRequest); None when this
        handshake set up no TLS 1.3 session."""
        keys = self.engine.session_keys()
        sh = self.engine.messages.server_hello
        if keys is None or not keys.tls13 or keys.hash_name is None or sh is None:
            return None
        secret = keys.resumption_master_secret
        share = sh.extension(51)
        if secret is None or share is None or len(share.data) < 2:
            return None
        age_ms = int((time.monotonic() - self.ended) * 1000)
        resume = Resumption(ticket=ticket.ticket, cipher_suite=sh.cipher_suite,
                            psk=resumption_psk(secret, ticket.ticket_nonce, keys.hash_name),
                            obfuscated_age=(age_ms + (ticket.ticket_age_add or 0)) % 2**32,
                            early_data=early_data)
        return replace(config, resume=resume,
                       key_share_groups=(int.from_bytes(share.data[:2], "big"),))

    def describe(self) -> str:
        """What the server answered, for a reason or an evidence line."""
        sh = self.engine.messages.server_hello
        if sh is None:
            return str(self.failure) if self.failure else "no ServerHello"
        text = (f"ServerHello {registry.version_name(sh.selected_version)} "
                f"{registry.suite_name(sh.cipher_suite)}")
        return text + (f", then {self.failure}" if self.failure else "")


class _Recording(PassThrough):
    """A transport that keeps what the client sends (for a replay of the same bytes)."""

    def __init__(self, inner: AsyncTransport, out: Handshake) -> None:
        super().__init__(inner)
        self.out = out

    async def send(self, data: bytes) -> None:
        if not self.out.sent:
            self.out.opening = data
        self.out.sent += data
        await self.inner.send(data)


async def _drain(out: Handshake, transport: AsyncTransport, deadline: float) -> None:
    """Send close_notify, then read until the server closes or goes quiet (a read timeout).
    A failure (a fatal alert such as TLS 1.3's certificate_required, which comes after the
    client's Finished) before any NewSessionTicket is the handshake's failure: the server
    refused the session, so the absence of a ticket says nothing; after one, what came
    before stands."""
    try:
        await aclose(out.engine, transport, deadline)
    except HandshakeFailure as exc:
        if not out.tickets:
            out.failure = exc


async def handshake(ctx: CheckContext, config: ClientConfig, *, label: str = "",
                    complete: bool = False, read_flight: bool = False, drain: bool = False,
                    prebuilt: BuiltHello | None = None) -> Handshake | Outcome:
    """One handshake with `config`: up to the first flight (TLS 1.2 ServerHelloDone, TLS
    1.3 ServerHello; with `read_flight` the TLS 1.3 flight up to the server Finished,
    decrypted and checked) or, with `complete`, the whole handshake (then, with `drain`,
    close_notify and the server's last records). `prebuilt`: send this ClientHello instead
    of a new one (a replay). An Outcome (inconclusive) when the connection failed."""

    async def talk(transport: AsyncTransport, deadline: float) -> Handshake:
        engine = ClientHandshake(config, annotate=False, stop_after_first_flight=not complete,
                                 read_server_flight=read_flight, prebuilt=prebuilt,
                                 limits=check_limits())
        out = Handshake(engine)
        recording = _Recording(transport, out)
        try:
            await adrive(engine, recording, deadline)
        except HandshakeFailure as exc:
            out.failure = exc
        if complete and drain and engine.handshake_complete and out.failure is None:
            await _drain(out, recording, deadline)
        out.ended = time.monotonic()
        return out

    return await ctx.converse(talk, label)


async def echo(ctx: CheckContext, config: ClientConfig, sent: str, name: str, ext_type: int,
               *, refused: str = "") -> tuple[ServerHello, bool, tuple[str, str]] | CheckResult:
    """Does the ServerHello to `config` (`sent`, for people) carry extension `ext_type`
    (`name`)? (the ServerHello, whether it does, the evidence lines); without a ServerHello
    the result: inconclusive, or, given `refused` (why that is so), not applicable when the
    hello was refused with an alert or a close and the server still answers the hello that
    established the version right after (else inconclusive: see ctx.still_answered)."""
    hs = await handshake(ctx, config)
    if isinstance(hs, Outcome):
        return ctx.inconclusive(f"{sent}: {hs.reason}")
    sh = hs.engine.messages.server_hello
    if sh is None:
        failure = hs.failure
        if refused and failure is not None and failure.refused:
            evidence = (f"sent: {sent}", f"received: {failure}")
            unsure = await ctx.still_answered(max(config.versions))
            if unsure:
                return ctx.inconclusive(f"{sent} is refused ({failure}), {unsure}", evidence)
            return ctx.result(Verdict.not_applicable, f"{sent} is refused ({failure}): "
                              f"{refused}", evidence)
        return ctx.inconclusive(f"{sent}: {hs.describe()}")
    echoed = sh.extension(ext_type) is not None
    return sh, echoed, (f"sent: {sent}", (f"received: {hs.describe()}, "
                         f"{'with' if echoed else 'without'} {name}"))


def legacy_versions(ctx: CheckContext) -> list[int]:
    """The TLS 1.0-1.2 versions the server speaks, highest first."""
    return sorted((v for v in ctx.spoken if TLS10 <= v <= TLS12), reverse=True)


def max_early_data(ticket: NewSessionTicket) -> int:
    """The max_early_data_size a TLS 1.3 ticket allows (0: no early_data extension)."""
    for e in ticket.extensions:
        if e.type == 42 and len(e.data) == 4:
            return int.from_bytes(e.data, "big")
    return 0
