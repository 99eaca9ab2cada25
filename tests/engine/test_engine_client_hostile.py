"""Servers that lie: a bad ServerKeyExchange signature, a bad Finished, a bad CertificateVerify,
an invalid key share. Each must be detected, named, and (through the CLI) exit with code 6.

The servers are scripted here on the engine's own primitives (PRF, key schedule, record
protection, wire messages, `cryptography` signatures), small enough to read: one TLS 1.2
ECDHE-RSA-AES128-GCM-SHA256 / x25519 server and one TLS 1.3 TLS_AES_128_GCM_SHA256 /
x25519 server. Their honest versions complete a handshake with the engine and check the
engine's own Finished, which proves the scripts right before they are made to lie.
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import threading
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.asymmetric.x25519 import (
    X25519PrivateKey,
    X25519PublicKey,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlsprobe.engine import prf
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.keyschedule import KeySchedule, Transcript
from tlsprobe.engine.protection import Tls13Protection, protections_from_key_block
from tlsprobe.engine.suites import suite_params
from tlsprobe.engine.verify import certificate_verify_input
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.certificate import Certificate, CertificateEntry, CertificateVerify
from tlsprobe.wire.context import ParseContext
from tlsprobe.wire.handshake import HandshakeReassembler
from tlsprobe.wire.hello import ClientHello, ServerHello
from tlsprobe.wire.keyexchange import ClientKeyExchange, ServerKeyExchange
from tlsprobe.wire.messages import (
    EncryptedExtensions,
    Finished,
    NewSessionTicket,
    ServerHelloDone,
)
from tlsprobe.wire.record import Record, RecordReader

PSS = padding.PSS(padding.MGF1(hashes.SHA256()), 32)


def flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x01])


class ScriptedServer:
    """Common record handling: plaintext records until the client's keys are known."""

    def __init__(self, cert_der: bytes, key: Any, lie: str | None = None) -> None:
        self.cert_der, self.key, self.lie = cert_der, key, lie
        self.reader = RecordReader()
        self.messages = HandshakeReassembler()
        self.transcript = Transcript()
        self.read_protection: Any = None
        self.alerts: list[bytes] = []
        self.client_finished_ok: bool | None = None
        self.server_random = os.urandom(32)
        self.x25519 = X25519PrivateKey.generate()

    def receive(self, data: bytes) -> bytes:
        out = bytearray()
        for rec in self.reader.feed(data):
            if rec.content_type == 20:
                self.on_client_ccs()
                continue
            content_type, payload = rec.content_type, rec.fragment
            if self.read_protection is not None and (rec.content_type == 23 or self.ccs_seen):
                content_type, payload = self.read_protection.decrypt(rec.content_type,
                                                                     rec.version, payload)
            if content_type == 21:
                self.alerts.append(payload)
            elif content_type == 22:
                for raw in self.messages.feed(payload):
                    out += self.on_message(raw)
        return bytes(out)

    ccs_seen = False

    def on_client_ccs(self) -> None:
        self.ccs_seen = True

    def on_message(self, raw: bytes) -> bytes:
        raise NotImplementedError

    def sign(self, data: bytes) -> bytes:
        return self.key.sign(data, PSS, hashes.SHA256())


class Tls12Server(ScriptedServer):
    """ECDHE-RSA-AES128-GCM-SHA256 with x25519; lies: ske_signature, finished, share."""

    suite = 0xC02F

    def on_message(self, raw: bytes) -> bytes:
        if raw[0] == 1:
            return self.first_flight(ClientHello.parse(raw[4:]), raw)
        if raw[0] == 16:
            self.transcript.add(raw)
            cke = ClientKeyExchange.parse(raw[4:], ParseContext(0x0303, key_exchange="ECDHE"))
            pms = self.x25519.exchange(X25519PublicKey.from_public_bytes(cke.exchange_keys))
            self.master = prf.master_secret(0x0303, "sha256", pms, self.client_random,
                                            self.server_random)
            params = suite_params(self.suite)
            assert params is not None
            kb = prf.key_block(0x0303, "sha256", self.master, self.client_random,
                               self.server_random, *params.key_material(0x0303))
            self.read_protection, self.write_protection = protections_from_key_block(
                params, kb, 0x0303)
            return b""
        if raw[0] == 20:
            expected = prf.verify_data(0x0303, "sha256", self.master,
                                       self.transcript.digest("sha256"), "client")
            self.client_finished_ok = hmac.compare_digest(expected, raw[4:])
            self.transcript.add(raw)
            verify = prf.verify_data(0x0303, "sha256", self.master,
                                     self.transcript.digest("sha256"), "server")
            if self.lie == "finished":
                verify = flip_last(verify)
            ccs = Record(20, 0x0303, b"\x01").to_bytes()
            return ccs + self.write_protection.encrypt(22, Finished(verify).to_bytes())
        return b""

    def first_flight(self, hello: ClientHello, raw: bytes) -> bytes:
        self.client_random = hello.random
        self.transcript.add(raw)
        public = bytes(32) if self.lie == "share" else self.x25519.public_key().public_bytes_raw()
        ske = ServerKeyExchange("ECDHE", curve_type=3, named_curve=0x001D, public=public)
        signature = self.sign(hello.random + self.server_random + ske.signed_params)
        if self.lie == "ske_signature":
            signature = flip_last(signature)
        ske = ServerKeyExchange("ECDHE", curve_type=3, named_curve=0x001D, public=public,
                                algorithm=0x0804, signature=signature)
        flight = [ServerHello(0x0303, self.server_random, b"", self.suite, 0, []).to_bytes(),
                  Certificate(None, [CertificateEntry(self.cert_der)]).to_bytes(),
                  ske.to_bytes(), ServerHelloDone().to_bytes()]
        for message in flight:
            self.transcript.add(message)
        return Record(22, 0x0303, b"".join(flight)).to_bytes()


class Tls13Server(ScriptedServer):
    """TLS_AES_128_GCM_SHA256 with x25519; lies: certificate_verify, finished."""

    def on_message(self, raw: bytes) -> bytes:
        if raw[0] == 1:
            return self.first_flight(ClientHello.parse(raw[4:]), raw)
        if raw[0] == 20:
            base = self.ks.client_handshake_traffic_secret or b""
            expected = self.ks.verify_data(self.ks.finished_key(base),
                                           self.transcript.digest("sha256"))
            self.client_finished_ok = hmac.compare_digest(expected, raw[4:])
            self.transcript.add(raw)
            key, iv = self.ks.traffic_keys(self.ks.server_application_traffic_secret_0 or b"",
                                           16, 12)
            ticket = NewSessionTicket(300, b"ticket", 7, b"\x00").to_bytes()
            return Tls13Protection("AES-128-GCM", key, iv).encrypt(22, ticket)
        return b""

    def first_flight(self, hello: ClientHello, raw: bytes) -> bytes:
        share = next(e.key_exchange for e in hello.key_shares if e.group == 0x001D)
        shared = self.x25519.exchange(X25519PublicKey.from_public_bytes(share))
        public = self.x25519.public_key().public_bytes_raw()
        sh = ServerHello(0x0303, self.server_random, hello.legacy_session_id, 0x1301, 0,
                         [ext.supported_versions_server(0x0304),
                          ext.key_share_server(0x001D, public)]).to_bytes()
        self.transcript.add(raw)
        self.transcript.add(sh)
        self.ks = KeySchedule("sha256")
        self.ks.handshake(shared, self.transcript.digest("sha256"))
        key, iv = self.ks.traffic_keys(self.ks.server_handshake_traffic_secret or b"", 16, 12)
        write = Tls13Protection("AES-128-GCM", key, iv)
        key, iv = self.ks.traffic_keys(self.ks.client_handshake_traffic_secret or b"", 16, 12)
        self.read_protection = Tls13Protection("AES-128-GCM", key, iv)
        out = Record(22, 0x0303, sh).to_bytes()
        for message in (EncryptedExtensions([]).to_bytes(),
                        Certificate(b"", [CertificateEntry(self.cert_der)]).to_bytes()):
            self.transcript.add(message)
            out += write.encrypt(22, message)
        signature = self.sign(certificate_verify_input(self.transcript.digest("sha256")))
        if self.lie == "certificate_verify":
            signature = flip_last(signature)
        cv = CertificateVerify(0x0804, signature).to_bytes()
        self.transcript.add(cv)
        out += write.encrypt(22, cv)
        verify = self.ks.verify_data(
            self.ks.finished_key(self.ks.server_handshake_traffic_secret or b""),
            self.transcript.digest("sha256"))
        if self.lie == "finished":
            verify = flip_last(verify)
        fin = Finished(verify).to_bytes()
        self.transcript.add(fin)
        self.ks.application(self.transcript.digest("sha256"))
        return out + write.encrypt(22, fin)


@pytest.fixture(scope="module")
def rsa_identity(certs: Any) -> tuple[bytes, Any]:
    files = certs["rsa"]
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    key = serialization.load_pem_private_key(files.key.read_bytes(), None)
    return cert.public_bytes(serialization.Encoding.DER), key


def engine(versions: tuple[int, ...]) -> ClientHandshake:
    return ClientHandshake(ClientConfig(versions=versions, groups=(0x001D,)),
                           stop_after_first_flight=False)


def converse(server: ScriptedServer, hs: ClientHandshake) -> ClientHandshake:
    """Run the engine against a scripted server in memory until it is done or fails."""
    to_server = hs.start()
    for _ in range(10):
        to_client = server.receive(to_server)
        if not to_client or hs.done:
            break
        to_server = hs.receive(to_client)
    return hs


@pytest.mark.parametrize("server_cls, versions", [(Tls12Server, (0x0303,)),
                                                  (Tls13Server, (0x0304,))])
def test_honest_scripted_servers_complete(rsa_identity, server_cls, versions) -> None:
    server = server_cls(*rsa_identity)
    hs = converse(server, engine(versions))
    assert hs.handshake_complete and hs.verification.finished_verified
    assert hs.verification.signature_verified
    assert server.client_finished_ok is True  # the engine's Finished is right, too


@pytest.mark.parametrize("server_cls, versions, lie, words, field", [
    (Tls12Server, (0x0303,), "ske_signature", ("ServerKeyExchange signature: "
     "rsa_pss_rsae_sha256 (0x0804) signature does not verify"), "signature_verified"),
    (Tls12Server, (0x0303,), "finished", "server Finished is wrong", "finished_verified"),
    (Tls13Server, (0x0304,), "certificate_verify", ("CertificateVerify: "
     "rsa_pss_rsae_sha256 (0x0804) signature does not verify"), "signature_verified"),
    (Tls13Server, (0x0304,), "finished", "server Finished is wrong", "finished_verified"),
])
def test_lies_are_detected(rsa_identity, server_cls, versions, lie, words, field) -> None:
    server = server_cls(*rsa_identity, lie=lie)
    hs = engine(versions)
    with pytest.raises(HandshakeFailure) as info:
        converse(server, hs)
    assert info.value.kind == "protocol" and words in str(info.value)
    assert getattr(hs.verification, field) is False and not hs.handshake_complete


def test_tls12_bad_finished_gets_decrypt_error_alert(rsa_identity) -> None:
    server = Tls12Server(*rsa_identity, lie="finished")
    hs = engine((0x0303,))
    answer = server.receive(hs.receive(server.receive(hs.start())))
    assert server.client_finished_ok is True  # the engine's side was right
    with pytest.raises(HandshakeFailure):
        hs.receive(answer)
    assert hs.verification.finished_verified is False and not hs.handshake_complete
    assert hs.verification.signature_verified is True
    server.receive(hs.take_output())
    assert server.alerts == [bytes([2, 51])]  # decrypt_error, encrypted under our key


def test_invalid_server_share_is_a_finding(rsa_identity) -> None:
    server = Tls12Server(*rsa_identity, lie="share")
    hs = engine((0x0303,))
    with pytest.raises(HandshakeFailure) as info:
        converse(server, hs)
    assert "invalid server key exchange" in str(info.value) and "x25519" in str(info.value)
    assert hs.verification.share_problem and "low-order" in hs.verification.share_problem
    assert hs.verification.signature_verified is True  # the lie was signed correctly


# -- the same lies over a socket, through the CLI ------------------------------------------
def serve_once(server: ScriptedServer) -> tuple[int, threading.Thread]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def run() -> None:
        conn, _ = listener.accept()
        conn.settimeout(5)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                answer = server.receive(data)
                if answer:
                    conn.sendall(answer)
        except OSError:
            pass
        finally:
            conn.close()
            listener.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return port, thread


@pytest.mark.parametrize("server_cls, flag, lie, field, words", [
    (Tls12Server, "--tls1_2", "ske_signature", "signature_verified",
     "ServerKeyExchange signature"),
    (Tls12Server, "--tls1_2", "finished", "finished_verified", "server Finished is wrong"),
    (Tls13Server, "--tls1_3", "finished", "finished_verified", "server Finished is wrong"),
])
def test_cli_reports_lies_with_exit_6(run_cli, rsa_identity, server_cls, flag, lie, field,
                                      words) -> None:
    server = server_cls(*rsa_identity, lie=lie)
    port, thread = serve_once(server)
    res = run_cli(f"127.0.0.1:{port}", flag, "--groups", "x25519", "--json", "--timeout", "5",
                  "--no-verify")
    thread.join(5)
    assert res.returncode == 6, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert words in res.stderr and f"127.0.0.1:{port}" in res.stderr
    data = json.loads(res.stdout)
    assert data[field] is False and data["handshake_complete"] is False
    assert data["error_kind"] == "protocol"
    # the engine told the server why it gave up
    assert server.alerts and server.alerts[-1] == bytes([2, 51])


def test_cli_reports_invalid_share_as_finding(run_cli, rsa_identity) -> None:
    server = Tls12Server(*rsa_identity, lie="share")
    port, thread = serve_once(server)
    res = run_cli(f"127.0.0.1:{port}", "--tls1_2", "--groups", "x25519", "--json",
                  "--timeout", "5", "--no-verify")
    thread.join(5)
    assert res.returncode == 6 and "Traceback" not in res.stderr
    kx = json.loads(res.stdout)["key_exchange"]
    assert kx["valid"] is False and "low-order" in kx["problem"]
    assert kx["group"]["name"] == "x25519" and kx["server_share_bytes"] == 32


def test_suite_the_engine_cannot_run_stops_cleanly(rsa_identity, run_cli) -> None:
    """A suite without record-protection parameters here (Camellia): the first flight is
    read and its signature checked, then the probe stops, reporting why; no error."""
    server = Tls12Server(*rsa_identity)
    server.suite = 0xC076  # TLS_ECDHE_RSA_WITH_CAMELLIA_128_CBC_SHA256
    hs = ClientHandshake(ClientConfig(versions=(0x0303,), groups=(0x001D,),
                                      cipher_suites_12=(0xC076,)),
                         stop_after_first_flight=False)
    assert hs.receive(server.receive(hs.start())) == b""
    assert hs.done and not hs.handshake_complete and hs.verification.signature_verified is True
    assert hs.incomplete_reason == ("no record protection for "
                                    "TLS_ECDHE_RSA_WITH_CAMELLIA_128_CBC_SHA256 (0xc076)")
    server = Tls12Server(*rsa_identity)
    server.suite = 0xC076
    port, thread = serve_once(server)
    res = run_cli(f"127.0.0.1:{port}", "--tls1_2", "--ciphers", "0xc076", "--groups", "x25519",
                  "--no-verify", "--timeout", "5")
    thread.join(5)
    assert res.returncode == 0, res.stderr
    assert "stopped after the server's first flight: no record protection for" in res.stdout


# -- any damage to the server's bytes ends in HandshakeFailure, never another exception ----
@settings(max_examples=int(os.environ.get("TLSPROBE_FUZZ_EXAMPLES", "60")), deadline=None,
          database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tls13=st.booleans(), flight=st.integers(0, 1), where=st.floats(0, 1),
       how=st.sampled_from(["flip", "cut", "junk", "zero"]), value=st.integers(1, 255))
def test_damaged_server_bytes_raise_handshake_failure(rsa_identity, tls13, flight, where, how,
                                                      value) -> None:
    server = (Tls13Server if tls13 else Tls12Server)(*rsa_identity)
    hs = engine((0x0304,) if tls13 else (0x0303,))
    to_server = hs.start()
    try:
        for n in range(2):
            answer = server.receive(to_server)  # the honest script: never damaged input
            if n == flight:
                answer = damage(answer, where, how, value)
            to_server = hs.receive(answer)
            if hs.done:
                break
        hs.connection_closed()
    except HandshakeFailure as exc:
        # "limit": a flipped high byte of a handshake length declares more than
        # --max-message allows, our own bound (as in tests/wire/test_fuzz_codec.py)
        assert exc.kind in ("alert", "protocol", "closed", "limit") and "\n" not in str(exc)
        assert not hs.handshake_complete
    else:
        assert hs.handshake_complete  # damage the engine accepted must have been harmless


def damage(data: bytes, where: float, how: str, value: int) -> bytes:
    at = int(where * (len(data) - 1))
    if how == "flip":
        return data[:at] + bytes([data[at] ^ value]) + data[at + 1:]
    if how == "cut":
        return data[:at]
    if how == "junk":
        return data[:at] + bytes([value]) * 7 + data[at:]
    return data[:at] + bytes(len(data) - at)
