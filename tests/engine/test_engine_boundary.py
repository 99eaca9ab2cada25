"""The client engine's one error boundary for server data, sans-IO: whatever extension bytes
a ServerHello, HelloRetryRequest or EncryptedExtensions carries, `ClientHandshake.receive`
returns bytes or raises HandshakeFailure (never DecodeError, ValueError, IndexError...),
and once it has refused a message, nothing that reads the engine's state afterwards (the
probe's result builder) meets an undecoded malformed extension.
"""

from __future__ import annotations

import os

from tests.hostile.tls import (
    TLS13_SUITE,
    Tls13Server,
    handshake_records,
    server_hello,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig
from tlsprobe.net.tcp import Target
from tlsprobe.probes.facts import result_from
from tlsprobe.wire.extensions import Extension
from tlsprobe.wire.handshake import decode_handshake, frame
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM, ClientHello

#: extension types a server's hello or EncryptedExtensions can carry, and some it cannot
TYPES = st.sampled_from([0, 5, 10, 11, 16, 22, 23, 35, 41, 42, 43, 44, 51, 0xFF01, 0x1234])
EXTENSIONS = st.lists(st.builds(Extension, TYPES, st.binary(max_size=12)), max_size=4)


def _start() -> tuple[ClientHandshake, ClientHello, bytes]:
    hs = ClientHandshake(ClientConfig(server_name="hostile.test"), stop_after_first_flight=True,
                         read_server_flight=True)
    raw = hs.start()[5:]
    hello = decode_handshake(raw).message
    assert isinstance(hello, ClientHello)
    return hs, hello, raw


def _outcome(hs: ClientHandshake, data: bytes) -> None:
    """Feed `data`; a failure must be a HandshakeFailure, and the result builder (which
    reads the hellos' extensions) must still work on the engine's state."""
    try:
        hs.receive(data)
    except HandshakeFailure as exc:
        assert exc.kind == "protocol"
    result_from(hs, Target("127.0.0.1", 443), "127.0.0.1")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exts=EXTENSIONS, hrr=st.booleans())
def test_any_hello_extensions(exts: list[Extension], hrr: bool) -> None:
    hs, ch, _ = _start()
    msg = server_hello(ch, suite=TLS13_SUITE, extensions=exts,
                       random=HELLO_RETRY_REQUEST_RANDOM if hrr else os.urandom(32))
    _outcome(hs, handshake_records(msg))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exts=EXTENSIONS)
def test_any_encrypted_extensions(exts: list[Extension]) -> None:
    hs, ch, raw = _start()
    tls = Tls13Server(ch, raw)
    body = b"".join(e.type.to_bytes(2, "big") + len(e.data).to_bytes(2, "big") + e.data
                    for e in exts)
    ee = tls.add(frame(8, len(body).to_bytes(2, "big") + body))
    _outcome(hs, tls.hello_and_flight([ee]))


def test_malformed_cookie_is_a_protocol_error_naming_the_field() -> None:
    hs, ch, _ = _start()
    msg = server_hello(ch, suite=TLS13_SUITE, random=HELLO_RETRY_REQUEST_RANDOM, extensions=[
        Extension(43, b"\x03\x04"), Extension(51, b"\x00\x17"), Extension(44, b"")])
    try:
        hs.receive(handshake_records(msg))
    except HandshakeFailure as exc:
        assert exc.kind == "protocol"
        assert str(exc).startswith("server sent a malformed HelloRetryRequest: cookie")
    else:
        raise AssertionError("an empty cookie was accepted")
    assert hs.messages.hrr is None  # never recorded: nothing reads it later
    out = hs.take_output()
    assert out[0] == 0x15 and out[5:] == b"\x02\x32"  # a fatal decode_error alert
