"""TLS record layer framing (RFC 8446 5.1, RFC 5246 6.2) and the SSLv2-compatible ClientHello.

`RecordReader` turns a byte stream (one direction of a connection) into `Record`s. It does
not decrypt or interpret fragments; it only frames them and rejects what cannot be TLS: an
unknown content type, a version whose major byte is not 3, or a length above the limit.
Incomplete input is kept for the next `feed`, never an error. The very first record of a
stream may instead be an SSLv2-format ClientHello (RFC 5246 appendix E.2), which old clients
and scanners still send; it is returned as an `SSLv2ClientHello`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from .buffer import Buffer, DecodeError, Writer

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
TLS12_CID, ACK = 25, 26
#: content types that are framed; 25 (DTLS cid) and 26 (DTLS 1.3 ACK) are framed as opaque.
CONTENT_TYPES: Final = frozenset(range(20, 27))
#: RFC 5246 6.2.3: TLSCiphertext.length must not exceed 2^14 + 2048.
MAX_CIPHERTEXT: Final = 2**14 + 2048
HEADER_SIZE: Final = 5


@dataclass(frozen=True)
class Record:
    """One TLSPlaintext / TLSCiphertext record: raw content type, record version, fragment."""

    content_type: int
    version: int
    fragment: bytes

    def to_bytes(self) -> bytes:
        w = Writer()
        w.push_uint8(self.content_type)
        w.push_uint16(self.version)
        w.push_vector(2, self.fragment)
        return w.data()


@dataclass(frozen=True)
class SSLv2ClientHello:
    """An SSLv2-format ClientHello (2-byte header with the high bit set, msg_type 1).

    `cipher_specs` are 3-byte values (TLS suites appear as 0x00XXYY); `raw` is the whole
    record as received, header included (empty when built locally; not compared); the
    handshake transcript uses `raw[2:]`."""

    version: int
    cipher_specs: list[int]
    session_id: bytes
    challenge: bytes
    raw: bytes = field(default=b"", compare=False)

    @classmethod
    def parse(cls, data: bytes, *, base_offset: int = 0) -> SSLv2ClientHello:
        """Parse one complete SSLv2 ClientHello record (header included, nothing after it)."""
        buf = Buffer(data, base_offset=base_offset, path="SSLv2ClientHello")
        header = buf.pull_uint16()
        if not header & 0x8000:
            raise buf.error("not a 2-byte SSLv2 record header", base_offset)
        length = header & 0x7FFF
        if length != buf.remaining:
            raise buf.error(f"record length {length} but {buf.remaining} bytes", base_offset)
        with buf.field("msg_type"):
            if (msg_type := buf.pull_uint8()) != 1:
                raise buf.error(f"msg_type {msg_type} is not client_hello (1)", buf.tell() - 1)
        version = buf.pull_uint16()
        sizes_at = buf.tell()
        spec_len, sid_len, chal_len = buf.pull_uint16(), buf.pull_uint16(), buf.pull_uint16()
        if spec_len == 0 or spec_len % 3:
            raise buf.error(f"cipher_spec_length {spec_len} is not a positive multiple of 3",
                            sizes_at)
        if sid_len not in (0, 16):
            raise buf.error(f"session_id_length {sid_len} is not 0 or 16", sizes_at + 2)
        if not 16 <= chal_len <= 32:
            raise buf.error(f"challenge_length {chal_len} outside 16..32", sizes_at + 4)
        if spec_len + sid_len + chal_len != buf.remaining:
            raise buf.error("lengths do not add up to the record length", sizes_at)
        with buf.field("cipher_specs"):
            specs = [buf.pull_uint24() for _ in range(spec_len // 3)]
        session_id = buf.pull_bytes(sid_len)
        challenge = buf.pull_bytes(chal_len)
        return cls(version, specs, session_id, challenge, bytes(data))

    def to_bytes(self) -> bytes:
        w = Writer()
        w.push_uint8(1)
        w.push_uint16(self.version)
        w.push_uint16(3 * len(self.cipher_specs))
        w.push_uint16(len(self.session_id))
        w.push_uint16(len(self.challenge))
        for spec in self.cipher_specs:
            w.push_uint24(spec)
        w.push_bytes(self.session_id + self.challenge)
        body = w.data()
        return (0x8000 | len(body)).to_bytes(2, "big") + body


def sslv2_record_size(data: bytes | bytearray) -> int | None:
    """Total size of an SSLv2 record with a 2-byte header, None until 2 bytes are there."""
    if len(data) < 2:
        return None
    return 2 + (((data[0] & 0x7F) << 8) | data[1])


def _sslv2_verdict(b: bytes) -> bool | None:
    """Is `b` (from the start of a stream) an SSLv2 ClientHello header? None: need more."""
    if len(b) >= 2 and ((b[0] & 0x7F) << 8 | b[1]) < 9 + 3 + 16:
        return False
    if len(b) >= 3 and b[2] != 1:
        return False
    if len(b) >= 4 and b[3] not in (0, 3):
        return False
    if len(b) >= 5:
        return b[4] == 2 if b[3] == 0 else b[4] <= 4
    return None


def looks_like_tls(first_bytes: bytes) -> bool | None:
    """Content-based detection from the first bytes one side sent.

    True for a plausible TLS record header (content type 20..26, version 3.0..3.4, length
    1..2^14+2048) or an SSLv2-format ClientHello; False when the bytes rule that out; None
    when more bytes are needed to tell (at most 5 are ever needed)."""
    b = bytes(first_bytes[:HEADER_SIZE])
    if not b:
        return None
    if b[0] & 0x80:
        return _sslv2_verdict(b)
    if b[0] not in CONTENT_TYPES:
        return False
    if len(b) >= 2 and b[1] != 3:
        return False
    if len(b) >= 3 and b[2] > 4:
        return False
    if len(b) < HEADER_SIZE:
        return None
    return 0 < int.from_bytes(b[3:5], "big") <= MAX_CIPHERTEXT


class RecordReader:
    """Incremental record framer for one direction of a stream.

    `feed(data)` returns the records completed so far (an empty list means "need more
    bytes"). A bad header raises `DecodeError` whose offset counts from the start of the
    stream; records completed before it in the same call are returned first and the error is
    raised by the next call (``feed(b"")`` suffices). After an error the reader stays failed.
    """

    def __init__(self, max_fragment: int = MAX_CIPHERTEXT, *, allow_sslv2: bool = True) -> None:
        self.max_fragment = max_fragment
        self._buf = bytearray()
        self._offset = 0  # stream offset of _buf[0]
        self._allow_sslv2 = allow_sslv2  # only the first record may be SSLv2
        self._error: DecodeError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a record."""
        return len(self._buf)

    @property
    def offset(self) -> int:
        """Stream offset of the next record header (bytes consumed so far)."""
        return self._offset

    @property
    def error(self) -> DecodeError | None:
        """The error that stopped this reader, if any."""
        return self._error

    def feed(self, data: bytes) -> list[Record | SSLv2ClientHello]:
        if self._error is not None:
            raise self._error
        self._buf += data
        out: list[Record | SSLv2ClientHello] = []
        try:
            while (item := self._next()) is not None:
                out.append(item)
        except DecodeError as exc:
            self._error = exc
            if not out:
                raise
        return out

    def _fail(self, reason: str, at: int, path: str) -> DecodeError:
        return DecodeError(reason, self._offset + at, path)

    def _next(self) -> Record | SSLv2ClientHello | None:
        b = self._buf
        if not b:
            return None
        if self._allow_sslv2 and b[0] & 0x80:
            return self._next_sslv2()
        self._allow_sslv2 = False
        if b[0] not in CONTENT_TYPES:
            raise self._fail(f"unknown content type {b[0]}", 0, "record.content_type")
        if len(b) >= 2 and b[1] != 3:
            raise self._fail(f"record version major {b[1]} is not 3", 1, "record.version")
        if len(b) < HEADER_SIZE:
            return None
        length = int.from_bytes(b[3:5], "big")
        if length > self.max_fragment:
            raise self._fail(f"record length {length} over {self.max_fragment}", 3,
                             "record.length")
        if len(b) < HEADER_SIZE + length:
            return None
        record = Record(b[0], int.from_bytes(b[1:3], "big"), bytes(b[5:5 + length]))
        self._consume(HEADER_SIZE + length)
        return record

    def _next_sslv2(self) -> SSLv2ClientHello | None:
        b = self._buf
        if _sslv2_verdict(bytes(b[:HEADER_SIZE])) is False:
            if len(b) >= 3 and b[2] != 1:
                raise self._fail(f"SSLv2 record with msg_type {b[2]}: only the SSLv2-format "
                                 "ClientHello is supported", 2, "record.sslv2.msg_type")
            raise self._fail("not a TLS record nor an SSLv2 ClientHello", 0, "record")
        total = sslv2_record_size(b)
        if total is None or len(b) < total:
            return None
        hello = SSLv2ClientHello.parse(bytes(b[:total]), base_offset=self._offset)
        self._consume(total)
        self._allow_sslv2 = False
        return hello

    def _consume(self, n: int) -> None:
        del self._buf[:n]
        self._offset += n
