"""ML-KEM (FIPS 203) as TLS 1.3 groups: MLKEM512 (0x0200), MLKEM768 (0x0201), MLKEM1024 (0x0202).

draft-ietf-tls-mlkem: the client's key_share is the encapsulation key, the server's is the
ciphertext, and the shared secret is the 32-byte ML-KEM key. ML-KEM-768/1024 come from
`cryptography`. It has no ML-KEM-512 here, so MLKEM512 uses kyber-py (pure Python,
imported only when that group is used) when it is installed; without it MLKEM512 is
offer-only (`random_encapsulation_key` builds a well-formed random-looking key to offer).

A server share (ciphertext) can only be checked for its size: ML-KEM decapsulation of any
ciphertext of the right size yields a key (implicit rejection). A client share is checked
with the FIPS 203 modulus check (every 12-bit coefficient below q = 3329).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from cryptography.hazmat.primitives.asymmetric import mlkem as _mlkem

from .base import GroupKex, KeyShare, UnsupportedGroup

Q = 3329

#: IANA code -> (name, k, encapsulation key size, ciphertext size)
MLKEM_PARAMETERS: dict[int, tuple[str, int, int, int]] = {
    0x0200: ("MLKEM512", 2, 800, 768),
    0x0201: ("MLKEM768", 3, 1184, 1088),
    0x0202: ("MLKEM1024", 4, 1568, 1568),
}


class _KyberScheme(Protocol):
    """What kyber-py's ML_KEM_512 (and _768, _1024) offer (kyber-py has no type hints)."""

    def keygen(self) -> tuple[bytes, bytes]: ...

    def encaps(self, ek: bytes) -> tuple[bytes, bytes]: ...

    def decaps(self, dk: bytes, ct: bytes) -> bytes: ...


@dataclass(frozen=True)
class KemBackend:
    """keygen() -> (encapsulation key, decapsulate function); encaps(ek) -> (secret, ct)."""

    source: str
    keygen: Callable[[], tuple[bytes, Callable[[bytes], bytes]]]
    encaps: Callable[[bytes], tuple[bytes, bytes]]


def _cryptography_backend(level: int) -> KemBackend | None:
    private_cls = getattr(_mlkem, f"MLKEM{level}PrivateKey", None)
    public_cls = getattr(_mlkem, f"MLKEM{level}PublicKey", None)
    if private_cls is None or public_cls is None:
        return None

    def keygen() -> tuple[bytes, Callable[[bytes], bytes]]:
        key = private_cls.generate()
        return key.public_key().public_bytes_raw(), key.decapsulate

    def encaps(ek: bytes) -> tuple[bytes, bytes]:
        secret, ciphertext = public_cls.from_public_bytes(ek).encapsulate()
        return secret, ciphertext

    return KemBackend("cryptography", keygen, encaps)


def _kyber_py_backend(level: int) -> KemBackend | None:
    if importlib.util.find_spec("kyber_py") is None:
        return None

    def scheme() -> _KyberScheme:
        from kyber_py import (
            ml_kem,  # lazy: pure Python, only for groups cryptography lacks
        )

        return cast(_KyberScheme, getattr(ml_kem, f"ML_KEM_{level}"))

    def keygen() -> tuple[bytes, Callable[[bytes], bytes]]:
        kem = scheme()
        ek, dk = kem.keygen()
        return bytes(ek), lambda ct: bytes(kem.decaps(dk, ct))

    def encaps(ek: bytes) -> tuple[bytes, bytes]:
        secret, ciphertext = scheme().encaps(ek)
        return bytes(secret), bytes(ciphertext)

    return KemBackend("kyber-py", keygen, encaps)


def backend_for(level: int) -> KemBackend | None:
    """`cryptography` first; kyber-py only for a level cryptography does not provide."""
    return _cryptography_backend(level) or _kyber_py_backend(level)


def modulus_check(ek: bytes, k: int) -> bool:
    """FIPS 203 section 7.2: the 384*k bytes of t_hat decode to coefficients below q."""
    t_hat = ek[:384 * k]
    for i in range(0, len(t_hat), 3):
        b0, b1, b2 = t_hat[i], t_hat[i + 1], t_hat[i + 2]
        if (b0 | (b1 & 0x0F) << 8) >= Q or (b1 >> 4 | b2 << 4) >= Q:
            return False
    return True


def random_encapsulation_key(k: int) -> bytes:
    """Random bytes shaped like an ML-KEM encapsulation key (passes the modulus check).

    For offering a group we cannot complete: a server that checks the key will not abort."""
    out = bytearray()
    raw = os.urandom(2 * 256 * k)
    coefficients = [int.from_bytes(raw[i:i + 2], "big") % Q for i in range(0, len(raw), 2)]
    for c0, c1 in zip(coefficients[0::2], coefficients[1::2]):
        out += bytes((c0 & 0xFF, c0 >> 8 | (c1 & 0x0F) << 4, c1 >> 4))
    return bytes(out) + os.urandom(32)


class MLKEMKex(GroupKex):
    """One ML-KEM parameter set as a TLS 1.3 group."""

    def __init__(self, code: int, backend: KemBackend) -> None:
        self.code = code
        self.name, self.k, self.client_size, self.server_size = MLKEM_PARAMETERS[code]
        self.backend = backend

    def check_server_share(self, data: bytes) -> None:
        self.check_size(data, self.server_size, "ciphertext")

    def check_client_share(self, data: bytes) -> None:
        self.check_size(data, self.client_size, "encapsulation key")
        if not modulus_check(data, self.k):
            raise self.invalid("encapsulation key fails the modulus check (coefficient >= q)")

    def generate(self) -> MLKEMShare:
        ek, decapsulate = self.backend.keygen()
        return MLKEMShare(self, ek, decapsulate)

    def decapsulate(self, decapsulate: Callable[[bytes], bytes], ciphertext: bytes) -> bytes:
        ciphertext = bytes(ciphertext)
        self.check_server_share(ciphertext)
        try:
            return decapsulate(ciphertext)
        except ValueError as exc:  # size already checked: a backend refusal
            raise self.invalid(f"decapsulation failed ({exc})") from None

    def respond(self, client_public: bytes) -> tuple[bytes, bytes]:
        client_public = bytes(client_public)
        self.check_client_share(client_public)
        try:
            secret, ciphertext = self.backend.encaps(client_public)
        except ValueError as exc:
            raise self.invalid(f"encapsulation key rejected ({exc})") from None
        return ciphertext, secret


class MLKEMShare(KeyShare):
    def __init__(self, kex: MLKEMKex, ek: bytes,
                 decapsulate: Callable[[bytes], bytes]) -> None:
        self._kex = kex
        self._decapsulate = decapsulate
        self.group = kex.code
        self.public = ek

    def shared_secret(self, peer: bytes) -> bytes:
        """Decapsulate the server's ciphertext."""
        return self._kex.decapsulate(self._decapsulate, peer)

    def premaster_secret(self, peer: bytes) -> bytes:
        raise UnsupportedGroup(f"{self._kex.name} is a TLS 1.3 group (no TLS 1.2 use)",
                               self.group)


def mlkem_groups() -> list[MLKEMKex]:
    """The ML-KEM groups some installed backend can compute."""
    out = []
    for code, (_name, k, _ek, _ct) in MLKEM_PARAMETERS.items():
        backend = backend_for({2: 512, 3: 768, 4: 1024}[k])
        if backend is not None:
            out.append(MLKEMKex(code, backend))
    return out
