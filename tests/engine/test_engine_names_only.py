"""ClientHandshake(names_only=True): the group audit's handshakes read what the server
names and compute nothing (scan start-up, issue 35: a group audit imports no
`cryptography`).

After a HelloRetryRequest no second hello is built (no key share, no transcript hash);
in a TLS 1.2 first flight the certificates are bounded but not parsed and the
ServerKeyExchange's signature and point are not checked, so the group it names is read
even where the full engine refuses the flight. Each test shows the ordinary engine's
answer to the same bytes beside it.
"""

from __future__ import annotations

import os

import pytest

from tests.hostile.tls import (
    SECP256R1,
    X25519,
    certificate_12,
    handshake_records,
    hello_retry_request,
    identity,
    server_hello_12,
    server_hello_done,
    ske_ecdhe,
)
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure, Limits
from tlsprobe.engine.config import TLS12, TLS13, ClientConfig
from tlsprobe.wire.handshake import decode_handshake
from tlsprobe.wire.hello import ClientHello


def _start(names_only: bool, config: ClientConfig,
           limits: Limits | None = None) -> tuple[ClientHandshake, ClientHello]:
    hs = ClientHandshake(config, stop_after_first_flight=True, names_only=names_only,
                         limits=limits)
    hello = decode_handshake(hs.start()[5:]).message
    assert isinstance(hello, ClientHello)
    return hs, hello


def _tls12_flight(ch: ClientHello, ders: list[bytes], **ske: object) -> bytes:
    random = os.urandom(32)
    return handshake_records(server_hello_12(ch, random=random), certificate_12(ders),
                             ske_ecdhe(ch, random, **ske),  # type: ignore[arg-type]
                             server_hello_done())


TLS12_ECDHE = ClientConfig(versions=(TLS12,), groups=(X25519, SECP256R1),
                           cipher_suites_12=(0xC02B,))


def test_a_hello_retry_request_ends_a_names_only_handshake() -> None:
    config = ClientConfig(versions=(TLS13,), groups=(X25519, SECP256R1), key_share_groups=())
    hs, ch = _start(True, config)
    out = hs.receive(handshake_records(hello_retry_request(ch, group=SECP256R1)))
    assert out == b"" and hs.done
    assert hs.messages.hrr is not None and hs.messages.hrr.hrr_selected_group == SECP256R1
    # the ordinary engine answers with a second ClientHello carrying a secp256r1 share
    hs, ch = _start(False, config)
    out = hs.receive(handshake_records(hello_retry_request(ch, group=SECP256R1)))
    assert out[:1] == b"\x16" and not hs.done


def test_an_unparsable_certificate_does_not_hide_the_named_group() -> None:
    hs, ch = _start(True, TLS12_ECDHE)
    hs.receive(_tls12_flight(ch, [b"\x30\x03\x02\x01\x00"], group=SECP256R1))
    assert hs.done and hs.key_exchange() is not None
    assert hs.key_exchange().group == SECP256R1
    assert hs.verification.signature_verified is None   # not checked, not claimed
    hs, ch = _start(False, TLS12_ECDHE)
    with pytest.raises(HandshakeFailure, match="not a parsable DER certificate"):
        hs.receive(_tls12_flight(ch, [b"\x30\x03\x02\x01\x00"], group=SECP256R1))


def test_a_bad_signature_is_not_checked_by_a_names_only_handshake() -> None:
    hs, ch = _start(True, TLS12_ECDHE)
    hs.receive(_tls12_flight(ch, [identity().der], bad_signature=True))
    assert hs.done and hs.key_exchange().group == X25519
    assert hs.verification.signature_verified is None
    hs, ch = _start(False, TLS12_ECDHE)
    with pytest.raises(HandshakeFailure, match="ServerKeyExchange signature"):
        hs.receive(_tls12_flight(ch, [identity().der], bad_signature=True))


def test_the_chain_is_still_bounded() -> None:
    hs, ch = _start(True, TLS12_ECDHE, Limits(max_chain=2))
    with pytest.raises(HandshakeFailure, match="more than tlsprobe's limit of 2 \\(--max-chain"):
        hs.receive(_tls12_flight(ch, [identity().der] * 3))
