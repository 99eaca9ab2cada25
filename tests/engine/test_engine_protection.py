"""Record protection: RFC 8448 records, every suite family round trip and tampering, the
nonce/AAD/MAC layouts rebuilt by hand, and tlslite-ng's record layer as an independent peer."""

from __future__ import annotations

import errno
import hashlib
import hmac
import os

from tests.engine import engine_rfc8448 as v
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from hypothesis import given, settings
from hypothesis import strategies as st
from tlslite.messages import ApplicationData
from tlslite.recordlayer import RecordLayer

from tlsprobe.engine.prf import key_block
from tlsprobe.engine.protection import (
    CbcProtection,
    RecordProtection,
    RecordProtectionError,
    Tls12AeadProtection,
    Tls13Protection,
    protection_for_suite,
    protections_from_key_block,
)
from tlsprobe.engine.suites import SUITES, SuiteParams, suite_params


def pair(suite: SuiteParams, version: int, etm: bool = False
         ) -> tuple[RecordProtection, RecordProtection]:
    """Sender and receiver sharing random key material for `suite`."""
    mac_len, key_len, iv_len = suite.key_material(version)
    key, iv, mac_key = os.urandom(key_len), os.urandom(iv_len), os.urandom(mac_len)
    return (protection_for_suite(suite, key, iv, mac_key, version, etm),
            protection_for_suite(suite, key, iv, mac_key, version, etm))


def _cases() -> list[tuple[int, int, bool]]:
    cases = []
    for code, suite in SUITES.items():
        if suite.tls13:
            cases.append((code, 0x0304, False))
        elif suite.aead:
            cases.append((code, 0x0303, False))
        else:
            for version in (0x0301, 0x0302, 0x0303):
                cases += [(code, version, False), (code, version, True)]
    return cases


# -- RFC 8448 ------------------------------------------------------------------------------
RFC_RECORDS = [
    ("server handshake", v.SERVER_HS_KEY, v.SERVER_HS_IV, 0, v.SERVER_HANDSHAKE_RECORD, 22),
    ("client finished", v.CLIENT_HS_KEY, v.CLIENT_HS_IV, 0, v.CLIENT_FINISHED_RECORD, 22),
    ("client app data", v.CLIENT_AP_KEY, v.CLIENT_AP_IV, 0, v.CLIENT_APPLICATION_RECORD, 23),
    ("server app data", v.SERVER_AP_KEY, v.SERVER_AP_IV, v.SERVER_APPLICATION_SEQ,
     v.SERVER_APPLICATION_RECORD, 23),
]


@pytest.mark.parametrize("name,key,iv,seq,record,content_type", RFC_RECORDS,
                         ids=[r[0] for r in RFC_RECORDS])
def test_rfc8448_records_decrypt_and_reencrypt(name: str, key: bytes, iv: bytes, seq: int,
                                               record: bytes, content_type: int) -> None:
    opener = Tls13Protection("AES-128-GCM", key, iv, seq=seq)
    got_type, plaintext = opener.decrypt_record(record)
    assert got_type == content_type
    assert opener.seq == seq + 1
    if content_type == 23:
        assert plaintext == v.APPLICATION_PAYLOAD
    sealer = Tls13Protection("AES-128-GCM", key, iv, seq=seq)
    assert sealer.encrypt(content_type, plaintext) == record


def test_rfc8448_server_flight_content() -> None:
    opener = Tls13Protection("AES-128-GCM", v.SERVER_HS_KEY, v.SERVER_HS_IV)
    _, plaintext = opener.decrypt_record(v.SERVER_HANDSHAKE_RECORD)
    assert len(plaintext) == 657
    assert plaintext.startswith(v.ENCRYPTED_EXTENSIONS + b"\x0b\x00\x01\xb9")
    assert plaintext.endswith(b"\x14\x00\x00\x20" + v.SERVER_FINISHED_VERIFY_DATA)


def test_rfc8448_wrong_sequence_key_or_bytes_fail() -> None:
    record = v.CLIENT_APPLICATION_RECORD
    for seq in (1, 2, 255, (1 << 64) - 2):
        with pytest.raises(RecordProtectionError) as err:
            Tls13Protection("AES-128-GCM", v.CLIENT_AP_KEY, v.CLIENT_AP_IV, seq).decrypt_record(
                record)
        assert err.value.alert == 20
    with pytest.raises(RecordProtectionError):
        Tls13Protection("AES-128-GCM", v.SERVER_AP_KEY, v.SERVER_AP_IV).decrypt_record(record)
    for pos in (0, 1, 2, 5, 20, len(record) - 1):  # header bytes are additional data
        tampered = bytearray(record)
        tampered[pos] ^= 0x01
        opener = Tls13Protection("AES-128-GCM", v.CLIENT_AP_KEY, v.CLIENT_AP_IV)
        with pytest.raises(RecordProtectionError):
            opener.decrypt_record(bytes(tampered))
        assert opener.seq == 0  # a failed open leaves the sequence alone
    with pytest.raises(RecordProtectionError):  # length field disagrees with the record
        Tls13Protection("AES-128-GCM", v.CLIENT_AP_KEY, v.CLIENT_AP_IV).decrypt_record(
            record[:-1])


# -- TLS 1.3 specifics ---------------------------------------------------------------------
@pytest.mark.parametrize("cipher,key_len", [("AES-128-GCM", 16), ("AES-256-GCM", 32),
                                            ("CHACHA20-POLY1305", 32), ("AES-128-CCM", 16),
                                            ("AES-128-CCM-8", 16)])
def test_tls13_padding_and_header(cipher: str, key_len: int) -> None:
    key, iv = os.urandom(key_len), os.urandom(12)
    sealer, opener = Tls13Protection(cipher, key, iv), Tls13Protection(cipher, key, iv)
    record = sealer.encrypt(21, b"\x01\x00", padding=100)
    assert record[:3] == b"\x17\x03\x03"
    assert len(record) == 5 + 2 + 1 + 100 + sealer.tag_len
    assert opener.decrypt_record(record) == (21, b"\x01\x00")
    assert opener.decrypt_record(sealer.encrypt(23, b"")) == (23, b"")


def test_tls13_inner_plaintext_without_type_is_unexpected_message() -> None:
    key, iv = os.urandom(16), os.urandom(12)
    header = b"\x17\x03\x03\x00\x20"
    body = AESGCM(key).encrypt(iv, bytes(16), header)  # all-zero TLSInnerPlaintext
    with pytest.raises(RecordProtectionError) as err:
        Tls13Protection("AES-128-GCM", key, iv).decrypt_record(header + body)
    assert err.value.alert == 10


def test_tls13_length_limits() -> None:
    prot = Tls13Protection("AES-128-GCM", os.urandom(16), os.urandom(12))
    with pytest.raises(RecordProtectionError) as err:
        prot.decrypt(23, 0x0303, bytes((1 << 14) + 257))
    assert err.value.alert == 22
    with pytest.raises(RecordProtectionError):
        prot.decrypt(23, 0x0303, bytes(16))
    key, iv = os.urandom(16), os.urandom(12)
    big = Tls13Protection("AES-128-GCM", key, iv).encrypt(23, bytes((1 << 14) + 1))
    with pytest.raises(RecordProtectionError) as err:
        Tls13Protection("AES-128-GCM", key, iv).decrypt_record(big)
    assert err.value.alert == 22


def test_bad_key_material_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Tls13Protection("AES-128-GCM", bytes(15), bytes(12))
    with pytest.raises(ValueError):
        Tls13Protection("AES-128-GCM", bytes(16), bytes(8))
    with pytest.raises(ValueError):
        Tls12AeadProtection("AES-128-GCM", bytes(16), bytes(12))
    with pytest.raises(ValueError):
        CbcProtection("AES-128-CBC", bytes(16), "sha1", bytes(19))
    with pytest.raises(ValueError):
        CbcProtection("AES-128-CBC", bytes(16), "sha1", bytes(20), 0x0301)  # no chain IV
    with pytest.raises(ValueError):
        Tls13Protection("AES-128-CBC", bytes(16), bytes(12))


# -- every suite: round trip and tampering -------------------------------------------------
@pytest.mark.parametrize("code,version,etm", _cases(),
                         ids=[f"{SUITES[c].name}-{v:04x}{'-etm' if e else ''}"
                              for c, v, e in _cases()])
def test_round_trip_and_tamper(code: int, version: int, etm: bool) -> None:
    suite = SUITES[code]
    sender, receiver = pair(suite, version, etm)
    records = []
    for size in (0, 1, 15, 16, 17, 31, 100, 1 << 14):
        plaintext = os.urandom(size)
        record = sender.encrypt(23, plaintext)
        assert int.from_bytes(record[3:5], "big") == len(record) - 5
        records.append(record)
        assert receiver.decrypt_record(record) == (23, plaintext)
    assert sender.seq == receiver.seq == 8
    record = sender.encrypt(22, b"handshake bytes")
    for pos in (0, 2, 5, len(record) // 2, len(record) - 1):
        tampered = bytearray(record)
        tampered[pos] ^= 0x80
        with pytest.raises(RecordProtectionError):
            receiver.decrypt_record(bytes(tampered))
    with pytest.raises(RecordProtectionError):  # replay of an old record
        receiver.decrypt_record(records[1])
    assert receiver.decrypt_record(record) == (22, b"handshake bytes")


def test_suite_table() -> None:
    assert suite_params(0xFFFF) is None
    assert suite_params(0x1302).prf_hash == "sha384"  # type: ignore[union-attr]
    gcm = SUITES[0xC02F]
    assert (gcm.cipher, gcm.key_len, gcm.iv_len, gcm.mac, gcm.aead) == \
        ("AES-128-GCM", 16, 4, None, True)
    assert SUITES[0xC0A0].cipher_params.tag_len == 8
    assert SUITES[0xCCA8].key_material(0x0303) == (0, 32, 12)
    assert SUITES[0x000A].key_material(0x0301) == (20, 24, 8)
    assert SUITES[0xC028].key_material(0x0303) == (48, 32, 0)
    assert SUITES[0x1301].key_material(0x0304) == (0, 16, 12)
    assert {SUITES[c].prf_hash for c in (0x009D, 0xC02C, 0xC030, 0xC024)} == {"sha384"}


# -- layouts rebuilt by hand ---------------------------------------------------------------
def test_tls12_gcm_nonce_and_additional_data() -> None:
    key, salt = os.urandom(16), os.urandom(4)
    prot = Tls12AeadProtection("AES-128-GCM", key, salt, seq=5)
    record = prot.encrypt(23, b"hello")
    explicit = record[5:13]
    assert explicit == (5).to_bytes(8, "big")
    aad = (5).to_bytes(8, "big") + b"\x17\x03\x03\x00\x05"
    assert AESGCM(key).decrypt(salt + explicit, record[13:], aad) == b"hello"


def test_tls12_chacha_nonce_and_additional_data() -> None:
    key, iv = os.urandom(32), os.urandom(12)
    prot = Tls12AeadProtection("CHACHA20-POLY1305", key, iv, seq=0x0102)
    record = prot.encrypt(22, b"hi")
    assert len(record) == 5 + 2 + 16  # no explicit nonce
    nonce = iv[:10] + bytes([iv[10] ^ 0x01, iv[11] ^ 0x02])
    aad = (0x0102).to_bytes(8, "big") + b"\x16\x03\x03\x00\x02"
    assert ChaCha20Poly1305(key).decrypt(nonce, record[5:], aad) == b"hi"


def _cbc_decrypt(key: bytes, iv: bytes, data: bytes) -> bytes:
    d = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    return d.update(data) + d.finalize()


def test_cbc_mac_then_encrypt_layout() -> None:
    key, mac_key = os.urandom(16), os.urandom(20)
    record = CbcProtection("AES-128-CBC", key, "sha1", mac_key, 0x0303, seq=3).encrypt(23, b"x" * 7)
    iv, ciphertext = record[5:21], record[21:]
    plain = _cbc_decrypt(key, iv, ciphertext)
    pad = plain[-1]
    assert plain[-pad - 1:] == bytes([pad]) * (pad + 1)
    mac = hmac.new(mac_key, (3).to_bytes(8, "big") + b"\x17\x03\x03\x00\x07" + b"x" * 7,
                   hashlib.sha1).digest()
    assert plain[:-pad - 1] == b"x" * 7 + mac


def test_cbc_encrypt_then_mac_layout() -> None:
    key, mac_key = os.urandom(32), os.urandom(32)
    record = CbcProtection("AES-256-CBC", key, "sha256", mac_key, 0x0303,
                           encrypt_then_mac=True).encrypt(23, b"y" * 20)
    body, tag = record[5:-32], record[-32:]
    header = b"\x17\x03\x03" + len(body).to_bytes(2, "big")
    assert tag == hmac.new(mac_key, bytes(8) + header + body, hashlib.sha256).digest()
    plain = _cbc_decrypt(key, body[:16], body[16:])
    assert plain[:20] == b"y" * 20 and plain[-1] == 11


def test_tls10_iv_is_chained() -> None:
    key, mac_key, iv = os.urandom(16), os.urandom(20), os.urandom(16)
    sender = CbcProtection("AES-128-CBC", key, "sha1", mac_key, 0x0301, iv=iv)
    first, second = sender.encrypt(23, b"a" * 40), sender.encrypt(23, b"b" * 40)
    assert len(first) == 5 + 64  # no explicit IV: 40 + 20 MAC + 4 padding
    assert _cbc_decrypt(key, iv, first[5:])[:40] == b"a" * 40
    assert _cbc_decrypt(key, first[-16:], second[5:])[:40] == b"b" * 40
    receiver = CbcProtection("AES-128-CBC", key, "sha1", mac_key, 0x0301, iv=iv)
    assert receiver.decrypt_record(first) == (23, b"a" * 40)
    assert receiver.decrypt_record(second) == (23, b"b" * 40)


def _mte_record(key: bytes, mac_key: bytes, plaintext_and_padding: bytes) -> bytes:
    iv = os.urandom(16)
    e = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    body = iv + e.update(plaintext_and_padding) + e.finalize()
    return b"\x17\x03\x03" + len(body).to_bytes(2, "big") + body


def test_cbc_padding_errors() -> None:
    key, mac_key = os.urandom(16), os.urandom(20)
    content = b"z" * 5
    mac = hmac.new(mac_key, bytes(8) + b"\x17\x03\x03\x00\x05" + content, hashlib.sha1).digest()
    good = content + mac + bytes([6]) * 7  # 5 + 20 + 7 = 32
    assert CbcProtection("AES-128-CBC", key, "sha1", mac_key).decrypt_record(
        _mte_record(key, mac_key, good)) == (23, content)
    bad_padding = content + mac + bytes([6]) * 6 + b"\x05"
    too_long_padding = content + mac[:-1] + bytes([26]) * 8
    for variant in (bad_padding, too_long_padding, content + mac[:-2] + bytes([0x11]) * 9):
        with pytest.raises(RecordProtectionError) as err:
            CbcProtection("AES-128-CBC", key, "sha1", mac_key).decrypt_record(
                _mte_record(key, mac_key, variant))
        assert err.value.alert == 20
    prot = CbcProtection("AES-128-CBC", key, "sha1", mac_key)
    for length in (0, 16, 31, 33):  # not IV + whole blocks holding a MAC
        with pytest.raises(RecordProtectionError):
            prot.decrypt(23, 0x0303, bytes(length))
    etm = CbcProtection("AES-128-CBC", key, "sha1", mac_key, encrypt_then_mac=True)
    for length in (20, 36, 52 + 1):
        with pytest.raises(RecordProtectionError):
            etm.decrypt(23, 0x0303, bytes(length))


def test_sequence_exhaustion() -> None:
    prot = Tls13Protection("AES-128-GCM", bytes(16), bytes(12), seq=(1 << 64) - 1)
    with pytest.raises(RecordProtectionError):
        prot.encrypt(23, b"")


# -- tlslite-ng's record layer as the peer -------------------------------------------------
class _Sock:
    """Just enough socket for tlslite's RecordLayer."""

    def __init__(self, data: bytes = b"") -> None:
        self.buf = bytearray(data)
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(bytes(data))
        return len(data)

    def recv(self, n: int) -> bytes:
        if not self.buf:
            raise OSError(errno.EWOULDBLOCK)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out


def _tlslite_layer(sock: _Sock, code: int, version: int, etm: bool, client: bool,
                   ms: bytes, cr: bytes, sr: bytes) -> RecordLayer:
    layer = RecordLayer(sock)
    layer.version = (3, version & 0xFF)
    layer.encryptThenMAC = etm
    layer.client = client
    layer.calcPendingStates(code, bytearray(ms), bytearray(cr), bytearray(sr), None)
    return layer


TLSLITE_CASES = [(c, ver, etm) for c in (0x000A, 0x002F, 0x0035, 0x003C, 0xC028, 0x0002, 0x003B)
                 for ver in (0x0301, 0x0302, 0x0303) for etm in (False, True)] + \
    [(c, 0x0303, False) for c in (0x009C, 0xC030, 0xC09C, 0xC09D, 0xC0A0, 0xC0A1, 0xCCA8)]


@pytest.mark.parametrize("code,version,etm", TLSLITE_CASES,
                         ids=[f"{SUITES[c].name}-{v:04x}{'-etm' if e else ''}"
                              for c, v, e in TLSLITE_CASES])
def test_interop_with_tlslite_record_layer(code: int, version: int, etm: bool) -> None:
    suite = SUITES[code]
    ms, cr, sr = os.urandom(48), os.urandom(32), os.urandom(32)
    kb = key_block(version, suite.prf_hash, ms, cr, sr, *suite.key_material(version))
    client, server = protections_from_key_block(suite, kb, version, etm)
    # tlslite's 3DES is pure Python and slow: keep its records short.
    payloads = [os.urandom(n) for n in ((1, 16, 200) if suite.cipher == "3DES-EDE-CBC"
                                        else (1, 16, 200, 5000))]

    # tlslite as the client writes; we read with the client_write protection.
    sock = _Sock()
    layer = _tlslite_layer(sock, code, version, etm, True, ms, cr, sr)
    layer.changeWriteState()
    for p in payloads:
        for _ in layer.sendRecord(ApplicationData().create(bytearray(p))):
            pass
    assert [client.decrypt_record(r) for r in sock.sent] == [(23, p) for p in payloads]

    # We write as the server; tlslite as the client reads.
    sock = _Sock(b"".join(server.encrypt(23, p) for p in payloads))
    layer = _tlslite_layer(sock, code, version, etm, True, ms, cr, sr)
    layer.changeReadState()
    received = []
    for _ in payloads:
        for result in layer.recvRecord():
            if result not in (0, 1):
                received.append(bytes(result[1].bytes))
                break
    assert received == payloads


# -- arbitrary input: one exception type, never a crash ------------------------------------
_FUZZ = [(c, ver, etm) for c, ver, etm in _cases()
         if c in (0x1301, 0x1303, 0x1305, 0xC02F, 0xC0A0, 0xCCA8, 0x002F, 0x000A, 0x0002)]


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(_FUZZ), content_type=st.integers(0, 255),
       fragment=st.binary(max_size=300))
def test_decrypt_of_arbitrary_bytes_only_raises_record_protection_error(
        case: tuple[int, int, bool], content_type: int, fragment: bytes) -> None:
    code, version, etm = case
    suite = SUITES[code]
    mac_len, key_len, iv_len = suite.key_material(version)
    prot = protection_for_suite(suite, bytes(key_len), bytes(iv_len), bytes(mac_len), version,
                                etm)
    with pytest.raises(RecordProtectionError):
        prot.decrypt(content_type, 0x0303, fragment)
    assert prot.seq == 0
