"""TLS 1.0-1.2 PRF: published P_SHA256/P_SHA384 vectors, OpenSSL's TLS1-PRF and tlslite-ng."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

import pytest
from tlslite import mathtls
from tlslite.constants import CipherSuite
from tlslite.handshakehashes import HandshakeHashes

from tlsprobe.engine.prf import (
    export_keying_material,
    extended_master_secret,
    handshake_hash_name,
    key_block,
    master_secret,
    p_hash,
    prf,
    prf_tls10,
    prf_tls12,
    verify_data,
)

# The P_SHA256 / P_SHA384 vectors posted to the IETF TLS list (msg03416), secret, seed,
# label "test label".
SHA256_SECRET = bytes.fromhex("9bbe436ba940f017b17652849a71db35")
SHA256_SEED = bytes.fromhex("a0ba9f936cda311827a6f796ffd5198c")
SHA256_OUT = bytes.fromhex(
    "e3f229ba727be17b8d122620557cd453c2aab21d07c3d495329b52d4e61edb5a6b301791e90d35c9c9a46b4e"
    "14baf9af0fa022f7077def17abfd3797c0564bab4fbc91666e9def9b97fce34f796789baa48082d122ee42c5"
    "a72e5a5110fff70187347b66")
SHA384_SECRET = bytes.fromhex("b80b733d6ceefcdc71566ea48e5567df")
SHA384_SEED = bytes.fromhex("cd665cf6a8447dd6ff8b27555edb7465")
SHA384_OUT = bytes.fromhex(
    "7b0c18e9ced410ed1804f2cfa34a336a1c14dffb4900bb5fd7942107e81c83cde9ca0faa60be9fe34f82b123"
    "3c9146a0e534cb400fed2700884f9dc236f80edd8bfa961144c9e8d792eca722a7b32fc3d416d473ebc2c5fd"
    "4abfdad05d9184259b5bf8cd4d90fa0d31e2dec479e4f1a26066f2eea9a69236a3e52655c9e9aee691c8f3a2"
    "6854308d5eaa3be85e0990703d73e56f")

OPENSSL = shutil.which("openssl")


def openssl_tls1_prf(digest: str, secret: bytes, seed: bytes, length: int) -> bytes:
    """OpenSSL's TLS1-PRF KDF through the CLI (seed = label + seed)."""
    assert OPENSSL is not None
    out = subprocess.run(
        [OPENSSL, "kdf", "-keylen", str(length), "-kdfopt", f"digest:{digest}",
         "-kdfopt", f"hexsecret:{secret.hex()}", "-kdfopt", f"hexseed:{seed.hex()}",
         "TLS1-PRF"], check=True, capture_output=True, text=True, timeout=20).stdout
    return bytes.fromhex(out.strip().replace(":", ""))


def test_ietf_p_sha256_vector() -> None:
    assert prf_tls12("sha256", SHA256_SECRET, b"test label", SHA256_SEED, 100) == SHA256_OUT
    assert prf(0x0303, "sha256", SHA256_SECRET, b"test label", SHA256_SEED, 100) == SHA256_OUT


def test_ietf_p_sha384_vector() -> None:
    assert prf_tls12("sha384", SHA384_SECRET, b"test label", SHA384_SEED, 148) == SHA384_OUT


def test_output_is_a_prefix_stream() -> None:
    for n in (0, 1, 31, 32, 33, 64, 99):
        assert prf_tls12("sha256", SHA256_SECRET, b"test label", SHA256_SEED, n) == SHA256_OUT[:n]
    full = prf_tls10(b"s" * 13, b"label", b"seed", 80)
    assert prf_tls10(b"s" * 13, b"label", b"seed", 21) == full[:21]


@pytest.mark.skipif(OPENSSL is None, reason="openssl CLI not installed")
@pytest.mark.parametrize("secret_len", [0, 1, 47, 48])
def test_tls10_prf_matches_openssl_md5_sha1(secret_len: int) -> None:
    # Odd secret lengths share the middle byte between the MD5 and SHA-1 halves.
    secret, seed = os.urandom(secret_len), os.urandom(64)
    ours = prf_tls10(secret, b"key expansion", seed, 104)
    assert ours == openssl_tls1_prf("MD5-SHA1", secret, b"key expansion" + seed, 104)


@pytest.mark.skipif(OPENSSL is None, reason="openssl CLI not installed")
def test_tls12_prf_matches_openssl_sha384() -> None:
    secret, seed = os.urandom(48), os.urandom(64)
    assert prf(0x0303, "sha384", secret, b"master secret", seed, 48) == \
        openssl_tls1_prf("SHA384", secret, b"master secret" + seed, 48)


def test_prfs_match_tlslite() -> None:
    for secret_len in (1, 20, 47, 48):
        secret, seed = os.urandom(secret_len), os.urandom(64)
        assert prf_tls10(secret, b"lbl", seed, 77) == bytes(mathtls.PRF(secret, b"lbl", seed, 77))
        assert prf_tls12("sha256", secret, b"lbl", seed, 77) == \
            bytes(mathtls.PRF_1_2(secret, b"lbl", seed, 77))
        assert prf_tls12("sha384", secret, b"lbl", seed, 77) == \
            bytes(mathtls.PRF_1_2_SHA384(secret, b"lbl", seed, 77))


@pytest.mark.parametrize("version,suite,prf_hash", [
    (0x0301, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, "sha256"),
    (0x0302, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, "sha256"),
    (0x0303, CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "sha256"),
    (0x0303, CipherSuite.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "sha384"),
])
def test_master_secret_key_block_and_finished_match_tlslite(version: int, suite: int,
                                                            prf_hash: str) -> None:
    tl_version = (3, version & 0xFF)
    pms, cr, sr = os.urandom(48), os.urandom(32), os.urandom(32)
    ms = master_secret(version, prf_hash, pms, cr, sr)
    assert ms == bytes(mathtls.calc_key(tl_version, pms, suite, b"master secret",
                                        client_random=cr, server_random=sr, output_length=48))
    kb = key_block(version, prf_hash, ms, cr, sr, 20, 16, 16)
    expected = bytes(mathtls.calc_key(tl_version, ms, suite, b"key expansion",
                                      client_random=cr, server_random=sr, output_length=104))
    assert kb.client_write_mac_key + kb.server_write_mac_key + kb.client_write_key + \
        kb.server_write_key + kb.client_write_iv + kb.server_write_iv == expected
    assert (len(kb.client_write_mac_key), len(kb.server_write_key), len(kb.server_write_iv)) \
        == (20, 16, 16)
    assert kb.client_write_key == expected[40:56] and kb.server_write_iv == expected[88:104]

    hh = HandshakeHashes()
    messages = os.urandom(300)
    hh.update(bytearray(messages))
    name = handshake_hash_name(version, prf_hash)
    handshake_hash = hashlib.new(name, messages).digest() if name != "md5sha1" else \
        hashlib.md5(messages).digest() + hashlib.sha1(messages).digest()
    for sender in ("client", "server"):
        label = f"{sender} finished".encode()
        theirs = mathtls.calc_key(tl_version, ms, suite, label, handshake_hashes=hh,
                                  output_length=12)
        assert verify_data(version, prf_hash, ms, handshake_hash, sender) == bytes(theirs)
    ems = extended_master_secret(version, prf_hash, pms, handshake_hash)
    assert ems == bytes(mathtls.calc_key(tl_version, pms, suite, b"extended master secret",
                                         handshake_hashes=hh, output_length=48))
    assert ems != ms


def test_rfc5705_exporter_layout() -> None:
    ms, cr, sr = os.urandom(48), os.urandom(32), os.urandom(32)
    assert export_keying_material(0x0303, "sha256", ms, b"EXPERIMENTAL x", cr, sr, None, 20) \
        == prf_tls12("sha256", ms, b"EXPERIMENTAL x", cr + sr, 20)
    assert export_keying_material(0x0303, "sha256", ms, b"EXPERIMENTAL x", cr, sr, b"", 20) \
        == prf_tls12("sha256", ms, b"EXPERIMENTAL x", cr + sr + b"\x00\x00", 20)


def test_p_hash_definition() -> None:
    import hmac as std_hmac
    secret, seed = b"k", b"seed"
    a1 = std_hmac.new(secret, seed, hashlib.sha1).digest()
    a2 = std_hmac.new(secret, a1, hashlib.sha1).digest()
    expected = std_hmac.new(secret, a1 + seed, hashlib.sha1).digest() + \
        std_hmac.new(secret, a2 + seed, hashlib.sha1).digest()
    assert p_hash("sha1", secret, seed, 40) == expected


def test_argument_errors() -> None:
    with pytest.raises(ValueError):
        master_secret(0x0303, "sha256", bytes(48), bytes(31), bytes(32))
    with pytest.raises(ValueError):
        extended_master_secret(0x0303, "sha256", bytes(48), bytes(36))
    with pytest.raises(ValueError):
        verify_data(0x0303, "sha256", bytes(48), bytes(32), "both")
    with pytest.raises(ValueError):
        prf(0x0300, "sha256", b"", b"", b"", 1)
    assert handshake_hash_name(0x0302, "sha256") == "md5sha1"
    assert handshake_hash_name(0x0303, "sha384") == "sha384"
