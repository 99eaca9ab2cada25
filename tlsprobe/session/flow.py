"""Flow: both directions of one TLS connection, bytes in, ordered events out.

The live prober and the pcap reader both feed a Flow, so both see the same records, messages
and negotiation context. `feed` is a generator: a consumer that installs record protection
when it sees a ServerHello (the engine, or a key log in the pcap reader) gets the very next
record decrypted, even when it arrived in the same chunk of bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from tlsprobe import registry
from tlsprobe.registry import ContentType, ExtensionType, HandshakeType
from tlsprobe.wire.alert import Alert, ciphertext_alert, parse_alerts
from tlsprobe.wire.buffer import Annotation, DecodeError
from tlsprobe.wire.handshake import (
    Decoded,
    HandshakeReassembler,
    ParseContext,
    decode_handshake,
    tiles_messages,
)
from tlsprobe.wire.hello import ClientHello, ServerHello
from tlsprobe.wire.record import Record, RecordReader, SSLv2ClientHello

CLIENT = 0  # client -> server, ">>>"
SERVER = 1  # server -> client, "<<<"

MAX_FRAGMENT = 2 ** 14 + 2048
MAX_MESSAGE = 2 ** 18  # larger than any sane certificate chain; bounds memory per direction


class UnknownRecordKey(ValueError):
    """Raised by a Deprotector for a record whose key (or sequence number) is not known,
    which says nothing wrong of the record: the Flow shows it not decrypted and goes on
    instead of failing the direction."""


class UndecryptableEarlyData(UnknownRecordKey):
    """Raised by a Deprotector for a client record that no known key opens while 0-RTT
    data may still arrive: the Flow skips it (as a server that rejected or cannot read
    early data does, RFC 8446 4.2.10) instead of failing the direction."""


class Deprotector(Protocol):
    """Removes record protection: returns (inner content type, plaintext)."""

    def decrypt(self, record: Record) -> tuple[int, bytes]: ...


@dataclass(frozen=True)
class RecordEvent:
    """A record as read from the wire (protected records carry ciphertext).

    `length` is the fragment length on the wire; it differs from `len(record.fragment)`
    only in a copy made by `without_payload` (what a long-lived trace keeps)."""

    direction: int
    record: Record
    protected: bool
    length: int = -1

    @property
    def fragment_length(self) -> int:
        return self.length if self.length >= 0 else len(self.record.fragment)

    @property
    def header(self) -> bytes:
        rec = self.record
        return struct.pack("!BHH", rec.content_type, rec.version, self.fragment_length)

    def without_payload(self) -> RecordEvent:
        """The same event without the fragment bytes: the header stays exact, the memory
        a stream of records costs does not grow with their size."""
        rec = self.record
        return RecordEvent(self.direction, Record(rec.content_type, rec.version, b""),
                           self.protected, self.fragment_length)


@dataclass(frozen=True)
class InnerContentEvent:
    """A protected record was decrypted: its inner content type (TLS 1.3) and plaintext length."""

    direction: int
    content_type: int
    length: int


@dataclass(frozen=True)
class MessageEvent:
    """A whole handshake message, decoded (or `error` when its body is malformed)."""

    direction: int
    raw: bytes
    decoded: Decoded | None
    protected: bool
    error: DecodeError | None = None

    @property
    def msg_type(self) -> int:
        return self.raw[0]

    @property
    def annotations(self) -> tuple[Annotation, ...]:
        return tuple(self.decoded.annotations) if self.decoded else ()


@dataclass(frozen=True)
class AlertEvent:
    direction: int
    alert: Alert
    protected: bool


@dataclass(frozen=True)
class ChangeCipherSpecEvent:
    direction: int
    raw: bytes


@dataclass(frozen=True)
class ApplicationDataEvent:
    """Application data (or an undecryptable protected record): only its length is kept.

    `content_type` is the record's content type as seen: the outer one of a record not
    decrypted (22 for a TLS 1.2 encrypted Finished, 23 for any TLS 1.3 record)."""

    direction: int
    length: int
    decrypted: bool
    data: bytes = b""
    content_type: int = 23


@dataclass(frozen=True)
class SSLv2HelloEvent:
    direction: int
    hello: SSLv2ClientHello


@dataclass(frozen=True)
class ErrorEvent:
    """Malformed input in one direction. `fatal` stops that direction (live probes)."""

    direction: int
    error: DecodeError
    where: str
    fatal: bool = True


Event = (RecordEvent | InnerContentEvent | MessageEvent | AlertEvent | ChangeCipherSpecEvent
         | ApplicationDataEvent | SSLv2HelloEvent | ErrorEvent)


@dataclass
class NegotiationState:
    """What the hellos and key exchange messages settled so far."""

    client_hellos: list[ClientHello] = field(default_factory=list)
    server_hello: ServerHello | None = None
    hello_retry_request: ServerHello | None = None
    version: int | None = None
    cipher_suite: int | None = None
    key_exchange: str | None = None
    named_group: int | None = None
    ccs_seen: list[bool] = field(default_factory=lambda: [False, False])
    early_data: bool = False  # the last ClientHello offered TLS 1.3 early_data (0-RTT)

    @property
    def tls13(self) -> bool:
        return self.version is not None and (self.version >= 0x0304 or self.version >> 8 == 0x7f)

    def context(self, direction: int) -> ParseContext:
        return ParseContext(version=self.version, cipher_suite=self.cipher_suite,
                            key_exchange=self.key_exchange, named_group=self.named_group,
                            is_server_message=direction == SERVER)


class _Direction:
    def __init__(self, max_message: int) -> None:
        self.records = RecordReader(max_fragment=MAX_FRAGMENT)
        self.handshake = HandshakeReassembler(max_message=max_message)
        self.deprotector: Deprotector | None = None
        self.failed = False
        self.bytes_seen = 0


class Flow:
    """Parses both directions of a TLS connection into events, tracking negotiation state."""

    def __init__(self, *, annotate: bool = True, max_message: int = MAX_MESSAGE,
                 resync: bool = False, capture: bool = False) -> None:
        self.annotate = annotate
        self.resync = resync
        #: reading a capture, which may have lost a ChangeCipherSpec: an alert record that
        #: cannot be plaintext is taken for a protected one (a live peer's changes of keys
        #: are all seen, so a live connection keeps to them)
        self.capture = capture
        #: capture: a side's CCS came with its ServerHello unknown (lost), so whether it
        #: started protection is open until that side's next handshake record shows it
        self._unsure_ccs = [False, False]
        self.state = NegotiationState()
        self._dirs = (_Direction(max_message), _Direction(max_message))

    # -- protection ----------------------------------------------------------------------
    def set_deprotector(self, direction: int, deprotector: Deprotector | None) -> None:
        """Install (or clear) record protection for records read from now on."""
        self._dirs[direction].deprotector = deprotector

    def failed(self, direction: int) -> bool:
        return self._dirs[direction].failed

    def pending(self, direction: int) -> bool:
        """True when a record or handshake message is only partly received."""
        return self.pending_part(direction) is not None

    def pending_part(self, direction: int) -> str | None:
        """What is only partly received: "record", "handshake message" or None. A record
        cut short wins (the message in it could not have been completed either)."""
        d = self._dirs[direction]
        if d.records.buffered:
            return "record"
        if d.handshake.pending:
            return "handshake message"
        return None

    def pending_message_type(self, direction: int) -> int | None:
        """msg_type of a handshake message only partly received (its header has started)."""
        return self._dirs[direction].handshake.pending_type

    # -- input ---------------------------------------------------------------------------
    def feed(self, direction: int, data: bytes) -> Iterator[Event]:
        """Yield the events that `data` completes. Consume lazily (see module docstring)."""
        d = self._dirs[direction]
        if d.failed:
            return
        d.bytes_seen += len(data)
        try:
            items = d.records.feed(data)
        except DecodeError as exc:
            d.failed = True
            yield ErrorEvent(direction, exc, "record layer")
            return
        for item in items:
            if isinstance(item, SSLv2ClientHello):
                yield SSLv2HelloEvent(direction, item)
                continue
            yield from self._record(direction, d, item)
            if d.failed:
                return
        # The reader returns the records before a bad header and keeps the error for the
        # next call: report it now, so events do not depend on how bytes were chunked.
        if d.records.error is not None:
            d.failed = True
            yield ErrorEvent(direction, d.records.error, "record layer")

    def _protected(self, direction: int, record: Record) -> bool:
        st = self.state
        if st.tls13 and st.server_hello is not None:
            return record.content_type == ContentType.application_data
        if st.early_data and direction == CLIENT and st.server_hello is None:
            return record.content_type == ContentType.application_data  # 0-RTT data
        if st.ccs_seen[direction]:
            return record.content_type != ContentType.change_cipher_spec
        if self._unsure_ccs[direction] and record.content_type == ContentType.handshake:
            self._unsure_ccs[direction] = False
            if not tiles_messages(record.fragment):  # ciphertext: protected since the CCS
                st.ccs_seen[direction] = True
                return True
        # an alert that cannot be plaintext: protected after a change of keys not captured
        return self.capture and record.content_type == ContentType.alert and \
            ciphertext_alert(record.fragment)

    def _record(self, direction: int, d: _Direction, record: Record) -> Iterator[Event]:
        protected = self._protected(direction, record)
        yield RecordEvent(direction, record, protected)
        content_type, payload = record.content_type, record.fragment
        if protected:
            if d.deprotector is None:
                yield ApplicationDataEvent(direction, len(payload), decrypted=False,
                                           content_type=record.content_type)
                return
            try:
                content_type, payload = d.deprotector.decrypt(record)
            except UnknownRecordKey:
                yield ApplicationDataEvent(direction, len(payload), decrypted=False,
                                           content_type=record.content_type)
                return
            except ValueError as exc:
                d.failed = True
                yield ErrorEvent(direction, DecodeError(f"record decryption failed: {exc}"),
                                 "record protection")
                return
            yield InnerContentEvent(direction, content_type, len(payload))
        if content_type == ContentType.handshake:
            yield from self._handshake(direction, d, payload, protected)
        elif content_type == ContentType.alert:
            try:
                alerts, _ = parse_alerts(payload)
            except DecodeError as exc:
                yield ErrorEvent(direction, exc, "alert", fatal=False)
                return
            for alert in alerts:
                yield AlertEvent(direction, alert, protected)
        elif content_type == ContentType.change_cipher_spec:
            # TLS 1.2 switches protection at CCS; in TLS 1.3 (and around a
            # HelloRetryRequest, before any ServerHello) CCS is only for middleboxes.
            if self.state.server_hello is not None and not self.state.tls13:
                self.state.ccs_seen[direction] = True
            elif self.capture and self.state.server_hello is None:
                self._unsure_ccs[direction] = True
            yield ChangeCipherSpecEvent(direction, payload)
        else:
            yield ApplicationDataEvent(direction, len(payload), decrypted=protected,
                                       data=payload if protected else b"")

    def _handshake(self, direction: int, d: _Direction, payload: bytes,
                   protected: bool) -> Iterator[Event]:
        try:
            messages = d.handshake.feed(payload)
        except DecodeError as exc:
            d.failed = True
            yield ErrorEvent(direction, exc, "handshake framing")
            return
        pending_error = d.handshake.error
        for raw in messages:
            try:
                decoded = decode_handshake(raw, self.state.context(direction), annotate=self.annotate)
                # Extension accessors decode lazily: a malformed key_share or
                # supported_versions surfaces here, as an error of this message.
                self._learn(direction, decoded)
            except DecodeError as exc:
                yield MessageEvent(direction, raw, None, protected, exc)
                continue
            yield MessageEvent(direction, raw, decoded, protected)
        if pending_error is not None:
            d.failed = True
            yield ErrorEvent(direction, pending_error, "handshake framing")

    # -- negotiation state ---------------------------------------------------------------
    def _learn(self, direction: int, decoded: Decoded) -> None:
        st = self.state
        msg = decoded.message
        if isinstance(msg, ClientHello) and direction == CLIENT:
            st.client_hellos.append(msg)
            versions = msg.extension(ExtensionType.supported_versions)
            st.early_data = versions is not None and \
                msg.extension(ExtensionType.early_data) is not None
        elif isinstance(msg, ServerHello) and direction == SERVER:
            if msg.is_hello_retry_request:
                _ = msg.hrr_selected_group  # decode (and validate) before recording it
                st.hello_retry_request = msg
                return
            version, share = msg.selected_version, msg.key_share
            st.server_hello = msg
            st.version = version
            st.cipher_suite = msg.cipher_suite
            suite = registry.cipher_suite(msg.cipher_suite)
            st.key_exchange = "TLS13" if st.tls13 else (suite.kx if suite else None)
            if share is not None:
                st.named_group = share[0]
        elif decoded.msg_type == HandshakeType.server_key_exchange:
            group = getattr(msg, "named_curve", None)
            if group is not None:
                st.named_group = group
