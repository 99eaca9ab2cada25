"""Decrypt real OpenSSL sessions with the engine alone, from the raw bytes and a key log.

For TLS 1.2 and older: key block from the logged master secret, both Finished messages
recomputed with our PRF over our transcript, all application data decrypted; with RSA key
exchange the premaster is recovered with the server key and the (extended) master secret
recomputed. For TLS 1.3: traffic keys from the logged secrets, both Finished recomputed
from our transcript (including the HelloRetryRequest message_hash), NewSessionTicket and
application data decrypted under the application keys.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from tests.engine import engine_peers as peers
import pytest
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tlsprobe.engine import keylog as kl
from tlsprobe.engine.keyschedule import (
    Transcript,
    finished_key,
    tls13_export,
    traffic_keys,
    verify_data,
)
from tlsprobe.engine.prf import (
    export_keying_material,
    extended_master_secret,
    handshake_hash_name,
    key_block,
    master_secret,
)
from tlsprobe.engine.prf import verify_data as prf_verify_data
from tlsprobe.engine.protection import (
    RecordProtection,
    Tls13Protection,
    protections_from_key_block,
)
from tlsprobe.engine.suites import SUITES, SuiteParams

HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
EXT_ENCRYPT_THEN_MAC, EXT_EXTENDED_MASTER_SECRET, EXT_SUPPORTED_VERSIONS = 22, 23, 43


# -- minimal framing for the test (the wire codec is tested on its own) ----------------------
def records(stream: bytes) -> list[tuple[int, int, bytes]]:
    out, pos = [], 0
    while pos < len(stream):
        length = int.from_bytes(stream[pos + 3:pos + 5], "big")
        out.append((stream[pos], int.from_bytes(stream[pos + 1:pos + 3], "big"),
                    stream[pos:pos + 5 + length]))
        pos += 5 + length
    assert pos == len(stream)
    return out


class Messages:
    """Reassembles handshake messages from record payloads."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            end = 4 + int.from_bytes(self.buf[1:4], "big")
            if len(self.buf) < end:
                break
            out.append(self.buf[:end])
            self.buf = self.buf[end:]
        return out


@dataclass
class Hello:
    random: bytes
    cipher_suite: int = 0
    extensions: dict[int, bytes] = field(default_factory=dict)


def parse_server_hello(msg: bytes) -> Hello:
    pos = 4 + 2
    random = msg[pos:pos + 32]
    pos += 32
    pos += 1 + msg[pos]
    suite = int.from_bytes(msg[pos:pos + 2], "big")
    pos += 3
    ext_end = pos + 2 + int.from_bytes(msg[pos:pos + 2], "big")
    pos += 2
    exts = {}
    while pos < ext_end:
        ext_type = int.from_bytes(msg[pos:pos + 2], "big")
        size = int.from_bytes(msg[pos + 2:pos + 4], "big")
        exts[ext_type] = msg[pos + 4:pos + 4 + size]
        pos += 4 + size
    return Hello(random, suite, exts)


# -- TLS 1.0-1.2 ---------------------------------------------------------------------------
@dataclass
class Tls12Result:
    version: int
    suite: SuiteParams
    ems: bool
    etm: bool
    client_app: bytes
    server_app: bytes
    client_key_exchange: bytes
    premaster_check: str = ""


def decrypt_tls12(cap: peers.Capture, server_key: object = None) -> Tls12Result:
    c_records, s_records = records(cap.c2s), records(cap.s2c)
    client_msgs, server_msgs = Messages(), Messages()
    plain_client = [m for t, _, r in c_records if t == 22 for m in client_msgs.feed(r[5:])
                    if m[0] in (1, 16)]  # before the encrypted Finished the rest won't parse
    client_hello, cke = plain_client[0], plain_client[1]
    # Server plaintext handshake messages come before its ChangeCipherSpec.
    ccs_index = next(i for i, (t, _, _) in enumerate(s_records) if t == 20)
    server_plain = [m for t, _, r in s_records[:ccs_index] if t == 22
                    for m in server_msgs.feed(r[5:])]
    hello = parse_server_hello(server_plain[0])
    version = int.from_bytes(server_plain[0][4:6], "big")
    suite = SUITES[hello.cipher_suite]
    ems = EXT_EXTENDED_MASTER_SECRET in hello.extensions
    etm = EXT_ENCRYPT_THEN_MAC in hello.extensions
    client_random = client_hello[6:38]
    ms = cap.keylog.master_secret(client_random)
    assert ms is not None, "key log has no CLIENT_RANDOM line for this session"

    kb = key_block(version, suite.prf_hash, ms, client_random, hello.random,
                   *suite.key_material(version))
    client_prot, server_prot = protections_from_key_block(suite, kb, version, etm)
    hash_name = handshake_hash_name(version, suite.prf_hash)
    transcript = Transcript(hash_name)
    transcript.add(client_hello)
    done = server_plain.index(next(m for m in server_plain if m[0] == 14)) + 1
    for m in server_plain[:done]:
        transcript.add(m)
    transcript.add(cke)
    premaster_check = ""
    if isinstance(server_key, rsa.RSAPrivateKey) and suite.code in (0x002F, 0x003D, 0xC09C):
        premaster = server_key.decrypt(cke[6:], padding.PKCS1v15())
        assert premaster[:2] == client_hello[4:6]  # client_version inside the premaster
        expected = (extended_master_secret(version, suite.prf_hash, premaster,
                                           transcript.digest()) if ems else
                    master_secret(version, suite.prf_hash, premaster, client_random,
                                  hello.random))
        assert expected == ms
        premaster_check = "ems" if ems else "standard"

    client_app, c_fin = _decrypt_after_ccs(c_records, client_prot)
    assert c_fin == b"\x14\x00\x00\x0c" + prf_verify_data(
        version, suite.prf_hash, ms, transcript.digest(), "client")
    transcript.add(c_fin)
    for m in server_plain[done:]:  # NewSessionTicket
        transcript.add(m)
    server_app, s_fin = _decrypt_after_ccs(s_records, server_prot)
    assert s_fin == b"\x14\x00\x00\x0c" + prf_verify_data(
        version, suite.prf_hash, ms, transcript.digest(), "server")
    return Tls12Result(version, suite, ems, etm, client_app, server_app, cke, premaster_check)


def _decrypt_after_ccs(recs: list[tuple[int, int, bytes]], prot: RecordProtection
                       ) -> tuple[bytes, bytes]:
    """(application data, Finished message) from the records after ChangeCipherSpec."""
    ccs = next(i for i, (t, _, _) in enumerate(recs) if t == 20)
    app, handshake = bytearray(), bytearray()
    for _, _, raw in recs[ccs + 1:]:
        content_type, plaintext = prot.decrypt_record(raw)
        (handshake if content_type == 22 else app).extend(plaintext)
        assert content_type in (22, 23)
    return bytes(app), bytes(handshake)


# -- TLS 1.3 -------------------------------------------------------------------------------
@dataclass
class Tls13Result:
    suite: SuiteParams
    hello_retry: bool
    server_messages: list[int]
    client_app: bytes
    server_app: bytes


def _tls13_keys(suite: SuiteParams, secret: bytes) -> Tls13Protection:
    key, iv = traffic_keys(secret, suite.key_len, 12, suite.prf_hash)
    return Tls13Protection(suite.cipher, key, iv)


def decrypt_tls13(cap: peers.Capture) -> Tls13Result:
    c_records, s_records = records(cap.c2s), records(cap.s2c)
    c_plain = [r[5:] for t, _, r in c_records if t == 22]
    s_plain = [r[5:] for t, _, r in s_records if t == 22]
    first = parse_server_hello(s_plain[0])
    hello_retry = first.random == HRR_RANDOM
    hello = parse_server_hello(s_plain[1]) if hello_retry else first
    assert hello.extensions[EXT_SUPPORTED_VERSIONS] == b"\x03\x04"
    suite = SUITES[hello.cipher_suite]
    secrets = cap.keylog.secrets(c_plain[0][6:38])
    assert secrets is not None, "key log has no lines for this client random"

    transcript = Transcript(suite.prf_hash)
    transcript.add(c_plain[0])
    if hello_retry:
        transcript.apply_hello_retry(suite.prf_hash)
        transcript.add(s_plain[0])
        transcript.add(c_plain[1])
        assert c_plain[1][6:38] == c_plain[0][6:38]
    transcript.add(s_plain[-1])

    s_hs = secrets[kl.SERVER_HANDSHAKE_TRAFFIC_SECRET]
    prot = _tls13_keys(suite, s_hs)
    msgs, server_types, server_app = Messages(), [], bytearray()
    for t, _, raw in s_records:
        if t != 23:
            continue
        content_type, plaintext = prot.decrypt_record(raw)
        if content_type == 23:
            server_app += plaintext
            continue
        assert content_type == 22
        for m in msgs.feed(plaintext):
            server_types.append(m[0])
            if m[0] == 20 and server_types.count(20) == 1:
                fk = finished_key(s_hs, suite.prf_hash)
                assert m[4:] == verify_data(fk, transcript.digest(), suite.prf_hash)
                transcript.add(m)
                prot = _tls13_keys(suite, secrets[kl.SERVER_TRAFFIC_SECRET_0])
            elif 20 not in server_types:
                transcript.add(m)

    c_hs = secrets[kl.CLIENT_HANDSHAKE_TRAFFIC_SECRET]
    prot = _tls13_keys(suite, c_hs)
    client_app = bytearray()
    for t, _, raw in c_records:
        if t != 23:
            continue
        content_type, plaintext = prot.decrypt_record(raw)
        if content_type == 22:
            assert plaintext[0] == 20
            assert plaintext[4:] == verify_data(finished_key(c_hs, suite.prf_hash),
                                                transcript.digest(), suite.prf_hash)
            prot = _tls13_keys(suite, secrets[kl.CLIENT_TRAFFIC_SECRET_0])
        else:
            client_app += plaintext
    return Tls13Result(suite, hello_retry, server_types, bytes(client_app), bytes(server_app))


# -- fixtures ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def creds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, peers.Credentials]:
    directory = tmp_path_factory.mktemp("engine-creds")
    return {kind: peers.make_credentials(directory, kind) for kind in ("rsa", "ecdsa")}


def _server_ctx(creds: dict[str, peers.Credentials], ciphers: str,
                options: int = 0) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for c in creds.values():
        ctx.load_cert_chain(c.cert_path, c.key_path)
    ctx.set_ciphers(ciphers)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.options |= options
    return ctx


TLS12_CASES = [
    # (openssl cipher, version, server options, expect ems, expect etm)
    ("ECDHE-RSA-AES128-GCM-SHA256", "TLSv1_2", 0, True, False),
    ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLSv1_2", 0, True, False),
    ("ECDHE-RSA-CHACHA20-POLY1305", "TLSv1_2", 0, True, False),
    ("AES128-CCM", "TLSv1_2", 0, True, False),
    ("ECDHE-ECDSA-AES128-CCM8", "TLSv1_2", 0, True, False),
    ("ECDHE-ECDSA-AES256-CCM", "TLSv1_2", 0, True, False),
    ("ECDHE-RSA-AES128-SHA", "TLSv1_2", 0, True, True),
    ("ECDHE-RSA-AES256-SHA384", "TLSv1_2", peers.OP_NO_ENCRYPT_THEN_MAC, True, False),
    ("AES256-SHA256", "TLSv1_2",
     peers.OP_NO_ENCRYPT_THEN_MAC | peers.OP_NO_EXTENDED_MASTER_SECRET, False, False),
    ("AES128-SHA", "TLSv1", 0, True, True),
    ("AES128-SHA", "TLSv1", peers.OP_NO_ENCRYPT_THEN_MAC, True, False),
    ("ECDHE-ECDSA-AES256-SHA", "TLSv1_1", peers.OP_NO_ENCRYPT_THEN_MAC, True, False),
    ("ECDHE-RSA-AES128-SHA", "TLSv1_1", 0, True, True),
]


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
@pytest.mark.parametrize("cipher,version,options,ems,etm", TLS12_CASES,
                         ids=[f"{c[0]}-{c[1]}-{'etm' if c[4] else 'mte'}" for c in TLS12_CASES])
def test_tls12_session_from_python_ssl(creds: dict[str, peers.Credentials], tmp_path: Path,
                                       cipher: str, version: str, options: int, ems: bool,
                                       etm: bool) -> None:
    tls_version = getattr(ssl.TLSVersion, version)
    server = _server_ctx(creds, f"{cipher}:@SECLEVEL=0", options)
    client = peers.client_context(tmp_path / "keys.log")
    client.set_ciphers(f"{cipher}:@SECLEVEL=0")
    client.minimum_version = client.maximum_version = tls_version
    try:
        cap = peers.pyssl_pair(server, client, tmp_path / "keys.log")
    except ssl.SSLError as exc:
        if version == "TLSv1_2":
            raise
        pytest.skip(f"the local OpenSSL refuses {version}: {exc}")
    assert cap.server_received == peers.CLIENT_PAYLOAD
    assert cap.client_received == peers.SERVER_PAYLOAD

    result = decrypt_tls12(cap, creds["rsa"].private_key)
    assert result.version == {"TLSv1": 0x0301, "TLSv1_1": 0x0302, "TLSv1_2": 0x0303}[version]
    assert (result.ems, result.etm) == (ems, etm)
    assert result.client_app == peers.CLIENT_PAYLOAD
    assert result.server_app == peers.SERVER_PAYLOAD
    if cipher in ("AES128-CCM", "AES256-SHA256", "AES128-SHA"):
        assert result.premaster_check == ("ems" if ems else "standard")


def test_tls13_sha384_session_from_python_ssl(creds: dict[str, peers.Credentials],
                                              tmp_path: Path) -> None:
    server = _server_ctx(creds, "DEFAULT")
    cap = peers.pyssl_pair(server, peers.client_context(tmp_path / "keys.log"),
                           tmp_path / "keys.log")
    result = decrypt_tls13(cap)
    assert result.suite.code == 0x1302 and result.suite.prf_hash == "sha384"
    assert not result.hello_retry
    assert result.server_messages[:4] == [8, 11, 15, 20]  # EE, Certificate, CV, Finished
    assert 4 in result.server_messages[4:]  # NewSessionTicket under the application key
    assert result.client_app == peers.CLIENT_PAYLOAD
    assert result.server_app == peers.SERVER_PAYLOAD


@pytest.mark.parametrize("suite_name", ["TLS_AES_128_GCM_SHA256",
                                        "TLS_CHACHA20_POLY1305_SHA256",
                                        "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"])
def test_tls13_suites_from_pyopenssl(creds: dict[str, peers.Credentials],
                                     suite_name: str) -> None:
    cap = peers.pyopenssl_pair(creds["ecdsa"], suite_name)
    assert cap.client_received == peers.SERVER_PAYLOAD
    result = decrypt_tls13(cap)
    assert result.suite.name == suite_name
    assert result.server_messages[:4] == [8, 11, 15, 20]
    assert result.client_app == peers.CLIENT_PAYLOAD
    assert result.server_app == peers.SERVER_PAYLOAD
    # RFC 8446 section 7.5 exporter from the logged EXPORTER_SECRET equals OpenSSL's.
    label, context, length = peers.EXPORTER_ARGS
    secrets = cap.keylog.secrets(records(cap.c2s)[0][2][11:43]) or {}
    assert tls13_export(secrets[kl.EXPORTER_SECRET], label, context, length,
                        result.suite.prf_hash) == cap.exported


@pytest.mark.parametrize("cipher", ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-SHA384",
                                    "ECDHE-ECDSA-CHACHA20-POLY1305"])
def test_tls12_exporter_and_session_from_pyopenssl(creds: dict[str, peers.Credentials],
                                                   cipher: str) -> None:
    cap = peers.pyopenssl_pair(creds["ecdsa"], cipher, tls12=True)
    result = decrypt_tls12(cap)
    assert result.version == 0x0303 and result.ems
    assert result.client_app == peers.CLIENT_PAYLOAD
    assert result.server_app == peers.SERVER_PAYLOAD
    # RFC 5705 exporter from the logged master secret equals OpenSSL's.
    c_records, s_records = records(cap.c2s), records(cap.s2c)
    client_random = c_records[0][2][11:43]
    server_random = s_records[0][2][11:43]
    label, context, length = peers.EXPORTER_ARGS
    ms = cap.keylog.master_secret(client_random)
    assert ms is not None
    assert export_keying_material(0x0303, result.suite.prf_hash, ms, label, client_random,
                                  server_random, context, length) == cap.exported


@pytest.mark.servers
@pytest.mark.skipif(peers.OPENSSL is None, reason="openssl CLI not installed")
@pytest.mark.parametrize("ciphersuite", ["TLS_CHACHA20_POLY1305_SHA256",
                                         "TLS_AES_256_GCM_SHA384"])
def test_tls13_hello_retry_against_openssl_s_server(creds: dict[str, peers.Credentials],
                                                    tmp_path: Path, ciphersuite: str) -> None:
    # The client's only key share is x25519; a server limited to P-256 must ask again.
    keylog_path = tmp_path / "keys.log"
    cap = peers.s_server_session(
        creds["rsa"], ["-tls1_3", "-groups", "P-256", "-ciphersuites", ciphersuite],
        peers.client_context(keylog_path), keylog_path)
    result = decrypt_tls13(cap)
    assert result.hello_retry
    assert result.suite.name == ciphersuite
    assert result.client_app == cap.server_received
    assert result.server_app == cap.client_received == cap.server_received[:-1][::-1] + b"\n"


@pytest.mark.servers
@pytest.mark.skipif(peers.OPENSSL is None, reason="openssl CLI not installed")
def test_tls12_against_openssl_s_server(creds: dict[str, peers.Credentials],
                                        tmp_path: Path) -> None:
    keylog_path = tmp_path / "keys.log"
    client = peers.client_context(keylog_path)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    cap = peers.s_server_session(creds["rsa"], ["-cipher", "ECDHE-RSA-AES256-SHA384"],
                                 client, keylog_path)
    result = decrypt_tls12(cap)
    assert result.suite.code == 0xC028 and result.etm
    assert result.client_app == cap.server_received
    assert result.server_app == cap.client_received


def test_tampered_capture_is_rejected(creds: dict[str, peers.Credentials],
                                      tmp_path: Path) -> None:
    server = _server_ctx(creds, "DEFAULT")
    cap = peers.pyssl_pair(server, peers.client_context(tmp_path / "keys.log"),
                           tmp_path / "keys.log")
    s2c = bytearray(cap.s2c)
    s2c[-3] ^= 0x01  # inside the tag of the last application record
    with pytest.raises(ValueError):
        decrypt_tls13(peers.Capture(cap.c2s, bytes(s2c), cap.keylog, cap.client_received,
                                    cap.server_received))
