"""Key exchange benchmarks: ECDH, X25519/X448, FFDHE, ML-KEM and the TLS hybrids.

Classic groups yield two figures, as `openssl speed` counts them: `keygen` (a fresh key
pair) and `derive` (one shared-secret computation from our private key and an already
decoded peer public key, what `openssl speed ecdhp256` reports as op/s).

ML-KEM yields `keygen`, `encaps` and `decaps` on key objects. The hybrids are timed as TLS
runs them (draft-ietf-tls-ecdhe-mlkem), key_share bytes included: `keygen` is the client
(ML-KEM and ECDH key pairs, encoded share), `encaps` the server (decode the client share,
encapsulate, ECDH key pair and derive, encode its share), `decaps` the client finishing
(decode the server share, decapsulate, ECDH derive). The shared secret is the concatenation
in the draft's order (X25519MLKEM768: ML-KEM first; SecP*MLKEM*: ECDH first).

Everything goes straight to `cryptography`; only the RFC 7919 primes come from tlsprobe.kex.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from cryptography.hazmat.primitives.asymmetric import ec, mlkem, x448, x25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tlsprobe.kex.ffdhe_primes import FFDHE_GENERATOR, FFDHE_GROUPS
from tlsprobe.speed.base import Algorithm, Op, OpensslSpec, ecdh_columns, kem_columns

with warnings.catch_warnings():  # cryptography deprecates FFDH on import; we benchmark it anyway
    warnings.simplefilter("ignore")
    from cryptography.hazmat.primitives.asymmetric import dh


# RFC 7919 prime by size in bits (2048 ... 8192).
FFDHE_PRIMES: dict[int, int] = {prime.bit_length(): prime for _, prime in FFDHE_GROUPS.values()}


def _x25519_ops(_: Sequence[int]) -> list[Op]:
    gen = x25519.X25519PrivateKey.generate
    return [Op("keygen", gen), Op("derive", gen().exchange, (gen().public_key(),))]


def _x448_ops(_: Sequence[int]) -> list[Op]:
    gen = x448.X448PrivateKey.generate
    return [Op("keygen", gen), Op("derive", gen().exchange, (gen().public_key(),))]


def _ec_ops(curve: ec.EllipticCurve) -> Callable[[Sequence[int]], list[Op]]:
    def build(_: Sequence[int]) -> list[Op]:
        private = ec.generate_private_key(curve)
        peer = ec.generate_private_key(curve).public_key()
        return [Op("keygen", ec.generate_private_key, (curve,)),
                Op("derive", private.exchange, (ec.ECDH(), peer))]
    return build


def _ffdhe_ops(bits: int) -> Callable[[Sequence[int]], list[Op]]:
    def build(_: Sequence[int]) -> list[Op]:
        with warnings.catch_warnings():  # FFDH deprecation, raised when parameters are made
            warnings.simplefilter("ignore")
            parameters = dh.DHParameterNumbers(FFDHE_PRIMES[bits], FFDHE_GENERATOR).parameters()
        private = parameters.generate_private_key()
        peer = parameters.generate_private_key().public_key()
        return [Op("keygen", parameters.generate_private_key),
                Op("derive", private.exchange, (peer,))]
    return build


def kem_levels() -> tuple[int, ...]:
    """ML-KEM parameter sets the installed `cryptography` provides (768 and 1024; 512 when
    a future release adds it). Nothing else is timed: kyber-py, which probes fall back on
    for ML-KEM-512, is a pure-Python reference and its figures would say nothing."""
    return tuple(level for level in (512, 768, 1024)
                 if hasattr(mlkem, f"MLKEM{level}PrivateKey"))


def _mlkem_ops(level: int) -> Callable[[Sequence[int]], list[Op]]:
    def build(_: Sequence[int]) -> list[Op]:
        private_class = getattr(mlkem, f"MLKEM{level}PrivateKey")
        private = private_class.generate()
        public = private.public_key()
        _, ciphertext = public.encapsulate()
        return [Op("keygen", private_class.generate), Op("encaps", public.encapsulate),
                Op("decaps", private.decapsulate, (ciphertext,))]
    return build


# The hybrids' ML-KEM halves (ML-KEM-768 and -1024 only).
_KEM_CLASSES: dict[int, type[mlkem.MLKEM768PrivateKey | mlkem.MLKEM1024PrivateKey]] = {
    768: mlkem.MLKEM768PrivateKey, 1024: mlkem.MLKEM1024PrivateKey}
_KEM_PUBLIC: dict[int, type[mlkem.MLKEM768PublicKey | mlkem.MLKEM1024PublicKey]] = {
    768: mlkem.MLKEM768PublicKey, 1024: mlkem.MLKEM1024PublicKey}


@dataclass(frozen=True)
class Hybrid:
    """One TLS hybrid group: ML-KEM `level` with X25519 (`curve` None) or a NIST curve."""

    level: int
    curve: ec.EllipticCurve | None

    @property
    def _ecdh_first(self) -> bool:
        return self.curve is not None  # SecP256r1MLKEM768, SecP384r1MLKEM1024

    @property
    def _ek_len(self) -> int:
        return 1184 if self.level == 768 else 1568

    @property
    def _ct_len(self) -> int:
        return 1088 if self.level == 768 else 1568

    def _ec_keypair(self) -> tuple[object, bytes]:
        if self.curve is None:
            key = x25519.X25519PrivateKey.generate()
            return key, key.public_key().public_bytes_raw()
        eckey = ec.generate_private_key(self.curve)
        return eckey, eckey.public_key().public_bytes(Encoding.X962,
                                                      PublicFormat.UncompressedPoint)

    def _ec_derive(self, private: object, peer: bytes) -> bytes:
        if isinstance(private, x25519.X25519PrivateKey):
            return private.exchange(x25519.X25519PublicKey.from_public_bytes(peer))
        key = cast(ec.EllipticCurvePrivateKey, private)
        point = ec.EllipticCurvePublicKey.from_encoded_point(key.curve, peer)
        return key.exchange(ec.ECDH(), point)

    def _split(self, share: bytes, kem_len: int) -> tuple[bytes, bytes]:
        """(ML-KEM part, ECDH part) of a key_share in this group's order."""
        if self._ecdh_first:
            ec_len = len(share) - kem_len
            return share[ec_len:], share[:ec_len]
        return share[:kem_len], share[kem_len:]

    def _join(self, kem_part: bytes, ec_part: bytes) -> bytes:
        return ec_part + kem_part if self._ecdh_first else kem_part + ec_part

    def client_keygen(self) -> tuple[mlkem.MLKEM768PrivateKey | mlkem.MLKEM1024PrivateKey, object,
                                     bytes]:
        """Client: both key pairs and the key_share it sends."""
        kem_key = _KEM_CLASSES[self.level].generate()
        ec_key, ec_public = self._ec_keypair()
        return kem_key, ec_key, self._join(kem_key.public_key().public_bytes_raw(), ec_public)

    def server_encaps(self, client_share: bytes) -> tuple[bytes, bytes]:
        """Server: (its key_share, the shared secret) from the client's share."""
        ek, ec_peer = self._split(client_share, self._ek_len)
        kem_secret, ciphertext = _KEM_PUBLIC[self.level].from_public_bytes(ek).encapsulate()
        ec_key, ec_public = self._ec_keypair()
        ec_secret = self._ec_derive(ec_key, ec_peer)
        return self._join(ciphertext, ec_public), self._join(kem_secret, ec_secret)

    def client_decaps(self, kem_key: mlkem.MLKEM768PrivateKey | mlkem.MLKEM1024PrivateKey,
                      ec_key: object, server_share: bytes) -> bytes:
        """Client: the shared secret from the server's key_share."""
        ciphertext, ec_peer = self._split(server_share, self._ct_len)
        return self._join(kem_key.decapsulate(ciphertext), self._ec_derive(ec_key, ec_peer))

    def build(self, _: Sequence[int]) -> list[Op]:
        kem_key, ec_key, client_share = self.client_keygen()
        server_share, server_secret = self.server_encaps(client_share)
        if self.client_decaps(kem_key, ec_key, server_share) != server_secret:
            raise RuntimeError("hybrid key exchange self-check failed")
        return [Op("keygen", self.client_keygen),
                Op("encaps", self.server_encaps, (client_share,)),
                Op("decaps", self.client_decaps, (kem_key, ec_key, server_share))]


def _ecdh(name: str, description: str, build: Callable[[Sequence[int]], list[Op]],
          aliases: tuple[str, ...], openssl_name: str | None, row: str,
          groups: tuple[str, ...] = ("ecdh",)) -> Algorithm:
    spec = OpensslSpec(row=row, names=(openssl_name,), columns=ecdh_columns()) \
        if openssl_name else None
    return Algorithm(name, "kex", description, ("keygen", "derive"), build, aliases,
                     groups + ("kex",), spec)


def _ffdhe(bits: int) -> Algorithm:
    return _ecdh(f"ffdhe{bits}", f"{bits} bits ffdh (ffdhe{bits})", _ffdhe_ops(bits),
                 (f"ffdh{bits}",), f"ffdh{bits}", rf"^\s*{bits} bits ffdh\b", ("ffdh", "ffdhe"))


def _mlkem(level: int) -> Algorithm:
    return Algorithm(f"mlkem{level}", "kem", f"ML-KEM-{level}", ("keygen", "encaps", "decaps"),
                     _mlkem_ops(level), (f"ML-KEM-{level}",), ("mlkem", "kem", "kex"),
                     OpensslSpec(row=rf"\bML-KEM-{level}\b", names=(f"ML-KEM-{level}",),
                                 columns=kem_columns(), since=(3, 5), family="ML-KEM"))


def _hybrid(name: str, hybrid: Hybrid) -> Algorithm:
    return Algorithm(name.lower(), "kem", f"{name} (TLS hybrid)", ("keygen", "encaps", "decaps"),
                     hybrid.build, (name,), ("hybrid", "kem", "kex"))


# IANA name -> how it is computed.
HYBRIDS: dict[str, Hybrid] = {
    "X25519MLKEM768": Hybrid(768, None),
    "SecP256r1MLKEM768": Hybrid(768, ec.SECP256R1()),
    "SecP384r1MLKEM1024": Hybrid(1024, ec.SECP384R1()),
}

ALGORITHMS: tuple[Algorithm, ...] = (
    _ecdh("x25519", "253 bits ecdh (X25519)", _x25519_ops, ("ecdhx25519",), "ecdhx25519",
          r"ecdh \(X25519\)"),
    _ecdh("x448", "448 bits ecdh (X448)", _x448_ops, ("ecdhx448",), "ecdhx448",
          r"ecdh \(X448\)"),
    _ecdh("p256", "256 bits ecdh (nistp256)", _ec_ops(ec.SECP256R1()),
          ("ecdhp256", "secp256r1", "prime256v1", "P-256"), "ecdhp256", r"ecdh \(nistp256\)"),
    _ecdh("p384", "384 bits ecdh (nistp384)", _ec_ops(ec.SECP384R1()),
          ("ecdhp384", "secp384r1", "P-384"), "ecdhp384", r"ecdh \(nistp384\)"),
    _ecdh("p521", "521 bits ecdh (nistp521)", _ec_ops(ec.SECP521R1()),
          ("ecdhp521", "secp521r1", "P-521"), "ecdhp521", r"ecdh \(nistp521\)"),
    _ecdh("secp256k1", "256 bits ecdh (secp256k1)", _ec_ops(ec.SECP256K1()), (), None,
          r"ecdh \(secp256k1\)"),
    _ecdh("brainpoolp256r1", "256 bits ecdh (brainpoolP256r1)", _ec_ops(ec.BrainpoolP256R1()),
          ("ecdhbrp256r1", "brainpool256", "brainpoolP256r1tls13"), "ecdhbrp256r1",
          r"ecdh \(brainpoolP256r1\)", ("ecdh", "brainpool")),
    _ecdh("brainpoolp384r1", "384 bits ecdh (brainpoolP384r1)", _ec_ops(ec.BrainpoolP384R1()),
          ("ecdhbrp384r1", "brainpool384", "brainpoolP384r1tls13"), "ecdhbrp384r1",
          r"ecdh \(brainpoolP384r1\)", ("ecdh", "brainpool")),
    _ecdh("brainpoolp512r1", "512 bits ecdh (brainpoolP512r1)", _ec_ops(ec.BrainpoolP512R1()),
          ("ecdhbrp512r1", "brainpool512", "brainpoolP512r1tls13"), "ecdhbrp512r1",
          r"ecdh \(brainpoolP512r1\)", ("ecdh", "brainpool")),
    *(_ffdhe(bits) for bits in sorted(FFDHE_PRIMES)),
    *(_mlkem(level) for level in kem_levels()),
    *(_hybrid(name, hybrid) for name, hybrid in HYBRIDS.items()),
)
