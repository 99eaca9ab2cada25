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
from dataclasses import dataclass, replace

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS12, TLS13
from tlsprobe.model.check_details import ResumptionDetails, ResumptionMechanism
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._handshake import (
    Handshake,
    handshake,
    legacy_versions,
    max_early_data,
)
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


@dataclass(frozen=True)
class Answer:
    """One mechanism's answer: resumed (True), not resumed (False) or undetermined (None),
    the evidence line, and the sessions (IDs or tickets) the server issued."""

    ok: bool | None
    line: str
    issued: int = 0

    def mechanism(self) -> ResumptionMechanism:
        return ResumptionMechanism(self.line.split(":")[0], self.issued, self.ok)


def _resumed(hs: Handshake | Outcome, what: str) -> Answer:
    """The answer of the connection that offered the session back (one session issued)."""
    if isinstance(hs, Outcome):
        return Answer(None, f"{what}: offered back, no answer ({hs.reason})", 1)
    if hs.engine.verification.resumed and hs.engine.verification.finished_verified:
        return Answer(True, f"{what}, resumed (abbreviated handshake, server Finished "
                      "verified)", 1)
    if hs.engine.messages.server_hello is not None and not hs.engine.verification.resumed:
        return Answer(False, f"{what}, not resumed (the server answered with a full "
                      "handshake)", 1)
    return Answer(None, f"{what}: offered back, {hs.describe()}", 1)


async def _session_id(ctx: CheckContext, version: int) -> Answer:
    name = f"{registry.version_name(version)} session ID"
    config = ctx.config((version,), session_ticket=False)
    full = await handshake(ctx, config, complete=True, drain=True, label="session ID")
    if isinstance(full, Outcome) or full.failure is not None:
        return Answer(None, f"{name}: the full handshake failed ({_why(full)})")
    session = full.tls12_session()
    if session is None or not session.session_id:
        return Answer(False, f"{name}: none issued (empty session ID in the ServerHello)")
    again = await handshake(ctx, ctx.config((version,), session_ticket=False, resume=session),
                            complete=True, label="session ID resumed")
    return _resumed(again, f"{name}: issued")


async def _ticket(ctx: CheckContext, version: int) -> Answer:
    name = f"{registry.version_name(version)} session ticket"
    full = await handshake(ctx, ctx.config((version,), session_ticket=True), complete=True,
                           drain=True, label="ticket")
    if isinstance(full, Outcome) or full.failure is not None:
        return Answer(None, f"{name}: the full handshake failed ({_why(full)})")
    tickets = full.tickets
    if not tickets:
        return Answer(False, f"{name}: none issued (no NewSessionTicket)")
    session = full.tls12_session(session_id=os.urandom(32), ticket=tickets[-1].ticket)
    if session is None:
        return Answer(None, f"{name}: no session to resume", len(tickets))
    again = await handshake(ctx, ctx.config((version,), resume=session), complete=True,
                            label="ticket resumed")
    got = _resumed(again, f"{name}: issued, lifetime hint {tickets[-1].ticket_lifetime} s")
    return replace(got, issued=len(tickets))


async def _tls13(ctx: CheckContext) -> Answer:
    name = "TLS 1.3 ticket"
    config = ctx.config((TLS13,))
    full = await handshake(ctx, config, complete=True, drain=True, label="TLS 1.3")
    if isinstance(full, Outcome) or full.failure is not None:
        return Answer(None, f"{name}: the full handshake failed ({_why(full)})")
    tickets = full.tickets
    if not tickets:
        return Answer(False, f"{name}: none issued (no NewSessionTicket before the server "
                      "closed or went quiet after close_notify)")
    last = tickets[-1]
    what = (f"{name}: {len(tickets)} issued, lifetime {last.ticket_lifetime} s, "
            f"max_early_data_size {max_early_data(last)}")
    offer = full.tls13_resumption(config, last)
    if offer is None:
        return Answer(None, f"{what}; no session to resume", len(tickets))
    again = await handshake(ctx, offer, complete=True, label="TLS 1.3 resumed")
    if isinstance(again, Handshake) and again.engine.verification.resumed and \
            again.engine.verification.finished_verified:
        return Answer(True, f"{what}, resumed with PSK (psk_dhe_ke, server Finished "
                      "verified)", len(tickets))
    return replace(_resumed(again, what), issued=len(tickets))


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
    evidence = tuple(a.line for a in answers)
    resumed = [a.line.split(":")[0] for a in answers if a.ok]
    details = ResumptionDetails(len(answers), len(resumed),
                                tuple(a.mechanism() for a in answers))
    if resumed:
        return ctx.result(Verdict.supported, f"resumed: {', '.join(resumed)}", evidence,
                          details=details)
    # "no resumption" covers the versions not asked only when they are known not spoken
    unknown = ctx.undetermined(TLS13, TLS13) or (None if legacy else
                                                 ctx.undetermined(TLS10, TLS12))
    if unknown is not None:
        return ctx.inconclusive(f"no session was resumed, but {unknown}: "
                                + "; ".join(evidence), evidence, details)
    if all(a.ok is False for a in answers):
        return ctx.result(Verdict.not_supported, "no session was resumed: "
                          + "; ".join(evidence), evidence, details=details)
    return ctx.inconclusive("no session was resumed, and not every mechanism could be "
                            "asked: " + "; ".join(evidence), evidence, details)


CHECK = ActiveCheck("resumption", "session resumption (session IDs, tickets, TLS 1.3 PSK)",
                    run, ResumptionDetails)
