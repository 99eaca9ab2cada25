"""The remaining handshake messages: EncryptedExtensions, NewSessionTicket, Finished,
KeyUpdate, the empty ones (HelloRequest, EndOfEarlyData, ServerHelloDone) and MessageHash.

Each is a frozen dataclass with pull/push (see `context.Message`). The key exchange and
certificate messages live in keyexchange.py and certificate.py, the hellos in hello.py;
all are re-exported here so that ``wire.messages`` names every message class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ._util import bytes_label, enum_label, pull_opaque, pull_uint_noted
from .buffer import Buffer, Writer
from .certificate import (
    Certificate,
    CertificateEntry,
    CertificateRequest,
    CertificateStatus,
    CertificateVerify,
    CompressedCertificate,
)
from .context import Message, ParseContext
from .ext_decoders import WHERE_ENCRYPTED_EXTENSIONS, WHERE_NEW_SESSION_TICKET
from .extensions import Extension, find, pull_extensions, push_extensions
from .hello import ClientHello, ServerHello
from .keyexchange import ClientKeyExchange, ExplicitCurve, ServerKeyExchange

KEY_UPDATE_REQUESTS = {0: "update_not_requested", 1: "update_requested"}


@dataclass(frozen=True)
class _Empty(Message):
    """A message whose body is empty; any byte in it is a DecodeError."""

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> _Empty:
        return cls()

    def push(self, w: Writer) -> None:
        pass


@dataclass(frozen=True)
class HelloRequest(_Empty):
    msg_type: ClassVar[int] = 0


@dataclass(frozen=True)
class EndOfEarlyData(_Empty):
    msg_type: ClassVar[int] = 5


@dataclass(frozen=True)
class ServerHelloDone(_Empty):
    msg_type: ClassVar[int] = 14


@dataclass(frozen=True)
class EncryptedExtensions(Message):
    msg_type: ClassVar[int] = 8

    extensions: list[Extension]

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> EncryptedExtensions:
        return cls(pull_extensions(buf, WHERE_ENCRYPTED_EXTENSIONS))

    def push(self, w: Writer) -> None:
        push_extensions(w, self.extensions)

    def extension(self, ext_type: int) -> Extension | None:
        return find(self.extensions, ext_type)


@dataclass(frozen=True)
class NewSessionTicket(Message):
    """TLS 1.3 form (RFC 8446 4.6.1) when `ticket_age_add` is not None; otherwise the
    RFC 5077 form, where `ticket_lifetime` is the ticket_lifetime_hint."""

    msg_type: ClassVar[int] = 4

    ticket_lifetime: int
    ticket: bytes
    ticket_age_add: int | None = None
    ticket_nonce: bytes = b""
    extensions: list[Extension] = field(default_factory=list)

    @property
    def tls13(self) -> bool:
        return self.ticket_age_add is not None

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> NewSessionTicket:
        if not ctx.tls13:
            lifetime = pull_uint_noted(buf, 4, "ticket_lifetime_hint")
            return cls(lifetime, pull_opaque(buf, 2, "ticket"))
        lifetime = pull_uint_noted(buf, 4, "ticket_lifetime")
        age_add = pull_uint_noted(buf, 4, "ticket_age_add")
        nonce = pull_opaque(buf, 1, "ticket_nonce")
        ticket = pull_opaque(buf, 2, "ticket", minimum=1)
        return cls(lifetime, ticket, age_add, nonce,
                   pull_extensions(buf, WHERE_NEW_SESSION_TICKET))

    def push(self, w: Writer) -> None:
        w.push_uint32(self.ticket_lifetime)
        if self.ticket_age_add is None:
            w.push_vector(2, self.ticket)
            return
        w.push_uint32(self.ticket_age_add)
        w.push_vector(1, self.ticket_nonce)
        w.push_vector(2, self.ticket)
        push_extensions(w, self.extensions)


@dataclass(frozen=True)
class Finished(Message):
    msg_type: ClassVar[int] = 20

    verify_data: bytes

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> Finished:
        at = buf.tell()
        data = buf.pull_rest()
        buf.note("verify_data", at, len(data), bytes_label(len(data)), "bytes")
        return cls(data)

    def push(self, w: Writer) -> None:
        w.push_bytes(self.verify_data)


@dataclass(frozen=True)
class KeyUpdate(Message):
    msg_type: ClassVar[int] = 24

    request_update: int

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> KeyUpdate:
        return cls(pull_uint_noted(buf, 1, "request_update",
                                   lambda v: enum_label(KEY_UPDATE_REQUESTS, v)))

    def push(self, w: Writer) -> None:
        w.push_uint8(self.request_update)


@dataclass(frozen=True)
class MessageHash(Message):
    """RFC 8446 4.4.1: the synthetic message replacing ClientHello1 after an HRR."""

    msg_type: ClassVar[int] = 254

    hash: bytes

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> MessageHash:
        at = buf.tell()
        data = buf.pull_rest()
        buf.note("hash", at, len(data), bytes_label(len(data)), "bytes")
        return cls(data)

    def push(self, w: Writer) -> None:
        w.push_bytes(self.hash)


MESSAGE_CLASSES: list[type[Message]] = [HelloRequest, EndOfEarlyData, ServerHelloDone,
                                        EncryptedExtensions, NewSessionTicket, Finished,
                                        KeyUpdate, MessageHash]

__all__ = [
    "MESSAGE_CLASSES",
    "Certificate",
    "CertificateEntry",
    "CertificateRequest",
    "CertificateStatus",
    "CertificateVerify",
    "ClientHello",
    "ClientKeyExchange",
    "CompressedCertificate",
    "EncryptedExtensions",
    "EndOfEarlyData",
    "ExplicitCurve",
    "Finished",
    "HelloRequest",
    "KeyUpdate",
    "MessageHash",
    "NewSessionTicket",
    "ServerHello",
    "ServerHelloDone",
    "ServerKeyExchange",
]
