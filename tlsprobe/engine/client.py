"""Sans-IO TLS client handshake: bytes from the server in, bytes to send and events out.

The state machine owns a session.Flow, feeds it both what it sends and what it receives
(so the trace shows both directions in order) and reacts to each event as the Flow yields
it. This module holds what every version shares: the first hello, the input boundary
(every server event dispatched; alerts, application data, the end of the connection) and
the public interface; the answers to a ServerHello or HelloRetryRequest are
engine.hellos' (their rules engine.serverhello's), the application of verdicts
engine.applying's, the record output engine.records'. After the ServerHello the version's
half (engine.tls13.Tls13Client, engine.tls12.Tls12Client) does the key schedule, verifies
the server's signature and Finished and builds the client's flight, answering each message
with a Verdict (engine.verdict) that this class (through engine.applying) applies: it is
the one place the handshake state changes.

Modes: `stop_after_first_flight=True` stops at the TLS 1.2 ServerHelloDone or the TLS 1.3
ServerHello (with `read_server_flight=True`, TLS 1.3 goes on to decrypt and verify the
server's flight up to its Finished, sending nothing); `False` completes the handshake.
`retry` (RetryHello): the second hello after a HelloRetryRequest built by the caller that
sent a `prebuilt` one (client simulation), not from the config. `names_only=True` (the group
audit) reads only what the server names and computes nothing: a HelloRetryRequest ends the
handshake (no second hello is built, no transcript hash taken), the certificates are not
parsed (their count is still bounded) and a TLS 1.2 ServerKeyExchange's signature and point
are not checked; so it needs no `cryptography` at all (start-up, issue 35).
Resumption (ClientConfig.resume): a TLS 1.2 session ID or ticket (the abbreviated handshake,
which stops after the server's Finished in the first mode), a TLS 1.3 PSK with its binder,
and 0-RTT data sent after the ClientHello (only in the first mode: the engine sends no
EndOfEarlyData). `resumed` and `early_data_accepted` say what the server did.
When the engine itself cannot go on (a suite without record-protection parameters, SSL
3.0, PSK key exchange, explicit curves) it stops with `incomplete_reason` set, not an error.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine import extcheck, serverhello
from tlsprobe.engine.common import (
    DECODE_ERROR,
    ILLEGAL_PARAMETER,
    INTERNAL_ERROR,
    TLS10,
    UNEXPECTED_MESSAGE,
    HandshakeFailure,
    ServerFlight,
    is_tls13,
    malformed,
    message_label,
)
from tlsprobe.engine.config import BuiltHello, ClientConfig, build_client_hello
from tlsprobe.engine.facts import facts_of, key_exchange_of
from tlsprobe.engine.guards import Limits
from tlsprobe.engine.hellos import RetryHello, ServerHellos
from tlsprobe.engine.interface import (
    Handshake,
)
from tlsprobe.engine.records import ALERT, APPLICATION_DATA
from tlsprobe.engine.tls13 import early_protection
from tlsprobe.engine.verdict import Refusal
from tlsprobe.errors import FailureKind
from tlsprobe.model.facts import HandshakeFacts, HandshakeTimings, KeyExchangeFacts
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import (
    SERVER,
    AlertEvent,
    ApplicationDataEvent,
    ChangeCipherSpecEvent,
    ErrorEvent,
    Event,
    MessageEvent,
    SSLv2HelloEvent,
)
from tlsprobe.wire.certificate import Certificate
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.hello import ServerHello

__all__ = ["ClientHandshake", "HandshakeFailure", "Limits", "RetryHello", "ServerFlight"]


class ClientHandshake(ServerHellos):
    """Drives one client handshake. Call `start()`, then `receive()` with every chunk.

    The one owner of the handshake's state: the version half, the checkers and the guard
    answer with verdicts and refusals (engine.verdict), which only this class and its bases
    (engine.applying, engine.hellos) apply."""

    def __init__(self, config: ClientConfig, *, annotate: bool = True,
                 stop_after_first_flight: bool = True, read_server_flight: bool = False,
                 limits: Limits | None = None, prebuilt: BuiltHello | None = None,
                 retry: RetryHello | None = None, names_only: bool = False) -> None:
        psk = config.psk_offer
        if psk is not None and psk.early_data is not None and not stop_after_first_flight:
            raise ValueError("0-RTT data is sent only by a handshake that stops after the "
                             "server's flight (the engine sends no EndOfEarlyData)")
        super().__init__(config, annotate=annotate,
                         stop_after_first_flight=stop_after_first_flight,
                         read_server_flight=read_server_flight, limits=limits,
                         prebuilt=prebuilt)
        self._names_only = names_only
        self._retry = retry   # builds the second hello after an HRR (None: from config)

    def start(self) -> bytes:
        self._built = self._prebuilt or build_client_hello(self._config)
        self._shares = dict(self._built.shares)
        self._hellos.append(self._built.hello)
        # Record-layer version 0x0301 for the first hello, as browsers and OpenSSL send it.
        self._record_version = min(TLS10, self._config.max_legacy) \
            if self._config.max_legacy >= 0x0300 else TLS10
        if self._built.record_version is not None:
            self._record_version = self._built.record_version
        self._send_message(frame(HandshakeType.client_hello, self._built.hello.serialize()))
        psk = self._config.psk_offer
        if psk is not None and psk.early_data is not None:   # 0-RTT (RFC 8446 2.3)
            hello_hash = self._transcript.digest(psk.hash_name)
            self._set_write(lambda: early_protection(psk, hello_hash))
            self._send_record(APPLICATION_DATA, psk.early_data)
        return self.take_output()

    # -- after the handshake -------------------------------------------------------------
    def send_application_data(self, data: bytes) -> None:
        """Queue application data (after a completed handshake); take_output() has it."""
        if not self._handshake_complete or self._closed:
            raise ValueError("application data needs a completed, open connection")
        self._send_record(APPLICATION_DATA, data)

    def close(self) -> bytes:
        """Send close_notify; returns the bytes to send."""
        if not self._closed:
            self._closed = True
            self._send_record(ALERT, b"\x01\x00")
        return self.take_output()

    # -- input ---------------------------------------------------------------------------
    def receive(self, data: bytes) -> bytes:
        """Process bytes from the server; returns bytes to send (possibly empty).

        The one error boundary for server data: whatever in the engine decodes what the
        server sent (the wire's lazy extension views included) raises DecodeError or
        ValueError, which ends here as a decode_error alert and a protocol error naming the
        message and the field, never as an exception of the caller's. A Refusal (a rule
        broken) ends here as its own alert and a protocol error."""
        guard = self._server_input
        try:
            guard.on_bytes(len(data))
            for ev in self._flow.feed(SERVER, data):
                self._reading = serverhello.event_label(ev)
                self._events.append(guard.for_trace(ev))
                guard.on_event(ev)
                self._handle(ev)
                if self._done and not self._handshake_complete:
                    break
            self._check_pending_message()
        except Refusal as refusal:
            self._fail(refusal.alert, refusal.message, refusal.kind)
        except ValueError as exc:  # DecodeError included; HandshakeFailure passes through
            self._fail(DECODE_ERROR, malformed(self._reading, exc))
        return self.take_output()

    def _check_pending_message(self) -> None:
        """Refuse a message the state cannot accept as soon as its type byte arrives,
        rather than wait (until a timeout) for the length its header claims."""
        pending = self._flow.pending_message_type(SERVER)
        half = self._version_state
        if pending is None or half is None or self._done or \
                half.expects(self._waiting_for, pending):
            return
        self._fail(UNEXPECTED_MESSAGE, f"server started a {message_label(pending)} while "
                  f"the client waited for {self._waiting_for}")

    def _may_come(self, msg_type: int | None) -> bool:
        """A handshake message of `msg_type` (not a HelloRequest, which is empty) may come
        now: what a header over --max-message announces is then taken for a real message,
        else (bytes that are no such header: a record read in the clear that is not) the
        data is malformed."""
        half = self._version_state
        return msg_type not in (None, 0) and \
            not registry.handshake_name(msg_type or 0).startswith("0x") and \
            (half is None or half.expects(self._waiting_for, msg_type or 0))

    def _handle(self, ev: Event) -> None:
        if isinstance(ev, ErrorEvent):
            alert = 20 if ev.where == "record protection" else DECODE_ERROR
            pending = self._flow.pending_message_type(SERVER)
            if ev.error.reason.endswith(f" over {self._limits.max_message}") and \
                    self._may_come(pending):
                # our own limit, not a malformed message: named, with the option to raise it
                raise Refusal(INTERNAL_ERROR, f"server sent a {message_label(pending or 0)} "
                              f"over tlsprobe's limit ({ev.where}): {ev.error} (--max-message "
                              "raises it)", FailureKind.LIMIT)
            self._fail(alert, f"server sent malformed data ({ev.where}): {ev.error}")
        if isinstance(ev, AlertEvent):
            self._alert(ev)
            return
        if isinstance(ev, SSLv2HelloEvent):
            raise HandshakeFailure(FailureKind.PROTOCOL, "server sent an SSLv2 ClientHello")
        if isinstance(ev, ChangeCipherSpecEvent):
            if self._version_state is not None:
                self._apply(self._version_state.on_change_cipher_spec(self._waiting_for))
            return
        if isinstance(ev, ApplicationDataEvent):
            self._on_application_data(ev)
            return
        if not isinstance(ev, MessageEvent) or ev.direction != SERVER:
            return
        if ev.error is not None or ev.decoded is None:
            self._fail(DECODE_ERROR, malformed(self._reading, ev.error or ValueError("?")))
        msg = ev.decoded.message
        if isinstance(msg, ServerHello):
            self._on_server_hello(msg, ev.raw)
            return
        if self._server_hello is None:
            self._fail(UNEXPECTED_MESSAGE, f"server sent "
                      f"{message_label(ev.msg_type)} before ServerHello")
        if isinstance(msg, Certificate):
            self._server_input.certificate(msg, parse=not self._names_only)
        extcheck.check_message(self._hellos[-1], self._config.alpn, ev.msg_type, msg,
                               is_tls13(self._server_hello.selected_version))
        self._flight.add(ev.msg_type, msg)
        if self._version_state is not None:
            self._apply(self._version_state.on_message(self._waiting_for, ev, msg,
                                                      may_send=not self._closed))

    def _alert(self, ev: AlertEvent) -> None:
        name = registry.alert_name(ev.alert.description)
        if ev.alert.level not in (1, 2):
            self._fail(ILLEGAL_PARAMETER, f"server sent an alert of level {ev.alert.level} "
                      f"({name}); RFC 5246 7.2 defines warning(1) and fatal(2) only")
        level = "fatal" if ev.alert.level == 2 else "warning"
        if ev.alert.description == 0 and self._handshake_complete:
            self._peer_closed = True
            return
        if ev.alert.level != 2 and not self._done and \
                self._server_input.warning_alert(ev.alert.description):
            return  # the handshake goes on
        if ev.alert.level == 2 or not self._done:
            if self._handshake_complete and not self._application_data and \
                    self._awaiting_acceptance:
                # TLS 1.3: the server checks our Finished after we sent it; an alert before
                # any data from it means it refused the handshake.
                self._handshake_complete = False
            why = ("; the server requires a client certificate (it sent a CertificateRequest "
                   "and tlsprobe has none to send)"
                   if self._certificate_requested
                   and HandshakeType.certificate in self._sent_types else "")
            raise HandshakeFailure(FailureKind.ALERT, f"server sent {level} alert {name} "
                                   f"({ev.alert.description}){why}", ev.alert.description)

    def _on_application_data(self, ev: ApplicationDataEvent) -> None:
        if ev.direction != SERVER:
            return
        if not self._handshake_complete:
            self._server_input.application_data(ev)
            return
        if ev.decrypted:
            self._application_data += ev.data

    def facts(self, timings: HandshakeTimings | None = None) -> HandshakeFacts:
        """What the handshake established, as the capture analyzer says it too."""
        return facts_of(self, timings)

    def key_exchange(self) -> KeyExchangeFacts | None:
        """`facts().key_exchange` alone (None before a ServerHello)."""
        return key_exchange_of(self)

    # -- end -----------------------------------------------------------------------------
    def connection_closed(self) -> None:
        """The server closed the connection; fail unless the handshake was done."""
        if self._done:
            return
        where = "ServerHello" if self._server_hello is None else "the rest of its flight"
        if self._server_hello is not None and self._first_flight_done:
            where = "its Finished"
        cut = self._flow.pending_part(SERVER)
        what = f"in the middle of a {cut}, " if cut else ""
        text = f"server closed the connection {what}before sending {where}"
        warnings = self._server_input.warning_alerts
        if warnings:
            text += f" (after a warning alert {registry.alert_name(warnings[-1])} " \
                f"({warnings[-1]}))"
        raise HandshakeFailure(FailureKind.CLOSED, text)


def _has_the_interface(hs: ClientHandshake) -> Handshake:
    """mypy checks here that ClientHandshake provides engine.interface.Handshake."""
    return hs
