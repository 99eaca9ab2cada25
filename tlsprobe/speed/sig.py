"""Signature benchmarks: RSA (PKCS#1 v1.5 and PSS), ECDSA, EdDSA and ML-DSA.

What is signed is what a TLS 1.3 server signs in CertificateVerify: 64 spaces, the context
string, a zero byte and a transcript hash. RSA and ECDSA sign the hash of that content as a
pre-hashed digest (SHA-256 for RSA and P-256, SHA-384 for P-384, SHA-512 for P-521), so the
figure is the private/public-key operation, as in `openssl speed rsa2048 ecdsap256`.
Ed25519, Ed448 and ML-DSA sign the content itself (pure mode). PSS uses a salt as long as
the hash, as TLS's rsa_pss_rsae_* schemes require.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from typing import Protocol

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import (
    ec,
    ed448,
    ed25519,
    mldsa,
    padding,
    rsa,
)
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

from tlsprobe.speed.base import Algorithm, Op, OpensslSpec, sig_columns

CERTIFICATE_VERIFY_CONTENT = (b" " * 64 + b"TLS 1.3, server CertificateVerify\x00"
                              + hashlib.sha256(b"tlsprobe speed transcript").digest())


@functools.cache
def _rsa_key(bits: int) -> rsa.RSAPrivateKey:
    """One key per size per process, shared by the PKCS#1 v1.5 and PSS benchmarks."""
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def _rsa_ops(bits: int, pss: bool) -> Callable[[Sequence[int]], list[Op]]:
    def build(_: Sequence[int]) -> list[Op]:
        key = _rsa_key(bits)
        digest = hashlib.sha256(CERTIFICATE_VERIFY_CONTENT).digest()
        pad: padding.AsymmetricPadding = (
            padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)
            if pss else padding.PKCS1v15())
        prehashed = Prehashed(hashes.SHA256())
        signature = key.sign(digest, pad, prehashed)
        public = key.public_key()
        public.verify(signature, digest, pad, prehashed)
        return [Op("sign", key.sign, (digest, pad, prehashed)),
                Op("verify", public.verify, (signature, digest, pad, prehashed))]
    return build


_ECDSA_HASH: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "secp256r1": hashes.SHA256, "secp384r1": hashes.SHA384, "secp521r1": hashes.SHA512}


def _ecdsa_ops(curve: ec.EllipticCurve) -> Callable[[Sequence[int]], list[Op]]:
    def build(_: Sequence[int]) -> list[Op]:
        hash_algorithm = _ECDSA_HASH[curve.name]()
        key = ec.generate_private_key(curve)
        digest = hashlib.new(hash_algorithm.name, CERTIFICATE_VERIFY_CONTENT).digest()
        algorithm = ec.ECDSA(Prehashed(hash_algorithm))
        signature = key.sign(digest, algorithm)
        public = key.public_key()
        public.verify(signature, digest, algorithm)
        return [Op("sign", key.sign, (digest, algorithm)),
                Op("verify", public.verify, (signature, digest, algorithm))]
    return build


class _PureVerifier(Protocol):
    def verify(self, signature: bytes, data: bytes) -> None: ...


class _PureSigner(Protocol):
    """Ed25519, Ed448 and ML-DSA private keys have this shape."""

    def sign(self, data: bytes) -> bytes: ...

    def public_key(self) -> _PureVerifier: ...


def _pure_ops(generate: Callable[[], _PureSigner]) -> Callable[[Sequence[int]], list[Op]]:
    """Ed25519, Ed448, ML-DSA: `sign(data)` and `verify(signature, data)`."""
    def build(_: Sequence[int]) -> list[Op]:
        key = generate()
        sign = key.sign
        signature = sign(CERTIFICATE_VERIFY_CONTENT)
        public = key.public_key()
        public.verify(signature, CERTIFICATE_VERIFY_CONTENT)
        return [Op("sign", sign, (CERTIFICATE_VERIFY_CONTENT,)),
                Op("verify", public.verify, (signature, CERTIFICATE_VERIFY_CONTENT))]
    return build


def _rsa(bits: int, pss: bool) -> Algorithm:
    if pss:
        return Algorithm(f"rsa{bits}-pss", "sig", f"rsa {bits} bits PSS", ("sign", "verify"),
                         _rsa_ops(bits, True), (f"rsapss{bits}",), ("rsa", "rsapss", "sig"))
    return Algorithm(f"rsa{bits}", "sig", f"rsa {bits} bits PKCS#1 v1.5", ("sign", "verify"),
                     _rsa_ops(bits, False), (), ("rsa", "sig"),
                     OpensslSpec(row=rf"^\s*rsa\s+{bits} bits", names=(f"rsa{bits}",),
                                 columns=sig_columns()))


def _ecdsa(bits: int, curve: ec.EllipticCurve) -> Algorithm:
    return Algorithm(f"ecdsap{bits}", "sig", f"{bits} bits ecdsa (nistp{bits})",
                     ("sign", "verify"), _ecdsa_ops(curve),
                     (f"ecdsa_{curve.name}_sha{min(bits, 512)}",),
                     ("ecdsa", "sig"),
                     OpensslSpec(row=rf"ecdsa \(nistp{bits}\)", names=(f"ecdsap{bits}",),
                                 columns=sig_columns()))


def _eddsa(name: str, bits: int, generate: Callable[[], _PureSigner]) -> Algorithm:
    return Algorithm(name.lower(), "sig", f"{bits} bits EdDSA ({name})", ("sign", "verify"),
                     _pure_ops(generate), (), ("eddsa", "sig"),
                     OpensslSpec(row=rf"EdDSA \({name}\)", names=(name.lower(),),
                                 columns=sig_columns()))


def _mldsa(level: int, generate: Callable[[], _PureSigner]) -> Algorithm:
    return Algorithm(f"mldsa{level}", "sig", f"ML-DSA-{level}", ("sign", "verify"),
                     _pure_ops(generate), (f"ML-DSA-{level}",), ("mldsa", "sig"),
                     OpensslSpec(row=rf"\bML-DSA-{level}\b", names=(f"ML-DSA-{level}",),
                                 columns=sig_columns(), since=(3, 5), family="ML-DSA"))


ALGORITHMS: tuple[Algorithm, ...] = (
    *(_rsa(bits, pss) for bits in (2048, 3072, 4096) for pss in (False, True)),
    _ecdsa(256, ec.SECP256R1()),
    _ecdsa(384, ec.SECP384R1()),
    _ecdsa(521, ec.SECP521R1()),
    _eddsa("Ed25519", 253, ed25519.Ed25519PrivateKey.generate),
    _eddsa("Ed448", 456, ed448.Ed448PrivateKey.generate),
    _mldsa(44, mldsa.MLDSA44PrivateKey.generate),
    _mldsa(65, mldsa.MLDSA65PrivateKey.generate),
    _mldsa(87, mldsa.MLDSA87PrivateKey.generate),
)
