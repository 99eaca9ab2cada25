"""How a client handshake carries out what its parts decided: the one place its state
changes for a verdict.

`AppliedState` (the base of engine.hellos.ServerHellos and engine.client.ClientHandshake)
sends a whole handshake message into the transcript, stops the handshake with a fatal
alert (`_fail`: a Refusal's alert and kind), stops it where the engine cannot go on, and
applies a version half's `Verdict` (engine.verdict) in its order: the facts, the outputs,
then the refusal or the end state. It also starts a half with the frozen context the
ServerHello fixes.
"""

from __future__ import annotations

from typing import NoReturn

from tlsprobe.engine.common import HandshakeFailure
from tlsprobe.engine.records import ALERT
from tlsprobe.engine.state import HandshakeState
from tlsprobe.engine.tls12 import Tls12Client
from tlsprobe.engine.tls13 import Tls13Client
from tlsprobe.engine.verdict import HandshakeContext, Verdict
from tlsprobe.errors import FailureKind
from tlsprobe.wire.hello import ServerHello


class AppliedState(HandshakeState):
    """The handshake's state with the operations that change it for a verdict."""

    #: the group audit's mode: read only what the server names, compute nothing (set by
    #: ClientHandshake)
    _names_only: bool

    def _send_message(self, raw: bytes) -> None:
        """Send one whole handshake message and add it to the transcript."""
        self._transcript.add(raw)
        self._send_handshake(raw)

    def _fail(self, alert: int, message: str,
              kind: FailureKind = FailureKind.PROTOCOL) -> NoReturn:
        """Queue a fatal alert for the server (take_output has it) and stop."""
        try:
            self._send_record(ALERT, bytes([2, alert]))
        except ValueError:
            pass
        raise HandshakeFailure(kind, message)

    def _stop_incomplete(self, reason: str) -> None:
        """The engine cannot complete this handshake: stop here, as after the first flight."""
        self._incomplete_reason = reason
        self._first_flight_done = True
        self._done = True

    def _complete(self) -> None:
        self._handshake_complete = True
        self._done = True

    # -- verdicts of the version half ----------------------------------------------------
    def _apply(self, v: Verdict) -> None:
        """Apply what the version half established: facts, outputs, then refusal or end."""
        if v.waiting_for is not None:
            self._waiting_for = v.waiting_for
        if v.certificates is not None:
            self._certificates = list(v.certificates)
        if v.signature_verified is not None:
            self._signature_verified = v.signature_verified
        if v.signature_detail is not None:
            self._signature_detail = v.signature_detail
        if v.finished_verified is not None:
            self._finished_verified = v.finished_verified
        if v.share_problem is not None:
            self._share_problem = v.share_problem
        if v.shared_secret is not None:
            self._shared_secret = v.shared_secret
        if v.client_share_bytes is not None:
            self._client_share_bytes = v.client_share_bytes
        if v.keylog_lines is not None:
            self._keylog_lines = v.keylog_lines
        if v.awaiting_acceptance is not None:
            self._awaiting_acceptance = v.awaiting_acceptance
        for out in v.outputs:
            self._perform(out)
        if v.refusal is not None:
            self._fail(v.refusal.alert, v.refusal.message, v.refusal.kind)
        if v.first_flight_done:
            self._first_flight_done = True
        if v.done:
            self._done = True
        if v.incomplete is not None:
            self._stop_incomplete(v.incomplete)
        if v.complete:
            self._complete()

    def _start_half(self, half: Tls12Client | Tls13Client) -> None:
        self._version_state = half
        self._apply(half.start())

    def _context(self, sh: ServerHello) -> HandshakeContext:
        return HandshakeContext(self._client_random, self._hellos[-1], sh, self._transcript,
                                self._stop_after_first_flight, self._names_only)


__all__ = ["AppliedState"]
