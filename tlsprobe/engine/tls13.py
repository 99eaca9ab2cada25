"""The TLS 1.3 half of the client (RFC 8446): from the ServerHello to the client Finished.

After the ServerHello the key schedule yields the handshake traffic keys; the server's
encrypted flight (EncryptedExtensions, optional CertificateRequest, Certificate,
CertificateVerify, Finished) is decrypted by the Flow as it arrives and checked here in
order: the CertificateVerify signature over the transcript, then the server Finished MAC.
The client answers with the middlebox-compatibility ChangeCipherSpec, an empty Certificate
when one was requested, and its Finished; NewSessionTicket and KeyUpdate are read after.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from tlsprobe import registry
from tlsprobe.engine import keylog
from tlsprobe.engine.common import (
    BAD_CERTIFICATE,
    DECODE_ERROR,
    DECRYPT_ERROR,
    ILLEGAL_PARAMETER,
    UNEXPECTED_MESSAGE,
    message_label,
)
from tlsprobe.engine.keyschedule import KeySchedule, tls13_hash_name
from tlsprobe.engine.protection import Tls13Protection
from tlsprobe.engine.suites import SuiteParams, suite_params
from tlsprobe.engine.verify import (
    SignatureError,
    UnsupportedKey,
    certificate_verify_input,
    leaf_public_key,
    verify_scheme,
)
from tlsprobe.registry import HandshakeType as HT
from tlsprobe.session.flow import MessageEvent
from tlsprobe.wire.certificate import Certificate, CertificateRequest, CertificateVerify
from tlsprobe.wire.hello import ServerHello
from tlsprobe.wire.messages import Finished, KeyUpdate

if TYPE_CHECKING:
    from tlsprobe.engine.client import ClientHandshake

# What the client waits for next
WAIT_EE, WAIT_CERT, WAIT_CV, WAIT_FINISHED, CONNECTED = (
    "EncryptedExtensions", "Certificate", "CertificateVerify", "Finished", "connected")


class Tls13Client:
    """Key schedule and message checks of one TLS 1.3 handshake, driven by ClientHandshake."""

    tls13 = True

    def __init__(self, hs: ClientHandshake, sh: ServerHello, shared_secret: bytes) -> None:
        self.hs = hs
        params = suite_params(sh.cipher_suite)
        if params is None:
            raise ValueError(f"no record protection for suite 0x{sh.cipher_suite:04x}")
        self.params: SuiteParams = params
        self.hash = tls13_hash_name(sh.cipher_suite)
        self.ks = KeySchedule(self.hash)
        self.ks.handshake(shared_secret, hs.transcript.digest(self.hash))
        self.state = WAIT_EE
        self.certificate_request: CertificateRequest | None = None
        self.leaf_key: object | None = None
        self.leaf_key_problem: str | None = None   # a key cryptography cannot use
        self.awaiting_acceptance = False  # our Finished is out, nothing heard since
        self.server_app_secret: bytes | None = None
        self.client_app_secret: bytes | None = None
        hs.set_read(self._protection(self.ks.server_handshake_traffic_secret))
        # Everything we send from now on (alerts included) goes under our handshake key;
        # the middlebox-compatibility ChangeCipherSpec is always sent in clear.
        client_hs = self.ks.client_handshake_traffic_secret
        hs.set_write(lambda: self._protection(client_hs))
        self._log()

    # -- helpers -------------------------------------------------------------------------
    def _protection(self, secret: bytes | None) -> Tls13Protection:
        if secret is None:
            raise ValueError("traffic secret not derived yet")
        key, iv = self.ks.traffic_keys(secret, self.params.key_len, 12)
        return Tls13Protection(self.params.cipher, key, iv)

    def _log(self) -> None:
        self.hs.keylog_lines = keylog.tls13_lines(self.hs.client_random, self.ks)

    def _digest(self) -> bytes:
        return self.hs.transcript.digest(self.hash)

    # -- events --------------------------------------------------------------------------
    def on_change_cipher_spec(self) -> None:
        if self.state == CONNECTED:
            self.hs.fail(UNEXPECTED_MESSAGE, "ChangeCipherSpec after the TLS 1.3 handshake")

    def on_message(self, ev: MessageEvent, msg: object) -> None:
        name = message_label(ev.msg_type)
        if not ev.protected:
            self.hs.fail(UNEXPECTED_MESSAGE, f"server sent {name} unencrypted after the "
                         "TLS 1.3 ServerHello")
        if self.state == CONNECTED:
            self._post_handshake(ev, msg, name)
            return
        t = ev.msg_type
        if t == HT.encrypted_extensions and self.state == WAIT_EE:
            self.state = WAIT_CERT
        elif t == HT.certificate_request and self.state == WAIT_CERT \
                and self.certificate_request is None:
            self.certificate_request = msg  # type: ignore[assignment]
        elif t == HT.certificate and self.state == WAIT_CERT:
            self._certificate(msg)  # type: ignore[arg-type]
        elif t == HT.certificate_verify and self.state == WAIT_CV:
            self._certificate_verify(msg)  # type: ignore[arg-type]
        elif t == HT.finished and self.state == WAIT_FINISHED:
            self._finished(ev, msg)  # type: ignore[arg-type]
            return
        else:
            self.hs.fail(UNEXPECTED_MESSAGE, f"server sent {name} while the client waited "
                         f"for {self.state}")
        self.hs.transcript.add(ev.raw)

    def _certificate(self, msg: Certificate) -> None:
        certs = msg.certificates
        if not certs:
            self.hs.fail(DECODE_ERROR, "server sent an empty Certificate")
        self.hs.certificates = list(certs)
        try:
            self.leaf_key = leaf_public_key(certs[0])
        except UnsupportedKey as exc:
            self.leaf_key_problem = str(exc)
        except SignatureError as exc:
            self.hs.fail(BAD_CERTIFICATE, str(exc))
        self.state = WAIT_CV

    def _certificate_verify(self, msg: CertificateVerify) -> None:
        hs = self.hs
        scheme = msg.algorithm
        if scheme is None or scheme not in hs.hellos[-1].signature_algorithms:
            hs.signature_verified = False
            hs.fail(ILLEGAL_PARAMETER, f"CertificateVerify uses "
                    f"{registry.sigscheme_label(scheme or 0)}, which was not offered")
        if self.leaf_key_problem is not None:
            hs.signature_detail = f"{registry.sigscheme_label(scheme)} CertificateVerify: " \
                f"{self.leaf_key_problem}"
            self.state = WAIT_FINISHED
            return
        try:
            verify_scheme(self.leaf_key, scheme, msg.signature,
                          certificate_verify_input(self._digest()), tls13=True)
        except SignatureError as exc:
            hs.signature_verified = False
            hs.fail(DECRYPT_ERROR, f"CertificateVerify: {exc}")
        hs.signature_verified = True
        hs.signature_detail = f"{registry.sigscheme_label(scheme)} CertificateVerify"
        self.state = WAIT_FINISHED

    def _finished(self, ev: MessageEvent, msg: Finished) -> None:
        hs = self.hs
        base = self.ks.server_handshake_traffic_secret or b""
        expected = self.ks.verify_data(self.ks.finished_key(base), self._digest())
        if not hmac.compare_digest(expected, msg.verify_data):
            hs.finished_verified = False
            hs.fail(DECRYPT_ERROR, f"server Finished is wrong: verify_data "
                    f"{msg.verify_data.hex()[:16]}..., expected {expected.hex()[:16]}...")
        hs.finished_verified = True
        hs.transcript.add(ev.raw)
        self.ks.application(self._digest())
        self.server_app_secret = self.ks.server_application_traffic_secret_0
        self.client_app_secret = self.ks.client_application_traffic_secret_0
        self.state = CONNECTED
        self._log()
        if hs.stop_after_first_flight:
            hs.done = True  # read the server's flight only; send nothing
            return
        hs.set_read(self._protection(self.server_app_secret))
        self._client_flight()

    def _client_flight(self) -> None:
        hs = self.hs
        hs.send_change_cipher_spec()  # middlebox compatibility (RFC 8446 D.4)
        client_hs = self.ks.client_handshake_traffic_secret
        if self.certificate_request is not None:
            context = self.certificate_request.certificate_request_context or b""
            hs.send_message(Certificate(context, []).to_bytes())
        verify = self.ks.verify_data(self.ks.finished_key(client_hs or b""), self._digest())
        hs.send_message(Finished(verify).to_bytes())
        self.ks.resumption(self._digest())
        client_app = self.client_app_secret
        hs.set_write(lambda: self._protection(client_app))
        self.awaiting_acceptance = True
        hs.complete()

    # -- after the handshake -------------------------------------------------------------
    def _post_handshake(self, ev: MessageEvent, msg: object, name: str) -> None:
        self.awaiting_acceptance = False
        if ev.msg_type == HT.new_session_ticket:
            return
        if ev.msg_type == HT.key_update and isinstance(msg, KeyUpdate):
            self._key_update(msg)
            return
        if ev.msg_type == HT.certificate_request:
            # Post-handshake authentication was not offered; answer with no certificate.
            return
        self.hs.fail(UNEXPECTED_MESSAGE, f"server sent {name} after the TLS 1.3 handshake")

    def _key_update(self, msg: KeyUpdate) -> None:
        """RFC 8446 4.6.3: new server keys; answer an update_requested with our own."""
        if msg.request_update not in (0, 1):
            self.hs.fail(ILLEGAL_PARAMETER, f"KeyUpdate with request_update "
                         f"{msg.request_update}")
        self.server_app_secret = self.ks.next_traffic_secret(self.server_app_secret or b"")
        self.hs.set_read(self._protection(self.server_app_secret))
        if msg.request_update == 1 and not self.hs.closed and not self.hs.stop_after_first_flight:
            self.hs.send_record(22, KeyUpdate(0).to_bytes())
            self.client_app_secret = self.ks.next_traffic_secret(self.client_app_secret or b"")
            secret = self.client_app_secret
            self.hs.set_write(lambda: self._protection(secret))
