"""Hybrid ECDHE + ML-KEM groups of draft-ietf-tls-ecdhe-mlkem.

Each share is the plain concatenation of the two components, and so is the secret:

  group                      client share            server share           secret
  X25519MLKEM768  (0x11ec)   ek(1184) || x25519(32)  ct(1088) || x25519(32) mlkem || x25519
  SecP256r1MLKEM768 (0x11eb) P-256(65) || ek(1184)   P-256(65) || ct(1088)  ecdh || mlkem
  SecP384r1MLKEM1024 (0x11ed) P-384(97) || ek(1568)  P-384(97) || ct(1568)  ecdh || mlkem

X25519MLKEM768 puts ML-KEM first (for FIPS reasons); the NIST-curve hybrids put ECDH first.
The same orders are in OpenSSL (EVP_PKEY-MLX-KEM), rustls and tlslite-ng.
"""

from __future__ import annotations

from .base import GroupKex, InvalidShare, KeyShare, UnsupportedGroup
from .mlkem import MLKEMKex, MLKEMShare


class HybridKex(GroupKex):
    """A classical group and an ML-KEM group concatenated in a fixed order."""

    def __init__(self, code: int, name: str, classical: GroupKex, kem: MLKEMKex,
                 kem_first: bool) -> None:
        self.code = code
        self.name = name
        self.classical = classical
        self.kem = kem
        self.kem_first = kem_first
        self.client_size = classical.client_size + kem.client_size
        self.server_size = classical.server_size + kem.server_size

    def split(self, data: bytes, classical_size: int, kem_size: int,
              what: str) -> tuple[bytes, bytes]:
        """(classical part, ML-KEM part) of a share after its total size is checked."""
        data = bytes(data)
        self.check_size(data, classical_size + kem_size, what)
        if self.kem_first:
            return data[kem_size:], data[:kem_size]
        return data[:classical_size], data[classical_size:]

    def join(self, classical: bytes, kem: bytes) -> bytes:
        return kem + classical if self.kem_first else classical + kem

    def wrap(self, exc: InvalidShare) -> InvalidShare:
        return InvalidShare(f"{self.name}: {exc.reason}", self.code)

    def check_server_share(self, data: bytes) -> None:
        c_part, k_part = self.split(data, self.classical.server_size, self.kem.server_size,
                                    "server share")
        try:
            self.classical.check_server_share(c_part)
            self.kem.check_server_share(k_part)
        except InvalidShare as exc:
            raise self.wrap(exc) from None

    def check_client_share(self, data: bytes) -> None:
        c_part, k_part = self.split(data, self.classical.client_size, self.kem.client_size,
                                    "client share")
        try:
            self.classical.check_client_share(c_part)
            self.kem.check_client_share(k_part)
        except InvalidShare as exc:
            raise self.wrap(exc) from None

    def generate(self) -> KeyShare:
        kem_share = self.kem.generate()
        return HybridShare(self, self.classical.generate(), kem_share)

    def respond(self, client_public: bytes) -> tuple[bytes, bytes]:
        c_part, k_part = self.split(client_public, self.classical.client_size,
                                    self.kem.client_size, "client share")
        try:
            c_public, c_secret = self.classical.respond(c_part)
            ciphertext, k_secret = self.kem.respond(k_part)
        except InvalidShare as exc:
            raise self.wrap(exc) from None
        return self.join(c_public, ciphertext), self.join(c_secret, k_secret)


class HybridShare(KeyShare):
    def __init__(self, kex: HybridKex, classical: KeyShare, kem: MLKEMShare) -> None:
        self._kex = kex
        self._classical = classical
        self._kem = kem
        self.group = kex.code
        self.public = kex.join(classical.public, kem.public)

    def shared_secret(self, peer: bytes) -> bytes:
        kex = self._kex
        c_part, k_part = kex.split(peer, kex.classical.server_size, kex.kem.server_size,
                                   "server share")
        try:
            c_secret = self._classical.shared_secret(c_part)
            k_secret = self._kem.shared_secret(k_part)
        except InvalidShare as exc:
            raise kex.wrap(exc) from None
        return kex.join(c_secret, k_secret)

    def premaster_secret(self, peer: bytes) -> bytes:
        raise UnsupportedGroup(f"{self._kex.name} is a TLS 1.3 group (no TLS 1.2 use)",
                               self.group)


#: code -> (name, classical group code, ML-KEM group code, ML-KEM first)
HYBRIDS: dict[int, tuple[str, int, int, bool]] = {
    0x11eb: ("SecP256r1MLKEM768", 0x0017, 0x0201, False),
    0x11ec: ("X25519MLKEM768", 0x001d, 0x0201, True),
    0x11ed: ("SecP384r1MLKEM1024", 0x0018, 0x0202, False),
}


def hybrid_groups(available: dict[int, GroupKex]) -> list[GroupKex]:
    """The hybrids whose two components are both in `available`."""
    out: list[GroupKex] = []
    for code, (name, classical, kem, kem_first) in HYBRIDS.items():
        c_kex, k_kex = available.get(classical), available.get(kem)
        if c_kex is not None and isinstance(k_kex, MLKEMKex):
            out.append(HybridKex(code, name, c_kex, k_kex, kem_first))
    return out
