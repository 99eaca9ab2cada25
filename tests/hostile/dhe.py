"""A TLS 1.2 DHE-RSA first flight with whatever (p, g) a scenario chooses, for the hostile
server: ServerHello (TLS_DHE_RSA_WITH_AES_128_GCM_SHA256, which the probe offers by
default), a throwaway RSA certificate, a ServerKeyExchange signed with rsa_pkcs1_sha256 over
both randoms (so the probe gets past the signature to the parameters), ServerHelloDone.

Moduli whose nature is known, so that no test searches for a prime: a Mersenne prime
2^n - 1 (n = 127, 607, 1279, 3217, 9941 are such n) is a prime but not a safe prime, since
(p-1)/2 = 2^(n-1) - 1 is divisible by 3 for odd n.
"""
from __future__ import annotations

import os
from functools import lru_cache

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tlsprobe.wire import ClientHello, frame

from .tls import certificate_12, self_signed, server_hello_12, server_hello_done

DHE_RSA_SUITE = 0x009E          # TLS_DHE_RSA_WITH_AES_128_GCM_SHA256
RSA_PKCS1_SHA256 = 0x0401

#: prime, not safe, 9941 bits: what cost OpenSSL's DH_check most of a minute
M9941 = 2**9941 - 1
#: prime, not safe, 3217 bits: under the size tlsprobe checks
M3217 = 2**3217 - 1
#: composite with no factor under 2000: 2013 bits, the product of three Mersenne primes
COMPOSITE_2013 = (2**1279 - 1) * (2**607 - 1) * (2**127 - 1)


@lru_cache(maxsize=1)
def rsa_identity() -> tuple[rsa.RSAPrivateKey, bytes]:
    """A throwaway RSA-2048 key and its self-signed certificate (DER)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key, self_signed(key)


def _vector(value: int) -> bytes:
    data = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
    return len(data).to_bytes(2, "big") + data


def ske_dhe(ch: ClientHello, server_random: bytes, p: int, g: int, ys: int) -> bytes:
    """A DHE ServerKeyExchange (RFC 5246 7.4.3) signed with the RSA identity."""
    params = _vector(p) + _vector(g) + _vector(ys)
    key, _ = rsa_identity()
    signature = key.sign(ch.random + server_random + params, padding.PKCS1v15(),
                         hashes.SHA256())
    return frame(12, params + RSA_PKCS1_SHA256.to_bytes(2, "big") +
                 len(signature).to_bytes(2, "big") + signature)


def wants_dhe_tls12(ch: ClientHello) -> bool:
    """Whether this hello offers TLS 1.2 and the DHE-RSA suite (else a server refuses)."""
    versions = ch.supported_versions or [min(ch.legacy_version, 0x0303)]
    return 0x0303 in versions and DHE_RSA_SUITE in ch.cipher_suites


def dhe_flight(ch: ClientHello, p: int, g: int, ys: int = 4) -> list[bytes]:
    """ServerHello, Certificate, ServerKeyExchange with (p, g, Ys), ServerHelloDone."""
    random = os.urandom(32)
    _, der = rsa_identity()
    return [server_hello_12(ch, suite=DHE_RSA_SUITE, random=random), certificate_12([der]),
            ske_dhe(ch, random, p, g, ys), server_hello_done()]
