"""Elliptic-curve groups: X25519 / X448 (RFC 7748) and the prime curves with ECDH.

The same share works in TLS 1.3 key_share and TLS 1.2 ECDHE ClientKeyExchange. Peer points
are validated before use: exact size, the uncompressed form (the only one TLS 1.3 allows,
RFC 8446 section 4.2.8.2), on the curve; X25519/X448 secrets must not be all zero (a
low-order point, RFC 8446 section 7.4.2).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric import ec, x448, x25519

from .base import GroupKex, KeyShare

_XPrivate = x25519.X25519PrivateKey | x448.X448PrivateKey


class XKex(GroupKex):
    """X25519 (0x001d) or X448 (0x001e): raw little-endian u-coordinates."""

    def __init__(self, code: int, name: str) -> None:
        self.code = code
        self.name = name
        self._is_25519 = name == "x25519"
        self.client_size = self.server_size = 32 if self._is_25519 else 56

    def _new_private(self) -> _XPrivate:
        if self._is_25519:
            return x25519.X25519PrivateKey.generate()
        return x448.X448PrivateKey.generate()

    def check_server_share(self, data: bytes) -> None:
        self.check_size(data, self.client_size)

    def exchange(self, private: _XPrivate, peer: bytes) -> bytes:
        data = bytes(peer)
        self.check_server_share(data)
        try:
            if isinstance(private, x25519.X25519PrivateKey):
                secret = private.exchange(x25519.X25519PublicKey.from_public_bytes(data))
            else:
                secret = private.exchange(x448.X448PublicKey.from_public_bytes(data))
        except ValueError:
            secret = b""
        if not any(secret):
            raise self.invalid("shared secret is all zero (low-order point)")
        return secret

    def generate(self) -> KeyShare:
        return XShare(self, self._new_private())

    def respond(self, client_public: bytes) -> tuple[bytes, bytes]:
        share = self.generate()
        return share.public, share.shared_secret(client_public)


class XShare(KeyShare):
    def __init__(self, kex: XKex, private: _XPrivate) -> None:
        self._kex = kex
        self._private = private
        self.group = kex.code
        self.public = private.public_key().public_bytes_raw()

    def shared_secret(self, peer: bytes) -> bytes:
        return self._kex.exchange(self._private, peer)


class ECKex(GroupKex):
    """A prime-order Weierstrass curve (NIST, SECG, brainpool): uncompressed points."""

    def __init__(self, code: int, name: str, curve: ec.EllipticCurve) -> None:
        self.code = code
        self.name = name
        self.curve = curve
        self.coordinate_size = (curve.key_size + 7) // 8
        self.client_size = self.server_size = 1 + 2 * self.coordinate_size

    def check_server_share(self, data: bytes) -> None:
        self.load_point(data)

    def load_point(self, data: bytes) -> ec.EllipticCurvePublicKey:
        """Validate and load an uncompressed point; `InvalidShare` says why it is bad."""
        data = bytes(data)
        if data == b"\x00":
            raise self.invalid("point at infinity")
        if data[:1] in (b"\x02", b"\x03"):
            raise self.invalid("compressed point (only the uncompressed form is allowed)")
        self.check_size(data, self.client_size)
        if data[0] != 0x04:
            raise self.invalid(f"unknown point format 0x{data[0]:02x} (expected 0x04)")
        try:
            return ec.EllipticCurvePublicKey.from_encoded_point(self.curve, data)
        except ValueError:
            raise self.invalid("point is not on the curve") from None

    def exchange(self, private: ec.EllipticCurvePrivateKey, peer: bytes) -> bytes:
        public = self.load_point(peer)
        try:
            return private.exchange(ec.ECDH(), public)
        except ValueError as exc:  # not reachable for a validated point; kept as a guard
            raise self.invalid(f"ECDH failed: {exc}") from None

    def generate(self) -> KeyShare:
        return ECShare(self, ec.generate_private_key(self.curve))

    def respond(self, client_public: bytes) -> tuple[bytes, bytes]:
        share = self.generate()
        return share.public, share.shared_secret(client_public)


class ECShare(KeyShare):
    def __init__(self, kex: ECKex, private: ec.EllipticCurvePrivateKey) -> None:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        self._kex = kex
        self._private = private
        self.group = kex.code
        self.public = private.public_key().public_bytes(
            Encoding.X962, PublicFormat.UncompressedPoint)

    def shared_secret(self, peer: bytes) -> bytes:
        return self._kex.exchange(self._private, peer)


def ec_groups() -> list[GroupKex]:
    """Every elliptic-curve group `cryptography` computes here, by IANA code."""
    curves: list[tuple[int, str, type[ec.EllipticCurve]]] = [
        (0x0013, "secp192r1", ec.SECP192R1),
        (0x0015, "secp224r1", ec.SECP224R1),
        (0x0016, "secp256k1", ec.SECP256K1),
        (0x0017, "secp256r1", ec.SECP256R1),
        (0x0018, "secp384r1", ec.SECP384R1),
        (0x0019, "secp521r1", ec.SECP521R1),
        (0x001a, "brainpoolP256r1", ec.BrainpoolP256R1),
        (0x001b, "brainpoolP384r1", ec.BrainpoolP384R1),
        (0x001c, "brainpoolP512r1", ec.BrainpoolP512R1),
        # RFC 8734: the same curves under TLS 1.3 codepoints
        (0x001f, "brainpoolP256r1tls13", ec.BrainpoolP256R1),
        (0x0020, "brainpoolP384r1tls13", ec.BrainpoolP384R1),
        (0x0021, "brainpoolP512r1tls13", ec.BrainpoolP512R1),
    ]
    out: list[GroupKex] = [XKex(0x001d, "x25519"), XKex(0x001e, "x448")]
    for code, name, curve_cls in curves:
        curve = curve_cls()
        if _curve_supported(curve):
            out.append(ECKex(code, name, curve))
    return out


def _curve_supported(curve: ec.EllipticCurve) -> bool:
    """OpenSSL builds differ (secp192r1 or secp256k1 may be left out)."""
    from cryptography.hazmat.backends.openssl.backend import backend

    return bool(backend.elliptic_curve_exchange_algorithm_supported(ec.ECDH(), curve))
