"""Every other handshake message, from real OpenSSL handshakes (TLS 1.3 messages in clear
through the ssl message callback): round trips, exact annotation offsets, and the parsed
fields proven right by verifying the signatures over them with `cryptography`."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding
from tests.lab_servers.certs import dh_numbers

from tlsprobe.registry import hash_for_suite, sigscheme_label
from tlsprobe.wire import (
    Certificate,
    CertificateRequest,
    CertificateVerify,
    ClientKeyExchange,
    EncryptedExtensions,
    Finished,
    NewSessionTicket,
    ParseContext,
    ServerHelloDone,
    ServerKeyExchange,
    decode_handshake,
)

from .conftest import ctx_for
from .helpers import check_annotations, find

CONFIGS = ["tls13", "tls13_hrr", "tls13_ecdsa", "tls12_ecdhe", "tls12_ecdhe_p256", "tls12_dhe",
           "tls12_rsa", "tls12_downgrade", "tls10_ecdhe"]


def _decode(hs: Any, msg_type: int, sender: str = "server", index: int = 0,
            annotate: bool = False) -> Any:
    raw = hs.of_type(msg_type, sender)[index]
    return decode_handshake(raw, ctx_for(hs, sender), annotate=annotate)


def _verify(public_key: Any, scheme: int | None, signature: bytes, data: bytes) -> None:
    """Raises InvalidSignature unless `signature` signs `data` (TLS 1.0-1.3 schemes)."""
    if scheme is None:  # TLS 1.0/1.1 RSA: PKCS#1 over MD5 || SHA-1, no DigestInfo
        digest = public_key.recover_data_from_signature(signature, padding.PKCS1v15(), None)
        assert digest == hashlib.md5(data).digest() + hashlib.sha1(data).digest()
        return
    algorithm = {4: hashes.SHA256(), 5: hashes.SHA384(), 6: hashes.SHA512()}
    if 0x0804 <= scheme <= 0x0806:
        h = algorithm[scheme - 0x0800]
        public_key.verify(signature, data, padding.PSS(padding.MGF1(h), h.digest_size), h)
    elif scheme & 0xFF == 1:
        public_key.verify(signature, data, padding.PKCS1v15(), algorithm[scheme >> 8])
    elif scheme & 0xFF == 3:
        public_key.verify(signature, data, ec.ECDSA(algorithm[scheme >> 8]))
    else:
        raise AssertionError(f"scheme 0x{scheme:04x} not handled by the test")


def _leaf_key(hs: Any) -> Any:
    cert = _decode(hs, 11).message
    return x509.load_der_x509_certificate(cert.certificates[0]).public_key()


@pytest.mark.parametrize("name", CONFIGS)
def test_every_message_round_trips_and_annotates(handshake, name: str) -> None:
    hs = handshake(name)
    for sender, raw in hs.messages:
        decoded = decode_handshake(raw, ctx_for(hs, sender), annotate=True)
        assert type(decoded.message).__name__ != "UnknownHandshake"
        assert decoded.message.to_bytes() == raw
        assert type(decoded.message).parse(raw[4:], ctx_for(hs, sender)) == decoded.message
        check_annotations(raw, decoded.annotations)
        assert decoded.annotations[0].name == "msg_type"


@pytest.mark.parametrize("name", ["tls12_ecdhe", "tls12_ecdhe_p256", "tls10_ecdhe"])
def test_server_key_exchange_ecdhe(handshake, name: str) -> None:
    hs = handshake(name)
    raw = hs.one(12)
    decoded = _decode(hs, 12, annotate=True)
    ske: ServerKeyExchange = decoded.message
    group, size = (0x17, 65) if name == "tls12_ecdhe_p256" else (0x1D, 32)
    assert (ske.key_exchange, ske.curve_type, ske.named_curve) == ("ECDHE", 3, group)
    assert len(ske.public) == size  # type: ignore[arg-type]
    notes = decoded.annotations
    assert (find(notes, "curve_type").offset, find(notes, "curve_type").value) == (
        4, "named_curve (3)")
    named = find(notes, "named_curve")
    assert (named.offset, named.length) == (5, 2) and raw[5:7] == group.to_bytes(2, "big")
    assert named.value == ("x25519 (0x001d)" if group == 0x1D else "secp256r1 (0x0017)")
    plen = find(notes, "public_length")
    assert (plen.offset, plen.value, plen.kind) == (7, f"{size} (0x{size:x})", "len")
    key = find(notes, "public")
    assert (key.offset, key.length, key.value, key.kind) == (8, size, f"{size} bytes", "bytes")
    assert raw[8:8 + size] == ske.public
    assert ske.signed_params == raw[4:8 + size]
    if name == "tls10_ecdhe":
        assert ske.algorithm is None
        assert find(notes, "signature_length").offset == 8 + size
    else:
        alg = find(notes, "algorithm")
        assert alg.offset == 8 + size and alg.value == sigscheme_label(ske.algorithm)
        assert find(notes, "signature_length").offset == 10 + size
    randoms = _decode(hs, 1, "client").message.random + _decode(hs, 2).message.random
    _verify(_leaf_key(hs), ske.algorithm, ske.signature, randoms + ske.signed_params)


def test_server_key_exchange_dhe(handshake) -> None:
    hs = handshake("tls12_dhe")
    ske: ServerKeyExchange = _decode(hs, 12).message
    p, g = dh_numbers("ffdhe2048")
    assert int.from_bytes(ske.dh_p, "big") == p and int.from_bytes(ske.dh_g, "big") == g
    assert 1 < int.from_bytes(ske.public, "big") < p - 1  # dh_Ys
    notes = _decode(hs, 12, annotate=True).annotations
    assert find(notes, "dh_p_length").offset == 4 and find(notes, "dh_p").offset == 6
    assert find(notes, "dh_p").length == 256
    randoms = _decode(hs, 1, "client").message.random + _decode(hs, 2).message.random
    _verify(_leaf_key(hs), ske.algorithm, ske.signature, randoms + ske.signed_params)
    with pytest.raises(InvalidSignature):  # a wrong signed_params must not verify
        _verify(_leaf_key(hs), ske.algorithm, ske.signature, randoms + ske.signed_params[1:])


@pytest.mark.parametrize("name, kx, size, len_size", [
    ("tls12_ecdhe", "ECDHE", 32, 1), ("tls12_ecdhe_p256", "ECDHE", 65, 1),
    ("tls10_ecdhe", "ECDHE", 32, 1), ("tls12_dhe", "DHE", 256, 2), ("tls12_rsa", "RSA", 256, 2),
])
def test_client_key_exchange(handshake, name: str, kx: str, size: int, len_size: int) -> None:
    hs = handshake(name)
    raw = hs.one(16, "client")
    decoded = _decode(hs, 16, "client", annotate=True)
    cke: ClientKeyExchange = decoded.message
    assert (cke.key_exchange, len(cke.exchange_keys), cke.psk_identity) == (kx, size, None)
    assert raw[4 + len_size:] == cke.exchange_keys
    length = decoded.annotations[2]
    assert (length.offset, length.length, length.kind) == (4, len_size, "len")
    assert length.value == f"{size} (0x{size:x})"
    key = decoded.annotations[3]
    assert (key.offset, key.length, key.kind) == (4 + len_size, size, "bytes")


def test_client_key_exchange_without_context_stays_raw(handshake) -> None:
    hs = handshake("tls12_ecdhe")
    raw = hs.one(16, "client")
    cke = decode_handshake(raw).message
    assert cke == ClientKeyExchange(None, raw[4:]) and cke.to_bytes() == raw
    ske = decode_handshake(hs.one(12)).message
    assert ske == ServerKeyExchange(None, raw=hs.one(12)[4:]) and ske.signed_params == b""


def test_rsa_premaster_ssl3_and_unknown_version() -> None:
    body = b"\x5a" * 128
    ssl3 = ClientKeyExchange.parse(body, ParseContext(version=0x0300, key_exchange="RSA"))
    assert ssl3.ssl3 and ssl3.exchange_keys == body and ssl3.serialize() == body
    tls = ClientKeyExchange.parse(b"\x00\x80" + body, ParseContext(key_exchange="RSA"))
    assert not tls.ssl3 and tls.exchange_keys == body  # version unknown: length recognised
    guessed = ClientKeyExchange.parse(body, ParseContext(key_exchange="RSA"))
    assert guessed.ssl3 and guessed.serialize() == body


@pytest.mark.parametrize("name", ["tls12_ecdhe", "tls12_dhe", "tls12_rsa", "tls10_ecdhe"])
def test_tls12_certificate_and_finished(handshake, name: str, certs) -> None:
    hs = handshake(name)
    cert: Certificate = _decode(hs, 11).message
    assert cert.certificate_request_context is None and not cert.tls13
    chain = x509.load_pem_x509_certificates(certs["rsa"].chain.read_bytes())
    assert [x509.load_der_x509_certificate(d) for d in cert.certificates] == chain
    notes = _decode(hs, 11, annotate=True).annotations
    assert find(notes, "certificate_list_length").offset == 4
    first = find(notes, "certificate_list[0].cert_data")
    assert first.offset == 10 and first.length == len(cert.certificates[0])
    assert isinstance(_decode(hs, 14).message, ServerHelloDone)
    fin: Finished = _decode(hs, 20, "client").message
    assert len(fin.verify_data) == 12
    ticket: NewSessionTicket = _decode(hs, 4).message
    assert not ticket.tls13 and ticket.ticket_lifetime > 0 and ticket.ticket


def test_tls12_certificate_request(handshake) -> None:
    hs = handshake("tls12_ecdhe")
    cr: CertificateRequest = _decode(hs, 13).message
    assert cr.certificate_request_context is None
    assert set(cr.certificate_types) <= {1, 2, 64} and cr.certificate_types
    assert 0x0804 in cr.supported_signature_algorithms  # type: ignore[operator]
    client_cert: Certificate = _decode(hs, 11, "client").message
    assert client_cert.certificate_list == []  # the client had none to send


def test_tls13_server_flight(handshake) -> None:
    hs = handshake("tls13")
    ee: EncryptedExtensions = _decode(hs, 8).message
    assert ee.extension(16).decode("encrypted_extensions") == [b"http/1.1"]
    cr: CertificateRequest = _decode(hs, 13).message
    assert cr.certificate_request_context == b""
    assert 0x0804 in cr.extensions[[e.type for e in cr.extensions].index(13)].decode(
        "certificate_request")
    cert: Certificate = _decode(hs, 11).message
    assert cert.tls13 and cert.certificate_request_context == b""
    assert all(e.extensions == [] for e in cert.certificate_list)
    client_cert: Certificate = _decode(hs, 11, "client").message
    assert client_cert.tls13 and client_cert.certificate_list == []
    fin: Finished = _decode(hs, 20).message
    assert len(fin.verify_data) == 48  # SHA-384 suite
    tickets = [_decode(hs, 4, index=i).message for i in range(2)]
    assert all(t.tls13 and t.ticket_age_add is not None for t in tickets)
    assert tickets[0].ticket_nonce != tickets[1].ticket_nonce


@pytest.mark.parametrize("name", ["tls13", "tls13_ecdsa", "tls13_hrr"])
def test_tls13_certificate_verify_signature(handshake, name: str) -> None:
    hs = handshake(name)
    decoded = _decode(hs, 15, annotate=True)
    cv: CertificateVerify = decoded.message
    assert find(decoded.annotations, "algorithm").offset == 4
    assert find(decoded.annotations, "algorithm").value == sigscheme_label(cv.algorithm)
    suite = _decode(hs, 2, index=-1).message.cipher_suite
    h = hashlib.new(hash_for_suite(suite).lower())
    for i, (_, raw) in enumerate(hs.messages):
        if raw[0] == 15:
            break
        if name == "tls13_hrr" and i == 0:  # RFC 8446 4.4.1: ClientHello1 -> message_hash
            first = hashlib.new(h.name, raw).digest()
            raw = b"\xfe\x00\x00" + bytes([len(first)]) + first
            assert type(decode_handshake(raw).message).__name__ == "MessageHash"
        h.update(raw)
    content = b" " * 64 + b"TLS 1.3, server CertificateVerify\x00" + h.digest()
    _verify(_leaf_key(hs), cv.algorithm, cv.signature, content)
