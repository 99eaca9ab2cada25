"""Session resumption: does the server offer sessions to resume, and does it resume them?

A resumed session skips the certificate and the key exchange: cheaper for both sides, and
what every browser tries. Asked per mechanism, each with a full handshake that sets the
session up and a second connection that offers it back (the engine completes both and
checks the server's Finished, so "resumed" means the server proved it holds the session):
  - TLS 1.2 session IDs (RFC 5246 7.4.1.2): a full handshake without session_ticket; the
    ServerHello's session ID, offered again: resumed when the server echoes it and ends
    the abbreviated handshake with a valid Finished;
  - TLS 1.2 tickets (RFC 5077): a full handshake with session_ticket; the NewSessionTicket
    (its lifetime hint), offered with a fresh session ID, which the server echoes when it
    resumes;
  - TLS 1.3 tickets (RFC 8446 4.6.1): a full handshake, then close_notify and the server's
    last records; the NewSessionTickets (lifetime, max_early_data_size), the last offered
    as a PSK (psk_dhe_ke, with its binder): resumed when the ServerHello selects it.
Verdict: supported when any mechanism resumed; not supported when every one was asked and
none resumed (no finding: it costs time, not security); otherwise inconclusive. Evidence:
one line per mechanism. Up to 6 connections (2 per mechanism the server's versions allow).
"""

from __future__ import annotations

import os

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS12, TLS13
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.checks._handshake import Handshake, handshake, legacy_versions, \
    max_early_data
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.probes.audit.outcome import Outcome

#: one mechanism's answer: resumed (True), not resumed (False) or undetermined (None), and
#: the evidence line
Answer = tuple[bool | None, str]


def _resumed(hs: Handshake | Outcome, what: str) -> Answer:
    """The answer of the connection that offered the session back."""
    if isinstance(hs, Outcome):
        return None, f"{what}: offered back, no answer ({hs.reason})"
    if hs.engine.verification.resumed and hs.engine.verification.finished_verified:
        return True, f"{what}, resumed (abbreviated handshake, server Finished verified)"
    if hs.engine.messages.server_hello is not None and not hs.engine.verification.resumed:
        return False, f"{what}, not resumed (the server answered with a full handshake)"
    return None, f"{what}: offered back, {hs.describe()}"


async def _session_id(ctx: CheckContext, version: int) -> Answer:
    name = f"{registry.version_name(version)} session ID"
    config = ctx.config((version,), session_ticket=False)
    full = await handshake(ctx, config, complete=True, drain=True, label="session ID")
    if isinstance(full, Outcome) or full.failure is not None:
        return None, f"{name}: the full handshake failed ({_why(full)})"
    session = full.tls12_session()
    if session is None or not session.session_id:
        return False, f"{name}: none issued (empty session ID in the ServerHello)"
    again = await handshake(ctx, ctx.config((version,), session_ticket=False, resume=session),
                            complete=True, label="session ID resumed")
    return _resumed(again, f"{name}: issued")


async def _ticket(ctx: CheckContext, version: int) -> Answer:
    name = f"{registry.version_name(version)} session ticket"
    full = await handshake(ctx, ctx.config((version,), session_ticket=True), complete=True,
                           drain=True, label="ticket")
    if isinstance(full, Outcome) or full.failure is not None:
        return None, f"{name}: the full handshake failed ({_why(full)})"
    tickets = full.tickets
    if not tickets:
        return False, f"{name}: none issued (no NewSessionTicket)"
    session = full.tls12_session(session_id=os.urandom(32), ticket=tickets[-1].ticket)
    if session is None:
        return None, f"{name}: no session to resume"
    again = await handshake(ctx, ctx.config((version,), resume=session), complete=True,
                            label="ticket resumed")
    return _resumed(again, f"{name}: issued, lifetime hint {tickets[-1].ticket_lifetime} s")


async def _tls13(ctx: CheckContext) -> Answer:
    name = "TLS 1.3 ticket"
    config = ctx.config((TLS13,))
    full = await handshake(ctx, config, complete=True, drain=True, label="TLS 1.3")
    if isinstance(full, Outcome) or full.failure is not None:
        return None, f"{name}: the full handshake failed ({_why(full)})"
    tickets = full.tickets
    if not tickets:
        return False, f"{name}: none issued (no NewSessionTicket before the server closed " \
            "or went quiet after close_notify)"
    last = tickets[-1]
    what = (f"{name}: {len(tickets)} issued, lifetime {last.ticket_lifetime} s, "
            f"max_early_data_size {max_early_data(last)}")
    offer = full.tls13_resumption(config, last)
    if offer is None:
        return None, f"{what}; no session to resume"
    again = await handshake(ctx, offer, complete=True, label="TLS 1.3 resumed")
    if isinstance(again, Handshake) and again.engine.verification.resumed and \
            again.engine.verification.finished_verified:
        return True, f"{what}, resumed with PSK (psk_dhe_ke, server Finished verified)"
    return _resumed(again, what)


def _why(hs: Handshake | Outcome) -> str:
    return hs.reason if isinstance(hs, Outcome) else hs.describe()


async def run(ctx: CheckContext) -> CheckResult:
    legacy = legacy_versions(ctx)
    answers: list[Answer] = []
    if legacy:
        answers += [await _session_id(ctx, legacy[0]), await _ticket(ctx, legacy[0])]
    if TLS13 in ctx.spoken:
        answers.append(await _tls13(ctx))
    if not answers:
        return ctx.unless_unknown(TLS10, TLS13, "the server speaks no TLS 1.0-1.3 version")
    evidence = tuple(line for _, line in answers)
    resumed = [line.split(":")[0] for ok, line in answers if ok]
    if resumed:
        return ctx.result(Verdict.supported, f"resumed: {', '.join(resumed)}", evidence)
    # "no resumption" covers the versions not asked only when they are known not spoken
    unknown = ctx.undetermined(TLS13, TLS13) or (None if legacy else
                                                 ctx.undetermined(TLS10, TLS12))
    if unknown is not None:
        return ctx.inconclusive(f"no session was resumed, but {unknown}: "
                                + "; ".join(evidence), evidence)
    if all(ok is False for ok, _ in answers):
        return ctx.result(Verdict.not_supported, "no session was resumed: "
                          + "; ".join(evidence), evidence)
    return ctx.inconclusive("no session was resumed, and not every mechanism could be "
                            "asked: " + "; ".join(evidence), evidence)


CHECK = ActiveCheck("resumption", "session resumption (session IDs, tickets, TLS 1.3 PSK)",
                    run)
