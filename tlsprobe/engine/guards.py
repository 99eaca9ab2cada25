"""Bounds on what a server may make the client read, checked before the state machine.

A hostile server can keep a client busy without ever breaking a message: endless records,
records that carry nothing (empty fragments, TLS 1.3 padding only, ChangeCipherSpec again
and again, warning alerts), or a stream of tiny messages that the trace would keep forever.
`ServerInput` counts what arrives and stops the handshake, with a verdict that names what
the server did, as soon as a bound is passed: the bounds are tlsprobe's (`Limits`, the
`--max-*` options), never lengths the server declares. It also decides what the trace
keeps of each event, so the memory a probe holds is bounded as well.
A passed bound raises engine.verdict.Refusal; ClientHandshake sends its alert. What the
guard reads of the handshake is the read-only `HandshakeView`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from tlsprobe import registry
from tlsprobe.engine.common import (
    BAD_CERTIFICATE,
    INTERNAL_ERROR,
    TLS13,
    UNEXPECTED_MESSAGE,
    HandshakeFailure,
    is_tls13,
)
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.interface import HelloExchange
from tlsprobe.engine.verdict import Refusal
from tlsprobe.errors import FailureKind
from tlsprobe.session.flow import (
    MAX_MESSAGE,
    SERVER,
    ApplicationDataEvent,
    ChangeCipherSpecEvent,
    Event,
    InnerContentEvent,
    RecordEvent,
)
from tlsprobe.wire.certificate import Certificate

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA = 20, 21, 22, 23
USER_CANCELED = 90
#: warning alerts accepted from the server in one connection (OpenSSL stops at 5 too)
MAX_WARNING_ALERTS = 4
#: TLS 1.3 middlebox-compatibility ChangeCipherSpec records dropped before giving up: RFC
#: 8446 5 says to drop them, D.4 that a server sends one; BoringSSL also stops at 32
MAX_CHANGE_CIPHER_SPECS = 32
#: events the trace keeps per record allowed by --max-records (header, inner type, content)
EVENTS_PER_RECORD = 4


@dataclass(frozen=True)
class Limits:
    """Bounds tlsprobe chooses, never the peer: past any of them the handshake fails."""

    max_message: int = MAX_MESSAGE      # one handshake message (a certificate chain)
    max_chain: int = 16                 # certificates in the server's Certificate message
    max_records: int = 4096             # records read from the server
    max_bytes: int = 16 * 2 ** 20       # bytes read from the server

    @property
    def max_events(self) -> int:
        """Server events (records, messages, alerts) kept for the trace."""
        return EVENTS_PER_RECORD * self.max_records


class HandshakeView(Protocol):
    """What the guard reads of the handshake (ClientHandshake provides it)."""

    @property
    def config(self) -> ClientConfig: ...

    @property
    def messages(self) -> HelloExchange: ...

    @property
    def handshake_complete(self) -> bool: ...


class ServerInput:
    """Counts the server's bytes, records and events for one handshake and enforces the
    limits and the rules about records that carry nothing (RFC 5246 6.2.1, RFC 8446 5)."""

    def __init__(self, hs: HandshakeView, limits: Limits) -> None:
        self.hs = hs
        self.limits = limits
        self.bytes = 0
        self.records = 0
        self.events = 0
        self.change_cipher_specs = 0
        self.warning_alerts: list[int] = []   # descriptions, in order
        self.last_record: RecordEvent | None = None
        self.content_type: int | None = None  # of the record being read (inner in TLS 1.3)

    def on_bytes(self, n: int) -> None:
        self.bytes += n
        if self.bytes > self.limits.max_bytes:
            raise Refusal(INTERNAL_ERROR, f"server sent more than {self.limits.max_bytes} "
                          "bytes, tlsprobe's limit (--max-bytes raises it)", FailureKind.LIMIT)

    def on_event(self, ev: Event) -> None:
        """Check one event from the server before the state machine handles it."""
        self.events += 1
        if self.events > self.limits.max_events:
            raise Refusal(INTERNAL_ERROR, f"server sent more than {self.limits.max_events} "
                          "records, messages and alerts, tlsprobe's limit (4 x --max-records; "
                          "--max-records raises it)", FailureKind.LIMIT)
        if isinstance(ev, RecordEvent):
            self._record(ev)
        elif isinstance(ev, InnerContentEvent):
            self.content_type = ev.content_type
            if ev.length == 0:
                self._empty(ev.content_type, protected=True)
        elif isinstance(ev, ChangeCipherSpecEvent):
            self._change_cipher_spec(ev)

    def _record(self, ev: RecordEvent) -> None:
        self.records += 1
        if self.records > self.limits.max_records:
            raise Refusal(INTERNAL_ERROR, f"server sent more than {self.limits.max_records} "
                          "records, tlsprobe's limit (--max-records raises it)",
                          FailureKind.LIMIT)
        self.last_record = ev
        self.content_type = ev.record.content_type
        if not ev.protected and ev.fragment_length == 0:
            self._empty(ev.record.content_type, protected=False)

    def _empty(self, content_type: int, *, protected: bool) -> None:
        """RFC 5246 6.2.1 and RFC 8446 5.1: no zero-length handshake, alert or
        ChangeCipherSpec fragments, padding or not (empty application data is allowed)."""
        if content_type not in (CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE):
            return
        what = registry.content_type_name(content_type)
        how = "an encrypted record of padding only" if protected else "a zero-length record"
        raise Refusal(UNEXPECTED_MESSAGE, f"server sent an empty {what} record ({how}; "
                      "RFC 5246 6.2.1 and RFC 8446 5.1 forbid them)")

    def _change_cipher_spec(self, ev: ChangeCipherSpecEvent) -> None:
        hs = self.hs
        if ev.raw != b"\x01":
            raise Refusal(UNEXPECTED_MESSAGE, f"server sent a malformed ChangeCipherSpec "
                          f"({ev.raw[:8].hex()}, not 01)")
        if self.last_record is not None and self.last_record.protected:
            raise Refusal(UNEXPECTED_MESSAGE, "server sent an encrypted ChangeCipherSpec "
                          "(RFC 8446 5)")
        server_hello = hs.messages.server_hello
        if server_hello is not None and not is_tls13(server_hello.selected_version):
            return  # TLS 1.0-1.2: the state machine decides (one, before the Finished)
        # TLS 1.3 (or no ServerHello yet): dropped, up to a bound; none at all before the
        # ServerHello when only TLS 1.2 and older were offered.
        self.change_cipher_specs += 1
        if server_hello is None and not hs.config.offers_tls13:
            raise Refusal(UNEXPECTED_MESSAGE, "server sent ChangeCipherSpec before ServerHello")
        if self.change_cipher_specs > MAX_CHANGE_CIPHER_SPECS:
            raise Refusal(UNEXPECTED_MESSAGE, f"server sent {self.change_cipher_specs} "
                          "ChangeCipherSpec records; a TLS 1.3 server sends one (RFC 8446 D.4)")

    def warning_alert(self, description: int) -> bool:
        """True when the handshake goes on after this warning alert (it is counted; too many
        end the handshake). Not after close_notify, and in TLS 1.3 only after user_canceled
        (RFC 8446 6: every other alert is an error whatever its level). Before the
        ServerHello the version is not known: warnings pass when TLS 1.2 was offered."""
        hs = self.hs
        if description == 0:
            return False
        server_hello = hs.messages.server_hello
        if server_hello is not None:
            tls13 = is_tls13(server_hello.selected_version)
        else:
            tls13 = min(hs.config.versions) >= TLS13
        if tls13 and description != USER_CANCELED:
            return False
        self.warning_alerts.append(description)
        if len(self.warning_alerts) > MAX_WARNING_ALERTS:
            name = registry.alert_name(description)
            raise HandshakeFailure(FailureKind.ALERT, f"server sent {len(self.warning_alerts)} "
                                   f"warning alerts (last: {name} ({description})); at most "
                                   f"{MAX_WARNING_ALERTS} are accepted", description)
        return True

    def certificate(self, msg: Certificate, *, parse: bool = True) -> None:
        """Bounded and parsable: at most --max-chain entries, each one X.509 certificate
        (RFC 5246 7.4.2, RFC 8446 4.4.2); OpenSSL refuses a chain with an unparsable entry
        too. One `cryptography` refuses but OpenSSL reads (BER's longer lengths, a time
        without seconds) passes when its outline is a certificate's (wire/spki.py): the
        key is then read from it, and the trust verdict says it was not established.
        `parse=False` (a probe that reads only what the server names): bounded only."""
        n = len(msg.certificate_list)
        if n > self.limits.max_chain:   # ours, not a fault of the chain: internal_error
            raise Refusal(INTERNAL_ERROR, f"server sent a chain of {n} certificates, more "
                          f"than tlsprobe's limit of {self.limits.max_chain} (--max-chain "
                          "raises it)", FailureKind.LIMIT)
        if not parse:
            return
        from cryptography import x509

        from tlsprobe.model.pubkey import load_certificate
        from tlsprobe.wire.spki import has_certificate_shape
        for i, der in enumerate(msg.certificates):
            try:
                load_certificate(der)
            except (ValueError, x509.InvalidVersion) as exc:  # (no ValueError: X.509 v2, v4+)
                if isinstance(exc, ValueError) and has_certificate_shape(der):
                    continue   # OpenSSL reads it: not the server's protocol error
                what = "leaf" if i == 0 else f"entry {i} (of {n})"
                raise Refusal(BAD_CERTIFICATE, f"server sent a certificate chain whose {what} "
                              f"is not a parsable DER certificate: {str(exc)[:120]}")

    def application_data(self, ev: ApplicationDataEvent) -> None:
        """Application data (or another opaque content type) before the handshake ended."""
        hs = self.hs
        if ev.direction != SERVER or hs.handshake_complete:
            return
        unprotected = self.last_record is not None and not self.last_record.protected
        if not ev.decrypted and not unprotected:
            return  # a protected record the engine has no keys for: it has stopped already
        content_type = self.content_type or APPLICATION_DATA
        if content_type != APPLICATION_DATA:
            what = f"a {registry.content_type_name(content_type)} record ({content_type})"
            raise Refusal(UNEXPECTED_MESSAGE, f"server sent {what}, which was not negotiated")
        server_hello = hs.messages.server_hello
        if server_hello is None:
            when = "before the handshake (before ServerHello)"
        elif is_tls13(server_hello.selected_version) and unprotected:
            when = "unencrypted, before the handshake was complete"
        else:
            when = "before its Finished (the handshake was not complete)"
        raise Refusal(UNEXPECTED_MESSAGE, f"server sent application data {when}")

    def for_trace(self, ev: Event) -> Event:
        """What the trace keeps of `ev`: record headers without their fragments, application
        data without its bytes (the handshake keeps those it needs itself)."""
        if isinstance(ev, RecordEvent):
            return ev.without_payload()
        if isinstance(ev, ApplicationDataEvent) and ev.data:
            return replace(ev, data=b"")
        return ev
