"""Forms no local peer produces: explicit curves, unknown-version heuristics, compressed
certificates, OCSP multi, the empty messages, alerts and ChangeCipherSpec edge cases."""

from __future__ import annotations

import pytest

from tlsprobe.wire import (
    Alert,
    Certificate,
    CertificateEntry,
    CertificateStatus,
    CertificateVerify,
    ChangeCipherSpec,
    CompressedCertificate,
    DecodeError,
    ExplicitCurve,
    KeyUpdate,
    NewSessionTicket,
    ParseContext,
    ServerKeyExchange,
    Writer,
    decode_handshake,
    frame,
    parse_alerts,
)
from tlsprobe.wire import extensions as ext

from .helpers import check_annotations, find
from .test_openssl_fixtures import _run

TLS12_ECDHE = ParseContext(version=0x0303, key_exchange="ECDHE")

# secp256r1 domain parameters (SEC 2), sent explicitly as RFC 4492 explicit_prime
P256 = {
    "p": 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF,
    "b": 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B,
    "G": bytes.fromhex("046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296"
                       "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5"),
    "n": 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
}


def _v1(w: Writer, value: int | bytes) -> None:
    w.push_vector(1, value if isinstance(value, bytes) else value.to_bytes(
        (value.bit_length() + 7) // 8 or 1, "big"))


def _explicit_prime_params() -> bytes:
    w = Writer()
    for value in (P256["p"], P256["p"] - 3, P256["b"], P256["G"], P256["n"], 1):
        _v1(w, value)
    return w.data()


def _explicit_char2_params() -> bytes:  # sect163k1, pentanomial basis
    w = Writer()
    w.push_uint16(163)
    w.push_uint8(2)
    for k in (3, 6, 7):
        _v1(w, k)
    for value in (1, 1, b"\x04" + bytes(42), 0x04000000000000000000020108A2E0CC0D99F8A5EF, 2):
        _v1(w, value)
    return w.data()


@pytest.mark.parametrize("curve_type, params", [(1, _explicit_prime_params()),
                                                (2, _explicit_char2_params())])
def test_explicit_curves_are_reported_not_crashed_on(curve_type: int, params: bytes) -> None:
    point, signature = P256["G"], b"\x30" * 70
    body = bytes([curve_type]) + params + bytes([len(point)]) + point
    body_signed = body + b"\x04\x01" + len(signature).to_bytes(2, "big") + signature
    decoded = decode_handshake(frame(12, body_signed), TLS12_ECDHE, annotate=True)
    ske: ServerKeyExchange = decoded.message
    assert ske.explicit_curve == ExplicitCurve(curve_type, params)
    assert ske.named_curve is None and ske.public == point
    assert (ske.algorithm, ske.signature) == (0x0401, signature)
    assert ske.signed_params == body and ske.serialize() == body_signed
    assert find(decoded.annotations, "explicit_curve").length == len(params)
    check_annotations(frame(12, body_signed), decoded.annotations)


@pytest.mark.parametrize("body, match", [
    (b"\x04\x00\x1d\x01\x00", "unknown curve_type 4"),
    (b"\x02\x00\xa3\x03\x01\x03", "unknown ECBasisType 3"),
    (b"\x01\x00", "outside 1"),  # empty prime_p
    (b"\x03\x00\x1d\x00", "outside 1"),  # empty public point
    (b"\x03\x00\x1d\x01\x09\x04\x01\x00\x05abc", "need 5"),
])
def test_malformed_server_key_exchange(body: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        ServerKeyExchange.parse(body, TLS12_ECDHE)


@pytest.mark.parametrize("name", ["tls11_ecdhe", "tls12_client_auth", "tls10_dhe_client_auth"])
def test_unknown_version_signature_forms_are_recognised(name: str) -> None:
    run = _run(name)
    ske = run.one(12)
    blind = ParseContext(key_exchange=ske.key_exchange)  # version not known
    assert ServerKeyExchange.parse(ske.serialize(), blind) == ske
    cv = run.one(15, "client") if name != "tls11_ecdhe" else None
    if cv is not None:
        assert CertificateVerify.parse(cv.serialize(), ParseContext()) == cv
        cr = run.one(13)
        assert type(cr).parse(cr.serialize(), ParseContext()) == cr


def test_compressed_certificate() -> None:
    msg = CompressedCertificate(2, 1234, b"\x1b\x00brotli")
    raw = msg.to_bytes()
    assert raw[:4] == b"\x19\x00\x00\x10" and decode_handshake(raw).message == msg
    with pytest.raises(DecodeError, match="outside 1"):
        CompressedCertificate.parse(b"\x00\x02\x00\x04\xd2\x00\x00\x00")


def test_certificate_status_forms() -> None:
    multi = CertificateStatus(2, b"\x00\x00\x03abc")  # ocsp_multi: one 3-byte response
    assert CertificateStatus.parse(multi.serialize()) == multi
    with pytest.raises(DecodeError, match="outside 1"):
        CertificateStatus.parse(b"\x01\x00\x00\x00")


def test_certificate_lengths() -> None:
    tls12 = ParseContext(version=0x0303)
    with pytest.raises(DecodeError, match="outside 1"):
        Certificate.parse(b"\x00\x00\x03\x00\x00\x00", tls12)  # empty ASN.1Cert
    with pytest.raises(DecodeError) as exc:
        Certificate.parse(b"\x00\x00\x00\x05\x00\x00\x02ab\x00\x00", ParseContext(version=0x0304))
    assert exc.value.path.startswith("Certificate.certificate_list")
    cert = Certificate(b"\x01", [CertificateEntry(b"der", [ext.empty(18)])])
    assert Certificate.parse(cert.serialize(), ParseContext(version=0x0304)) == cert


def test_new_session_ticket_tls13_extensions() -> None:
    nst = NewSessionTicket(7200, b"ticket", 0x01020304, b"\x00", [ext.early_data(16384)])
    tls13 = ParseContext(version=0x0304)
    parsed = NewSessionTicket.parse(nst.serialize(), tls13)
    assert parsed == nst and parsed.extensions[0].decode("new_session_ticket") == 16384
    with pytest.raises(DecodeError, match="outside 1"):
        NewSessionTicket.parse(NewSessionTicket(1, b"", 2, b"").serialize(), tls13)
    raw = frame(4, nst.serialize())
    check_annotations(raw, decode_handshake(raw, tls13, annotate=True).annotations)


@pytest.mark.parametrize("msg_type", [0, 5, 14])
def test_empty_messages(msg_type: int) -> None:
    decoded = decode_handshake(frame(msg_type, b""))
    assert decoded.message.to_bytes() == frame(msg_type, b"")
    with pytest.raises(DecodeError):
        decode_handshake(frame(msg_type, b"\x00"))


def test_key_update_values() -> None:
    assert decode_handshake(frame(24, b"\x00")).message == KeyUpdate(0)
    notes = decode_handshake(frame(24, b"\x01"), annotate=True).annotations
    assert find(notes, "request_update").value == "update_requested (1)"
    assert decode_handshake(frame(24, b"\x07")).message == KeyUpdate(7)  # kept, not judged
    for body in (b"", b"\x00\x00"):
        with pytest.raises(DecodeError):
            decode_handshake(frame(24, body))


def test_alerts() -> None:
    alerts, notes = parse_alerts(b"\x02\x28\x01\x00", annotate=True)
    assert alerts == [Alert(2, 40), Alert(1, 0)] and alerts[0].is_fatal
    assert [(a.name, a.offset, a.value) for a in notes][:2] == [
        ("level", 0, "fatal (2)"), ("description", 1, "handshake_failure (40)")]
    assert Alert.parse(b"\x02\x28").serialize() == b"\x02\x28"
    for bad in (b"", b"\x02", b"\x02\x28\x00"):
        with pytest.raises(DecodeError):
            Alert.parse(bad)
    with pytest.raises(DecodeError, match="empty alert"):
        parse_alerts(b"")
    assert Alert(2, 0x99).description == 0x99  # unknown description kept raw


def test_change_cipher_spec() -> None:
    assert ChangeCipherSpec.parse(b"\x01") == ChangeCipherSpec()
    for bad, match in ((b"", "need 1"), (b"\x02", "is not 1"), (b"\x01\x01", "trailing")):
        with pytest.raises(DecodeError, match=match):
            ChangeCipherSpec.parse(bad)


def test_certificate_verify_legacy_form() -> None:
    cv = CertificateVerify(None, b"sig" * 40)
    tls10 = ParseContext(version=0x0301)
    assert CertificateVerify.parse(cv.serialize(), tls10) == cv
    assert cv.serialize()[:2] == (120).to_bytes(2, "big")
