"""TLS 1.3 0-RTT (RFC 8446 2.3, 8): does the server accept early data, and accept it twice?

0-RTT data is sent with the ClientHello under a key derived from a resumption PSK alone,
so nothing in it is fresh: an attacker who records the ClientHello and its early data can
send them again, and a server without anti-replay (RFC 8446 8: single-use tickets or a
ClientHello recording) acts on the same request twice. The check:
  1. a full TLS 1.3 handshake, then close_notify and the server's last records: the
     NewSessionTickets; none with max_early_data_size > 0 means no 0-RTT (not applicable);
  2. a resumption with that ticket's PSK, early_data offered and EARLY_DATA (two harmless
     bytes, CRLF, which any protocol skips) sent as 0-RTT; the server's flight is decrypted
     and checked up to its Finished: early_data in its EncryptedExtensions means accepted;
  3. when accepted: the same bytes again, byte for byte (the same ClientHello and the same
     encrypted early data), on a new connection, as an attacker would replay them.
Verdict: accepted on 2 and refused on 3 (the PSK not selected, or early_data missing):
supported, replay prevented; accepted on both: vulnerable (replay not prevented, a finding
of severity medium); rejected on 2: not supported. At most 3 connections.
"""

from __future__ import annotations

from tlsprobe.engine.config import TLS13
from tlsprobe.model.check_details import EarlyDataDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._handshake import Handshake, handshake, max_early_data
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

EARLY_DATA = b"\r\n"


def accepted(hs: Handshake) -> bool:
    """The server accepted the 0-RTT data and proved it holds the PSK (its Finished)."""
    checked = hs.engine.verification
    return checked.early_data_accepted and bool(checked.finished_verified) and \
        hs.failure is None


def _answer(hs: Handshake) -> str:
    engine = hs.engine
    if hs.failure is not None or engine.messages.server_hello is None:
        return hs.describe()
    if accepted(hs):
        return "PSK selected, early_data accepted (server Finished verified)"
    if engine.verification.resumed:
        return "PSK selected, early_data not accepted"
    return "PSK not selected (a full handshake), early_data not accepted"


async def run(ctx: CheckContext) -> CheckResult:
    if TLS13 not in ctx.spoken:
        return ctx.unless_unknown(TLS13, TLS13, "the server does not speak TLS 1.3 (0-RTT "
                                  "data is TLS 1.3's)")
    config = ctx.config((TLS13,))
    full = await handshake(ctx, config, complete=True, drain=True, label="ticket")
    if isinstance(full, Outcome) or full.failure is not None:
        why = full.reason if isinstance(full, Outcome) else full.describe()
        return ctx.inconclusive(f"the TLS 1.3 handshake for a ticket failed: {why}")
    tickets = full.tickets
    allowing = [t for t in tickets if max_early_data(t) > 0]
    if not allowing:
        seen = (f"{len(tickets)} NewSessionTicket(s), none with max_early_data_size > 0"
                if tickets else "no NewSessionTicket after the handshake")
        return ctx.result(Verdict.not_applicable, f"no ticket allows early data ({seen})")
    ticket = allowing[-1]
    offer = full.tls13_resumption(config, ticket, early_data=EARLY_DATA)
    if offer is None:
        return ctx.inconclusive("the TLS 1.3 handshake set up no session to resume")
    what = f"ticket with max_early_data_size {max_early_data(ticket)}"
    first = await handshake(ctx, offer, read_flight=True, label="0-RTT")
    if isinstance(first, Outcome):
        return ctx.inconclusive(f"0-RTT offer: {first.reason}")
    evidence: tuple[str, ...] = ((f"sent: a resumption with the {what} and "
                                  f"{len(EARLY_DATA)} bytes of 0-RTT data"),
                                 f"received: {_answer(first)}")
    engine = first.engine
    size = max_early_data(ticket)
    if not accepted(first):
        if engine.messages.server_hello is None or first.failure is not None:
            return ctx.inconclusive(f"0-RTT offer: {first.describe()}", evidence)
        return ctx.result(Verdict.not_supported, f"the server issues a {what} but did not "
                          f"accept 0-RTT data: {_answer(first)}", evidence,
                          details=EarlyDataDetails(size, False, None))
    replay = await handshake(ctx, offer, read_flight=True, prebuilt=engine.messages.built,
                             label="0-RTT replay")
    if isinstance(replay, Outcome):
        return ctx.inconclusive(f"0-RTT accepted; its replay: {replay.reason}", evidence)
    same = replay.opening == first.opening
    evidence += (f"replayed: the same {len(first.opening)} bytes (ClientHello and 0-RTT data)"
                 + ("" if same else " (NOT byte-identical)"), f"received: {_answer(replay)}")
    if not same:
        return ctx.inconclusive("0-RTT accepted; the replay was not byte-identical", evidence)
    if accepted(replay):
        return ctx.result(Verdict.vulnerable, "0-RTT data is accepted, and accepted again "
                          "when the same ClientHello and early data are replayed: replay "
                          "is not prevented (RFC 8446 8)", evidence,
                          severity=Severity.medium,
                          details=EarlyDataDetails(size, True, True))
    if replay.engine.messages.server_hello is None or replay.failure is not None:
        return ctx.inconclusive(f"0-RTT accepted; its replay: {replay.describe()}", evidence)
    return ctx.result(Verdict.supported, "0-RTT data is accepted, and its replay refused "
                      f"({_answer(replay)})", evidence,
                      details=EarlyDataDetails(size, True, False))


CHECK = ActiveCheck("early_data", "TLS 1.3 0-RTT early data and its replay", run, EarlyDataDetails)
