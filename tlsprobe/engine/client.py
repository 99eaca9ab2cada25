"""Sans-IO TLS client handshake: bytes from the server in, bytes to send and events out.

The state machine owns a session.Flow, feeds it both what it sends and what it receives
(so the trace shows both directions in order) and reacts to each event as the Flow yields
it. This module holds what every version shares: the hellos, HelloRetryRequest, alerts
and application data; the rules for the hellos are engine.serverhello's, the record
output engine.records'. After the ServerHello the version's half (engine.tls13.Tls13Client,
engine.tls12.Tls12Client) does the key schedule, verifies the server's signature and
Finished and builds the client's flight, answering each message with a Verdict
(engine.verdict) that this class applies: it is the one place the handshake state changes.

Modes: `stop_after_first_flight=True` stops at the TLS 1.2 ServerHelloDone or the TLS 1.3
ServerHello (with `read_server_flight=True`, TLS 1.3 goes on to decrypt and verify the
server's flight up to its Finished, sending nothing); `False` completes the handshake.
Resumption (ClientConfig.resume): a TLS 1.2 session ID or ticket (the abbreviated handshake,
which stops after the server's Finished in the first mode), a TLS 1.3 PSK with its binder,
and 0-RTT data sent after the ClientHello (only in the first mode: the engine sends no
EndOfEarlyData). `resumed` and `early_data_accepted` say what the server did.
When the engine itself cannot go on (a suite without record-protection parameters, SSL
3.0, PSK key exchange, explicit curves) it stops with `incomplete_reason` set, not an error.
"""

from __future__ import annotations

from typing import NoReturn

from tlsprobe import kex, registry
from tlsprobe.engine import extcheck, serverhello
from tlsprobe.engine.common import (
    DECODE_ERROR,
    ILLEGAL_PARAMETER,
    TLS10,
    TLS12,
    UNEXPECTED_MESSAGE,
    HandshakeFailure,
    ServerFlight,
    is_tls13,
    malformed,
    message_label,
)
from tlsprobe.engine.config import BuiltHello, ClientConfig, build_client_hello
from tlsprobe.engine.guards import Limits, ServerInput
from tlsprobe.engine.keyschedule import Transcript, tls13_hash_name
from tlsprobe.engine.records import ALERT, APPLICATION_DATA, ClientRecords
from tlsprobe.engine.suites import suite_params
from tlsprobe.engine.tls12 import Tls12Client
from tlsprobe.engine.tls13 import Tls13Client, early_protection
from tlsprobe.engine.verdict import HandshakeContext, Refusal, Verdict, VersionHalf
from tlsprobe.errors import FailureKind
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import (
    SERVER,
    AlertEvent,
    ApplicationDataEvent,
    ChangeCipherSpecEvent,
    ErrorEvent,
    Event,
    Flow,
    MessageEvent,
    SSLv2HelloEvent,
)
from tlsprobe.wire.certificate import Certificate
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.hello import ClientHello, ServerHello

__all__ = ["ClientHandshake", "HandshakeFailure", "Limits", "ServerFlight"]


class ClientHandshake(ClientRecords):
    """Drives one client handshake. Call `start()`, then `receive()` with every chunk.

    The one owner of the handshake's state: the version half, the checkers and the guard
    answer with verdicts and refusals (engine.verdict), which only this class applies."""

    def __init__(self, config: ClientConfig, *, annotate: bool = True,
                 stop_after_first_flight: bool = True, read_server_flight: bool = False,
                 limits: Limits | None = None, prebuilt: BuiltHello | None = None) -> None:
        psk = config.psk_offer
        if psk is not None and psk.early_data is not None and not stop_after_first_flight:
            raise ValueError("0-RTT data is sent only by a handshake that stops after the "
                             "server's flight (the engine sends no EndOfEarlyData)")
        self.config = config
        self.prebuilt = prebuilt   # a ClientHello built before (a replay sends it again)
        self.limits = limits or Limits()
        super().__init__(Flow(annotate=annotate, max_message=self.limits.max_message))
        self.server_input = ServerInput(self, self.limits)
        self.stop_after_first_flight = stop_after_first_flight
        self.read_server_flight = read_server_flight
        self.built: BuiltHello | None = None
        self.hellos: list[ClientHello] = []
        self.shares: dict[int, kex.KeyShare] = {}
        self.server_hello: ServerHello | None = None
        self.hrr: ServerHello | None = None
        self.flight = ServerFlight()
        self.transcript = Transcript()
        self.shared_secret: bytes | None = None
        self.share_problem: str | None = None
        self.client_share_bytes: int | None = None   # TLS 1.2 ClientKeyExchange key size
        self.certificates: list[bytes] = []
        self.signature_verified: bool | None = None
        self.signature_detail: str | None = None
        self.finished_verified: bool | None = None
        self.handshake_complete = False
        self.incomplete_reason: str | None = None
        #: a ServerHello or HRR whose choice broke a rule (a suite not offered, or not
        #: defined for the version it selects; serverhello.check_choice): the named
        #: violation; that hello is then not taken for an answer (server_hello stays None)
        self.hello_violation: str | None = None
        self.keylog_lines: list[str] = []
        self.application_data = bytearray()
        self.peer_closed = False
        self.closed = False
        self.done = False
        self.first_flight_done = False
        self.version_state: VersionHalf | None = None
        self.waiting_for = ""               # the version half's state: what it waits for
        self.awaiting_acceptance = False    # TLS 1.3: our Finished out, nothing heard since
        self._reading = "record"   # what receive() is handling, for its error boundary

    def send_message(self, raw: bytes) -> None:
        """Send one whole handshake message and add it to the transcript."""
        self.transcript.add(raw)
        self.send_handshake(raw)

    def fail(self, alert: int, message: str) -> NoReturn:
        """Queue a fatal alert for the server (take_output has it) and stop."""
        try:
            self.send_record(ALERT, bytes([2, alert]))
        except ValueError:
            pass
        raise HandshakeFailure(FailureKind.PROTOCOL, message)

    def stop_incomplete(self, reason: str) -> None:
        """The engine cannot complete this handshake: stop here, as after the first flight."""
        self.incomplete_reason = reason
        self.first_flight_done = True
        self.done = True

    def complete(self) -> None:
        self.handshake_complete = True
        self.done = True

    # -- verdicts of the version half ----------------------------------------------------
    def _apply(self, v: Verdict) -> None:
        """Apply what the version half established: facts, outputs, then refusal or end."""
        if v.waiting_for is not None:
            self.waiting_for = v.waiting_for
        if v.certificates is not None:
            self.certificates = list(v.certificates)
        if v.signature_verified is not None:
            self.signature_verified = v.signature_verified
        if v.signature_detail is not None:
            self.signature_detail = v.signature_detail
        if v.finished_verified is not None:
            self.finished_verified = v.finished_verified
        if v.share_problem is not None:
            self.share_problem = v.share_problem
        if v.shared_secret is not None:
            self.shared_secret = v.shared_secret
        if v.client_share_bytes is not None:
            self.client_share_bytes = v.client_share_bytes
        if v.keylog_lines is not None:
            self.keylog_lines = v.keylog_lines
        if v.awaiting_acceptance is not None:
            self.awaiting_acceptance = v.awaiting_acceptance
        for out in v.outputs:
            self.perform(out)
        if v.refusal is not None:
            self.fail(v.refusal.alert, v.refusal.message)
        if v.first_flight_done:
            self.first_flight_done = True
        if v.done:
            self.done = True
        if v.incomplete is not None:
            self.stop_incomplete(v.incomplete)
        if v.complete:
            self.complete()

    def _start_half(self, half: Tls12Client | Tls13Client) -> None:
        self.version_state = half
        self._apply(half.start())

    def _context(self, sh: ServerHello) -> HandshakeContext:
        return HandshakeContext(self.client_random, self.hellos[-1], sh, self.transcript,
                                self.stop_after_first_flight)

    @property
    def certificate_requested(self) -> bool:
        """The server sent a CertificateRequest (tlsprobe answers with no certificate)."""
        return HandshakeType.certificate_request in self.flight.messages

    @property
    def client_random(self) -> bytes:
        return self.hellos[0].random

    @property
    def resumed(self) -> bool:
        """The server resumed the offered session: a TLS 1.2 abbreviated handshake, or a
        TLS 1.3 ServerHello that selected the offered PSK."""
        half = self.version_state
        return isinstance(half, (Tls12Client, Tls13Client)) and half.resumed

    @property
    def early_data_accepted(self) -> bool:
        """TLS 1.3: the server's EncryptedExtensions accepted our 0-RTT data."""
        half = self.version_state
        return isinstance(half, Tls13Client) and half.early_data_accepted

    def start(self) -> bytes:
        self.built = self.prebuilt or build_client_hello(self.config)
        self.shares = dict(self.built.shares)
        self.hellos.append(self.built.hello)
        # Record-layer version 0x0301 for the first hello, as browsers and OpenSSL send it.
        self._record_version = min(TLS10, self.config.max_legacy) \
            if self.config.max_legacy >= 0x0300 else TLS10
        self.send_message(frame(HandshakeType.client_hello, self.built.hello.serialize()))
        psk = self.config.psk_offer
        if psk is not None and psk.early_data is not None:   # 0-RTT (RFC 8446 2.3)
            hello_hash = self.transcript.digest(psk.hash_name)
            self.set_write(lambda: early_protection(psk, hello_hash))
            self.send_record(APPLICATION_DATA, psk.early_data)
        return self.take_output()

    # -- after the handshake -------------------------------------------------------------
    def send_application_data(self, data: bytes) -> None:
        """Queue application data (after a completed handshake); take_output() has it."""
        if not self.handshake_complete or self.closed:
            raise ValueError("application data needs a completed, open connection")
        self.send_record(APPLICATION_DATA, data)

    def close(self) -> bytes:
        """Send close_notify; returns the bytes to send."""
        if not self.closed:
            self.closed = True
            self.send_record(ALERT, b"\x01\x00")
        return self.take_output()

    # -- input ---------------------------------------------------------------------------
    def receive(self, data: bytes) -> bytes:
        """Process bytes from the server; returns bytes to send (possibly empty).

        The one error boundary for server data: whatever in the engine decodes what the
        server sent (the wire's lazy extension views included) raises DecodeError or
        ValueError, which ends here as a decode_error alert and a protocol error naming the
        message and the field, never as an exception of the caller's. A Refusal (a rule
        broken) ends here as its own alert and a protocol error."""
        guard = self.server_input
        try:
            guard.on_bytes(len(data))
            for ev in self.flow.feed(SERVER, data):
                self._reading = serverhello.event_label(ev)
                self.events.append(guard.for_trace(ev))
                guard.on_event(ev)
                self._handle(ev)
                if self.done and not self.handshake_complete:
                    break
            self._check_pending_message()
        except Refusal as refusal:
            self.fail(refusal.alert, refusal.message)
        except ValueError as exc:  # DecodeError included; HandshakeFailure passes through
            self.fail(DECODE_ERROR, malformed(self._reading, exc))
        return self.take_output()

    def _check_pending_message(self) -> None:
        """Refuse a message the state cannot accept as soon as its type byte arrives,
        rather than wait (until a timeout) for the length its header claims."""
        pending = self.flow.pending_message_type(SERVER)
        half = self.version_state
        if pending is None or half is None or self.done or \
                half.expects(self.waiting_for, pending):
            return
        self.fail(UNEXPECTED_MESSAGE, f"server started a {message_label(pending)} while "
                  f"the client waited for {self.waiting_for}")

    def _handle(self, ev: Event) -> None:
        if isinstance(ev, ErrorEvent):
            alert = 20 if ev.where == "record protection" else DECODE_ERROR
            hint = " (--max-message)" if ev.error.reason.endswith(
                f" over {self.limits.max_message}") else ""
            self.fail(alert, f"server sent malformed data ({ev.where}): {ev.error}{hint}")
        if isinstance(ev, AlertEvent):
            self._alert(ev)
            return
        if isinstance(ev, SSLv2HelloEvent):
            raise HandshakeFailure(FailureKind.PROTOCOL, "server sent an SSLv2 ClientHello")
        if isinstance(ev, ChangeCipherSpecEvent):
            if self.version_state is not None:
                self._apply(self.version_state.on_change_cipher_spec(self.waiting_for))
            return
        if isinstance(ev, ApplicationDataEvent):
            self._application_data(ev)
            return
        if not isinstance(ev, MessageEvent) or ev.direction != SERVER:
            return
        if ev.error is not None or ev.decoded is None:
            self.fail(DECODE_ERROR, malformed(self._reading, ev.error or ValueError("?")))
        msg = ev.decoded.message
        if isinstance(msg, ServerHello):
            self._server_hello(msg, ev.raw)
            return
        if self.server_hello is None:
            self.fail(UNEXPECTED_MESSAGE, f"server sent "
                      f"{message_label(ev.msg_type)} before ServerHello")
        if isinstance(msg, Certificate):
            self.server_input.certificate(msg)
        extcheck.check_message(self.hellos[-1], self.config.alpn, ev.msg_type, msg,
                               is_tls13(self.server_hello.selected_version))
        self.flight.messages[ev.msg_type] = msg
        self.flight.raw[ev.msg_type] = ev.raw
        self.flight.order.append(ev.msg_type)
        if self.version_state is not None:
            self._apply(self.version_state.on_message(self.waiting_for, ev, msg,
                                                      may_send=not self.closed))

    def _alert(self, ev: AlertEvent) -> None:
        name = registry.alert_name(ev.alert.description)
        if ev.alert.level not in (1, 2):
            self.fail(ILLEGAL_PARAMETER, f"server sent an alert of level {ev.alert.level} "
                      f"({name}); RFC 5246 7.2 defines warning(1) and fatal(2) only")
        level = "fatal" if ev.alert.level == 2 else "warning"
        if ev.alert.description == 0 and self.handshake_complete:
            self.peer_closed = True
            return
        if ev.alert.level != 2 and not self.done and \
                self.server_input.warning_alert(ev.alert.description):
            return  # the handshake goes on
        if ev.alert.level == 2 or not self.done:
            if self.handshake_complete and not self.application_data and \
                    self.awaiting_acceptance:
                # TLS 1.3: the server checks our Finished after we sent it; an alert before
                # any data from it means it refused the handshake.
                self.handshake_complete = False
            why = ("; the server requires a client certificate (it sent a CertificateRequest "
                   "and tlsprobe has none to send)"
                   if self.certificate_requested
                   and HandshakeType.certificate in self.sent_types else "")
            raise HandshakeFailure(FailureKind.ALERT, f"server sent {level} alert {name} "
                                   f"({ev.alert.description}){why}", ev.alert.description)

    def _application_data(self, ev: ApplicationDataEvent) -> None:
        if ev.direction != SERVER:
            return
        if not self.handshake_complete:
            self.server_input.application_data(ev)
            return
        if ev.decrypted:
            self.application_data += ev.data

    # -- hellos --------------------------------------------------------------------------
    def _server_hello(self, sh: ServerHello, raw: bytes) -> None:
        # decoded before anything reads them (the ServerHello and TLS 1.2 contexts decode
        # alike); the rules come once the version is known
        extcheck.decode_extensions(sh.extensions, extcheck.HRR if sh.is_hello_retry_request
                                   else extcheck.SH13)
        try:
            serverhello.check_choice(sh, self.hellos[-1], self.config.versions)
        except Refusal as refusal:
            self.hello_violation = refusal.message
            raise
        serverhello.second_hello(sh, self.server_hello, self.hrr)
        if sh.is_hello_retry_request:
            self._hello_retry(sh, raw)
            return
        self.server_hello = sh
        serverhello.check_server_hello(sh, self.config, self.hellos[-1], self.hrr)
        self.transcript.add(raw)
        if is_tls13(sh.selected_version):
            self._record_version = TLS12  # legacy_record_version from now on
            self._tls13_server_hello(sh)
        else:
            self._record_version = sh.selected_version
            self._start_half(Tls12Client(self._context(sh), self.config.resume))

    def _tls13_server_hello(self, sh: ServerHello) -> None:
        found = serverhello.tls13_share(sh, self.hrr, self.hellos[-1], self.shares)
        if isinstance(found, str):
            self.stop_incomplete(found)  # we offered a share we cannot compute
            return
        group, mine, key = found
        try:
            self.shared_secret = mine.shared_secret(key)
        except kex.InvalidShare as exc:
            self.share_problem = str(exc)
            self.fail(ILLEGAL_PARAMETER, f"invalid server key share for "
                      f"{registry.group_label(group)}: {exc}")
        self.first_flight_done = True
        if self.stop_after_first_flight and not self.read_server_flight:
            self.done = True
            return
        if suite_params(sh.cipher_suite) is None:
            self.stop_incomplete(f"no record protection for "
                                 f"{registry.suite_label(sh.cipher_suite)}")
            return
        self._start_half(Tls13Client(self._context(sh), self.shared_secret,
                                     self.config.psk_offer))

    def _hello_retry(self, hrr: ServerHello, raw: bytes) -> None:
        serverhello.check_hello_retry_form(hrr, self.config, self.hellos[-1])
        self.hrr = hrr
        if self.config.psk_offer is not None:
            self.stop_incomplete("a HelloRetryRequest to a PSK offer (a second hello with "
                                 "the PSK is not implemented)")
            return
        if self.built is None:
            raise HandshakeFailure(FailureKind.PROTOCOL, "HelloRetryRequest before start()")
        serverhello.check_hello_retry_change(hrr, self.config, self.shares)
        group = hrr.hrr_selected_group
        cookie_ext = hrr.extension(44)
        cookie = None
        if cookie_ext is not None:
            from tlsprobe.wire.ext_decoders import WHERE_HRR, decode_extension
            cookie = decode_extension(44, cookie_ext.data, WHERE_HRR)
        self.transcript.apply_hello_retry(tls13_hash_name(hrr.cipher_suite))
        self.transcript.add(raw)
        share_groups = (group,) if group is not None else self.config.share_groups()
        first = self.built.hello
        rebuilt = build_client_hello(self.config, share_groups=share_groups,
                                     session_id=first.legacy_session_id, cookie=cookie,
                                     random=first.random, reuse=self.shares)
        self.shares = dict(rebuilt.shares)
        self.hellos.append(rebuilt.hello)
        self._record_version = TLS12
        self.send_message(frame(HandshakeType.client_hello, rebuilt.hello.serialize()))

    # -- end -----------------------------------------------------------------------------
    def connection_closed(self) -> None:
        """The server closed the connection; fail unless the handshake was done."""
        if self.done:
            return
        where = "ServerHello" if self.server_hello is None else "the rest of its flight"
        if self.server_hello is not None and self.first_flight_done:
            where = "its Finished"
        cut = self.flow.pending_part(SERVER)
        what = f"in the middle of a {cut}, " if cut else ""
        text = f"server closed the connection {what}before sending {where}"
        warnings = self.server_input.warning_alerts
        if warnings:
            text += f" (after a warning alert {registry.alert_name(warnings[-1])} " \
                f"({warnings[-1]}))"
        raise HandshakeFailure(FailureKind.CLOSED, text)
