"""Record framing on real OpenSSL byte streams: whole, byte by byte, chunked, trailing bytes,
bad headers, the SSLv2-format ClientHello and content-based TLS detection."""

from __future__ import annotations

import random

import pytest

from tlsprobe.wire import (
    DecodeError,
    Record,
    RecordReader,
    SSLv2ClientHello,
    looks_like_tls,
)
from tlsprobe.wire.record import MAX_CIPHERTEXT

CONFIGS = ["tls13", "tls13_hrr", "tls12_ecdhe", "tls12_dhe", "tls12_rsa", "tls10_ecdhe"]


def _feed_chunks(stream: bytes, sizes: list[int]) -> list[Record | SSLv2ClientHello]:
    reader = RecordReader()
    out: list[Record | SSLv2ClientHello] = []
    pos, i = 0, 0
    while pos < len(stream):
        n = sizes[i % len(sizes)]
        out += reader.feed(stream[pos:pos + n])
        pos, i = pos + n, i + 1
    assert reader.buffered == 0
    return out


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("side", ["client_bytes", "server_bytes"])
def test_real_streams_whole_bytewise_and_chunked(handshake, name: str, side: str) -> None:
    stream: bytes = getattr(handshake(name), side)
    reader = RecordReader()
    records = reader.feed(stream)
    assert records and all(isinstance(r, Record) for r in records)
    assert b"".join(r.to_bytes() for r in records) == stream  # framing loses nothing
    assert reader.buffered == 0 and reader.offset == len(stream)
    assert _feed_chunks(stream, [1]) == records
    rng = random.Random(len(stream))
    assert _feed_chunks(stream, [rng.randint(1, 700) for _ in range(50)]) == records
    assert records[0].content_type == 22  # every stream starts with a handshake record


def test_content_type_sequence_tls12(handshake) -> None:
    hs = handshake("tls12_ecdhe")
    types = [r.content_type for r in RecordReader().feed(hs.server_bytes)]
    # plaintext handshake, ChangeCipherSpec, encrypted Finished, then application data
    ccs = types.index(20)
    assert set(types[:ccs]) == {22} and types[ccs + 1] == 22 and types[-1] == 23
    versions = {r.version for r in RecordReader().feed(hs.server_bytes)}
    assert versions == {0x0303}


def test_trailing_partial_record_is_kept(handshake) -> None:
    stream = handshake("tls12_ecdhe").client_bytes
    whole = RecordReader().feed(stream)
    reader = RecordReader()
    tail = bytes([23, 3, 3, 0, 40]) + b"x" * 17
    assert reader.feed(stream + tail) == whole
    assert reader.buffered == len(tail)
    assert reader.feed(b"y" * 22) == []
    assert reader.feed(b"z") == [Record(23, 0x0303, b"x" * 17 + b"y" * 22 + b"z")]
    assert reader.buffered == 0


@pytest.mark.parametrize("content_type", [20, 21, 22, 23, 24, 25, 26])
def test_every_content_type_is_framed(content_type: int) -> None:
    record = Record(content_type, 0x0303, b"\x01\x02")
    assert RecordReader().feed(record.to_bytes() * 2) == [record, record]


@pytest.mark.parametrize("header, offset, path", [
    (b"\x13\x03\x03\x00\x01", 0, "record.content_type"),
    (b"\x1b\x03\x03\x00\x01", 0, "record.content_type"),
    (b"\x16\x02\x00\x00\x01", 1, "record.version"),
    (b"\x17\x03\x03\x48\x01", 3, "record.length"),
])
def test_bad_header_errors_carry_stream_offset(handshake, header: bytes, offset: int,
                                               path: str) -> None:
    good = handshake("tls12_rsa").client_bytes
    reader = RecordReader()
    records = reader.feed(good + header)
    assert b"".join(r.to_bytes() for r in records) == good  # records before it come first
    with pytest.raises(DecodeError) as exc:
        reader.feed(b"")
    assert exc.value.offset == len(good) + offset and exc.value.path == path
    assert reader.error is exc.value
    with pytest.raises(DecodeError):  # the reader stays failed
        reader.feed(b"\x17\x03\x03\x00\x00")


def test_bad_header_detected_from_the_first_byte() -> None:
    with pytest.raises(DecodeError) as exc:
        RecordReader().feed(b"G")
    assert exc.value.offset == 0 and "content type 71" in exc.value.reason
    with pytest.raises(DecodeError):
        RecordReader().feed(b"\x16\x04")


def test_max_fragment_is_configurable() -> None:
    record = Record(23, 0x0303, bytes(300))
    assert RecordReader(max_fragment=300).feed(record.to_bytes()) == [record]
    with pytest.raises(DecodeError, match="over 299"):
        RecordReader(max_fragment=299).feed(record.to_bytes()[:5])
    assert RecordReader().max_fragment == MAX_CIPHERTEXT == 2**14 + 2048


# A ClientHello as old clients sent it (RFC 5246 E.2): SSLv2 record header, version TLS 1.0,
# SSLv2 and TLS cipher specs, no session id, 16-byte challenge.
SSLV2_HELLO = SSLv2ClientHello(0x0301, [0x010080, 0x000035, 0x00002F, 0x00000A], b"",
                               bytes(range(16)))


def test_sslv2_client_hello_bytes_and_round_trip() -> None:
    raw = SSLV2_HELLO.to_bytes()
    assert raw[:2] == (0x8000 | (9 + 12 + 16)).to_bytes(2, "big") and raw[2] == 1
    parsed = SSLv2ClientHello.parse(raw)
    assert parsed == SSLv2ClientHello(0x0301, SSLV2_HELLO.cipher_specs, b"", bytes(range(16)),
                                      raw)
    follow = Record(22, 0x0301, b"\x10\x00\x00\x00")
    stream = raw + follow.to_bytes()
    assert RecordReader().feed(stream) == [parsed, follow]
    assert _feed_chunks(stream, [1]) == [parsed, follow]


def test_sslv2_only_at_stream_start() -> None:
    reader = RecordReader()
    reader.feed(Record(22, 0x0301, b"").to_bytes())
    with pytest.raises(DecodeError, match="content type 128"):
        reader.feed(SSLV2_HELLO.to_bytes())


@pytest.mark.parametrize("patch, match", [
    ({2: 4}, "SSLv2 record with msg_type 4"),  # an SSLv2 ServerHello: not supported
    ({3: 9}, "not a TLS record"),              # version 9.x
    ({6: 0, 7: 4}, "multiple of 3"),           # cipher_spec_length 4
    ({10: 20}, "do not add up"),               # challenge_length 20 but 16 sent
    ({10: 8}, "challenge_length 8"),           # below the SSLv2 minimum of 16
    ({8: 5}, "session_id_length 5"),
])
def test_sslv2_malformed(patch: dict[int, int], match: str) -> None:
    raw = bytearray(SSLV2_HELLO.to_bytes())
    for i, v in patch.items():
        raw[i] = v
    with pytest.raises(DecodeError, match=match):
        RecordReader().feed(bytes(raw))


@pytest.mark.parametrize("name", CONFIGS)
def test_looks_like_tls_on_real_streams(handshake, name: str) -> None:
    hs = handshake(name)
    for stream in (hs.client_bytes, hs.server_bytes):
        assert [looks_like_tls(stream[:n]) for n in range(6)] == [None] * 5 + [True]


@pytest.mark.parametrize("data, verdict", [
    (b"GET / HTTP/1.1\r\n", False), (b"SSH-2.0-OpenSSH_9.2\r\n", False),
    (b"220 smtp ESMTP\r\n", False), (b"\x16\x03\x01\x00\x00", False),
    (b"\x16\x03\x05\x00\x10", False), (b"\x16\x02", False), (b"\x16\x03\x01\x48\x01", False),
    (b"\x15\x03\x03\x00\x02", True), (b"", None), (b"\x16\x03\x01\x02", None),
    (b"\x80", None), (b"\x80\x05", False),
])
def test_looks_like_tls_verdicts(data: bytes, verdict: bool | None) -> None:
    assert looks_like_tls(data) is verdict


def test_looks_like_tls_sslv2() -> None:
    raw = SSLV2_HELLO.to_bytes()
    assert [looks_like_tls(raw[:n]) for n in range(6)] == [None] * 5 + [True]
    assert looks_like_tls(raw[:4] + b"\x09") is False  # version 3.9
