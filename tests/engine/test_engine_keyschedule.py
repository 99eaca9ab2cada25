"""TLS 1.3 key schedule and transcript against RFC 8448 section 3 and an independent HKDF."""

from __future__ import annotations

import hashlib
import os

from tests.engine import engine_rfc8448 as v
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import (
    X25519PrivateKey,
    X25519PublicKey,
)
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from tlsprobe.engine.keyschedule import (
    KeySchedule,
    Transcript,
    derive_secret,
    digest,
    finished_key,
    hkdf_expand,
    hkdf_expand_label,
    hkdf_extract,
    hkdf_label,
    resumption_psk,
    tls13_hash_name,
    traffic_keys,
    verify_data,
)
from tlsprobe.engine.protection import Tls13Protection


def split_messages(data: bytes) -> list[bytes]:
    """Whole handshake messages (header included) from a concatenation."""
    out, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 1:pos + 4], "big")
        out.append(data[pos:pos + 4 + length])
        pos += 4 + length
    return out


@pytest.fixture(scope="module")
def server_flight() -> list[bytes]:
    """EE, Certificate, CertificateVerify, Finished from the RFC's encrypted record."""
    prot = Tls13Protection("AES-128-GCM", v.SERVER_HS_KEY, v.SERVER_HS_IV)
    content_type, plaintext = prot.decrypt_record(v.SERVER_HANDSHAKE_RECORD)
    assert content_type == 22
    return split_messages(plaintext)


def test_hkdf_matches_cryptography_hkdf() -> None:
    for hash_name, algo in (("sha256", hashes.SHA256()), ("sha384", hashes.SHA384())):
        for length in (1, 12, 32, 48, 100, 255):
            ikm, salt, info = os.urandom(40), os.urandom(20), os.urandom(30)
            ours = hkdf_expand(hkdf_extract(salt, ikm, hash_name), info, length, hash_name)
            theirs = HKDF(algorithm=algo, length=length, salt=salt, info=info).derive(ikm)
            assert ours == theirs
            prk = os.urandom(algo.digest_size)
            assert hkdf_expand(prk, info, length, hash_name) == \
                HKDFExpand(algorithm=algo, length=length, info=info).derive(prk)


def test_hkdf_label_layout() -> None:
    # RFC 8448 logs the info for the server handshake key: 00 10 09 "tls13 key" 00.
    assert hkdf_label("key", b"", 16) == bytes.fromhex("001009746c733133206b657900")
    assert hkdf_label(b"iv", b"", 12) == bytes.fromhex("000c08746c73313320697600")


def test_hkdf_expand_rejects_too_long() -> None:
    with pytest.raises(ValueError):
        hkdf_expand(bytes(32), b"", 255 * 32 + 1)


def test_rfc8448_schedule_step_by_step() -> None:
    early = hkdf_extract(b"", bytes(32))
    assert early == v.EARLY_SECRET
    assert derive_secret(early, "derived", hashlib.sha256(b"").digest()) == v.DERIVED_FOR_HANDSHAKE
    assert hkdf_extract(v.DERIVED_FOR_HANDSHAKE, v.SHARED_SECRET) == v.HANDSHAKE_SECRET
    hello_hash = hashlib.sha256(v.CLIENT_HELLO + v.SERVER_HELLO).digest()
    assert derive_secret(v.HANDSHAKE_SECRET, b"c hs traffic", hello_hash) == v.CLIENT_HS_TRAFFIC
    assert derive_secret(v.HANDSHAKE_SECRET, b"s hs traffic", hello_hash) == v.SERVER_HS_TRAFFIC
    assert traffic_keys(v.SERVER_HS_TRAFFIC, 16, 12) == (v.SERVER_HS_KEY, v.SERVER_HS_IV)
    assert hkdf_expand_label(v.CLIENT_HS_TRAFFIC, "key", b"", 16) == v.CLIENT_HS_KEY
    assert finished_key(v.SERVER_HS_TRAFFIC) == v.SERVER_FINISHED_KEY


def test_rfc8448_shared_secret_is_x25519() -> None:
    private = X25519PrivateKey.from_private_bytes(v.CLIENT_X25519_PRIVATE)
    assert private.public_key().public_bytes_raw() == v.CLIENT_X25519_PUBLIC
    shared = private.exchange(X25519PublicKey.from_public_bytes(v.SERVER_X25519_PUBLIC))
    assert shared == v.SHARED_SECRET


def test_rfc8448_full_walk(server_flight: list[bytes]) -> None:
    ee, certificate, certificate_verify, server_finished = server_flight
    assert ee == v.ENCRYPTED_EXTENSIONS
    assert certificate_verify.startswith(v.CERTIFICATE_VERIFY_PREFIX)
    transcript = Transcript()
    transcript.add(v.CLIENT_HELLO)
    transcript.add(v.SERVER_HELLO)
    transcript.hash_name = tls13_hash_name(0x1301)

    ks = KeySchedule("sha256")
    assert ks.early_secret == v.EARLY_SECRET
    ks.handshake(v.SHARED_SECRET, transcript.digest())
    assert ks.handshake_secret == v.HANDSHAKE_SECRET
    assert ks.client_handshake_traffic_secret == v.CLIENT_HS_TRAFFIC
    assert ks.server_handshake_traffic_secret == v.SERVER_HS_TRAFFIC
    assert ks.master_secret == v.MASTER_SECRET
    assert ks.traffic_keys(v.CLIENT_HS_TRAFFIC, 16, 12) == (v.CLIENT_HS_KEY, v.CLIENT_HS_IV)

    for message in (ee, certificate, certificate_verify):
        transcript.add(message)
    s_finished_key = ks.finished_key(ks.server_handshake_traffic_secret)
    expected = ks.verify_data(s_finished_key, transcript.digest())
    assert expected == v.SERVER_FINISHED_VERIFY_DATA
    assert server_finished == b"\x14\x00\x00\x20" + expected

    transcript.add(server_finished)
    ks.application(transcript.digest())
    assert ks.client_application_traffic_secret_0 == v.CLIENT_AP_TRAFFIC
    assert ks.server_application_traffic_secret_0 == v.SERVER_AP_TRAFFIC
    assert ks.exporter_master_secret == v.EXPORTER_MASTER
    assert ks.traffic_keys(v.SERVER_AP_TRAFFIC, 16, 12) == (v.SERVER_AP_KEY, v.SERVER_AP_IV)
    assert ks.traffic_keys(v.CLIENT_AP_TRAFFIC, 16, 12) == (v.CLIENT_AP_KEY, v.CLIENT_AP_IV)

    # The client Finished computed here must equal the one inside the RFC's client record.
    c_verify = verify_data(finished_key(v.CLIENT_HS_TRAFFIC), transcript.digest())
    assert c_verify == v.CLIENT_FINISHED_VERIFY_DATA
    client_prot = Tls13Protection("AES-128-GCM", v.CLIENT_HS_KEY, v.CLIENT_HS_IV)
    assert client_prot.decrypt_record(v.CLIENT_FINISHED_RECORD) == \
        (22, b"\x14\x00\x00\x20" + c_verify)

    transcript.add(b"\x14\x00\x00\x20" + c_verify)
    assert transcript.digest() == v.CLIENT_FINISHED_TRANSCRIPT_HASH
    assert ks.resumption(transcript.digest()) == v.RESUMPTION_MASTER
    assert resumption_psk(v.RESUMPTION_MASTER, b"\x00\x00") == v.RESUMPTION_PSK


def test_schedule_order_and_length_errors() -> None:
    ks = KeySchedule("sha384")
    with pytest.raises(ValueError):
        ks.application(bytes(48))
    with pytest.raises(ValueError):
        ks.handshake(bytes(48), bytes(32))  # SHA-256 sized hash into a SHA-384 schedule
    with pytest.raises(ValueError):
        ks.export(b"EXPORTER-x", b"", 16)
    ks.handshake(os.urandom(48), bytes(48))
    ks.application(bytes(48))
    assert len(ks.client_application_traffic_secret_0 or b"") == 48
    assert len(ks.export("EXPORTER-test", b"ctx", 20)) == 20


def test_next_traffic_secret_and_binder_are_labelled_expansions() -> None:
    ks = KeySchedule("sha256")
    assert ks.next_traffic_secret(v.SERVER_AP_TRAFFIC) == \
        hkdf_expand_label(v.SERVER_AP_TRAFFIC, "traffic upd", b"", 32)
    empty = hashlib.sha256(b"").digest()
    assert ks.binder_key() == derive_secret(v.EARLY_SECRET, "res binder", empty)
    assert ks.binder_key(external=True) == derive_secret(v.EARLY_SECRET, "ext binder", empty)
    psk_ks = KeySchedule("sha256", psk=v.RESUMPTION_PSK)
    assert psk_ks.early_secret == hkdf_extract(bytes(32), v.RESUMPTION_PSK)


def test_tls13_hash_name() -> None:
    assert tls13_hash_name(0x1302) == "sha384"
    assert [tls13_hash_name(c) for c in (0x1301, 0x1303, 0x1304, 0x1305)] == ["sha256"] * 4


def test_transcript_running_hash_is_not_consumed() -> None:
    messages = [os.urandom(n) for n in (5, 100, 1000)]
    t = Transcript("sha384")
    seen = b""
    for m in messages:
        t.add(m)
        seen += m
        assert t.digest() == hashlib.sha384(seen).digest()
        assert t.digest() == hashlib.sha384(seen).digest()
    # A second hash requested late still covers everything added before.
    assert t.digest("sha256") == hashlib.sha256(seen).digest()
    assert t.digest("md5sha1") == hashlib.md5(seen).digest() + hashlib.sha1(seen).digest()
    t.add(b"more")
    assert t.digest("sha256") == hashlib.sha256(seen + b"more").digest()
    assert t.data == seen + b"more" and len(t) == len(seen) + 4


def test_transcript_without_hash_refuses_digest() -> None:
    t = Transcript()
    t.add(v.CLIENT_HELLO)
    with pytest.raises(ValueError):
        t.digest()


@pytest.mark.parametrize("hash_name", ["sha256", "sha384"])
def test_transcript_hello_retry_substitution(hash_name: str) -> None:
    ch1, hrr, ch2 = v.CLIENT_HELLO, b"\x02\x00\x00\x04abcd", b"\x01\x00\x00\x02xy"
    t = Transcript()
    t.add(ch1)
    t.apply_hello_retry(hash_name)
    t.add(hrr)
    t.add(ch2)
    inner = digest(hash_name, ch1)
    synthetic = bytes([254, 0, 0, len(inner)]) + inner
    assert t.data == synthetic + hrr + ch2
    assert t.digest() == digest(hash_name, synthetic + hrr + ch2)
    assert t.hello_retry_applied


def test_transcript_hello_retry_needs_tls13_hash() -> None:
    t = Transcript()
    t.add(v.CLIENT_HELLO)
    with pytest.raises(ValueError):
        t.apply_hello_retry()
