"""What a handshake parser must know about the connection, and the common message base.

Several TLS messages cannot be parsed from their bytes alone: a ServerKeyExchange depends on
the key exchange of the negotiated suite and on the version (TLS 1.2 signs with an explicit
SignatureScheme, TLS 1.0/1.1 do not); a Certificate or NewSessionTicket has a different
layout in TLS 1.3. `ParseContext` carries those facts; the session layer fills it from the
ServerHello (resolving the suite's key exchange through the registry) and hands it to
`decode_handshake`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self, TypeVar

from .buffer import Buffer, Writer

TLS13 = 0x0304
SSL3 = 0x0300

#: key exchange names understood by ServerKeyExchange / ClientKeyExchange
KEY_EXCHANGES = ("ECDHE", "DHE", "ECDH", "DH", "RSA", "PSK", "ECDHE_PSK", "DHE_PSK",
                 "RSA_PSK", "TLS13")


#: TLS 1.3 variants outside 0x7fXX: Facebook's drafts 23 and 26 (Fizz, mvfst), as named in
#: Wireshark's version table
TLS13_VARIANTS = frozenset({0xFB17, 0xFB1A})


def is_tls13_version(version: int | None) -> bool:
    """TLS 1.3 (0x0304), one of its drafts (0x7fXX) or a vendor variant (`TLS13_VARIANTS`)."""
    return version is not None and (version == TLS13 or version & 0xFF00 == 0x7F00
                                    or version in TLS13_VARIANTS)


@dataclass(frozen=True)
class ParseContext:
    """Negotiation state that later messages are parsed against.

    `version`: negotiated version (supported_versions or legacy_version), None before the
    ServerHello. `key_exchange`: the suite's key exchange, one of `KEY_EXCHANGES` ("TLS13"
    for any TLS 1.3 suite), None when unknown. `named_group`: the TLS 1.2 curve (from the
    ServerKeyExchange), used to name the ClientKeyExchange point. `is_server_message`: the
    message comes from the server (e.g. Certificate extensions, status_request form).
    """

    version: int | None = None
    cipher_suite: int | None = None
    key_exchange: str | None = None
    named_group: int | None = None
    is_server_message: bool = False
    is_hrr_seen: bool = False

    @property
    def tls13(self) -> bool:
        return is_tls13_version(self.version)


M = TypeVar("M", bound="Message")


class Message:
    """Base of every handshake message dataclass.

    Subclasses implement `pull` (read the body from a Buffer positioned at its start) and
    `push` (write the body). `parse`/`serialize` work on the body alone, without the 4-byte
    handshake header; `to_bytes` adds the header."""

    msg_type: ClassVar[int]

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> Self:
        raise NotImplementedError

    def push(self, w: Writer) -> None:
        raise NotImplementedError

    @classmethod
    def parse(cls, body: bytes, ctx: ParseContext | None = None) -> Self:
        """Parse a whole message body (offsets in errors count from the body's start)."""
        buf = Buffer(body, path=cls.__name__)
        msg = cls.pull(buf, ctx or ParseContext())
        if not buf.eof():
            raise buf.error(f"{buf.remaining} trailing bytes")
        return msg

    def serialize(self) -> bytes:
        w = Writer()
        self.push(w)
        return w.data()

    def to_bytes(self) -> bytes:
        """The whole handshake message: msg_type, uint24 length, body."""
        body = self.serialize()
        return bytes([self.msg_type]) + len(body).to_bytes(3, "big") + body
