"""The TLS 1.3 half of the client (RFC 8446): from the ServerHello to the client Finished.

After the ServerHello the key schedule yields the handshake traffic keys; the server's
encrypted flight (EncryptedExtensions, optional CertificateRequest, Certificate,
CertificateVerify, Finished) is decrypted by the Flow as it arrives and checked here in
order: the CertificateVerify signature over the transcript, then the server Finished MAC.
The client answers with the middlebox-compatibility ChangeCipherSpec, an empty Certificate
when one was requested, and its Finished; NewSessionTicket and KeyUpdate are read after.
When the ServerHello selects the offered resumption PSK (RFC 8446 4.2.11) the key schedule
starts from that PSK and the flight has no Certificate nor CertificateVerify; the
EncryptedExtensions then say whether the 0-RTT data was accepted (early_data, 4.2.10).

The half keeps the connection's secrets (key schedule, traffic epochs, the server's leaf
key) and answers each message with a Verdict (engine.verdict); ClientHandshake applies it.
"""

from __future__ import annotations

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
from tlsprobe.engine.config import Resumption
from tlsprobe.engine.epochs import TrafficEpochs, tls13_protection
from tlsprobe.engine.interface import Waiting
from tlsprobe.engine.keyschedule import KeySchedule, tls13_hash_name
from tlsprobe.engine.protection import Tls13Protection
from tlsprobe.engine.suites import SuiteParams, suite_params
from tlsprobe.engine.verdict import (
    HandshakeContext,
    ReadKeys,
    Refusal,
    SendChangeCipherSpec,
    SendMessage,
    SendRecord,
    Verdict,
    WriteKeys,
)
from tlsprobe.registry import HandshakeType as HT
from tlsprobe.session.flow import CLIENT, SERVER, MessageEvent
from tlsprobe.wire.certificate import Certificate, CertificateRequest, CertificateVerify
from tlsprobe.wire.context import Message
from tlsprobe.wire.messages import EncryptedExtensions, Finished, KeyUpdate

if TYPE_CHECKING:
    from tlsprobe.engine.verify import PublicKey

# What the client waits for next
WAIT_EE, WAIT_CERT, WAIT_CV, WAIT_FINISHED, CONNECTED = (
    Waiting.ENCRYPTED_EXTENSIONS, Waiting.CERTIFICATE, Waiting.CERTIFICATE_VERIFY,
    Waiting.FINISHED, Waiting.CONNECTED)
HANDSHAKE = 22


class Tls13Client:
    """Key schedule and message checks of one TLS 1.3 handshake, driven by ClientHandshake."""

    tls13 = True

    def __init__(self, ctx: HandshakeContext, shared_secret: bytes,
                 psk: Resumption | None = None) -> None:
        self.ctx = ctx
        sh = ctx.server_hello
        params = suite_params(sh.cipher_suite)
        if params is None:
            raise ValueError(f"no record protection for suite 0x{sh.cipher_suite:04x}")
        self.params: SuiteParams = params
        self.hash = tls13_hash_name(sh.cipher_suite)
        self.resumed = self._psk_selected(psk)
        self.early_data_accepted = False
        self.ks = KeySchedule(self.hash, psk.psk if psk is not None and self.resumed else None)
        self.ks.handshake(shared_secret, self._digest())
        self.epochs = TrafficEpochs(params.cipher, params.key_len, self.hash)
        self.certificate_request: CertificateRequest | None = None
        self.leaf_key: PublicKey | None = None
        self.leaf_pss_only = False                 # an RSASSA-PSS key (engine/verify.py)
        self.leaf_key_problem: str | None = None   # a key cryptography cannot use

    # -- helpers -------------------------------------------------------------------------
    def _psk_selected(self, psk: Resumption | None) -> bool:
        """Whether the ServerHello's pre_shared_key selects our one identity (the engine
        refuses it earlier when no PSK was offered)."""
        selected = self.ctx.server_hello.extension(41)
        if selected is None or psk is None:
            return False
        index = int.from_bytes(selected.data[:2], "big")
        if index != 0:
            raise Refusal(ILLEGAL_PARAMETER, f"server selected PSK identity {index}; the "
                          "client offered one (RFC 8446 4.2.11)")
        if psk.hash_name != self.hash:
            raise Refusal(ILLEGAL_PARAMETER, f"server resumed a {psk.hash_name} PSK with "
                          f"{registry.suite_label(self.ctx.server_hello.cipher_suite)} "
                          "(RFC 8446 4.2.11: the suite's hash must be the PSK's)")
        return True

    def _protection(self, secret: bytes | None) -> Tls13Protection:
        if secret is None:
            raise ValueError("traffic secret not derived yet")
        return self.epochs.protection(secret)

    def _write(self, secret: bytes | None) -> WriteKeys:
        return WriteKeys(lambda: self._protection(secret))

    def _keylog(self) -> list[str]:
        return keylog.tls13_lines(self.ctx.client_random, self.ks)

    def _digest(self) -> bytes:
        return self.ctx.transcript.digest(self.hash)

    # -- events --------------------------------------------------------------------------
    def start(self) -> Verdict:
        """The handshake keys: the server's flight is read under the server's; everything
        we send from now on (alerts included) goes under ours. The middlebox-compatibility
        ChangeCipherSpec is always sent in clear."""
        v = Verdict(waiting_for=WAIT_EE, keylog_lines=self._keylog())
        v.send(ReadKeys(self._protection(self.ks.server_handshake_traffic_secret)))
        v.send(self._write(self.ks.client_handshake_traffic_secret))
        return v

    def expects(self, waiting_for: Waiting, msg_type: int) -> bool:
        return True  # TLS 1.3 messages come encrypted: checked once decrypted

    def on_change_cipher_spec(self, waiting_for: Waiting) -> Verdict:
        if waiting_for == CONNECTED:
            return Verdict(refusal=Refusal(UNEXPECTED_MESSAGE,
                                           "ChangeCipherSpec after the TLS 1.3 handshake"))
        return Verdict()

    def on_message(self, waiting_for: Waiting, ev: MessageEvent, msg: Message, *,
                   may_send: bool) -> Verdict:
        v = Verdict()
        try:
            self._message(v, waiting_for, ev, msg, may_send)
        except Refusal as refusal:
            v.refusal = refusal
        return v

    def _message(self, v: Verdict, state: Waiting, ev: MessageEvent, msg: Message,
                 may_send: bool) -> None:
        name = message_label(ev.msg_type)
        if not ev.protected:
            raise Refusal(UNEXPECTED_MESSAGE, f"server sent {name} unencrypted after the "
                          "TLS 1.3 ServerHello")
        if state == CONNECTED:
            self._post_handshake(v, ev, msg, name, may_send)
            return
        t = ev.msg_type
        if t == HT.encrypted_extensions and state == WAIT_EE:
            self._encrypted_extensions(v, msg)
        elif t == HT.certificate_request and state == WAIT_CERT \
                and self.certificate_request is None and isinstance(msg, CertificateRequest):
            self.certificate_request = msg
        elif t == HT.certificate and state == WAIT_CERT and isinstance(msg, Certificate):
            self._certificate(v, msg)
        elif t == HT.certificate_verify and state == WAIT_CV \
                and isinstance(msg, CertificateVerify):
            self._certificate_verify(v, msg)
        elif t == HT.finished and state == WAIT_FINISHED and isinstance(msg, Finished):
            self._finished(v, ev, msg)
            return
        else:
            raise Refusal(UNEXPECTED_MESSAGE, f"server sent {name} while the client waited "
                          f"for {state}")
        self.ctx.transcript.add(ev.raw)

    def _encrypted_extensions(self, v: Verdict, msg: Message) -> None:
        """A resumed handshake skips the certificate (RFC 8446 2.2); early_data here means
        the 0-RTT data was accepted, which needs the first PSK selected (4.2.10)."""
        early = isinstance(msg, EncryptedExtensions) and msg.extension(42) is not None
        if early and not self.resumed:
            raise Refusal(ILLEGAL_PARAMETER, "server accepted early_data without selecting "
                          "the offered PSK (RFC 8446 4.2.10)")
        self.early_data_accepted = early
        v.waiting_for = WAIT_FINISHED if self.resumed else WAIT_CERT

    def _certificate(self, v: Verdict, msg: Certificate) -> None:
        certs = msg.certificates
        if not certs:
            raise Refusal(DECODE_ERROR, "server sent an empty Certificate")
        v.certificates = list(certs)
        # the signature checks (and cryptography) with the first certificate (start-up)
        from tlsprobe.engine.verify import (
            SignatureError,
            UnsupportedKey,
            leaf_key,
        )
        try:
            self.leaf_key, self.leaf_pss_only = leaf_key(certs[0])
        except UnsupportedKey as exc:
            self.leaf_key_problem = str(exc)
        except SignatureError as exc:
            raise Refusal(BAD_CERTIFICATE, str(exc)) from None
        v.waiting_for = WAIT_CV

    def _certificate_verify(self, v: Verdict, msg: CertificateVerify) -> None:
        scheme = msg.algorithm
        if scheme is None or scheme not in self.ctx.offered.signature_algorithms:
            v.signature_verified = False
            raise Refusal(ILLEGAL_PARAMETER, f"CertificateVerify uses "
                          f"{registry.sigscheme_label(scheme or 0)}, which was not offered")
        if self.leaf_key_problem is not None:
            v.signature_detail = f"{registry.sigscheme_label(scheme)} CertificateVerify: " \
                f"{self.leaf_key_problem}"
            v.waiting_for = WAIT_FINISHED
            return
        if self.leaf_key is None:
            raise Refusal(UNEXPECTED_MESSAGE, "CertificateVerify without a Certificate")
        from tlsprobe.engine.verify import (
            SignatureError,
            certificate_verify_input,
            verify_scheme,
        )
        try:
            verify_scheme(self.leaf_key, scheme, msg.signature,
                          certificate_verify_input(self._digest()), tls13=True,
                          pss_only=self.leaf_pss_only)
        except SignatureError as exc:
            v.signature_verified = False
            raise Refusal(DECRYPT_ERROR, f"CertificateVerify: {exc}") from None
        v.signature_verified = True
        v.signature_detail = f"{registry.sigscheme_label(scheme)} CertificateVerify"
        v.waiting_for = WAIT_FINISHED

    def _finished(self, v: Verdict, ev: MessageEvent, msg: Finished) -> None:
        base = self.ks.server_handshake_traffic_secret or b""
        expected = self.ks.verify_data(self.ks.finished_key(base), self._digest())
        import hmac  # (hashlib with it: imported when a Finished is checked, start-up)
        if not hmac.compare_digest(expected, msg.verify_data):
            v.finished_verified = False
            raise Refusal(DECRYPT_ERROR, f"server Finished is wrong: verify_data "
                          f"{msg.verify_data.hex()[:16]}..., expected {expected.hex()[:16]}...")
        v.finished_verified = True
        self.ctx.transcript.add(ev.raw)
        self.ks.application(self._digest())
        for direction, secret in ((SERVER, self.ks.server_application_traffic_secret_0),
                                  (CLIENT, self.ks.client_application_traffic_secret_0)):
            if secret is not None:
                self.epochs.set_application(direction, secret)
        v.waiting_for = CONNECTED
        v.keylog_lines = self._keylog()
        if self.ctx.stop_after_first_flight:
            v.done = True  # read the server's flight only; send nothing
            return
        v.send(ReadKeys(self._protection(self.epochs.finished(SERVER))))
        self._client_flight(v)

    def _client_flight(self, v: Verdict) -> None:
        v.send(SendChangeCipherSpec())  # middlebox compatibility (RFC 8446 D.4)
        client_hs = self.ks.client_handshake_traffic_secret
        if self.certificate_request is not None:
            context = self.certificate_request.certificate_request_context or b""
            self._send(v, Certificate(context, []).to_bytes())
        verify = self.ks.verify_data(self.ks.finished_key(client_hs or b""), self._digest())
        self._send(v, Finished(verify).to_bytes())
        self.ks.resumption(self._digest())
        v.send(self._write(self.epochs.finished(CLIENT)))
        v.awaiting_acceptance = True
        v.complete = True

    def _send(self, v: Verdict, raw: bytes) -> None:
        self.ctx.transcript.add(raw)
        v.send(SendMessage(raw))

    # -- after the handshake -------------------------------------------------------------
    def _post_handshake(self, v: Verdict, ev: MessageEvent, msg: Message, name: str,
                        may_send: bool) -> None:
        v.awaiting_acceptance = False
        if ev.msg_type == HT.new_session_ticket:
            return
        if ev.msg_type == HT.key_update and isinstance(msg, KeyUpdate):
            self._key_update(v, msg, may_send)
            return
        if ev.msg_type == HT.certificate_request:
            # Post-handshake authentication was not offered; answer with no certificate.
            return
        raise Refusal(UNEXPECTED_MESSAGE, f"server sent {name} after the TLS 1.3 handshake")

    def _key_update(self, v: Verdict, msg: KeyUpdate, may_send: bool) -> None:
        """RFC 8446 4.6.3: new server keys; answer an update_requested with our own."""
        if msg.request_update not in (0, 1):
            raise Refusal(ILLEGAL_PARAMETER, f"KeyUpdate with request_update "
                          f"{msg.request_update}")
        v.send(ReadKeys(self._protection(self.epochs.key_update(SERVER))))
        if msg.request_update == 1 and may_send and not self.ctx.stop_after_first_flight:
            v.send(SendRecord(HANDSHAKE, KeyUpdate(0).to_bytes()))
            v.send(self._write(self.epochs.key_update(CLIENT)))


def early_protection(psk: Resumption, client_hello_hash: bytes) -> Tls13Protection:
    """The write protection of 0-RTT data: the PSK's client_early_traffic_secret over the
    ClientHello (RFC 8446 7.1), with the session's suite."""
    params = suite_params(psk.cipher_suite)
    if params is None or psk.psk is None:
        raise ValueError(f"no 0-RTT protection for suite 0x{psk.cipher_suite:04x}")
    ks = KeySchedule(psk.hash_name, psk.psk)
    ks.early(client_hello_hash)
    return tls13_protection(params.cipher, params.key_len, psk.hash_name,
                            ks.client_early_traffic_secret or b"")
