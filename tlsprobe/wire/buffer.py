"""Bounded binary reader and writer for TLS structures.

Every parser in tlsprobe reads through `Buffer`, so every malformed input ends in one
exception type, `DecodeError`, carrying the absolute byte offset and the field path
(e.g. ``ClientHello.extensions[3].key_share.client_shares[0].key_exchange``).
Parsers may also record `Annotation`s (field name, offset, length, decoded value) that the
trace formatter prints under each message, as in ``named_curve x25519 (0x001d) at +6``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


class DecodeError(ValueError):
    """Malformed input. `offset` is absolute within the parsed unit; `path` names the field."""

    def __init__(self, reason: str, offset: int = 0, path: str = "") -> None:
        self.reason = reason
        self.offset = offset
        self.path = path
        where = f" in {path}" if path else ""
        super().__init__(f"{reason}{where} at offset {offset}")


@dataclass(frozen=True)
class Annotation:
    """One decoded field of a message, for the trace: where it is and what it means.

    `offset` counts from the start of the unit being annotated (for handshake messages the
    4-byte handshake header is included, so offsets match the hex dump of the message).
    `kind` is "int" for fixed-size integers, "bytes" for opaque data, "len" for a length prefix.
    """

    name: str
    offset: int
    length: int
    value: str
    kind: str = "int"


class Buffer:
    """Reads a bytes object front to back; never reads past the end or past an open block."""

    __slots__ = ("_base", "_data", "_end", "_path", "_pos", "annotations")

    def __init__(self, data: bytes, *, base_offset: int = 0, path: str = "",
                 annotate: bool = False) -> None:
        self._data = bytes(data)
        self._pos = 0
        self._end = len(self._data)
        self._base = base_offset
        self._path: list[str] = [path] if path else []
        self.annotations: list[Annotation] | None = [] if annotate else None

    # -- position -------------------------------------------------------------------------
    def tell(self) -> int:
        """Offset of the next byte, counted like annotations (base_offset included)."""
        return self._base + self._pos

    @property
    def remaining(self) -> int:
        return self._end - self._pos

    def eof(self) -> bool:
        return self._pos >= self._end

    @property
    def path(self) -> str:
        return ".".join(p for p in self._path if p).replace(".[", "[")

    def error(self, reason: str, offset: int | None = None) -> DecodeError:
        return DecodeError(reason, self.tell() if offset is None else offset, self.path)

    @contextmanager
    def field(self, name: str) -> Iterator[None]:
        """Name the field being read, so errors say where they happened."""
        self._path.append(name)
        try:
            yield
        finally:
            self._path.pop()

    # -- primitives -----------------------------------------------------------------------
    def _take(self, n: int) -> bytes:
        if n < 0:
            raise self.error(f"negative length {n}")
        if self._pos + n > self._end:
            raise self.error(f"need {n} bytes, {self._end - self._pos} left")
        b = self._data[self._pos:self._pos + n]
        self._pos += n
        return b

    def pull_bytes(self, n: int) -> bytes:
        return self._take(n)

    def pull_uint8(self) -> int:
        return self._take(1)[0]

    def pull_uint16(self) -> int:
        return int.from_bytes(self._take(2), "big")

    def pull_uint24(self) -> int:
        return int.from_bytes(self._take(3), "big")

    def pull_uint32(self) -> int:
        return int.from_bytes(self._take(4), "big")

    def pull_uint(self, size: int) -> int:
        return int.from_bytes(self._take(size), "big")

    def pull_rest(self) -> bytes:
        return self._take(self._end - self._pos)

    def peek(self, n: int) -> bytes:
        return self._data[self._pos:min(self._pos + n, self._end)]

    def pull_vector(self, len_size: int, *, minimum: int = 0, maximum: int | None = None) -> bytes:
        """opaque x<minimum..maximum> with a `len_size`-byte length prefix."""
        n = self.pull_uint(len_size)
        if n < minimum or (maximum is not None and n > maximum):
            raise self.error(f"length {n} outside {minimum}..{maximum}", self.tell() - len_size)
        return self._take(n)

    @contextmanager
    def block(self, len_size: int, *, minimum: int = 0,
              maximum: int | None = None) -> Iterator[int]:
        """Read a length prefix and confine reads to it; the block must be consumed exactly.

        Yields the block length."""
        start = self.tell()
        n = self.pull_uint(len_size)
        if n < minimum or (maximum is not None and n > maximum):
            raise self.error(f"length {n} outside {minimum}..{maximum}", start)
        if self._pos + n > self._end:
            raise self.error(f"block of {n} bytes, only {self._end - self._pos} left", start)
        saved_end = self._end
        self._end = self._pos + n
        try:
            yield n
            if self._pos != self._end:
                raise self.error(f"{self._end - self._pos} unread bytes at end of block")
        finally:
            self._end = saved_end

    # -- annotations ----------------------------------------------------------------------
    def note(self, name: str, offset: int, length: int, value: str, kind: str = "int") -> None:
        """Record a decoded field (offset as returned by tell() before reading it)."""
        if self.annotations is not None:
            self.annotations.append(Annotation(name, offset, length, value, kind))


class Writer:
    """Builds TLS structures; `block` back-fills a length prefix."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def data(self) -> bytes:
        return bytes(self._buf)

    def __len__(self) -> int:
        return len(self._buf)

    def push_bytes(self, b: bytes) -> None:
        self._buf += b

    def push_uint(self, value: int, size: int) -> None:
        if value < 0 or value >= 1 << (8 * size):
            raise ValueError(f"{value} does not fit in {size} bytes")
        self._buf += value.to_bytes(size, "big")

    def push_uint8(self, value: int) -> None:
        self.push_uint(value, 1)

    def push_uint16(self, value: int) -> None:
        self.push_uint(value, 2)

    def push_uint24(self, value: int) -> None:
        self.push_uint(value, 3)

    def push_uint32(self, value: int) -> None:
        self.push_uint(value, 4)

    def push_vector(self, len_size: int, b: bytes) -> None:
        self.push_uint(len(b), len_size)
        self._buf += b

    @contextmanager
    def block(self, len_size: int) -> Iterator[None]:
        start = len(self._buf)
        self._buf += b"\x00" * len_size
        yield
        n = len(self._buf) - start - len_size
        if n >= 1 << (8 * len_size):
            raise ValueError(f"block of {n} bytes does not fit a {len_size}-byte length")
        self._buf[start:start + len_size] = n.to_bytes(len_size, "big")
