"""Pieces shared by the client state machine and its TLS 1.3 / TLS 1.2 halves.

`HandshakeFailure` is the one exception the client raises (re-exported by engine.client);
`RecordDeprotector` adapts a record protection to the session.Flow deprotector interface, so
the Flow decrypts the records it is fed (the server's, and our own for the trace).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tlsprobe.engine.protection import RecordProtection
from tlsprobe.errors import FailureKind
from tlsprobe.registry import HandshakeType
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.certificate import (
    Certificate,
    CertificateRequest,
    CertificateStatus,
    CertificateVerify,
)
from tlsprobe.wire.context import Message
from tlsprobe.wire.keyexchange import ServerKeyExchange
from tlsprobe.wire.messages import (
    EncryptedExtensions,
    Finished,
    KeyUpdate,
    NewSessionTicket,
    ServerHelloDone,
)
from tlsprobe.wire.record import Record

TLS13, TLS12, TLS11, TLS10, SSL30 = 0x0304, 0x0303, 0x0302, 0x0301, 0x0300
MAX_FRAGMENT = 2 ** 14

# AlertDescription values the client sends (RFC 8446 section 6.2)
UNEXPECTED_MESSAGE = 10
BAD_RECORD_MAC = 20
HANDSHAKE_FAILURE = 40
BAD_CERTIFICATE = 42
ILLEGAL_PARAMETER = 47
DECODE_ERROR = 50
DECRYPT_ERROR = 51
UNSUPPORTED_EXTENSION = 110
INTERNAL_ERROR = 80


class HandshakeFailure(Exception):
    """The handshake cannot go on. `kind` (a FailureKind; given as one or as its value):
    alert, protocol, closed (and not_tls from the driver, net/driver.py). `alert` is the
    description of an alert the server sent. `refusal` False: a close that is no answer to
    what the hello offered (a QUIC CONNECTION_CLOSE with a transport error code such as
    CONNECTION_REFUSED: RFC 9001 4.8 carries a TLS refusal as CRYPTO_ERROR, an alert)."""

    def __init__(self, kind: FailureKind | str, message: str, alert: int | None = None,
                 *, refusal: bool = True) -> None:
        super().__init__(message)
        self.kind = FailureKind(kind)
        self.alert = alert
        self._refusal = refusal

    @property
    def refused(self) -> bool:
        """Whether the server may have refused what the hello offered: an alert, or a
        close that may be one (over TCP, a close before the answer)."""
        return self.kind in (FailureKind.ALERT, FailureKind.CLOSED) and self._refusal


@dataclass
class ServerFlight:
    """The server's handshake messages after its hello, typed, one field per message type
    (None: not sent; the last one wins, e.g. of several NewSessionTickets), and the types of
    every message in the order they came (HelloRequest and unknown types included)."""

    certificate: Certificate | None = None
    certificate_status: CertificateStatus | None = None
    server_key_exchange: ServerKeyExchange | None = None
    certificate_request: CertificateRequest | None = None
    server_hello_done: ServerHelloDone | None = None
    encrypted_extensions: EncryptedExtensions | None = None
    certificate_verify: CertificateVerify | None = None
    finished: Finished | None = None
    new_session_ticket: NewSessionTicket | None = None
    key_update: KeyUpdate | None = None
    order: list[int] = field(default_factory=list)

    def add(self, msg_type: int, message: Message) -> None:
        """Keep one decoded message (a message of another class is kept in `order` only)."""
        self.order.append(msg_type)
        name = _FLIGHT_FIELDS.get(msg_type)
        if name is not None and isinstance(message, _FLIGHT_CLASSES[name]):
            setattr(self, name, message)

    def has(self, msg_type: int) -> bool:
        """The server sent a message of this type."""
        return msg_type in self.order


_FLIGHT_CLASSES: dict[str, type] = {
    "certificate": Certificate, "certificate_status": CertificateStatus,
    "server_key_exchange": ServerKeyExchange, "certificate_request": CertificateRequest,
    "server_hello_done": ServerHelloDone, "encrypted_extensions": EncryptedExtensions,
    "certificate_verify": CertificateVerify, "finished": Finished,
    "new_session_ticket": NewSessionTicket, "key_update": KeyUpdate}
_FLIGHT_FIELDS = {int(HandshakeType[name]): name for name in _FLIGHT_CLASSES}


class RecordDeprotector:
    """session.Flow's Deprotector on top of one direction's RecordProtection."""

    def __init__(self, protection: RecordProtection) -> None:
        self.protection = protection

    def decrypt(self, record: Record) -> tuple[int, bytes]:
        return self.protection.decrypt(record.content_type, record.version, record.fragment)


def plain_records(content_type: int, version: int, payload: bytes) -> bytes:
    """`payload` as unprotected records of at most 2^14 bytes each."""
    out = bytearray()
    for i in range(0, max(len(payload), 1), MAX_FRAGMENT):
        out += Record(content_type, version, payload[i:i + MAX_FRAGMENT]).to_bytes()
    return bytes(out)


def message_label(msg_type: int) -> str:
    """A handshake message type as OpenSSL spells it (EncryptedExtensions), for messages."""
    from tlsprobe import registry
    name = registry.handshake_name(msg_type)
    if name.startswith("0x"):
        return f"handshake message {name}"
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def malformed(label: str, exc: Exception) -> str:
    """The one verdict on server bytes that do not decode: the message, the field (the
    wire's path, e.g. ``cookie.cookie``) and what is wrong with it."""
    if isinstance(exc, DecodeError):
        where = f"{exc.path}: " if exc.path else ""
        return f"server sent a malformed {label}: {where}{exc.reason}"
    return f"server sent a malformed {label}: {' '.join(str(exc).split())[:200]}"


def is_tls13(version: int | None) -> bool:
    return version is not None and (version >= TLS13 or version >> 8 == 0x7F)
