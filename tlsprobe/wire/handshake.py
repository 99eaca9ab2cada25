"""Handshake message framing, reassembly and type dispatch (RFC 8446 4, RFC 5246 7.4).

Handshake messages are not aligned with records: one record may carry several messages and
one message may span several records. `HandshakeReassembler` rebuilds whole messages from
the fragments of consecutive handshake records, with bounded memory: a declared length over
`max_message` fails as soon as the 4-byte header is seen, not after buffering.
`decode_handshake` turns one whole message into its typed dataclass, optionally with
annotations whose offsets count from the first byte of the message header.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from ._util import handshake_label, length_label
from .buffer import Annotation, Buffer, DecodeError, Writer
from .context import Message, ParseContext

__all__ = [
    "DEFAULT_MAX_MESSAGE",
    "HEADER_SIZE",
    "Decoded",
    "HandshakeReassembler",
    "ParseContext",
    "UnknownHandshake",
    "decode_handshake",
    "frame",
    "message_class",
    "tiles_messages",
]

HEADER_SIZE: Final = 4
#: generous for real certificate chains (OpenSSL's own default limit is 100 KiB)
DEFAULT_MAX_MESSAGE = 1 << 20


#: the handshake message types of TLS 1.0-1.3 (and DTLS's HelloVerifyRequest, 3)
MESSAGE_TYPES: Final = frozenset((0, 1, 2, 3, 4, 5, 6, 8, 11, 12, 13, 14, 15, 16, 20, 21, 22, 23,
                                  24, 25, 254))


def tiles_messages(fragment: bytes) -> bool:
    """Whether a handshake record's fragment is whole messages of known types end to end
    (what a plaintext record after a ChangeCipherSpec, such as a ServerHello after a
    HelloRetryRequest, is): ciphertext, such as an encrypted Finished, is not."""
    p, n = 0, len(fragment)
    while p + HEADER_SIZE <= n:
        if fragment[p] not in MESSAGE_TYPES:
            return False
        p += HEADER_SIZE + int.from_bytes(fragment[p + 1:p + 4], "big")
    return p == n and n > 0


def frame(msg_type: int, body: bytes) -> bytes:
    """Prefix a body with its handshake header (msg_type, uint24 length)."""
    w = Writer()
    w.push_uint8(msg_type)
    w.push_vector(3, body)
    return w.data()


class HandshakeReassembler:
    """Rebuild whole handshake messages from the fragments of handshake records.

    `feed(fragment)` returns the messages completed so far, each with its 4-byte header.
    Errors follow `RecordReader`: offsets count from the start of the handshake stream,
    messages completed before a bad header are returned first, the error comes on the next
    call, and the reassembler then stays failed."""

    def __init__(self, max_message: int = DEFAULT_MAX_MESSAGE) -> None:
        self.max_message = max_message
        self._buf = bytearray()
        self._offset = 0
        self._error: DecodeError | None = None

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete message held back (0 at a message boundary)."""
        return len(self._buf)

    @property
    def pending(self) -> bool:
        """True while part of a message is held back (not at a message boundary)."""
        return bool(self._buf)

    @property
    def pending_type(self) -> int | None:
        """The msg_type of the message held back, known from its first byte."""
        return self._buf[0] if self._buf else None

    @property
    def offset(self) -> int:
        """Handshake-stream offset of the next message header."""
        return self._offset

    @property
    def error(self) -> DecodeError | None:
        return self._error

    def feed(self, fragment: bytes) -> list[bytes]:
        if self._error is not None:
            raise self._error
        self._buf += fragment
        out: list[bytes] = []
        try:
            while len(self._buf) >= HEADER_SIZE:
                length = int.from_bytes(self._buf[1:4], "big")
                if length > self.max_message:
                    raise DecodeError(f"message length {length} over {self.max_message}",
                                      self._offset + 1, "handshake.length")
                total = HEADER_SIZE + length
                if len(self._buf) < total:
                    break
                out.append(bytes(self._buf[:total]))
                del self._buf[:total]
                self._offset += total
        except DecodeError as exc:
            self._error = exc
            if not out:
                raise
        return out


@dataclass(frozen=True)
class UnknownHandshake:
    """A handshake type this codec does not model; the body is kept raw. Not a `Message`:
    its type is its own field, where a `Message` class has one type for all."""

    msg_type: int
    body: bytes

    def push(self, w: Writer) -> None:
        w.push_bytes(self.body)

    def serialize(self) -> bytes:
        return self.body

    def to_bytes(self) -> bytes:
        return frame(self.msg_type, self.body)


@dataclass(frozen=True)
class Decoded:
    """A decoded handshake message: raw type, typed message, trace annotations."""

    msg_type: int
    message: Any
    annotations: list[Annotation] = field(default_factory=list)


_CLASSES: Final[dict[int, type[Message]]] = {}


def message_class(msg_type: int) -> type[Message] | None:
    """The dataclass that models `msg_type`, None when unknown."""
    if not _CLASSES:
        from . import certificate, hello, keyexchange, messages
        for module in (hello, keyexchange, certificate, messages):
            for cls in module.MESSAGE_CLASSES:
                _CLASSES[cls.msg_type] = cls
    return _CLASSES.get(msg_type)


def decode_handshake(raw: bytes, ctx: ParseContext | None = None,
                     annotate: bool = False) -> Decoded:
    """Decode one whole handshake message (header included), dispatching on its type.

    Raises DecodeError (offset from the message start, field path) when the header length
    does not match or the body is malformed for its type and context."""
    ctx = ctx or ParseContext()
    buf = Buffer(raw, path="handshake", annotate=annotate)
    msg_type = buf.pull_uint8()
    buf.note("msg_type", 0, 1, handshake_label(msg_type))
    cls = message_class(msg_type)
    with buf.block(3) as length:
        buf.note("length", 1, 3, length_label(length), "len")
        if cls is None:
            message: Any = UnknownHandshake(msg_type, buf.pull_rest())
        else:
            with buf.field(cls.__name__):
                message = cls.pull(buf, ctx)
    if not buf.eof():
        raise buf.error(f"{buf.remaining} bytes after the message")
    return Decoded(msg_type, message, list(buf.annotations or []))
