"""Handshake reassembly and dispatch on real OpenSSL handshakes: several messages per
record, one message over many records, byte by byte, bounded memory, header checks."""

from __future__ import annotations

import pytest

from tlsprobe.wire import (
    ClientHello,
    DecodeError,
    HandshakeReassembler,
    ParseContext,
    Record,
    RecordReader,
    ServerHello,
    UnknownHandshake,
    decode_handshake,
    frame,
    message_class,
)
from tlsprobe.wire.handshake import DEFAULT_MAX_MESSAGE

from .conftest import Handshake


def _plaintext_fragments(stream: bytes) -> list[bytes]:
    """Fragments of the handshake records before the first ChangeCipherSpec."""
    out = []
    for record in RecordReader().feed(stream):
        assert isinstance(record, Record)
        if record.content_type == 20:
            break
        assert record.content_type == 22
        out.append(record.fragment)
    return out


def _plaintext_messages(hs: Handshake, sender: str) -> list[bytes]:
    """In TLS 1.0-1.2 only the final Finished is encrypted."""
    return [m for s, m in hs.messages if s == sender][:-1]


@pytest.mark.parametrize("name", ["tls12_ecdhe", "tls12_dhe", "tls10_ecdhe"])
def test_reassembles_tls12_server_flight(handshake, name: str) -> None:
    hs = handshake(name)
    fragments = _plaintext_fragments(hs.server_bytes)
    expected = _plaintext_messages(hs, "server")  # ServerHello .. NewSessionTicket
    assert [m[0] for m in expected][-2:] == [14, 4]
    reasm = HandshakeReassembler()
    got = [m for f in fragments for m in reasm.feed(f)]
    assert got == expected and reasm.buffered == 0
    joined = b"".join(fragments)
    for size in (1, 3, 7, 100, 1000):  # one message over many pieces
        reasm = HandshakeReassembler()
        got = [m for i in range(0, len(joined), size) for m in reasm.feed(joined[i:i + size])]
        assert got == expected
    assert HandshakeReassembler().feed(joined) == expected  # several messages at once


def test_reassembles_client_flight(handshake) -> None:
    hs = handshake("tls12_ecdhe")
    fragments = _plaintext_fragments(hs.client_bytes)
    reasm = HandshakeReassembler()
    got = [m for f in fragments for m in reasm.feed(f)]
    assert got == _plaintext_messages(hs, "client")
    assert [m[0] for m in got] == [1, 11, 16]  # ClientHello, empty Certificate, CKE


def test_trailing_partial_message_is_kept(handshake) -> None:
    hs = handshake("tls12_ecdhe")
    sh = hs.one(2)
    reasm = HandshakeReassembler()
    assert reasm.feed(sh) == [sh] and not reasm.pending
    assert reasm.feed(sh[:10]) == []
    assert reasm.buffered == 10 and reasm.pending and reasm.offset == len(sh)
    assert reasm.feed(sh[10:-1]) == []
    assert reasm.feed(sh[-1:]) == [sh] and not reasm.pending


def test_oversized_declared_length_fails_at_the_header() -> None:
    reasm = HandshakeReassembler(max_message=1000)
    with pytest.raises(DecodeError) as exc:
        reasm.feed(b"\x0b\x00\x03\xe9")  # declares 1001 bytes; nothing buffered beyond it
    assert exc.value.offset == 1 and exc.value.path == "handshake.length"
    assert HandshakeReassembler(max_message=1000).feed(frame(11, bytes(1000))) != []
    assert DEFAULT_MAX_MESSAGE >= 2**17


def test_error_after_good_messages_is_deferred() -> None:
    good = frame(14, b"")
    reasm = HandshakeReassembler(max_message=100)
    assert reasm.feed(good + b"\x01\xff\xff\xff") == [good]
    with pytest.raises(DecodeError) as exc:
        reasm.feed(b"")
    assert exc.value.offset == len(good) + 1
    assert reasm.error is exc.value


def test_frame() -> None:
    assert frame(20, b"\xaa" * 12) == b"\x14\x00\x00\x0c" + b"\xaa" * 12
    assert frame(14, b"") == b"\x0e\x00\x00\x00"


def test_decode_dispatches_on_type(handshake) -> None:
    hs = handshake("tls12_ecdhe")
    ch = decode_handshake(hs.one(1, "client"))
    assert ch.msg_type == 1 and isinstance(ch.message, ClientHello)
    assert isinstance(decode_handshake(hs.one(2)).message, ServerHello)
    assert message_class(2) is ServerHello and message_class(99) is None


def test_header_length_must_match() -> None:
    msg = frame(14, b"")
    with pytest.raises(DecodeError, match="1 bytes after the message"):
        decode_handshake(msg + b"\x00")
    with pytest.raises(DecodeError, match="block of 5 bytes"):
        decode_handshake(b"\x14\x00\x00\x05abc")
    with pytest.raises(DecodeError):
        decode_handshake(b"\x14\x00")
    with pytest.raises(DecodeError, match="trailing|unread"):
        decode_handshake(frame(14, b"\x00"))  # ServerHelloDone must be empty


def test_unknown_type_is_kept_raw() -> None:
    raw = frame(67, b"\x01\x02\x03")  # NPN's NextProtocol, not modelled
    decoded = decode_handshake(raw, annotate=True)
    assert decoded.message == UnknownHandshake(67, b"\x01\x02\x03")
    assert decoded.message.to_bytes() == raw
    assert [(a.name, a.offset, a.length) for a in decoded.annotations] == [
        ("msg_type", 0, 1), ("length", 1, 3)]


def test_context_tls13_property() -> None:
    assert ParseContext(version=0x0304).tls13 and ParseContext(version=0x7F17).tls13
    assert not ParseContext(version=0x0303).tls13 and not ParseContext().tls13
