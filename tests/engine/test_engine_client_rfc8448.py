"""The TLS 1.3 client state machine against RFC 8448 section 3 ("Simple 1-RTT Handshake").

The engine is given the RFC's ClientHello and X25519 private key; fed the RFC's ServerHello
and encrypted server flight, it must verify the server's CertificateVerify and Finished and
answer with exactly the RFC's client Finished record (after its middlebox-compatibility
ChangeCipherSpec), then protect application data exactly as the RFC does. Tampered copies
of the server flight, re-encrypted under the RFC's server handshake key, must fail with
the matching error and a fatal alert encrypted under the client handshake key.
"""

from __future__ import annotations


import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tlsprobe import kex
from tlsprobe.engine import client as client_module
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import BuiltHello, ClientConfig
from tlsprobe.engine.keylog import parse_keylog
from tlsprobe.engine.protection import Tls13Protection
from tlsprobe.kex.ecdh import XShare
from tlsprobe.report.trace import TraceFormatter
from tlsprobe.wire.hello import ClientHello
from tlsprobe.wire.messages import NewSessionTicket

from tests.engine import engine_rfc8448 as v


CCS_RECORD = bytes.fromhex("140303000101")


def record(content_type: int, body: bytes, version: int = 0x0303) -> bytes:
    return bytes([content_type]) + version.to_bytes(2, "big") + len(body).to_bytes(2, "big") + body


@pytest.fixture
def rfc_engine(monkeypatch: pytest.MonkeyPatch) -> ClientHandshake:
    """A ClientHandshake whose ClientHello and key share are the RFC's."""
    hello = ClientHello.parse(v.CLIENT_HELLO[4:])
    private = X25519PrivateKey.from_private_bytes(v.CLIENT_X25519_PRIVATE)
    share = XShare(kex.REGISTRY[0x001D], private)  # type: ignore[arg-type]
    assert share.public == v.CLIENT_X25519_PUBLIC

    def built(config: ClientConfig, **kw: object) -> BuiltHello:
        return BuiltHello(hello, {0x001D: share})

    monkeypatch.setattr(client_module, "build_client_hello", built)
    config = ClientConfig(versions=(0x0304,), groups=(0x001D,))
    return ClientHandshake(config, stop_after_first_flight=False)


def server_plaintext() -> tuple[int, bytes]:
    """The server's encrypted flight opened with the RFC's server handshake key."""
    prot = Tls13Protection("AES-128-GCM", v.SERVER_HS_KEY, v.SERVER_HS_IV)
    return prot.decrypt_record(v.SERVER_HANDSHAKE_RECORD)


def reencrypt(plaintext: bytes) -> bytes:
    prot = Tls13Protection("AES-128-GCM", v.SERVER_HS_KEY, v.SERVER_HS_IV)
    return prot.encrypt(22, plaintext)


def test_rfc8448_full_handshake_bytes(rfc_engine: ClientHandshake) -> None:
    hs = rfc_engine
    first = hs.start()
    assert first == record(22, v.CLIENT_HELLO, 0x0301)
    out = hs.receive(record(22, v.SERVER_HELLO) + v.SERVER_HANDSHAKE_RECORD)
    assert out == CCS_RECORD + v.CLIENT_FINISHED_RECORD
    assert hs.handshake_complete and hs.done
    assert hs.verification.finished_verified is True and hs.verification.signature_verified is True
    assert hs.verification.signature_detail == "rsa_pss_rsae_sha256 (0x0804) CertificateVerify"
    assert hs._shared_secret == v.SHARED_SECRET
    keys = hs.session_keys()
    assert keys is not None and keys.tls13 and keys.hash_name == "sha256"
    assert keys.client_application_traffic_secret == v.CLIENT_AP_TRAFFIC
    assert keys.resumption_master_secret == v.RESUMPTION_MASTER
    logged = parse_keylog("\n".join(hs.keylog_lines)).secrets(hs.messages.hellos[0].random)
    assert logged is not None
    assert logged["CLIENT_HANDSHAKE_TRAFFIC_SECRET"] == v.CLIENT_HS_TRAFFIC
    assert logged["SERVER_HANDSHAKE_TRAFFIC_SECRET"] == v.SERVER_HS_TRAFFIC
    assert logged["SERVER_TRAFFIC_SECRET_0"] == v.SERVER_AP_TRAFFIC
    assert logged["EXPORTER_SECRET"] == v.EXPORTER_MASTER
    certificates = hs.verification.certificates
    assert len(certificates) == 1 and certificates[0][:2] == b"\x30\x82"

    # application data both ways, byte for byte
    hs.send_application_data(v.APPLICATION_PAYLOAD)
    assert hs.take_output() == v.CLIENT_APPLICATION_RECORD
    server_app = Tls13Protection("AES-128-GCM", v.SERVER_AP_KEY, v.SERVER_AP_IV)
    ticket = NewSessionTicket(30, b"\x2c" * 16, 0x12345678, b"\x00\x00").to_bytes()
    assert server_app.encrypt(22, ticket) and server_app.seq == v.SERVER_APPLICATION_SEQ
    nst = Tls13Protection("AES-128-GCM", v.SERVER_AP_KEY, v.SERVER_AP_IV).encrypt(22, ticket)
    assert hs.receive(nst + v.SERVER_APPLICATION_RECORD) == b""
    assert bytes(hs.application_data) == v.APPLICATION_PAYLOAD
    assert hs.messages.flight.new_session_ticket.ticket_lifetime == 30  # type: ignore[union-attr]


def test_rfc8448_trace_marks_decrypted_messages(rfc_engine: ClientHandshake) -> None:
    hs = rfc_engine
    hs.start()
    hs.receive(record(22, v.SERVER_HELLO) + v.SERVER_HANDSHAKE_RECORD)
    lines = list(TraceFormatter().lines(hs.events))
    heads = [ln for ln in lines if ", Handshake [" in ln or "ChangeCipherSpec" in ln]
    assert heads == [
        ">>> TLS 1.3, Handshake [length 00c4], ClientHello",
        "<<< TLS 1.3, Handshake [length 005a], ServerHello",
        "<<< TLS 1.3, Handshake [length 0028], EncryptedExtensions (decrypted)",
        "<<< TLS 1.3, Handshake [length 01bd], Certificate (decrypted)",
        "<<< TLS 1.3, Handshake [length 0088], CertificateVerify (decrypted)",
        "<<< TLS 1.3, Handshake [length 0024], Finished (decrypted)",
        ">>> TLS 1.3, ChangeCipherSpec [length 0001]",
        ">>> TLS 1.3, Handshake [length 0024], Finished (decrypted)",
    ]
    text = "\n".join(lines)
    assert "algorithm rsa_pss_rsae_sha256 (0x0804)" in text
    # the client Finished as dumped is the RFC's verify_data
    dump = lines[lines.index(heads[-1]) + 1:lines.index(heads[-1]) + 4]
    assert bytes.fromhex("".join(dump)).startswith(b"\x14\x00\x00\x20"
                                                   + v.CLIENT_FINISHED_VERIFY_DATA[:12])


def _tampered_flight(offset_from_end: int) -> bytes:
    content_type, plain = server_plaintext()
    assert content_type == 22
    data = bytearray(plain)
    data[len(data) - offset_from_end] ^= 0x01
    return reencrypt(bytes(data))


def test_rfc8448_bad_server_finished(rfc_engine: ClientHandshake) -> None:
    hs = rfc_engine
    hs.start()
    with pytest.raises(HandshakeFailure) as info:
        hs.receive(record(22, v.SERVER_HELLO) + _tampered_flight(1))  # last verify_data byte
    assert info.value.kind == "protocol"
    assert "server Finished is wrong" in str(info.value)
    assert hs.verification.finished_verified is False and hs.verification.signature_verified is True
    assert not hs.handshake_complete
    # a fatal decrypt_error alert under the client handshake key is queued for the server
    alert = hs.take_output()
    client_hs = Tls13Protection("AES-128-GCM", v.CLIENT_HS_KEY, v.CLIENT_HS_IV)
    assert client_hs.decrypt_record(alert) == (21, bytes([2, 51]))


def test_rfc8448_bad_certificate_verify(rfc_engine: ClientHandshake) -> None:
    hs = rfc_engine
    hs.start()
    _, plain = server_plaintext()
    cv_end = len(plain) - 36  # CertificateVerify ends where the 36-byte Finished starts
    data = bytearray(plain)
    data[cv_end - 1] ^= 0x80  # last signature byte
    with pytest.raises(HandshakeFailure) as info:
        hs.receive(record(22, v.SERVER_HELLO) + reencrypt(bytes(data)))
    assert "CertificateVerify" in str(info.value) and "does not verify" in str(info.value)
    assert hs.verification.signature_verified is False and hs.verification.finished_verified is None


def test_rfc8448_first_flight_only_sends_nothing(monkeypatch: pytest.MonkeyPatch,
                                                 rfc_engine: ClientHandshake) -> None:
    """read_server_flight: decrypt and verify the server's flight, then stop, silent."""
    hs = ClientHandshake(rfc_engine.config, stop_after_first_flight=True,
                         read_server_flight=True)
    hs.start()
    assert hs.receive(record(22, v.SERVER_HELLO) + v.SERVER_HANDSHAKE_RECORD) == b""
    assert hs.done and not hs.handshake_complete and hs.verification.finished_verified is True
    # the audit's mode: stop at the ServerHello, nothing decrypted
    audit = ClientHandshake(rfc_engine.config, stop_after_first_flight=True)
    audit.start()
    assert audit.receive(record(22, v.SERVER_HELLO) + v.SERVER_HANDSHAKE_RECORD) == b""
    assert audit.done and audit.first_flight_done and audit.verification.finished_verified is None
    assert audit.messages.flight.order == []


def test_rfc8448_unencrypted_flight_is_refused(rfc_engine: ClientHandshake) -> None:
    hs = rfc_engine
    hs.start()
    with pytest.raises(HandshakeFailure, match="EncryptedExtensions unencrypted"):
        hs.receive(record(22, v.SERVER_HELLO) + record(22, v.ENCRYPTED_EXTENSIONS))


def test_rfc8448_key_update(rfc_engine: ClientHandshake) -> None:
    """A server KeyUpdate(update_requested): new server keys, and our own KeyUpdate."""
    from tlsprobe.engine.keyschedule import next_traffic_secret, traffic_keys
    from tlsprobe.wire.messages import KeyUpdate
    hs = rfc_engine
    hs.start()
    hs.receive(record(22, v.SERVER_HELLO) + v.SERVER_HANDSHAKE_RECORD)
    server = Tls13Protection("AES-128-GCM", v.SERVER_AP_KEY, v.SERVER_AP_IV)
    out = hs.receive(server.encrypt(22, KeyUpdate(1).to_bytes()))
    client = Tls13Protection("AES-128-GCM", v.CLIENT_AP_KEY, v.CLIENT_AP_IV)
    assert client.decrypt_record(out) == (22, KeyUpdate(0).to_bytes())
    server_next = next_traffic_secret(v.SERVER_AP_TRAFFIC)
    server2 = Tls13Protection("AES-128-GCM", *traffic_keys(server_next, 16, 12))
    hs.receive(server2.encrypt(23, b"after the update"))
    assert bytes(hs.application_data) == b"after the update"
    hs.send_application_data(b"ours too")
    client_next = next_traffic_secret(v.CLIENT_AP_TRAFFIC)
    client2 = Tls13Protection("AES-128-GCM", *traffic_keys(client_next, 16, 12))
    assert client2.decrypt_record(hs.take_output()) == (23, b"ours too")
    # the old server key no longer opens anything
    with pytest.raises(HandshakeFailure, match="record decryption failed"):
        hs.receive(server.encrypt(23, b"stale"))
