"""Property tests across the codec's consumers, beyond the message parsers themselves
(tests/wire/test_fuzz.py covers those one by one): for ANY bytes,

- the session Flow yields events (malformed input becomes an ErrorEvent, never an
  exception), and the same events whether the bytes come whole or in arbitrary chunks;
- the client engine raises only HandshakeFailure, and what it saw still renders as a
  trace and as a JSON result;
- key shares of any length and content give a secret or InvalidShare, nothing else;
- certificate summaries of any DER give a value, never an exception;
- the capture reader turns any file body after a valid header into events and warnings
  (CaptureError only when nothing can be read).

Inputs are random bytes and mutations of real traffic (a real ClientHello from the engine,
real TLS 1.2 and 1.3 server flights from the hostile server's builders). The example count
follows TLSPROBE_FUZZ_EXAMPLES (default 120 per property, a few seconds in all).
"""
from __future__ import annotations

import io
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlsprobe import kex
from tlsprobe.capture import CaptureError, iter_stream_events
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig, build_client_hello
from tlsprobe.net.tcp import Target
from tlsprobe.probes import facts
from tlsprobe.report.trace import TraceFormatter
from tlsprobe.session.flow import CLIENT, SERVER, ErrorEvent, Flow
from tlsprobe.wire import frame

from tests.helpers.capbuild import Conv, Pcapng, ether, pcap_bytes
from tests.hostile.tls import (
    alert,
    handshake_records,
    hello_retry_request,
    identity,
    record,
    server_hello_13,
    tls12_flight,
)

FUZZ = settings(max_examples=int(os.environ.get("TLSPROBE_FUZZ_EXAMPLES", "120")),
                database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_HELLO = build_client_hello(ClientConfig(server_name="fuzz.test")).hello
CLIENT_BYTES = record(22, frame(1, _HELLO.serialize()), version=0x0301)
SERVER_FLIGHTS: list[bytes] = [
    handshake_records(*tls12_flight(_HELLO)),
    handshake_records(server_hello_13(_HELLO)),
    handshake_records(hello_retry_request(_HELLO, group=0x17)),
    handshake_records(*tls12_flight(_HELLO)[:2]) + alert(2, 40),
    record(20, b"\x01") + record(23, b"\x00" * 40),
]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A real byte stream with a few random edits, or plain random bytes."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=400))
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete", "length"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and at < len(data):
            data[at] ^= draw(st.integers(1, 255))
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        elif op == "length" and at + 2 <= len(data):  # a plausible-looking length gone wrong
            data[at:at + 2] = draw(st.sampled_from([b"\x00\x00", b"\xff\xff", b"\x40\x01",
                                                    b"\x00\x01", b"\x7f\xff"]))
    return bytes(data)


def _chunks(data: bytes, sizes: list[int]) -> list[bytes]:
    out, i = [], 0
    for size in sizes or [len(data) or 1]:
        out.append(data[i:i + size])
        i += size
    if i < len(data):
        out.append(data[i:])
    return out


def _flow_events(stream: list[tuple[int, bytes]]) -> list[Any]:
    flow = Flow(annotate=True)
    events: list[Any] = []
    for direction, data in stream:
        events.extend(flow.feed(direction, data))
    # RecordReader's contract lets an error behind complete records of the same chunk wait
    # for the next feed; flush so both ways of feeding are compared after the same input.
    for direction in (CLIENT, SERVER):
        events.extend(flow.feed(direction, b""))
    return events


@FUZZ
@given(server=mutated(SERVER_FLIGHTS), client=mutated([CLIENT_BYTES]),
       sizes=st.lists(st.integers(1, 300), max_size=12))
def test_flow_events_do_not_depend_on_chunking(server: bytes, client: bytes,
                                               sizes: list[int]) -> None:
    whole = _flow_events([(CLIENT, client), (SERVER, server)])
    chunked = _flow_events([(CLIENT, c) for c in _chunks(client, sizes)] +
                           [(SERVER, s) for s in _chunks(server, sizes)])
    assert [repr(e) for e in chunked] == [repr(e) for e in whole]  # DecodeError has no ==
    errors = [e for e in whole if isinstance(e, ErrorEvent)]
    assert all(e.error.reason and e.error.offset >= 0 for e in errors)
    assert len([e for e in errors if e.fatal and e.direction == SERVER]) <= 1
    for line in TraceFormatter().lines(whole):
        assert isinstance(line, str)


@FUZZ
@given(server=mutated(SERVER_FLIGHTS), sizes=st.lists(st.integers(1, 500), max_size=8),
       tls12_only=st.booleans(), closed=st.booleans())
def test_engine_raises_only_handshake_failure(server: bytes, sizes: list[int],
                                              tls12_only: bool, closed: bool) -> None:
    config = ClientConfig(server_name="fuzz.test", versions=(0x0303,) if tls12_only
                          else (0x0304, 0x0303))
    engine = ClientHandshake(config)
    engine.start()
    failure: HandshakeFailure | None = None
    try:
        for chunk in _chunks(server, sizes):
            engine.receive(chunk)
            if engine.done:
                break
        if closed:
            engine.connection_closed()
    except HandshakeFailure as exc:
        failure = exc
        assert str(exc) and "\n" not in str(exc)
        # (limit: a mutated length over --max-message is tlsprobe's own limit, exit 8)
        assert exc.kind in ("alert", "protocol", "closed", "not_tls") or \
            (exc.kind == "limit" and "tlsprobe's limit" in str(exc)), (exc.kind, str(exc))
    error = (str(failure), failure.kind) if failure else None
    result = facts.result_from(engine, Target("127.0.0.1", 443), "127.0.0.1", error=error)
    assert result.to_json()
    for line in TraceFormatter().lines(engine.events):
        assert isinstance(line, str)


_GROUPS = [g for g in kex.computable_groups() if g < 0x0200 or g in (0x11EC, 0x0201)]


@FUZZ
@given(group=st.sampled_from(_GROUPS), data=st.data())
def test_key_shares_give_secret_or_invalid_share(group: int, data: st.DataObject) -> None:
    share = kex.generate(group)
    size = kex.share_size(group, "server") or 32
    peer = data.draw(st.one_of(st.binary(min_size=size, max_size=size),
                               st.binary(max_size=size + 3)))
    try:
        secret = share.shared_secret(peer)
        assert isinstance(secret, bytes) and secret
    except kex.InvalidShare as exc:
        assert str(exc) and "\n" not in str(exc)
    try:
        kex.validate_server_share(group, peer)
    except kex.InvalidShare:
        pass


_DER = identity().der


@FUZZ
@given(der=mutated([_DER]))
def test_certificate_summary_never_raises(der: bytes) -> None:
    info = facts.certificate_info(der)
    assert info.sha256 and len(info.sha256) == 64


def _pcap_seed() -> bytes:
    conv = Conv()
    packets = conv.handshake() + [conv.c(CLIENT_BYTES), conv.s(SERVER_FLIGHTS[0][:700]),
                                  conv.s(SERVER_FLIGHTS[0][700:]), conv.c(b"", "FA")]
    return pcap_bytes([ether(p) for p in packets])


def _pcapng_seed() -> bytes:
    conv = Conv(client=("2001:db8::1", 40001), server=("2001:db8::2", 443))
    ng = Pcapng().shb().idb(1)
    for i, p in enumerate(conv.handshake() + [conv.c(CLIENT_BYTES),
                                              conv.s(SERVER_FLIGHTS[1])]):
        ng.epb(0, 1_000_000 * (i + 1), ether(p))
    return ng.bytes()


CAPTURES = [_pcap_seed(), _pcapng_seed()]


@FUZZ
@given(data=mutated(CAPTURES))
def test_capture_reader_gives_events_or_warnings(data: bytes) -> None:
    try:
        stream = iter_stream_events(io.BytesIO(data))
    except CaptureError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    events = list(stream)
    # every packet costs at least a 12-byte record/block header, so the count is bounded
    # by the input (a reader that loops on one record would overshoot this)
    assert stream.stats.packets <= len(data) // 12 and len(events) <= 4 * len(data) + 8
    for warning in stream.stats.warnings:
        assert 0 <= warning.offset <= len(data) and warning.message
