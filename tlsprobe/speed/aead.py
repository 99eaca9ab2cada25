"""AEAD throughput: one `encrypt` per block, as a TLS record is sealed.

Each call seals one block with a 12-byte nonce and 13 bytes of additional data (the TLS 1.2
record header, the sequence `openssl speed -aead` times): nonce set-up, AAD, encryption and
tag. The figure is plaintext bytes per second, like `openssl speed -evp X -aead`.
The nonce is fixed: this measures speed, it does not protect anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from tlsprobe.speed.base import Algorithm, Op, OpensslSpec

NONCE = bytes(range(12))
AAD = bytes(13)


class _Aead(Protocol):
    def encrypt(self, nonce: bytes, data: bytes, associated_data: bytes | None) -> bytes: ...


def _aead_ops(make: Callable[[], _Aead]) -> Callable[[Sequence[int]], list[Op]]:
    def build(block_sizes: Sequence[int]) -> list[Op]:
        encrypt = make().encrypt
        ops = []
        for size in block_sizes:
            block = bytes(size)
            encrypt(NONCE, block, AAD)
            ops.append(Op("encrypt", encrypt, (NONCE, block, AAD), block_size=size))
        return ops
    return build


def _aead(name: str, row: str, make: Callable[[], _Aead], aliases: tuple[str, ...]) -> Algorithm:
    return Algorithm(name, "aead", row, ("encrypt",), _aead_ops(make), aliases, ("aead",),
                     OpensslSpec(row=row, cipher=name))


ALGORITHMS: tuple[Algorithm, ...] = (
    _aead("aes-128-gcm", "AES-128-GCM", lambda: AESGCM(bytes(range(16))), ("aes128gcm",)),
    _aead("aes-256-gcm", "AES-256-GCM", lambda: AESGCM(bytes(range(32))), ("aes256gcm",)),
    _aead("chacha20-poly1305", "ChaCha20-Poly1305",
          lambda: ChaCha20Poly1305(bytes(range(32))), ("chacha20poly1305", "chacha")),
    _aead("aes-128-ccm", "AES-128-CCM", lambda: AESCCM(bytes(range(16)), tag_length=16),
          ("aes128ccm",)),
)
