"""Messages recorded from `openssl s_server` / `s_client -msg` on loopback (see
data/make_fixtures.py): PSK suites, anonymous (EC)DH, TLS 1.0/1.1 signatures, client
authentication, OCSP stapling, KeyUpdate, resumption and renegotiation. Parsed fields are
checked against what the protocol ties them to (signatures, tickets, Finished values)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509 import ocsp
from tests.lab_servers.certs import dh_numbers

from tlsprobe.registry import cipher_suite, hash_for_suite, parse_suite
from tlsprobe.wire import (
    Alert,
    ChangeCipherSpec,
    ClientHello,
    OcspStatus,
    ParseContext,
    decode_handshake,
)

from .helpers import check_annotations
from .test_messages import _verify

DATA = json.loads((Path(__file__).parent / "data" / "openssl_msgs.json").read_text())
SCENARIOS = sorted(k for k in DATA if not k.startswith("_"))
VERSIONS = {"TLSv1.3": 0x0304, "TLSv1.2": 0x0303, "TLSv1.1": 0x0302, "TLSv1": 0x0301}


class Run:
    def __init__(self, run: dict[str, Any]) -> None:
        self.version = VERSIONS[run["protocol"]]
        self.suite = parse_suite(run["cipher"])
        self.raw = [(m["from"], m["content"], bytes.fromhex(m["hex"])) for m in run["messages"]]

    def ctx(self, sender: str) -> ParseContext:
        return ParseContext(self.version, self.suite, cipher_suite(self.suite).kx,
                            is_server_message=sender == "server")

    def handshakes(self) -> list[tuple[str, bytes]]:
        return [(s, raw) for s, c, raw in self.raw if c == "Handshake"]

    def all(self, msg_type: int, sender: str | None = None) -> list[Any]:
        return [decode_handshake(raw, self.ctx(s)).message for s, raw in self.handshakes()
                if raw[0] == msg_type and sender in (None, s)]

    def one(self, msg_type: int, sender: str | None = None) -> Any:
        (found,) = self.all(msg_type, sender)
        return found

    def transcript(self, until: int, sender: str) -> bytes:
        """Concatenated messages before the first `until` message from `sender`."""
        out = b""
        for s, raw in self.handshakes():
            if raw[0] == until and s == sender:
                return out
            out += raw
        raise AssertionError("message not found")


def _run(name: str, index: int = 0) -> Run:
    entry = DATA[name]
    return Run(entry[index] if isinstance(entry, list) else entry)


def _all_runs() -> list[tuple[str, int]]:
    return [(n, i) for n in SCENARIOS
            for i in range(len(DATA[n]) if isinstance(DATA[n], list) else 1)]


@pytest.mark.parametrize("name, index", _all_runs())
def test_every_recorded_message(name: str, index: int) -> None:
    run = _run(name, index)
    for sender, content, raw in run.raw:
        if content == "Alert":
            assert Alert.parse(raw) == Alert(1, 0)  # close_notify from s_client's "Q"
        elif content == "ChangeCipherSpec":
            assert ChangeCipherSpec.parse(raw).serialize() == raw
        else:
            decoded = decode_handshake(raw, run.ctx(sender), annotate=True)
            assert type(decoded.message).__name__ != "UnknownHandshake"
            assert decoded.message.to_bytes() == raw
            check_annotations(raw, decoded.annotations)
            assert not [a for a in decoded.annotations if a.kind == "error"]


def _randoms(run: Run) -> bytes:
    return run.one(1, "client").random + run.one(2).random


@pytest.mark.parametrize("name", ["tls12_psk", "tls12_ecdhe_psk", "tls12_dhe_psk",
                                  "tls12_rsa_psk"])
def test_psk_key_exchanges(name: str) -> None:
    run = _run(name)
    ske, cke = run.one(12), run.one(16)
    assert ske.psk_identity_hint == b"fixture hint" and ske.signature is None
    assert cke.psk_identity == b"client1"
    kx = cipher_suite(run.suite).kx
    if kx == "ECDHE_PSK":
        assert (ske.named_curve, len(ske.public), len(cke.exchange_keys)) == (0x1D, 32, 32)
    elif kx == "DHE_PSK":
        assert int.from_bytes(ske.dh_p, "big") == dh_numbers("ffdhe2048")[0]
        assert len(cke.exchange_keys) == 256
    elif kx == "RSA_PSK":
        assert ske.signed_params == b"" and len(cke.exchange_keys) == 256  # 2048-bit RSA
    else:
        assert (kx, ske.signed_params, cke.exchange_keys) == ("PSK", b"", b"")


@pytest.mark.parametrize("name, kx", [("tls12_adh", "DHE"), ("tls12_aecdh", "ECDHE")])
def test_anonymous_key_exchange_is_unsigned(name: str, kx: str) -> None:
    ske = _run(name).one(12)
    assert ske.key_exchange == kx and ske.signature is None and ske.algorithm is None
    assert ske.public


@pytest.mark.parametrize("name", ["tls10_dhe_client_auth", "tls11_ecdhe", "tls12_client_auth",
                                  "tls12_ocsp"])
def test_server_key_exchange_signatures(name: str) -> None:
    run = _run(name)
    ske = run.one(12)
    assert (ske.algorithm is None) == (run.version < 0x0303)
    leaf = x509.load_der_x509_certificate(run.one(11, "server").certificates[0])
    _verify(leaf.public_key(), ske.algorithm, ske.signature, _randoms(run) + ske.signed_params)


@pytest.mark.parametrize("name", ["tls10_dhe_client_auth", "tls12_client_auth"])
def test_tls12_client_certificate_verify(name: str) -> None:
    run = _run(name)
    cr = run.one(13)
    if run.version < 0x0303:
        assert cr.supported_signature_algorithms is None
    else:
        assert 0x0804 in cr.supported_signature_algorithms
    client_cert = run.one(11, "client")
    assert x509.load_der_x509_certificate(client_cert.certificates[0]).subject.rfc4514_string() \
        == "CN=client"
    cv = run.one(15, "client")
    assert (cv.algorithm is None) == (run.version < 0x0303)
    key = x509.load_der_x509_certificate(client_cert.certificates[0]).public_key()
    _verify(key, cv.algorithm, cv.signature, run.transcript(15, "client"))


def test_tls13_client_certificate_verify() -> None:
    run = _run("tls13_client_auth")
    cr = run.one(13)
    assert cr.certificate_request_context == b""
    cert = run.one(11, "client")
    assert cert.certificate_request_context == cr.certificate_request_context
    cv = run.one(15, "client")
    digest = hashlib.new(hash_for_suite(run.suite).lower(), run.transcript(15, "client")).digest()
    content = b" " * 64 + b"TLS 1.3, client CertificateVerify\x00" + digest
    key = x509.load_der_x509_certificate(cert.certificates[0]).public_key()
    _verify(key, cv.algorithm, cv.signature, content)


def _check_ocsp(der: bytes, leaf_der: bytes) -> None:
    response = ocsp.load_der_ocsp_response(der)
    assert response.response_status == ocsp.OCSPResponseStatus.SUCCESSFUL
    assert response.serial_number == x509.load_der_x509_certificate(leaf_der).serial_number
    assert response.certificate_status == ocsp.OCSPCertStatus.GOOD


def test_ocsp_stapling_tls12_certificate_status() -> None:
    run = _run("tls12_ocsp")
    assert run.one(1, "client").extension(5).decode().status_type == 1
    status = run.one(22)
    assert status.status_type == 1
    _check_ocsp(status.response, run.one(11).certificates[0])


def test_ocsp_stapling_tls13_certificate_entry() -> None:
    run = _run("tls13_ocsp")
    leaf = run.one(11).certificate_list[0]
    (ext,) = leaf.extensions
    status = ext.decode("certificate")
    assert isinstance(status, OcspStatus) and status.status_type == 1
    _check_ocsp(status.response, leaf.cert_data)


def test_key_update() -> None:
    assert _run("tls13_keyupdate").one(24, "client").request_update == 1  # s_client "K"


def test_tls13_resumption_offers_the_ticket() -> None:
    first, second = _run("tls13_resumption", 0), _run("tls13_resumption", 1)
    tickets = [t.ticket for t in first.all(4)]
    ch: ClientHello = second.one(1)
    assert ch.extensions[-1].type == 41  # pre_shared_key must be last
    offered = ch.extensions[-1].decode()
    assert [i.identity for i in offered.identities] == [tickets[-1]]
    assert [len(b) for b in offered.binders] == [48]  # SHA-384 suite
    assert ch.extension(45).decode() == [1]  # psk_dhe_ke
    sh = second.one(2)
    assert sh.extension(41).decode("server_hello") == 0
    assert second.all(11) == []  # resumed: no Certificate


def test_renegotiation_binds_finished_values() -> None:
    run = _run("tls12_renegotiation")
    assert len(run.all(0)) == 1  # HelloRequest
    client_fin, server_fin = run.all(20, "client")[0], run.all(20, "server")[0]
    first_ch, second_ch = run.all(1)
    first_sh, second_sh = run.all(2)
    # OpenSSL signals RFC 5746 support in the first hello with the SCSV, not the extension
    assert first_ch.extension(0xFF01) is None and 0xFF in first_ch.cipher_suites
    assert second_ch.extension(0xFF01).decode() == client_fin.verify_data  # RFC 5746
    assert second_sh.extension(0xFF01).decode("server_hello") == (
        client_fin.verify_data + server_fin.verify_data)
    assert first_sh.extension(0xFF01).decode("server_hello") == b""


def test_client_hello_extensions_from_options() -> None:
    run = _run("tls12_maxfrag")
    ch = run.one(1)
    assert ch.server_name == "fixture.test"
    assert ch.alpn_protocols == [b"h2", b"http/1.1"]
    assert ch.extension(1).decode() == 2  # 2^10 = 1024
    assert run.one(2).extension(1).decode("server_hello") == 2
