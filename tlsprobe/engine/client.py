"""Sans-IO TLS client handshake: bytes from the server in, bytes to send and events out.

The state machine owns a session.Flow, feeds it both what it sends and what it receives
(so the trace shows both directions in order) and reacts to each message as the Flow yields it.
This module handles the hellos, HelloRetryRequest and the server's first flight; the key
schedule and record protection (engine.keyschedule / prf / protection) complete the handshake.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tlsprobe import kex, registry
from tlsprobe.engine.config import BuiltHello, ClientConfig, build_client_hello
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import (CLIENT, SERVER, AlertEvent, ErrorEvent, Event, Flow,
                                   MessageEvent, SSLv2HelloEvent)
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.hello import ClientHello, ServerHello
from tlsprobe.wire.record import Record


class HandshakeFailure(Exception):
    """The handshake cannot go on. `kind`: alert, protocol, closed."""

    def __init__(self, kind: str, message: str, alert: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.alert = alert


@dataclass
class ServerFlight:
    """The server's handshake messages, as decoded, by type (last one wins)."""

    messages: dict[int, object] = field(default_factory=dict)
    raw: dict[int, bytes] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)


def _record(content_type: int, version: int, payload: bytes) -> bytes:
    out = bytearray()
    for i in range(0, max(len(payload), 1), 2 ** 14):
        out += Record(content_type, version, payload[i:i + 2 ** 14]).to_bytes()
    return bytes(out)


class ClientHandshake:
    """Drives one client handshake. Call `start()`, then `receive()` with every chunk."""

    def __init__(self, config: ClientConfig, *, annotate: bool = True,
                 stop_after_first_flight: bool = True) -> None:
        self.config = config
        self.flow = Flow(annotate=annotate)
        self.stop_after_first_flight = stop_after_first_flight
        self.events: list[Event] = []
        self.built: BuiltHello | None = None
        self.hellos: list[ClientHello] = []
        self.shares: dict[int, kex.KeyShare] = {}
        self.server_hello: ServerHello | None = None
        self.hrr: ServerHello | None = None
        self.flight = ServerFlight()
        self.shared_secret: bytes | None = None
        self.share_problem: str | None = None
        self.done = False
        self.first_flight_done = False
        self._out = bytearray()

    # -- output --------------------------------------------------------------------------
    def _send_handshake(self, raw: bytes, record_version: int) -> None:
        data = _record(22, record_version, raw)
        self._out += data
        self.events.extend(self.flow.feed(CLIENT, data))

    def take_output(self) -> bytes:
        data, self._out = bytes(self._out), bytearray()
        return data

    def start(self) -> bytes:
        self.built = build_client_hello(self.config)
        self.shares = dict(self.built.shares)
        self.hellos.append(self.built.hello)
        # Record-layer version 0x0301 for the first hello, as browsers and OpenSSL send it.
        version = min(0x0301, self.config.max_legacy) if self.config.max_legacy >= 0x0300 else 0x0301
        self._send_handshake(frame(HandshakeType.client_hello, self.built.hello.serialize()),
                             version)
        return self.take_output()

    # -- input ---------------------------------------------------------------------------
    def receive(self, data: bytes) -> bytes:
        """Process bytes from the server; returns bytes to send (possibly empty)."""
        for ev in self.flow.feed(SERVER, data):
            self.events.append(ev)
            self._handle(ev)
            if self.done:
                break
        return self.take_output()

    def _handle(self, ev: Event) -> None:
        if isinstance(ev, ErrorEvent):
            raise HandshakeFailure("protocol", f"server sent malformed data ({ev.where}): {ev.error}")
        if isinstance(ev, AlertEvent):
            name = registry.alert_name(ev.alert.description)
            level = "fatal" if ev.alert.level == 2 else "warning"
            if ev.alert.level == 2 or not self.done:
                raise HandshakeFailure("alert", f"server sent {level} alert {name} "
                                       f"({ev.alert.description})", ev.alert.description)
            return
        if isinstance(ev, SSLv2HelloEvent):
            raise HandshakeFailure("protocol", "server sent an SSLv2 ClientHello")
        if not isinstance(ev, MessageEvent) or ev.direction != SERVER:
            return
        if ev.error is not None or ev.decoded is None:
            raise HandshakeFailure("protocol", f"server sent a malformed "
                                   f"{registry.handshake_name(ev.msg_type)}: {ev.error}")
        msg = ev.decoded.message
        if isinstance(msg, ServerHello):
            self._server_hello(msg)
            return
        if self.server_hello is None:
            raise HandshakeFailure("protocol", f"server sent {registry.handshake_name(ev.msg_type)} "
                                   "before ServerHello")
        self.flight.messages[ev.msg_type] = msg
        self.flight.raw[ev.msg_type] = ev.raw
        self.flight.order.append(ev.msg_type)
        if ev.msg_type == HandshakeType.server_hello_done:
            self.first_flight_done = True
            if self.stop_after_first_flight:
                self.done = True

    def _server_hello(self, sh: ServerHello) -> None:
        offered = self.hellos[-1]
        if sh.cipher_suite not in offered.cipher_suites:
            raise HandshakeFailure("protocol", f"server chose cipher suite "
                                   f"{registry.suite_label(sh.cipher_suite)} which was not offered")
        if sh.is_hello_retry_request:
            self._hello_retry(sh)
            return
        if self.server_hello is not None:
            raise HandshakeFailure("protocol", "server sent a second ServerHello")
        self.server_hello = sh
        version = sh.selected_version
        if version not in self.config.versions and not (
                version <= 0x0303 and sh.extension(43) is None and version in self.config.versions):
            raise HandshakeFailure("protocol", f"server chose {registry.version_name(version)}, "
                                   "which was not offered")
        if version >= 0x0304:
            share = sh.key_share
            if share is None:
                raise HandshakeFailure("protocol", "TLS 1.3 ServerHello without key_share "
                                       "(PSK-only resumption was not offered)")
            group, key = share
            mine = self.shares.get(group)
            if mine is None:
                raise HandshakeFailure("protocol", f"server answered with a key share for "
                                       f"{registry.group_label(group)}, for which the client "
                                       "sent no share")
            try:
                self.shared_secret = mine.shared_secret(key)
            except kex.InvalidShare as exc:
                self.share_problem = str(exc)
                raise HandshakeFailure("protocol", f"invalid server key share for "
                                       f"{registry.group_label(group)}: {exc}") from None
            self.first_flight_done = True
            if self.stop_after_first_flight:
                self.done = True

    def _hello_retry(self, hrr: ServerHello) -> None:
        if self.hrr is not None:
            raise HandshakeFailure("protocol", "server sent a second HelloRetryRequest")
        if self.server_hello is not None:
            raise HandshakeFailure("protocol", "HelloRetryRequest after ServerHello")
        self.hrr = hrr
        group = hrr.hrr_selected_group
        cookie_ext = hrr.extension(44)
        if group is None and cookie_ext is None:
            raise HandshakeFailure("protocol", "HelloRetryRequest that changes nothing "
                                   "(no group, no cookie)")
        assert self.built is not None
        offered_groups = self.config.offered_groups()
        if group is not None:
            if group not in offered_groups:
                raise HandshakeFailure("protocol", f"HelloRetryRequest asks for "
                                       f"{registry.group_label(group)}, which was not offered")
            if group in self.shares or group in self.config.share_groups():
                raise HandshakeFailure("protocol", f"HelloRetryRequest asks for "
                                       f"{registry.group_label(group)}, for which a share was "
                                       "already sent")
        cookie = None
        if cookie_ext is not None:
            from tlsprobe.wire.ext_decoders import WHERE_HRR, decode_extension
            cookie = decode_extension(44, cookie_ext.data, WHERE_HRR)
        share_groups = (group,) if group is not None else self.config.share_groups()
        first = self.built.hello
        rebuilt = build_client_hello(self.config, share_groups=share_groups,
                                     session_id=first.legacy_session_id, cookie=cookie,
                                     random=first.random, reuse=self.shares)
        self.shares = dict(rebuilt.shares)
        self.hellos.append(rebuilt.hello)
        self._send_handshake(frame(HandshakeType.client_hello, rebuilt.hello.serialize()), 0x0303)

    # -- end -----------------------------------------------------------------------------
    def connection_closed(self) -> None:
        """The server closed the connection; fail unless the handshake was done."""
        if self.done:
            return
        where = "ServerHello" if self.server_hello is None else "the rest of its flight"
        raise HandshakeFailure("closed", f"server closed the connection before sending {where}")
