"""Server-side TLS message builders for the hostile server, on top of tlsprobe.wire and kex.

The hostile server must get the probe far enough for each misbehaviour to matter, so these
build *real* messages: a ServerHello with a genuine x25519 share computed from the client's
own share, an ECDHE ServerKeyExchange signed with a throwaway P-256 key, a certificate that
`cryptography` can load. Each scenario then breaks exactly one thing.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from functools import lru_cache

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tlsprobe import kex
from tlsprobe.engine import prf
from tlsprobe.engine.keyschedule import KeySchedule, digest
from tlsprobe.engine.protection import Tls12AeadProtection, Tls13Protection
from tlsprobe.engine.suites import suite_params
from tlsprobe.engine.verify import certificate_verify_input
from tlsprobe.wire import Alert, ClientHello, ServerHello, frame
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM
from tlsprobe.wire.record import Record

HANDSHAKE, ALERT, CCS, APPDATA = 22, 21, 20, 23
TLS12, TLS13 = 0x0303, 0x0304
X25519, SECP256R1, SECP384R1, SECP521R1 = 0x001D, 0x0017, 0x0018, 0x0019
ECDSA_SECP256R1_SHA256 = 0x0403
#: an ECDHE-ECDSA suite the probe offers by default
TLS12_SUITE = 0xC02B
TLS13_SUITE = 0x1301


def record(content_type: int, payload: bytes, version: int = TLS12) -> bytes:
    """One record, however long the payload (the length field wraps nothing: callers that
    want a lying length use `raw_record`)."""
    return Record(content_type, version, payload).to_bytes()


def raw_record(content_type: int, length: int, payload: bytes, version: int = TLS12) -> bytes:
    """A record header declaring `length` followed by whatever `payload` is."""
    return bytes([content_type]) + version.to_bytes(2, "big") + length.to_bytes(2, "big") + payload


def handshake_records(*messages: bytes, version: int = TLS12) -> bytes:
    """Handshake messages packed into records of at most 2^14 bytes."""
    data = b"".join(messages)
    return b"".join(record(HANDSHAKE, data[i:i + 2**14], version)
                    for i in range(0, len(data), 2**14))


def alert(level: int, description: int) -> bytes:
    return record(ALERT, Alert(level, description).serialize())


def server_hello(ch: ClientHello, *, suite: int, version: int = TLS12,
                 extensions: list[ext.Extension] | None = None, random: bytes | None = None,
                 session_id: bytes | None = None, compression: int = 0) -> bytes:
    """A framed ServerHello (or HelloRetryRequest when `random` is the HRR magic)."""
    sh = ServerHello(legacy_version=version, random=random or os.urandom(32),
                     legacy_session_id_echo=ch.legacy_session_id if session_id is None
                     else session_id, cipher_suite=suite, legacy_compression_method=compression,
                     extensions=list(extensions or []))
    return frame(2, sh.serialize())


def client_share(ch: ClientHello, group: int) -> bytes | None:
    for entry in ch.key_shares:
        if entry.group == group:
            return bytes(entry.key_exchange)
    return None


def server_hello_13(ch: ClientHello, *, group: int = X25519, share: bytes | None = None,
                    suite: int = TLS13_SUITE, version_ext: int = TLS13,
                    extra: list[ext.Extension] | None = None) -> bytes:
    """A TLS 1.3 ServerHello answering the client's own share for `group` (or `share`)."""
    if share is None:
        peer = client_share(ch, group)
        if peer is None:
            raise ValueError(f"client sent no share for 0x{group:04x}")
        share, _ = kex.respond(group, peer)
    exts = [ext.supported_versions_server(version_ext), ext.key_share_server(group, share)]
    return server_hello(ch, suite=suite, extensions=exts + list(extra or []))


def hello_retry_request(ch: ClientHello, *, group: int | None, cookie: bytes | None = None,
                        suite: int = TLS13_SUITE) -> bytes:
    exts = [ext.supported_versions_server(TLS13)]
    if group is not None:
        exts.append(ext.key_share_hrr(group))
    if cookie is not None:
        exts.append(ext.cookie(cookie))
    return server_hello(ch, suite=suite, extensions=exts, random=HELLO_RETRY_REQUEST_RANDOM)


def server_hello_12(ch: ClientHello, *, suite: int = TLS12_SUITE, random: bytes | None = None,
                    compression: int = 0) -> bytes:
    exts = [ext.renegotiation_info(), ext.ec_point_formats()]
    return server_hello(ch, suite=suite, random=random, compression=compression,
                        extensions=exts)


@dataclass(frozen=True)
class Identity:
    """A throwaway ECDSA P-256 key and its self-signed certificate (DER)."""

    key: ec.EllipticCurvePrivateKey
    der: bytes


def self_signed(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    """A self-signed certificate (DER) for hostile.test on `key`, valid for a month."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hostile.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("hostile.test")]), False)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


@lru_cache(maxsize=1)
def identity() -> Identity:
    key = ec.generate_private_key(ec.SECP256R1())
    return Identity(key, self_signed(key))


def certificate_12(ders: list[bytes]) -> bytes:
    """TLS 1.2 Certificate message with the given DER blobs (any bytes)."""
    body = b"".join(len(d).to_bytes(3, "big") + d for d in ders)
    return frame(11, len(body).to_bytes(3, "big") + body)


def ske_ecdhe(ch: ClientHello, server_random: bytes, *, group: int = X25519,
              public: bytes | None = None, bad_signature: bool = False) -> bytes:
    """ECDHE ServerKeyExchange signed (ecdsa_secp256r1_sha256) over both randoms."""
    if public is None:
        public = kex.generate(group).public
    params = bytes([3]) + group.to_bytes(2, "big") + bytes([len(public)]) + public
    signature = identity().key.sign(ch.random + server_random + params,
                                    ec.ECDSA(hashes.SHA256()))
    if bad_signature:
        signature = signature[:-1] + bytes([signature[-1] ^ 0x01])
    body = params + ECDSA_SECP256R1_SHA256.to_bytes(2, "big") + \
        len(signature).to_bytes(2, "big") + signature
    return frame(12, body)


def server_hello_done() -> bytes:
    return frame(14, b"")


def tls12_flight(ch: ClientHello, *, bad_signature: bool = False, random: bytes | None = None,
                 compression: int = 0) -> list[bytes]:
    """The four messages of a TLS 1.2 ECDHE-ECDSA first flight (well-formed unless asked)."""
    random = random or os.urandom(32)
    return [server_hello_12(ch, random=random, compression=compression),
            certificate_12([identity().der]),
            ske_ecdhe(ch, random, bad_signature=bad_signature), server_hello_done()]


def sslv2_server_hello() -> bytes:
    """An SSLv2 SERVER-HELLO (msg type 4) with one cipher kind and a tiny fake certificate."""
    cert = b"\x30\x03\x02\x01\x00"
    body = bytes([4, 0, 1]) + (0x0002).to_bytes(2, "big") + len(cert).to_bytes(2, "big") + \
        (3).to_bytes(2, "big") + (16).to_bytes(2, "big") + cert + b"\x01\x00\x80" + bytes(16)
    return (0x8000 | len(body)).to_bytes(2, "big") + body


class Tls13Server:
    """The server half of one TLS 1.3 handshake after its ServerHello: the transcript, the
    handshake traffic key and the encrypted flight (EncryptedExtensions, Certificate,
    CertificateVerify, Finished), each of which a scenario may break."""

    def __init__(self, ch: ClientHello, ch_raw: bytes, *, group: int = X25519,
                 suite: int = TLS13_SUITE, retried: tuple[bytes, bytes] | None = None) -> None:
        """`retried`: (the first ClientHello, the HelloRetryRequest) when `ch` is the
        second hello; the transcript then starts with their RFC 8446 4.4.1 message_hash."""
        peer = client_share(ch, group)
        if peer is None:
            raise ValueError(f"client sent no share for 0x{group:04x}")
        share, secret = kex.respond(group, peer)
        self.server_hello = server_hello_13(ch, group=group, share=share, suite=suite)
        params = suite_params(suite)
        if params is None:
            raise ValueError(f"no parameters for suite 0x{suite:04x}")
        self.hash_name = params.prf_hash
        self.params = params
        self.transcript = [ch_raw, self.server_hello]
        if retried is not None:
            first, hrr = retried
            self.transcript[:0] = [frame(254, digest(self.hash_name, first)), hrr]
        self.schedule = KeySchedule(self.hash_name)
        self.schedule.handshake(secret, self.hash())
        secret_s = self.schedule.server_handshake_traffic_secret
        assert secret_s is not None  # set by handshake() just above (our own state)
        self.traffic_secret = secret_s
        key, iv = self.schedule.traffic_keys(secret_s, params.key_len, params.iv_len)
        self.protection = Tls13Protection(params.cipher, key, iv)

    def hash(self) -> bytes:
        return digest(self.hash_name, b"".join(self.transcript))

    def add(self, message: bytes) -> bytes:
        self.transcript.append(message)
        return message

    def encrypted_extensions(self) -> bytes:
        return self.add(frame(8, b"\x00\x00"))

    def certificate(self, ders: list[bytes]) -> bytes:
        entries = b"".join(len(d).to_bytes(3, "big") + d + b"\x00\x00" for d in ders)
        return self.add(frame(11, b"\x00" + len(entries).to_bytes(3, "big") + entries))

    def certificate_verify(self, *, bad: bool = False) -> bytes:
        signature = identity().key.sign(certificate_verify_input(self.hash()),
                                        ec.ECDSA(hashes.SHA256()))
        if bad:
            signature = signature[:-1] + bytes([signature[-1] ^ 0x01])
        body = ECDSA_SECP256R1_SHA256.to_bytes(2, "big") + len(signature).to_bytes(2, "big") \
            + signature
        return self.add(frame(15, body))

    def finished(self, *, bad: bool = False) -> bytes:
        key = self.schedule.finished_key(self.traffic_secret)
        verify_data = self.schedule.verify_data(key, self.hash())
        if bad:
            verify_data = bytes([verify_data[0] ^ 0x80]) + verify_data[1:]
        return self.add(frame(20, verify_data))

    def flight(self, *, bad_signature: bool = False, bad_finished: bool = False,
               ders: list[bytes] | None = None) -> list[bytes]:
        return [self.encrypted_extensions(),
                self.certificate([identity().der] if ders is None else ders),
                self.certificate_verify(bad=bad_signature), self.finished(bad=bad_finished)]

    def application_protection(self) -> Tls13Protection:
        """The server's application traffic protection (after its Finished was built), for
        what a server sends after the handshake (NewSessionTicket)."""
        self.schedule.application(self.hash())
        secret = self.schedule.server_application_traffic_secret_0
        assert secret is not None  # set by application() just above (our own state)
        key, iv = self.schedule.traffic_keys(secret, self.params.key_len, self.params.iv_len)
        return Tls13Protection(self.params.cipher, key, iv)

    def encrypt(self, *messages: bytes, content_type: int = HANDSHAKE) -> bytes:
        """Each message in its own protected record."""
        return b"".join(self.protection.encrypt(content_type, m) for m in messages)

    def hello_and_flight(self, messages: list[bytes]) -> bytes:
        """ServerHello, middlebox-compatibility CCS, then the encrypted messages."""
        return handshake_records(self.server_hello) + record(CCS, b"\x01") + \
            self.encrypt(*messages)


class Tls12Server:
    """The server half of a whole TLS 1.2 ECDHE-ECDSA handshake (AES-128-GCM, no extended
    master secret): the first flight, then from the client's ClientKeyExchange and encrypted
    Finished the keys and the server's own ChangeCipherSpec + Finished."""

    SUITE = TLS12_SUITE

    def __init__(self, ch: ClientHello, ch_raw: bytes, *, group: int = X25519) -> None:
        self.ch = ch
        self.random = os.urandom(32)
        self.share = kex.generate(group)
        self.flight = [server_hello_12(ch, random=self.random), certificate_12([identity().der]),
                       ske_ecdhe(ch, self.random, group=group, public=self.share.public),
                       server_hello_done()]
        self.transcript = [ch_raw, *self.flight]
        params = suite_params(self.SUITE)
        if params is None:
            raise ValueError("no parameters for the TLS 1.2 suite")
        self.params = params
        self.master_secret = b""
        self.server_protection: Tls12AeadProtection | None = None

    def take_client_key_exchange(self, cke_raw: bytes) -> None:
        """Derive the keys from the client's ClientKeyExchange (framed)."""
        self.transcript.append(cke_raw)
        pms = self.share.premaster_secret(cke_raw[5:])  # type 1, length 3, point length 1
        self.master_secret = prf.master_secret(TLS12, self.params.prf_hash, pms, self.ch.random,
                                               self.random)
        p = self.params
        block = prf.key_block(TLS12, p.prf_hash, self.master_secret, self.ch.random,
                              self.random, 0, p.key_len, p.iv_len)
        self.client_protection = Tls12AeadProtection(p.cipher, block.client_write_key,
                                                     block.client_write_iv)
        self.server_protection = Tls12AeadProtection(p.cipher, block.server_write_key,
                                                     block.server_write_iv)

    def take_client_finished(self, rec: Record) -> None:
        """Decrypt the client's Finished and add it to the transcript."""
        _, plaintext = self.client_protection.decrypt(rec.content_type, rec.version,
                                                      rec.fragment)
        self.transcript.append(plaintext)

    def finished(self, *, bad: bool = False) -> bytes:
        """ChangeCipherSpec and the encrypted server Finished."""
        digest_ = digest(self.params.prf_hash, b"".join(self.transcript))
        vd = prf.verify_data(TLS12, self.params.prf_hash, self.master_secret, digest_, "server")
        if bad:
            vd = bytes([vd[0] ^ 0x40]) + vd[1:]
        assert self.server_protection is not None  # keys derived first (our own state)
        return record(CCS, b"\x01") + self.server_protection.encrypt(HANDSHAKE, frame(20, vd))
