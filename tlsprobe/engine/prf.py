"""The TLS 1.0/1.1/1.2 PRF and what is derived from it (RFC 2246, 4346, 5246, 7627).

TLS 1.2 uses P_<hash> with the suite's PRF hash (SHA-256 unless the suite says SHA-384);
TLS 1.0 and 1.1 XOR P_MD5 over the first half of the secret with P_SHA1 over the second.
The handshake hash that feeds Finished and the extended master secret is the PRF hash in
TLS 1.2 and MD5 || SHA-1 (36 bytes) before it, see `handshake_hash_name`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tlsprobe.engine.keyschedule import hash_len, hmac_digest

TLS1_0 = 0x0301
TLS1_1 = 0x0302
TLS1_2 = 0x0303

MASTER_SECRET_LEN = 48
VERIFY_DATA_LEN = 12


def p_hash(hash_name: str, secret: bytes, seed: bytes, length: int) -> bytes:
    """P_hash(secret, seed): HMAC(secret, A(i) || seed) with A(0) = seed, A(i) = HMAC(A(i-1))."""
    if length < 0:
        raise ValueError("negative PRF length")
    out = bytearray()
    a = seed
    while len(out) < length:
        a = hmac_digest(hash_name, secret, a)
        out += hmac_digest(hash_name, secret, a + seed)
    return bytes(out[:length])


def prf_tls10(secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.0/1.1 PRF: P_MD5(S1, label + seed) XOR P_SHA1(S2, label + seed).

    S1 and S2 are the two halves of the secret, sharing the middle byte when its length is odd."""
    half = (len(secret) + 1) // 2
    s1, s2 = secret[:half], secret[len(secret) - half:]
    md5 = p_hash("md5", s1, label + seed, length)
    sha1 = p_hash("sha1", s2, label + seed, length)
    return bytes(x ^ y for x, y in zip(md5, sha1))


def prf_tls12(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.2 PRF(secret, label, seed) = P_<hash>(secret, label + seed)."""
    return p_hash(hash_name, secret, label + seed, length)


def prf(version: int, prf_hash: str, secret: bytes, label: bytes, seed: bytes,
        length: int) -> bytes:
    """The PRF of `version` (0x0301..0x0303); `prf_hash` only matters for TLS 1.2."""
    if version >= TLS1_2:
        return prf_tls12(prf_hash, secret, label, seed, length)
    if version >= TLS1_0:
        return prf_tls10(secret, label, seed, length)
    raise ValueError(f"no TLS PRF for version 0x{version:04x}")


def handshake_hash_name(version: int, prf_hash: str) -> str:
    """Hash of the handshake messages for Finished and session_hash: the PRF hash in TLS 1.2,
    "md5sha1" in TLS 1.0/1.1 (use it with `keyschedule.Transcript.digest`)."""
    return prf_hash if version >= TLS1_2 else "md5sha1"


def master_secret(version: int, prf_hash: str, pre_master_secret: bytes,
                  client_random: bytes, server_random: bytes) -> bytes:
    """master_secret = PRF(pre_master_secret, "master secret", ClientHello.random +
    ServerHello.random)[0..47]."""
    _check_random(client_random, server_random)
    return prf(version, prf_hash, pre_master_secret, b"master secret",
               client_random + server_random, MASTER_SECRET_LEN)


def extended_master_secret(version: int, prf_hash: str, pre_master_secret: bytes,
                           session_hash: bytes) -> bytes:
    """RFC 7627: PRF(pre_master_secret, "extended master secret", session_hash)[0..47];
    session_hash is the handshake hash through ClientKeyExchange."""
    expected = hash_len(handshake_hash_name(version, prf_hash))
    if len(session_hash) != expected:
        raise ValueError(f"session_hash of {len(session_hash)} bytes, expected {expected}")
    return prf(version, prf_hash, pre_master_secret, b"extended master secret", session_hash,
               MASTER_SECRET_LEN)


@dataclass(frozen=True)
class KeyBlock:
    """The key_block of RFC 5246 section 6.3, split in its standard order."""

    client_write_mac_key: bytes
    server_write_mac_key: bytes
    client_write_key: bytes
    server_write_key: bytes
    client_write_iv: bytes
    server_write_iv: bytes


def key_block(version: int, prf_hash: str, master_secret_: bytes, client_random: bytes,
              server_random: bytes, mac_len: int, key_len: int, iv_len: int) -> KeyBlock:
    """PRF(master_secret, "key expansion", server_random + client_random), split into MAC
    keys, encryption keys and IVs (fixed_iv for AEAD; the CBC IV only for TLS 1.0)."""
    _check_random(client_random, server_random)
    if min(mac_len, key_len, iv_len) < 0:
        raise ValueError("negative key material length")
    total = 2 * (mac_len + key_len + iv_len)
    block = prf(version, prf_hash, master_secret_, b"key expansion",
                server_random + client_random, total)
    parts = []
    pos = 0
    for size in (mac_len, mac_len, key_len, key_len, iv_len, iv_len):
        parts.append(block[pos:pos + size])
        pos += size
    return KeyBlock(*parts)


def verify_data(version: int, prf_hash: str, master_secret_: bytes, handshake_hash: bytes,
                sender: str) -> bytes:
    """Finished.verify_data = PRF(master_secret, "<sender> finished", handshake_hash)[0..11];
    `sender` is "client" or "server"."""
    if sender not in ("client", "server"):
        raise ValueError("sender must be 'client' or 'server'")
    label = b"client finished" if sender == "client" else b"server finished"
    return prf(version, prf_hash, master_secret_, label, handshake_hash, VERIFY_DATA_LEN)


def export_keying_material(version: int, prf_hash: str, master_secret_: bytes, label: bytes,
                           client_random: bytes, server_random: bytes,
                           context: bytes | None, length: int) -> bytes:
    """RFC 5705 exporter for TLS 1.0..1.2 (context None means no context at all)."""
    seed = client_random + server_random
    if context is not None:
        if len(context) > 0xFFFF:
            raise ValueError("exporter context too long")
        seed += len(context).to_bytes(2, "big") + context
    return prf(version, prf_hash, master_secret_, label, seed, length)


def _check_random(client_random: bytes, server_random: bytes) -> None:
    if len(client_random) != 32 or len(server_random) != 32:
        raise ValueError("client_random and server_random must be 32 bytes")
