"""The TLS 1.0-1.2 half of the client (RFC 2246, 4346, 5246): ServerHello to server Finished.

The server's first flight (Certificate, CertificateStatus, ServerKeyExchange,
CertificateRequest, ServerHelloDone) is collected and its ServerKeyExchange signature
checked as soon as it arrives. At ServerHelloDone the client computes the pre-master secret
(ECDHE, DHE or RSA key transport), the master secret (extended master secret when the
server echoed it, RFC 7627) and the key block, and sends [empty Certificate],
ClientKeyExchange, ChangeCipherSpec and its Finished. The server's ChangeCipherSpec
switches on the server's protection; its Finished is then checked against the transcript.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from cryptography.exceptions import UnsupportedAlgorithm

from tlsprobe import kex, registry
from tlsprobe.engine import keylog, prf
from tlsprobe.engine.common import (
    BAD_CERTIFICATE,
    DECRYPT_ERROR,
    HANDSHAKE_FAILURE,
    ILLEGAL_PARAMETER,
    SSL30,
    UNEXPECTED_MESSAGE,
    message_label,
)
from tlsprobe.engine.protection import RecordProtection, protection_for_suite
from tlsprobe.engine.suites import protection_params, suite_params
from tlsprobe.engine.verify import (
    SCHEMES,
    SignatureError,
    UnsupportedKey,
    leaf_public_key,
    ske_signed_data,
    verify_legacy,
    verify_scheme,
)
from tlsprobe.registry import HandshakeType as HT
from tlsprobe.session.flow import MessageEvent
from tlsprobe.wire.certificate import Certificate
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.hello import ServerHello
from tlsprobe.wire.keyexchange import ClientKeyExchange, ServerKeyExchange

if TYPE_CHECKING:
    from tlsprobe.engine.client import ClientHandshake

FIRST_FLIGHT, WAIT_CCS, WAIT_FINISHED, CONNECTED = (
    "ServerHelloDone", "ChangeCipherSpec", "Finished", "connected")
_FIRST_FLIGHT_TYPES = (HT.certificate, HT.certificate_status, HT.server_key_exchange,
                       HT.certificate_request)


class Tls12Client:
    """Key exchange, key block and Finished checks of one TLS 1.0-1.2 handshake."""

    tls13 = False

    def __init__(self, hs: ClientHandshake, sh: ServerHello) -> None:
        self.hs = hs
        self.sh = sh
        self.version = sh.selected_version
        suite = registry.cipher_suite(sh.cipher_suite)
        self.kx = suite.kx if suite else None
        self.anonymous = suite is not None and suite.auth == "anon"
        self.params = suite_params(sh.cipher_suite) or (protection_params(sh.cipher_suite)
                                                        if self.anonymous else None)
        self.prf_hash = self.params.prf_hash if self.params else "sha256"
        self.handshake_hash = prf.handshake_hash_name(self.version, self.prf_hash) \
            if self.version >= 0x0301 else "md5sha1"
        self.ems = sh.extension(23) is not None
        self.etm = sh.extension(22) is not None
        self.state = FIRST_FLIGHT
        self.ske: ServerKeyExchange | None = None
        self.certificate_requested = False
        self.master_secret: bytes | None = None
        self._server_protection: RecordProtection | None = None

    # -- events --------------------------------------------------------------------------
    def on_change_cipher_spec(self) -> None:
        if self.state != WAIT_CCS or self._server_protection is None:
            self.hs.fail(UNEXPECTED_MESSAGE, f"server sent ChangeCipherSpec while the client "
                         f"waited for {self.state}")
        self.hs.set_read(self._server_protection)  # type: ignore[arg-type]
        self.state = WAIT_FINISHED

    def expects(self, msg_type: int) -> bool:
        """Whether a message of this type can come next (checked before it is complete)."""
        if msg_type == HT.hello_request:
            return True
        if self.state == FIRST_FLIGHT:
            return msg_type in _FIRST_FLIGHT_TYPES or msg_type == HT.server_hello_done
        if self.state == WAIT_CCS:
            return msg_type == HT.new_session_ticket
        if self.state == WAIT_FINISHED:
            return msg_type == HT.finished
        return True

    def on_message(self, ev: MessageEvent, msg: object) -> None:
        t = ev.msg_type
        name = message_label(t)
        if t == HT.hello_request:
            return  # renegotiation is not offered; RFC 5246 7.4.1.1 lets us ignore it
        if self.state == FIRST_FLIGHT and t in _FIRST_FLIGHT_TYPES:
            self.hs.transcript.add(ev.raw)
            if t == HT.certificate:
                self._certificate(msg)  # type: ignore[arg-type]
            elif t == HT.server_key_exchange:
                self._server_key_exchange(msg)  # type: ignore[arg-type]
            elif t == HT.certificate_request:
                self.certificate_requested = True
        elif self.state == FIRST_FLIGHT and t == HT.server_hello_done:
            self.hs.transcript.add(ev.raw)
            self._server_hello_done()
        elif self.state == WAIT_CCS and t == HT.new_session_ticket:
            self.hs.transcript.add(ev.raw)
        elif self.state == WAIT_FINISHED and t == HT.finished:
            self._finished(ev, msg)  # type: ignore[arg-type]
        else:
            self.hs.fail(UNEXPECTED_MESSAGE, f"server sent {name} while the client waited "
                         f"for {self.state}")

    def _certificate(self, msg: Certificate) -> None:
        if self.hs.certificates:
            self.hs.fail(UNEXPECTED_MESSAGE, "server sent a second Certificate")
        self.hs.certificates = list(msg.certificates)

    # -- ServerKeyExchange -----------------------------------------------------------------
    def _server_key_exchange(self, ske: ServerKeyExchange) -> None:
        hs = self.hs
        if self.ske is not None:
            hs.fail(UNEXPECTED_MESSAGE, "server sent a second ServerKeyExchange")
        self.ske = ske
        self._check_share(ske)
        if ske.signature is None:
            return  # anonymous or PSK parameters: nothing signed
        if not hs.certificates:
            hs.fail(UNEXPECTED_MESSAGE, "signed ServerKeyExchange without a Certificate")
        try:
            key = leaf_public_key(hs.certificates[0])
        except UnsupportedKey as exc:
            hs.signature_detail = f"ServerKeyExchange: {exc}"
            return
        except SignatureError as exc:
            hs.fail(BAD_CERTIFICATE, str(exc))
        data = ske_signed_data(hs.client_random, self.sh.random, ske.signed_params)
        scheme = ske.algorithm
        try:
            if scheme is None:
                what = verify_legacy(key, ske.signature, data)
            else:
                if scheme not in hs.hellos[-1].signature_algorithms:
                    hs.signature_verified = False
                    hs.fail(ILLEGAL_PARAMETER, f"ServerKeyExchange signed with "
                            f"{registry.sigscheme_label(scheme)}, which was not offered")
                if scheme not in SCHEMES:
                    hs.signature_detail = f"{registry.sigscheme_label(scheme)} not checked " \
                        "(scheme not implemented)"
                    return
                verify_scheme(key, scheme, ske.signature, data)
                what = registry.sigscheme_label(scheme)
        except SignatureError as exc:
            hs.signature_verified = False
            hs.fail(DECRYPT_ERROR, f"ServerKeyExchange signature: {exc}")
        hs.signature_verified = True
        hs.signature_detail = f"{what} ServerKeyExchange"

    def _check_share(self, ske: ServerKeyExchange) -> None:
        """The server's ECDHE point must be valid as soon as it is seen, also when the
        probe stops after the first flight (the full handshake would refuse it later)."""
        group = ske.named_curve
        if self.kx != "ECDHE" or group is None or ske.public is None:
            return
        try:
            kex.validate_server_share(group, ske.public)
        except kex.UnsupportedGroup:
            return  # a group we cannot compute: nothing to say about the point
        except kex.InvalidShare as exc:
            self.hs.share_problem = str(exc)
            self.hs.fail(ILLEGAL_PARAMETER, f"invalid server key share for "
                         f"{registry.group_label(group)} in the ServerKeyExchange: {exc}")

    # -- the client's flight -------------------------------------------------------------
    def _server_hello_done(self) -> None:
        hs = self.hs
        hs.first_flight_done = True
        if hs.stop_after_first_flight:
            hs.done = True
            return
        reason = self._cannot_complete()
        if reason:
            hs.stop_incomplete(reason)
            return
        premaster, exchange_keys = self._key_exchange()
        if hs.done:
            return
        if self.certificate_requested:
            hs.send_message(Certificate(None, []).to_bytes())
        cke = ClientKeyExchange(self.kx, exchange_keys)
        hs.send_message(frame(HT.client_key_exchange, cke.serialize()))
        self._keys(premaster)
        hs.send_change_cipher_spec()
        hs.set_write(lambda: self._protection("client"))
        verify = prf.verify_data(self.version, self.prf_hash, self.master_secret or b"",
                                 hs.transcript.digest(self.handshake_hash), "client")
        hs.send_message(frame(HT.finished, verify))
        self.state = WAIT_CCS

    def _cannot_complete(self) -> str | None:
        suite = registry.suite_label(self.sh.cipher_suite)
        if self.version <= SSL30:
            return "SSL 3.0 handshakes are not implemented"
        if self.params is None:
            return f"no record protection for {suite}"
        if self.kx not in ("ECDHE", "DHE", "RSA"):
            return f"{self.kx or 'unknown'} key exchange ({suite}) is not implemented"
        if self.kx != "RSA" and self.ske is None:
            self.hs.fail(UNEXPECTED_MESSAGE, f"{suite} needs a ServerKeyExchange")
        if self.kx == "ECDHE" and self.ske is not None and self.ske.named_curve is None:
            return "explicit curve parameters are not supported"
        if self.kx == "RSA" and not self.hs.certificates:
            self.hs.fail(UNEXPECTED_MESSAGE, "RSA key exchange without a server Certificate")
        return None

    def _key_exchange(self) -> tuple[bytes, bytes]:
        """(pre_master_secret, ClientKeyExchange exchange_keys) for the suite's key exchange."""
        hs = self.hs
        try:
            if self.kx == "RSA":
                from cryptography import x509
                cert = x509.load_der_x509_certificate(hs.certificates[0])
                hs.signature_detail = "none: RSA key transport (the server's Finished " \
                    "proves its key)"
                return kex.rsa_encrypt_premaster(cert, hs.hellos[-1].legacy_version)
            ske = self.ske
            if ske is None or ske.public is None:
                hs.fail(UNEXPECTED_MESSAGE, "no server key exchange parameters")
            if self.kx == "ECDHE":
                group = ske.named_curve or 0
                if group not in hs.hellos[-1].supported_groups:
                    hs.fail(ILLEGAL_PARAMETER, f"server chose {registry.group_label(group)}, "
                            "which was not offered")
                share: kex.KeyShare = kex.generate(group)
            else:
                share = kex.DHShare(int.from_bytes(ske.dh_p or b"", "big"),
                                    int.from_bytes(ske.dh_g or b"", "big"))
            premaster = share.premaster_secret(ske.public)
        except kex.UnsupportedGroup as exc:
            if self.kx == "DHE":
                # The server's own (p, g), refused (size, not a safe prime): the handshake
                # ends here, as OpenSSL's does, and the probe says so with a non-zero exit.
                hs.share_problem = str(exc)
                hs.fail(HANDSHAKE_FAILURE, f"server's DH parameters refused: {exc}")
            hs.stop_incomplete(str(exc))  # a named curve this build cannot compute
            return b"", b""
        except (kex.InvalidShare, ValueError, UnsupportedAlgorithm) as exc:
            hs.share_problem = str(exc)
            hs.fail(ILLEGAL_PARAMETER if self.kx != "RSA" else BAD_CERTIFICATE,
                    f"invalid server key exchange: {exc}")
        hs.shared_secret = premaster
        hs.client_share_bytes = len(share.public)
        return premaster, share.public

    def _keys(self, premaster: bytes) -> None:
        hs = self.hs
        if self.ems:
            session_hash = hs.transcript.digest(self.handshake_hash)
            self.master_secret = prf.extended_master_secret(self.version, self.prf_hash,
                                                            premaster, session_hash)
        else:
            self.master_secret = prf.master_secret(self.version, self.prf_hash, premaster,
                                                   hs.client_random, self.sh.random)
        hs.keylog_lines = keylog.tls12_lines(hs.client_random, self.master_secret)
        self._server_protection = self._protection("server")

    def _protection(self, side: str) -> RecordProtection:
        if self.params is None or self.master_secret is None:
            raise ValueError("record protection before the master secret")
        mac_len, key_len, iv_len = self.params.key_material(self.version)
        kb = prf.key_block(self.version, self.prf_hash, self.master_secret,
                           self.hs.client_random, self.sh.random, mac_len, key_len, iv_len)
        if side == "client":
            return protection_for_suite(self.params, kb.client_write_key, kb.client_write_iv,
                                        kb.client_write_mac_key, self.version, self.etm)
        return protection_for_suite(self.params, kb.server_write_key, kb.server_write_iv,
                                    kb.server_write_mac_key, self.version, self.etm)

    # -- the server's Finished -------------------------------------------------------------
    def _finished(self, ev: MessageEvent, msg: object) -> None:
        hs = self.hs
        if not ev.protected:
            hs.fail(UNEXPECTED_MESSAGE, "server Finished was not encrypted")
        verify_data = getattr(msg, "verify_data", b"")
        expected = prf.verify_data(self.version, self.prf_hash, self.master_secret or b"",
                                   hs.transcript.digest(self.handshake_hash), "server")
        if not hmac.compare_digest(expected, verify_data):
            hs.finished_verified = False
            hs.fail(DECRYPT_ERROR, f"server Finished is wrong: verify_data "
                    f"{verify_data.hex()}, expected {expected.hex()}")
        hs.transcript.add(ev.raw)
        hs.finished_verified = True
        self.state = CONNECTED
        hs.complete()

