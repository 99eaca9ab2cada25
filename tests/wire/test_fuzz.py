"""The codec's invariant (h11's fuzz rule): for ANY bytes, every parser returns values or
raises DecodeError -- never IndexError, struct.error, a bare ValueError, AssertionError or
UnicodeDecodeError -- and whatever it accepts serializes back to the same bytes.

Inputs are random bytes and mutations (flips, truncations, insertions) of real messages,
so the fuzzer reaches deep inside valid structures. Hypothesis keeps no example database
(tests write nothing outside temp dirs)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlsprobe.wire import (
    Alert,
    ChangeCipherSpec,
    DecodeError,
    Extension,
    HandshakeReassembler,
    ParseContext,
    RecordReader,
    SSLv2ClientHello,
    decode_extension,
    decode_handshake,
    frame,
    looks_like_tls,
    message_class,
    parse_alerts,
)
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.context import KEY_EXCHANGES
from tlsprobe.wire.ext_decoders import DECODERS
from tlsprobe.wire.extensions import annotate_extension

FUZZ = settings(max_examples=int(os.environ.get("TLSPROBE_FUZZ_EXAMPLES", "300")), database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

_DATA = json.loads((Path(__file__).parent / "data" / "openssl_msgs.json").read_text())
_ALL = sorted({(m["content"], bytes.fromhex(m["hex"])) for k, v in _DATA.items()
               if not k.startswith("_") for run in (v if isinstance(v, list) else [v])
               for m in run["messages"]}, key=lambda cm: (len(cm[1]), cm))
#: the two shortest real messages of each content type and handshake type, every hello
SEEDS: list[bytes] = [m for kind in sorted({(c, m[0]) for c, m in _ALL})
                      for m in [x for c, x in _ALL if (c, x[0]) == kind][:2]] + [
    m for c, m in _ALL if c == "Handshake" and m[0] in (1, 2)]


def _extension_seeds() -> dict[int, list[bytes]]:
    """Real extension_data by type, from every message of the fixtures, plus builders for
    forms no fixture has."""
    seeds: dict[int, list[bytes]] = {}
    for content, raw in _ALL:
        if content != "Handshake":
            continue
        for version in (0x0304, 0x0303, 0x0301):
            try:
                message = decode_handshake(raw, ParseContext(version=version)).message
                break
            except DecodeError:
                continue
        entries = getattr(message, "certificate_list", None) or [message]
        for holder in entries:
            for e in getattr(holder, "extensions", []):
                seeds.setdefault(e.type, []).append(e.data)
    for e in (ext.key_share_hrr(0x17), ext.cookie(b"c" * 8), ext.early_data(1024),
              ext.pre_shared_key_client([(b"id", 1)], [bytes(32)]), ext.pre_shared_key_server(0),
              ext.compress_certificate([1, 2]), ext.record_size_limit(2**14),
              ext.signature_algorithms_cert([0x0804]), ext.padding(3), ext.grease(0x0A0A, b"x"),
              Extension(5, b"\x01\x00\x00\x03der"), ext.supported_versions_server(0x0304),
              Extension(47, b"\x00\x05\x00\x03abc"), ext.server_name("a.example")):
        seeds.setdefault(e.type, []).append(e.data)
    return seeds


EXT_SEEDS = _extension_seeds()
MSG_TYPES = [0, 1, 2, 4, 5, 8, 11, 12, 13, 14, 15, 16, 20, 22, 24, 25, 254, 3, 67]
CONTEXTS = [ParseContext(version=v, key_exchange=kx)
            for v in (None, 0x0300, 0x0301, 0x0303, 0x0304) for kx in (*KEY_EXCHANGES, None)]
WHERES = ["client_hello", "server_hello", "hello_retry_request", "encrypted_extensions",
          "certificate", "certificate_request", "new_session_ticket"]
EXT_TYPES = sorted(DECODERS) + [0x0A0A, 0x4469]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes] | None = None) -> bytes:
    """A real message with a few random edits, or plain random bytes."""
    if draw(st.booleans()) or seeds == []:
        return draw(st.binary(max_size=300))
    data = bytearray(draw(st.sampled_from(seeds or SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 4))]
    return bytes(data)


def _only_decode_error(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except DecodeError as exc:
        assert isinstance(exc.offset, int) and exc.offset >= 0 and exc.reason
        return None


def _fix_header(data: bytes, msg_type: int) -> bytes:
    """Half the time keep the bytes as they are, else re-frame them as `msg_type` so the
    body parser (not just the header check) sees them."""
    return frame(msg_type, data[4:]) if len(data) >= 4 else data


@FUZZ
@given(data=mutated(), msg_type=st.sampled_from(MSG_TYPES), ctx=st.sampled_from(CONTEXTS),
       reframe=st.booleans(), annotate=st.booleans())
def test_decode_handshake(data: bytes, msg_type: int, ctx: ParseContext, reframe: bool,
                          annotate: bool) -> None:
    raw = _fix_header(data, msg_type) if reframe else data
    decoded = _only_decode_error(lambda: decode_handshake(raw, ctx, annotate=annotate))
    if decoded is not None:
        assert decoded.message.to_bytes() == raw  # accepted input round-trips exactly
        for a in decoded.annotations:
            assert 0 <= a.offset <= len(raw) and isinstance(a.value, str)
        cls = message_class(raw[0])
        if cls is not None:
            assert cls.parse(raw[4:], ctx) == decoded.message


@FUZZ
@given(ext_type=st.sampled_from(EXT_TYPES), where=st.sampled_from(WHERES), data=st.data())
def test_decode_extension(ext_type: int, where: str, data: st.DataObject) -> None:
    body = data.draw(mutated(EXT_SEEDS.get(ext_type, [])))
    _only_decode_error(lambda: decode_extension(ext_type, body, where))
    notes = annotate_extension(Extension(ext_type, body), where, 9)
    assert all(a.offset >= 9 and isinstance(a.value, str) for a in notes)


@FUZZ
@given(data=mutated(), chunk=st.integers(1, 64), max_fragment=st.sampled_from([16, 2**14 + 2048]))
def test_record_reader(data: bytes, chunk: int, max_fragment: int) -> None:
    stream = data
    reader = RecordReader(max_fragment)
    records: list[Any] = []
    try:
        for i in range(0, len(stream), chunk):
            records += reader.feed(stream[i:i + chunk])
        records += reader.feed(b"")
    except DecodeError as exc:
        assert 0 <= exc.offset <= len(stream)
        return
    assert b"".join(r.to_bytes() for r in records) + stream[len(stream) - reader.buffered:] \
        == stream
    verdict = looks_like_tls(stream)
    assert verdict in (True, False, None)


@FUZZ
@given(data=st.binary(min_size=2, max_size=120), spec_len=st.integers(0, 40))
def test_sslv2_hello(data: bytes, spec_len: int) -> None:
    raw = bytes([0x80 | (len(data) + 7) >> 8 & 0x7F, (len(data) + 7) & 0xFF, 1, 3, 1,
                 0, spec_len]) + data
    hello = _only_decode_error(lambda: SSLv2ClientHello.parse(raw))
    if hello is not None:
        assert hello.to_bytes() == raw
    _only_decode_error(lambda: RecordReader().feed(raw))


@FUZZ
@given(data=mutated(), chunk=st.integers(1, 50), limit=st.integers(0, 400))
def test_handshake_reassembler(data: bytes, chunk: int, limit: int) -> None:
    reasm = HandshakeReassembler(max_message=limit)
    out: list[bytes] = []
    try:
        for i in range(0, len(data), chunk):
            out += reasm.feed(data[i:i + chunk])
        out += reasm.feed(b"")
    except DecodeError:
        assert reasm.error is not None
        return
    assert b"".join(out) + data[len(data) - reasm.buffered:] == data
    assert all(len(m) - 4 <= limit for m in out)


@FUZZ
@given(data=st.binary(max_size=8))
def test_alert_and_ccs(data: bytes) -> None:
    _only_decode_error(lambda: Alert.parse(data))
    _only_decode_error(lambda: parse_alerts(data, annotate=True))
    _only_decode_error(lambda: ChangeCipherSpec.parse(data))
