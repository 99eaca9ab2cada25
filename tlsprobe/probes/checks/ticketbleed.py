"""Ticketbleed (CVE-2016-9244, F5 BIG-IP): a session ID shorter than 32 bytes, sent with a
session ticket the server accepts, comes back padded to 32 bytes with the server's memory.

RFC 5077 section 3.4: a server that resumes a session from a ticket echoes the client's
session ID, whatever its length. The affected F5 stacks always echoed 32 bytes. The check
follows the published method (filippo.io/Ticketbleed; testssl.sh run_ticketbleed, nmap
tls-ticketbleed), in the highest of TLS 1.2, 1.1 and 1.0 the server speaks:
  1. a full handshake (the engine completes it) offering session tickets, to get one; no
     NewSessionTicket: the server issues no tickets (not applicable);
  2. the same hello with that ticket and a random 1-byte session ID, read up to the
     ServerHello:
       - the 1 byte echoed: resumed as RFC 5077 says (not vulnerable);
       - 32 bytes beginning with our byte: the F5 padding, confirmed by step 2 again with
         another byte (a fresh random session ID begins with our byte once in 256), then
         vulnerable; the 31 other bytes are never kept nor shown, only whether they differed
         between the two connections;
       - another session ID: the server did not resume from its own ticket, so the code
         Ticketbleed lives in was not reached (inconclusive).
Two connections, three when a padded echo is confirmed.
"""

from __future__ import annotations

import os
from dataclasses import replace

from tlsprobe import registry
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.suites import suite_params
from tlsprobe.model.check_details import TicketbleedDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks import _early
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

SESSION_TICKET = 35
FULL = 32     # the length the affected servers always echo


def handshake_config(ctx: CheckContext, version: int) -> ClientConfig:
    """A hello for `version` with every suite the engine can complete a handshake with, of
    those in the hello that established the version (the minimal one where the server
    refused the full offer)."""
    base, _ = ctx.version_hello(version)
    suites = tuple(s for s in base.cipher_suites_12
                   if suite_params(s) is not None and
                   (info := registry.cipher_suite(s)) is not None and
                   info.kx in ("ECDHE", "DHE", "RSA"))
    return replace(base, cipher_suites_12=suites)


async def get_ticket(transport: AsyncTransport, deadline: float, config: ClientConfig
                     ) -> bytes | str:
    """The ticket of a full handshake (b"" when the server sent none), or why the
    handshake did not complete."""
    hs, why = await _early.drive(transport, deadline, config, full=True)
    if why:
        return why
    nst = hs.messages.flight.new_session_ticket
    return nst.ticket if nst is not None else b""


async def resume(transport: AsyncTransport, deadline: float, config: ClientConfig
                 ) -> bytes | str:
    """The session ID the server's ServerHello carries for `config`, or why there is
    none."""
    hs, why = await _early.drive(transport, deadline, config,
                                 until=lambda h: h.messages.server_hello is not None)
    sh = hs.messages.server_hello
    if sh is None:
        return why or "no ServerHello"
    return sh.legacy_session_id_echo


async def probe(ctx: CheckContext, config: ClientConfig, ticket: bytes, label: str
                ) -> tuple[bytes, bytes] | str:
    """(the 1-byte session ID sent, the one that came back) or why there is none."""
    ours = os.urandom(1)
    hello = replace(config, session_ticket=False, session_id=ours,
                    extra_extensions=((SESSION_TICKET, ticket),))

    async def talk(transport: AsyncTransport, deadline: float) -> bytes | str:
        return await resume(transport, deadline, hello)

    got = await ctx.converse(talk, label)
    if isinstance(got, Outcome):
        return got.describe()
    return got if isinstance(got, str) else (ours, got)


def padded(sent: bytes, echoed: bytes) -> bool:
    return len(echoed) == FULL and echoed.startswith(sent)


async def run(ctx: CheckContext) -> CheckResult:
    version = _early.ask_version(ctx, "Ticketbleed")
    if isinstance(version, CheckResult):
        return version
    name = registry.version_name(version)
    config = handshake_config(ctx, version)

    async def full(transport: AsyncTransport, deadline: float) -> bytes | str:
        return await get_ticket(transport, deadline, config)

    ticket = await ctx.converse(full, "ticket")
    if isinstance(ticket, Outcome):
        return ctx.inconclusive(f"no {name} handshake for a ticket: {ticket.describe()}")
    if isinstance(ticket, str):
        return ctx.inconclusive(f"the {name} handshake for a ticket did not complete: "
                                f"{ticket}")
    if not ticket:
        return ctx.result(Verdict.not_applicable, f"the server issues no session ticket (a "
                          f"full {name} handshake offering the extension got none)")
    evidence = [f"a full {name} handshake gave a {len(ticket)}-byte session ticket",
                f"sent: a {name} ClientHello with that ticket and a 1-byte session ID"]
    first = await probe(ctx, config, ticket, "resume")
    if isinstance(first, str):
        return ctx.inconclusive(f"the hello with the ticket got no ServerHello: {first}",
                                tuple(evidence))
    if padded(*first):
        second = await probe(ctx, config, ticket, "confirm")
        if isinstance(second, str):
            return ctx.inconclusive(f"a 1-byte session ID came back as {FULL} bytes, and "
                                    f"the confirmation got no ServerHello: {second}",
                                    tuple(evidence))
        if padded(*second):
            same = "the same" if first[1][1:] == second[1][1:] else "different"
            evidence.append(f"received on two connections with two different bytes: a "
                            f"{FULL}-byte session ID beginning with our byte; the "
                            f"{FULL - 1} bytes after it were {same}")
            return ctx.result(Verdict.vulnerable, f"the server echoes a 1-byte session ID "
                              f"as {FULL} bytes when it resumes from a ticket: {FULL - 1} "
                              "bytes of its memory", tuple(evidence),
                              severity=Severity.high,
                              details=TicketbleedDetails(len(second[0]), len(second[1])))
        first = second      # the first was a fresh session ID that began with our byte
    sent, echoed = first
    if echoed == sent:
        evidence.append("received: the 1-byte session ID echoed as sent")
        return ctx.result(Verdict.not_vulnerable, "the server resumes from its ticket and "
                          "echoes the 1-byte session ID as sent (RFC 5077 section 3.4)",
                          tuple(evidence), details=TicketbleedDetails(len(sent), len(echoed)))
    evidence.append(f"received: a {len(echoed)}-byte session ID that does not begin with "
                    "ours" if echoed else "received: an empty session ID")
    return ctx.inconclusive("the server did not resume the session from the ticket it had "
                            "issued, so the resumption Ticketbleed lives in was not reached",
                            tuple(evidence))


CHECK = ActiveCheck("ticketbleed", "Ticketbleed (CVE-2016-9244)", run, TicketbleedDetails)
