"""Sans-IO TLS client handshake: bytes from the server in, bytes to send and events out.

The state machine owns a session.Flow, feeds it both what it sends and what it receives
(so the trace shows both directions in order) and reacts to each event as the Flow yields
it. This module holds what every version shares: the hellos, HelloRetryRequest, the
ServerHello checks, alerts, record output and application data. After the ServerHello the
version's half takes over (engine.tls13.Tls13Client, engine.tls12.Tls12Client): key
schedule, verification of the server's signature and Finished, and the client's flight.

Modes: `stop_after_first_flight=True` stops at the TLS 1.2 ServerHelloDone or the TLS 1.3
ServerHello (with `read_server_flight=True`, TLS 1.3 goes on to decrypt and verify the
server's flight up to its Finished, sending nothing); `False` completes the handshake.
When the engine itself cannot go on (a suite without record-protection parameters, SSL
3.0, PSK key exchange, explicit curves) it stops with `incomplete_reason` set, not an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from tlsprobe import kex, registry
from tlsprobe.engine import extcheck
from tlsprobe.engine.common import (
    DECODE_ERROR,
    ILLEGAL_PARAMETER,
    MAX_FRAGMENT,
    TLS10,
    TLS12,
    TLS13,
    UNEXPECTED_MESSAGE,
    HandshakeFailure,
    RecordDeprotector,
    ServerFlight,
    is_tls13,
    malformed,
    message_label,
    plain_records,
)
from tlsprobe.engine.config import BuiltHello, ClientConfig, build_client_hello
from tlsprobe.engine.guards import Limits, ServerInput
from tlsprobe.engine.keyschedule import Transcript, tls13_hash_name
from tlsprobe.engine.protection import RecordProtection
from tlsprobe.engine.suites import suite_params
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import (
    CLIENT,
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
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM, ClientHello, ServerHello

__all__ = ["ClientHandshake", "HandshakeFailure", "Limits", "ServerFlight"]

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA = 20, 21, 22, 23


class ClientHandshake:
    """Drives one client handshake. Call `start()`, then `receive()` with every chunk."""

    def __init__(self, config: ClientConfig, *, annotate: bool = True,
                 stop_after_first_flight: bool = True, read_server_flight: bool = False,
                 limits: Limits | None = None) -> None:
        self.config = config
        self.limits = limits or Limits()
        self.flow = Flow(annotate=annotate, max_message=self.limits.max_message)
        self.server_input = ServerInput(self, self.limits)
        self.stop_after_first_flight = stop_after_first_flight
        self.read_server_flight = read_server_flight
        self.events: list[Event] = []
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
        self.keylog_lines: list[str] = []
        self.application_data = bytearray()
        self.peer_closed = False
        self.closed = False
        self.done = False
        self.first_flight_done = False
        self.sent_types: set[int] = set()   # handshake types we sent
        self.version_state: object | None = None
        self._record_version = TLS10
        self._write: RecordProtection | None = None
        self._out = bytearray()
        self._reading = "record"   # what receive() is handling, for its error boundary

    # -- output --------------------------------------------------------------------------
    def take_output(self) -> bytes:
        data, self._out = bytes(self._out), bytearray()
        return data

    def _emit(self, data: bytes) -> None:
        self._out += data
        self.events.extend(self.flow.feed(CLIENT, data))

    def send_record(self, content_type: int, payload: bytes) -> None:
        """Send `payload` as records, protected once `set_write` was called."""
        if self._write is None:
            self._emit(plain_records(content_type, self._record_version, payload))
            return
        for i in range(0, max(len(payload), 1), MAX_FRAGMENT):
            self._emit(self._write.encrypt(content_type, payload[i:i + MAX_FRAGMENT]))

    def send_message(self, raw: bytes) -> None:
        """Send one whole handshake message and add it to the transcript."""
        self.transcript.add(raw)
        self.sent_types.add(raw[0])
        self.send_record(HANDSHAKE, raw)

    def send_change_cipher_spec(self) -> None:
        self._emit(plain_records(CHANGE_CIPHER_SPEC, self._record_version, b"\x01"))

    def set_write(self, make: Callable[[], RecordProtection]) -> None:
        """Protect what we send from now on; a twin protection lets the Flow decrypt our own
        records, so the trace shows our Finished and requests in clear."""
        self._write = make()
        self.flow.set_deprotector(CLIENT, RecordDeprotector(make()))

    def set_read(self, protection: RecordProtection) -> None:
        """Decrypt the server's records from the next one on."""
        self.flow.set_deprotector(SERVER, RecordDeprotector(protection))

    def fail(self, alert: int, message: str) -> NoReturn:
        """Queue a fatal alert for the server (take_output has it) and stop."""
        try:
            self.send_record(ALERT, bytes([2, alert]))
        except ValueError:
            pass
        raise HandshakeFailure("protocol", message)

    def stop_incomplete(self, reason: str) -> None:
        """The engine cannot complete this handshake: stop here, as after the first flight."""
        self.incomplete_reason = reason
        self.first_flight_done = True
        self.done = True

    def complete(self) -> None:
        self.handshake_complete = True
        self.done = True

    @property
    def certificate_requested(self) -> bool:
        """The server sent a CertificateRequest (tlsprobe answers with no certificate)."""
        return HandshakeType.certificate_request in self.flight.messages

    @property
    def client_random(self) -> bytes:
        return self.hellos[0].random

    def start(self) -> bytes:
        self.built = build_client_hello(self.config)
        self.shares = dict(self.built.shares)
        self.hellos.append(self.built.hello)
        # Record-layer version 0x0301 for the first hello, as browsers and OpenSSL send it.
        self._record_version = min(TLS10, self.config.max_legacy) \
            if self.config.max_legacy >= 0x0300 else TLS10
        self.send_message(frame(HandshakeType.client_hello, self.built.hello.serialize()))
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
        message and the field, never as an exception of the caller's."""
        guard = self.server_input
        guard.on_bytes(len(data))
        try:
            for ev in self.flow.feed(SERVER, data):
                self._reading = _label(ev)
                self.events.append(guard.for_trace(ev))
                guard.on_event(ev)
                self._handle(ev)
                if self.done and not self.handshake_complete:
                    break
            self._check_pending_message()
        except ValueError as exc:  # DecodeError included; HandshakeFailure passes through
            self.fail(DECODE_ERROR, malformed(self._reading, exc))
        return self.take_output()

    def _check_pending_message(self) -> None:
        """Refuse a message the state cannot accept as soon as its type byte arrives,
        rather than wait (until a timeout) for the length its header claims."""
        pending = self.flow.pending_message_type(SERVER)
        expects = getattr(self.version_state, "expects", None)
        if pending is None or expects is None or self.done or expects(pending):
            return
        self.fail(UNEXPECTED_MESSAGE, f"server started a {message_label(pending)} while "
                  f"the client waited for {getattr(self.version_state, 'state', '?')}")

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
            raise HandshakeFailure("protocol", "server sent an SSLv2 ClientHello")
        if isinstance(ev, ChangeCipherSpecEvent):
            if self.version_state is not None:
                self.version_state.on_change_cipher_spec()  # type: ignore[attr-defined]
            return
        if isinstance(ev, ApplicationDataEvent):
            self._application_data(ev)
            return
        if not isinstance(ev, MessageEvent) or ev.direction != SERVER:
            return
        if ev.error is not None or ev.decoded is None:
            self.fail(DECODE_ERROR, malformed(self._reading, ev.error or ValueError("?")))
        msg = ev.decoded.message  # type: ignore[union-attr]
        if isinstance(msg, ServerHello):
            self._server_hello(msg, ev.raw)
            return
        if self.server_hello is None:
            self.fail(UNEXPECTED_MESSAGE, f"server sent "
                      f"{message_label(ev.msg_type)} before ServerHello")
        if isinstance(msg, Certificate):
            self.server_input.certificate(msg)
        extcheck.check_message(self, ev.msg_type, msg,
                               is_tls13(self.server_hello.selected_version))
        self.flight.messages[ev.msg_type] = msg
        self.flight.raw[ev.msg_type] = ev.raw
        self.flight.order.append(ev.msg_type)
        if self.version_state is not None:
            self.version_state.on_message(ev, msg)  # type: ignore[attr-defined]

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
                    getattr(self.version_state, "awaiting_acceptance", False):
                # TLS 1.3: the server checks our Finished after we sent it; an alert before
                # any data from it means it refused the handshake.
                self.handshake_complete = False
            why = ("; the server requires a client certificate (it sent a CertificateRequest "
                   "and tlsprobe has none to send)"
                   if self.certificate_requested
                   and HandshakeType.certificate in self.sent_types else "")
            raise HandshakeFailure("alert", f"server sent {level} alert {name} "
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
        offered = self.hellos[-1]
        if sh.cipher_suite not in offered.cipher_suites:
            self.fail(ILLEGAL_PARAMETER, f"server chose cipher suite "
                      f"{registry.suite_label(sh.cipher_suite)} which was not offered")
        if sh.legacy_compression_method not in offered.legacy_compression_methods:
            method = {1: " (DEFLATE)", 64: " (LZS)"}.get(sh.legacy_compression_method, "")
            self.fail(ILLEGAL_PARAMETER, f"server chose compression method "
                      f"{sh.legacy_compression_method}{method}, which was not offered")
        if sh.is_hello_retry_request:
            self._hello_retry(sh, raw)
            return
        if self.server_hello is not None:
            self.fail(UNEXPECTED_MESSAGE, "server sent a second ServerHello")
        self.server_hello = sh
        version = sh.selected_version
        if version not in self.config.versions:
            self.fail(ILLEGAL_PARAMETER, f"server chose {registry.version_name(version)}, "
                      "which was not offered")
        extcheck.check_extensions(self, extcheck.SH13 if is_tls13(version) else extcheck.SH12,
                                  sh.extensions)
        self._check_server_hello(sh, version)
        self.transcript.add(raw)
        if is_tls13(version):
            self._record_version = TLS12  # legacy_record_version from now on
            self._tls13_server_hello(sh)
        else:
            from tlsprobe.engine.tls12 import Tls12Client
            self._record_version = version
            self.version_state = Tls12Client(self, sh)

    def _check_server_hello(self, sh: ServerHello, version: int) -> None:
        params = suite_params(sh.cipher_suite)
        if params is not None and params.tls13 != is_tls13(version):
            self.fail(ILLEGAL_PARAMETER, f"server chose {registry.suite_label(sh.cipher_suite)} "
                      f"with {registry.version_name(version)}")
        sentinel = sh.downgrade_sentinel
        offered_max = max(self.config.versions)
        if sentinel is not None and version < TLS13 and (
                (sentinel == TLS12 and self.config.offers_tls13) or
                (sentinel == 0x0302 and version < TLS12 and offered_max >= TLS12)):
            self.fail(ILLEGAL_PARAMETER, f"ServerHello.random carries the downgrade sentinel "
                      f"for {registry.version_name(sentinel)} although a higher version was "
                      "offered (RFC 8446 4.1.3)")
        if is_tls13(version):
            extcheck.check_legacy_version(self, sh)
            if sh.legacy_session_id_echo != self.hellos[-1].legacy_session_id:
                self.fail(ILLEGAL_PARAMETER, "TLS 1.3 ServerHello does not echo the "
                          "legacy_session_id")
            if self.hrr is not None and sh.cipher_suite != self.hrr.cipher_suite:
                self.fail(ILLEGAL_PARAMETER, "ServerHello cipher suite differs from the "
                          "HelloRetryRequest's")

    def _tls13_server_hello(self, sh: ServerHello) -> None:
        share = sh.key_share
        if share is None:
            self.fail(109, "TLS 1.3 ServerHello without key_share (PSK-only resumption was "
                      "not offered)")
        group, key = share  # type: ignore[misc]
        if self.hrr is not None and self.hrr.hrr_selected_group not in (None, group):
            self.fail(ILLEGAL_PARAMETER, f"ServerHello key share for "
                      f"{registry.group_label(group)}, the HelloRetryRequest asked for "
                      f"{registry.group_label(self.hrr.hrr_selected_group or 0)}")
        mine = self.shares.get(group)
        if mine is None:
            if group in self.hellos[-1].supported_groups and \
                    any(e.group == group for e in self.hellos[-1].key_shares):
                # We offered a share we cannot compute (offer-only group).
                self.stop_incomplete(f"{registry.group_label(group)} cannot be computed here")
                return
            self.fail(ILLEGAL_PARAMETER, f"server answered with a key share for "
                      f"{registry.group_label(group)}, for which the client sent no share")
        try:
            self.shared_secret = mine.shared_secret(key)  # type: ignore[union-attr]
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
        from tlsprobe.engine.tls13 import Tls13Client
        self.version_state = Tls13Client(self, sh, self.shared_secret or b"")

    def _hello_retry(self, hrr: ServerHello, raw: bytes) -> None:
        if self.hrr is not None:
            self.fail(UNEXPECTED_MESSAGE, "server sent a second HelloRetryRequest")
        if self.server_hello is not None:
            self.fail(UNEXPECTED_MESSAGE, "HelloRetryRequest after ServerHello")
        extcheck.check_extensions(self, extcheck.HRR, hrr.extensions)
        extcheck.check_legacy_version(self, hrr)
        self.hrr = hrr
        group = hrr.hrr_selected_group
        cookie_ext = hrr.extension(44)
        if group is None and cookie_ext is None:
            self.fail(ILLEGAL_PARAMETER, "HelloRetryRequest that changes nothing "
                      "(no group, no cookie)")
        if self.built is None:
            raise HandshakeFailure("protocol", "HelloRetryRequest before start()")
        offered_groups = self.config.offered_groups()
        if group is not None:
            if group not in offered_groups:
                self.fail(ILLEGAL_PARAMETER, f"HelloRetryRequest asks for "
                          f"{registry.group_label(group)}, which was not offered")
            if group in self.shares or group in self.config.share_groups():
                self.fail(ILLEGAL_PARAMETER, f"HelloRetryRequest asks for "
                          f"{registry.group_label(group)}, for which a share was already sent")
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
        raise HandshakeFailure("closed", text)


def _label(ev: Event) -> str:
    """What a server event is called in a verdict on it (a HelloRetryRequest by its name)."""
    if isinstance(ev, MessageEvent):
        if ev.msg_type == HandshakeType.server_hello and \
                ev.raw[6:38] == HELLO_RETRY_REQUEST_RANDOM:
            return "HelloRetryRequest"
        return message_label(ev.msg_type)
    if isinstance(ev, AlertEvent):
        return "alert"
    return "record"
