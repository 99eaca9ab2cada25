"""The TLS 1.0-1.2 half of the client (RFC 2246, 4346, 5246): ServerHello to server Finished.

The server's first flight (Certificate, CertificateStatus, ServerKeyExchange,
CertificateRequest, ServerHelloDone) is collected and its ServerKeyExchange signature
checked as soon as it arrives. At ServerHelloDone the client computes the pre-master secret
(ECDHE, DHE or RSA key transport), the master secret (extended master secret when the
server echoed it, RFC 7627) and the key block, and sends [empty Certificate],
ClientKeyExchange, ChangeCipherSpec and its Finished. The server's ChangeCipherSpec
switches on the server's protection; its Finished is then checked against the transcript.
A ServerHello that echoes the session ID of the session offered for resumption (RFC 5246
7.4.1.2; RFC 5077 3.4 for a ticket) starts the abbreviated handshake instead: the session's
master secret, the server's [NewSessionTicket], ChangeCipherSpec and Finished, then ours.

The half keeps what the key exchange needs (the ServerKeyExchange, the master secret) and
answers each message with a Verdict (engine.verdict); ClientHandshake applies it.
"""

from __future__ import annotations

from collections.abc import Callable

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
from tlsprobe.engine.config import Resumption
from tlsprobe.engine.interface import Waiting
from tlsprobe.engine.protection import RecordProtection, protections_from_key_block
from tlsprobe.engine.suites import SuiteParams, protection_params, suite_params
from tlsprobe.engine.verdict import (
    HandshakeContext,
    ReadKeys,
    Refusal,
    SendChangeCipherSpec,
    SendMessage,
    Verdict,
    WriteKeys,
)
from tlsprobe.registry import HandshakeType as HT
from tlsprobe.session.flow import MessageEvent
from tlsprobe.wire.certificate import Certificate
from tlsprobe.wire.context import Message
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.keyexchange import ClientKeyExchange, ServerKeyExchange

FIRST_FLIGHT, WAIT_CCS, WAIT_FINISHED, CONNECTED = (
    Waiting.SERVER_HELLO_DONE, Waiting.CHANGE_CIPHER_SPEC, Waiting.FINISHED, Waiting.CONNECTED)
_FIRST_FLIGHT_TYPES = (HT.certificate, HT.certificate_status, HT.server_key_exchange,
                       HT.certificate_request)
#: HelloRequests ignored in one connection: each is legal (RFC 5246 7.4.1.1), a server
#: asking to renegotiate sends one now and then; a stream of them (thousands a record) kept
#: the client reading until its event limit, 0.25 s of CPU per scan connection
MAX_HELLO_REQUESTS = 64


class _Stop(Exception):
    """The engine cannot complete this handshake (not an error of the server's)."""


class Tls12Client:
    """Key exchange, key block and Finished checks of one TLS 1.0-1.2 handshake."""

    tls13 = False

    def __init__(self, ctx: HandshakeContext, resume: Resumption | None = None) -> None:
        self.ctx = ctx
        sh = self.sh = ctx.server_hello
        self.client_random = ctx.client_random
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
        self.certificates: list[bytes] = []
        self.ske: ServerKeyExchange | None = None
        self.certificate_requested = False
        self.hello_requests = 0
        self.master_secret: bytes | None = None
        self._server_protection: RecordProtection | None = None
        self._client_protection: Callable[[], RecordProtection] | None = None
        offered_id = ctx.offered.legacy_session_id
        self.resumed = resume is not None and bool(resume.master_secret) and \
            bool(offered_id) and sh.legacy_session_id_echo == offered_id
        if resume is not None and self.resumed:
            self.master_secret = resume.master_secret
        #: both Finished verify_data, for a renegotiation's renegotiation_info (RFC 5746)
        self.client_verify_data = self.server_verify_data = b""

    # -- events --------------------------------------------------------------------------
    def start(self) -> Verdict:
        if not self.resumed:
            return Verdict(waiting_for=FIRST_FLIGHT)
        v = Verdict(waiting_for=WAIT_CCS)   # abbreviated: the server's CCS and Finished
        if self.params is None:
            v.incomplete = "no record protection for " \
                f"{registry.suite_label(self.sh.cipher_suite)}"
            return v
        v.keylog_lines = keylog.tls12_lines(self.client_random, self.master_secret or b"")
        self._client_protection = self._key_block(self.params)
        return v

    def on_change_cipher_spec(self, waiting_for: Waiting) -> Verdict:
        if waiting_for != WAIT_CCS or self._server_protection is None:
            return Verdict(refusal=Refusal(UNEXPECTED_MESSAGE, f"server sent "
                                           f"ChangeCipherSpec while the client waited for "
                                           f"{waiting_for}"))
        v = Verdict(waiting_for=WAIT_FINISHED)
        v.send(ReadKeys(self._server_protection))
        return v

    def expects(self, waiting_for: Waiting, msg_type: int) -> bool:
        if msg_type == HT.hello_request:
            return True
        if waiting_for == FIRST_FLIGHT:
            return msg_type in _FIRST_FLIGHT_TYPES or msg_type == HT.server_hello_done
        if waiting_for == WAIT_CCS:
            return msg_type == HT.new_session_ticket
        if waiting_for == WAIT_FINISHED:
            return msg_type == HT.finished
        return True

    def on_message(self, waiting_for: Waiting, ev: MessageEvent, msg: Message, *,
                   may_send: bool) -> Verdict:
        v = Verdict()
        try:
            self._message(v, waiting_for, ev, msg)
        except Refusal as refusal:
            v.refusal = refusal
        return v

    def _message(self, v: Verdict, state: Waiting, ev: MessageEvent, msg: Message) -> None:
        t = ev.msg_type
        name = message_label(t)
        if t == HT.hello_request:
            # renegotiation is not offered; RFC 5246 7.4.1.1 lets us ignore it, a few times
            self.hello_requests += 1
            if self.hello_requests > MAX_HELLO_REQUESTS:
                raise Refusal(UNEXPECTED_MESSAGE, f"server sent {self.hello_requests} "
                              f"HelloRequests; at most {MAX_HELLO_REQUESTS} are ignored")
            return
        transcript = self.ctx.transcript
        if state == FIRST_FLIGHT and t in _FIRST_FLIGHT_TYPES:
            transcript.add(ev.raw)
            if t == HT.certificate and isinstance(msg, Certificate):
                self._certificate(v, msg)
            elif t == HT.server_key_exchange and isinstance(msg, ServerKeyExchange):
                self._server_key_exchange(v, msg)
            elif t == HT.certificate_request:
                self.certificate_requested = True
        elif state == FIRST_FLIGHT and t == HT.server_hello_done:
            transcript.add(ev.raw)
            self._server_hello_done(v)
        elif state == WAIT_CCS and t == HT.new_session_ticket:
            transcript.add(ev.raw)
        elif state == WAIT_FINISHED and t == HT.finished:
            self._finished(v, ev, msg)
        else:
            raise Refusal(UNEXPECTED_MESSAGE, f"server sent {name} while the client waited "
                          f"for {state}")

    def _certificate(self, v: Verdict, msg: Certificate) -> None:
        if self.certificates:
            raise Refusal(UNEXPECTED_MESSAGE, "server sent a second Certificate")
        self.certificates = list(msg.certificates)
        v.certificates = self.certificates

    # -- ServerKeyExchange -----------------------------------------------------------------
    def _server_key_exchange(self, v: Verdict, ske: ServerKeyExchange) -> None:
        if self.ske is not None:
            raise Refusal(UNEXPECTED_MESSAGE, "server sent a second ServerKeyExchange")
        self.ske = ske
        if self.ctx.names_only:
            return  # only the group or parameters it names are read (ClientHandshake)
        self._check_share(v, ske)
        if ske.signature is None:
            return  # anonymous or PSK parameters: nothing signed
        # the signature checks (and cryptography) when a signature is to be checked: a
        # probe that stops before any key, a group audit, imports neither (start-up)
        from tlsprobe.engine.verify import (
            SCHEMES,
            SignatureError,
            UnsupportedKey,
            leaf_key,
            ske_signed_data,
            verify_legacy,
            verify_scheme,
        )
        if not self.certificates:
            raise Refusal(UNEXPECTED_MESSAGE, "signed ServerKeyExchange without a Certificate")
        try:
            key, pss_only = leaf_key(self.certificates[0])
        except UnsupportedKey as exc:
            v.signature_detail = f"ServerKeyExchange: {exc}"
            return
        except SignatureError as exc:
            raise Refusal(BAD_CERTIFICATE, str(exc)) from None
        data = ske_signed_data(self.client_random, self.sh.random, ske.signed_params)
        scheme = ske.algorithm
        try:
            if scheme is None:
                what = verify_legacy(key, ske.signature, data)
            else:
                if scheme not in self.ctx.offered.signature_algorithms:
                    v.signature_verified = False
                    raise Refusal(ILLEGAL_PARAMETER, f"ServerKeyExchange signed with "
                                  f"{registry.sigscheme_label(scheme)}, which was not offered")
                if scheme not in SCHEMES:
                    v.signature_detail = f"{registry.sigscheme_label(scheme)} not checked " \
                        "(scheme not implemented)"
                    return
                verify_scheme(key, scheme, ske.signature, data, pss_only=pss_only)
                what = registry.sigscheme_label(scheme)
        except SignatureError as exc:
            v.signature_verified = False
            raise Refusal(DECRYPT_ERROR, f"ServerKeyExchange signature: {exc}") from None
        v.signature_verified = True
        v.signature_detail = f"{what} ServerKeyExchange"

    def _check_share(self, v: Verdict, ske: ServerKeyExchange) -> None:
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
            v.share_problem = str(exc)
            raise Refusal(ILLEGAL_PARAMETER, f"invalid server key share for "
                          f"{registry.group_label(group)} in the ServerKeyExchange: {exc}") \
                from None

    # -- the client's flight -------------------------------------------------------------
    def _server_hello_done(self, v: Verdict) -> None:
        v.first_flight_done = True
        if self.ctx.stop_after_first_flight:
            v.done = True
            return
        reason = self._cannot_complete()
        if reason:
            v.incomplete = reason
            return
        try:
            premaster, exchange_keys = self._key_exchange(v)
        except _Stop as stop:
            v.incomplete = str(stop)
            return
        if self.certificate_requested:
            self._send(v, Certificate(None, []).to_bytes())
        cke = ClientKeyExchange(self.kx, exchange_keys)
        self._send(v, frame(HT.client_key_exchange, cke.serialize()))
        client_protection = self._keys(v, premaster)
        v.send(SendChangeCipherSpec())
        v.send(WriteKeys(client_protection))
        verify = prf.verify_data(self.version, self.prf_hash, self.master_secret or b"",
                                 self.ctx.transcript.digest(self.handshake_hash), "client")
        self._send(v, frame(HT.finished, verify))
        self.client_verify_data = verify
        v.waiting_for = WAIT_CCS

    def _send(self, v: Verdict, raw: bytes) -> None:
        self.ctx.transcript.add(raw)
        v.send(SendMessage(raw))

    def _cannot_complete(self) -> str | None:
        suite = registry.suite_label(self.sh.cipher_suite)
        if self.version <= SSL30:
            return "SSL 3.0 handshakes are not implemented"
        if self.params is None:
            return f"no record protection for {suite}"
        if self.kx not in ("ECDHE", "DHE", "RSA"):
            return f"{self.kx or 'unknown'} key exchange ({suite}) is not implemented"
        if self.kx != "RSA" and self.ske is None:
            raise Refusal(UNEXPECTED_MESSAGE, f"{suite} needs a ServerKeyExchange")
        if self.kx == "ECDHE" and self.ske is not None and self.ske.named_curve is None:
            return "explicit curve parameters are not supported"
        if self.kx == "RSA" and not self.certificates:
            raise Refusal(UNEXPECTED_MESSAGE, "RSA key exchange without a server Certificate")
        return None

    def _key_exchange(self, v: Verdict) -> tuple[bytes, bytes]:
        """(pre_master_secret, ClientKeyExchange exchange_keys) for the suite's key exchange;
        _Stop when this build cannot compute the server's named curve."""
        offered = self.ctx.offered
        from cryptography.exceptions import UnsupportedAlgorithm
        try:
            if self.kx == "RSA":
                v.signature_detail = "none: RSA key transport (the server's Finished " \
                    "proves its key)"
                from tlsprobe.engine.verify import transport_key
                return kex.rsa_encrypt_premaster(transport_key(self.certificates[0]),
                                                 offered.legacy_version)
            ske = self.ske
            if ske is None or ske.public is None:
                raise Refusal(UNEXPECTED_MESSAGE, "no server key exchange parameters")
            if self.kx == "ECDHE":
                group = ske.named_curve or 0
                if group not in offered.supported_groups:
                    raise Refusal(ILLEGAL_PARAMETER, f"server chose "
                                  f"{registry.group_label(group)}, which was not offered")
                share: kex.KeyShare = kex.generate(group)
            else:
                share = kex.DHShare(int.from_bytes(ske.dh_p or b"", "big"),
                                    int.from_bytes(ske.dh_g or b"", "big"))
            premaster = share.premaster_secret(ske.public)
        except kex.UnsupportedGroup as exc:
            if self.kx == "DHE":
                # The server's own (p, g), refused (size, not a safe prime): the handshake
                # ends here, as OpenSSL's does, and the probe says so with a non-zero exit.
                v.share_problem = str(exc)
                raise Refusal(HANDSHAKE_FAILURE, f"server's DH parameters refused: {exc}") \
                    from None
            # a named curve this build cannot compute, named as everywhere else
            raise _Stop(str(exc) if exc.group is None else
                        f"{registry.group_label(exc.group)} cannot be computed here") from None
        except (kex.InvalidShare, ValueError, UnsupportedAlgorithm) as exc:
            v.share_problem = str(exc)
            raise Refusal(ILLEGAL_PARAMETER if self.kx != "RSA" else BAD_CERTIFICATE,
                          f"invalid server key exchange: {exc}") from None
        v.shared_secret = premaster
        v.client_share_bytes = len(share.public)
        return premaster, share.public

    def _keys(self, v: Verdict, premaster: bytes) -> Callable[[], RecordProtection]:
        """Master secret and key block; keeps the server's protection (switched on by its
        ChangeCipherSpec) and returns a maker of the client's."""
        if self.ems:
            session_hash = self.ctx.transcript.digest(self.handshake_hash)
            self.master_secret = prf.extended_master_secret(self.version, self.prf_hash,
                                                            premaster, session_hash)
        else:
            self.master_secret = prf.master_secret(self.version, self.prf_hash, premaster,
                                                   self.client_random, self.sh.random)
        v.keylog_lines = keylog.tls12_lines(self.client_random, self.master_secret)
        params = self.params
        if params is None:
            raise ValueError("record protection without suite parameters")
        return self._key_block(params)

    def _key_block(self, params: SuiteParams) -> Callable[[], RecordProtection]:
        mac_len, key_len, iv_len = params.key_material(self.version)
        kb = prf.key_block(self.version, self.prf_hash, self.master_secret or b"",
                           self.client_random, self.sh.random, mac_len, key_len, iv_len)
        self._server_protection = protections_from_key_block(params, kb, self.version,
                                                             self.etm)[1]
        return lambda: protections_from_key_block(params, kb, self.version, self.etm)[0]

    # -- the server's Finished -------------------------------------------------------------
    def _finished(self, v: Verdict, ev: MessageEvent, msg: Message) -> None:
        if not ev.protected:
            raise Refusal(UNEXPECTED_MESSAGE, "server Finished was not encrypted")
        verify_data = getattr(msg, "verify_data", b"")
        expected = prf.verify_data(self.version, self.prf_hash, self.master_secret or b"",
                                   self.ctx.transcript.digest(self.handshake_hash), "server")
        import hmac  # (hashlib with it: imported when a Finished is checked, start-up)
        if not hmac.compare_digest(expected, verify_data):
            v.finished_verified = False
            raise Refusal(DECRYPT_ERROR, f"server Finished is wrong: verify_data "
                          f"{verify_data.hex()}, expected {expected.hex()}")
        self.ctx.transcript.add(ev.raw)
        self.server_verify_data = verify_data
        v.finished_verified = True
        v.waiting_for = CONNECTED
        if not self.resumed:
            v.complete = True
        elif self.ctx.stop_after_first_flight or self._client_protection is None:
            v.first_flight_done = v.done = True   # the resumption is established
        else:   # abbreviated handshake: our ChangeCipherSpec and Finished come last
            v.send(SendChangeCipherSpec())
            v.send(WriteKeys(self._client_protection))
            verify = prf.verify_data(self.version, self.prf_hash, self.master_secret or b"",
                                     self.ctx.transcript.digest(self.handshake_hash), "client")
            self.client_verify_data = verify
            self._send(v, frame(HT.finished, verify))
            v.complete = True
