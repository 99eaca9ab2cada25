"""TLS 1.0-1.2 key exchange messages: ServerKeyExchange and ClientKeyExchange.

Their layout is not self-describing: it depends on the key exchange of the negotiated suite
(RFC 4492 / RFC 8422 for ECDHE, RFC 5246 7.4.3 for DHE, RFC 4279 / RFC 5489 for PSK) and on
the version (TLS 1.2 prefixes the signature with its SignatureScheme, TLS 1.0/1.1 do not;
SSL 3.0 sends the RSA premaster without a length). Both are read from `ParseContext`. When
the key exchange is unknown the body is kept raw rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._util import (
    enum_label,
    group_label,
    pull_opaque,
    pull_uint_noted,
    sigscheme_label,
)
from .buffer import Buffer, Writer
from .context import SSL3, Message, ParseContext

CURVE_TYPES = {1: "explicit_prime", 2: "explicit_char2", 3: "named_curve"}
NAMED_CURVE = 3
_EC = ("ECDHE", "ECDH", "ECDHE_PSK")
_DH = ("DHE", "DH", "DHE_PSK")
_PSK = ("PSK", "ECDHE_PSK", "DHE_PSK", "RSA_PSK")
_SKE_KINDS = _EC + _DH + _PSK + ("RSA",)
_CKE_KINDS = _SKE_KINDS


@dataclass(frozen=True)
class ExplicitCurve:
    """An explicit_prime (1) or explicit_char2 (2) curve (RFC 4492 5.4, deprecated by RFC
    8422): reported, not used. `params` are the raw ECParameters after curve_type."""

    curve_type: int
    params: bytes

    @classmethod
    def pull(cls, buf: Buffer, curve_type: int) -> ExplicitCurve:
        start = buf.tell()
        w = Writer()  # the params are re-encoded from their parts: same bytes
        with buf.field("explicit_curve"):
            if curve_type == 2:
                w.push_uint16(buf.pull_uint16())  # m
                basis = buf.pull_uint8()
                if basis not in (1, 2):
                    raise buf.error(f"unknown ECBasisType {basis}", buf.tell() - 1)
                w.push_uint8(basis)
                for _ in range(1 if basis == 1 else 3):  # k or k1, k2, k3
                    w.push_vector(1, buf.pull_vector(1, minimum=1))
            else:
                w.push_vector(1, buf.pull_vector(1, minimum=1))  # prime_p
            for _ in range(5):  # curve.a, curve.b, base, order, cofactor
                w.push_vector(1, buf.pull_vector(1, minimum=1))
        buf.note("explicit_curve", start, len(w), f"{len(w)} bytes", "bytes")
        return cls(curve_type, w.data())


def _tls12_signature(buf: Buffer, ctx: ParseContext) -> bool:
    """Does a digitally-signed struct here start with a SignatureScheme?"""
    if ctx.version is not None:
        return ctx.version >= 0x0303
    # unknown version: TLS 1.0/1.1 form iff the remaining bytes are exactly one vector
    head = buf.peek(2)
    return not (len(head) == 2 and int.from_bytes(head, "big") == buf.remaining - 2)


@dataclass(frozen=True)
class ServerKeyExchange(Message):
    """ServerKeyExchange for ECDHE, DHE, RSA (export), PSK and the PSK hybrids.

    `key_exchange` says how the body was read; None (unknown key exchange) keeps it in
    `raw`. `public` is the ECDH point or dh_Ys. `signature` is None when the parameters
    are not signed (anonymous and PSK suites); `algorithm` is the TLS 1.2 SignatureScheme,
    None for TLS 1.0/1.1 signatures."""

    msg_type: ClassVar[int] = 12

    key_exchange: str | None
    psk_identity_hint: bytes | None = None
    curve_type: int | None = None
    named_curve: int | None = None
    explicit_curve: ExplicitCurve | None = None
    dh_p: bytes | None = None
    dh_g: bytes | None = None
    rsa_modulus: bytes | None = None
    rsa_exponent: bytes | None = None
    public: bytes | None = None
    algorithm: int | None = None
    signature: bytes | None = None
    raw: bytes = b""

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> ServerKeyExchange:
        kx = ctx.key_exchange
        if kx not in _SKE_KINDS:
            return cls(None, raw=buf.pull_rest())
        hint = curve_type = named_curve = explicit = dh_p = dh_g = None
        modulus = exponent = public = algorithm = signature = None
        if kx in _PSK:
            hint = pull_opaque(buf, 2, "psk_identity_hint")
        if kx in _EC:
            curve_type = pull_uint_noted(buf, 1, "curve_type",
                                         lambda v: enum_label(CURVE_TYPES, v))
            if curve_type == NAMED_CURVE:
                named_curve = pull_uint_noted(buf, 2, "named_curve", group_label)
            elif curve_type in (1, 2):
                explicit = ExplicitCurve.pull(buf, curve_type)
            else:
                raise buf.error(f"unknown curve_type {curve_type}", buf.tell() - 1)
            public = pull_opaque(buf, 1, "public", minimum=1)
        elif kx in _DH:
            dh_p = pull_opaque(buf, 2, "dh_p", minimum=1)
            dh_g = pull_opaque(buf, 2, "dh_g", minimum=1)
            public = pull_opaque(buf, 2, "dh_Ys", minimum=1)
        elif kx == "RSA":
            modulus = pull_opaque(buf, 2, "rsa_modulus", minimum=1)
            exponent = pull_opaque(buf, 2, "rsa_exponent", minimum=1)
        if kx not in _PSK and not buf.eof():
            if _tls12_signature(buf, ctx):
                algorithm = pull_uint_noted(buf, 2, "algorithm", sigscheme_label)
            signature = pull_opaque(buf, 2, "signature")
        return cls(kx, psk_identity_hint=hint, curve_type=curve_type, named_curve=named_curve,
                   explicit_curve=explicit, dh_p=dh_p, dh_g=dh_g, rsa_modulus=modulus,
                   rsa_exponent=exponent, public=public, algorithm=algorithm,
                   signature=signature)

    def _push_params(self, w: Writer) -> None:
        kx = self.key_exchange
        if kx in _EC:
            w.push_uint8(self.curve_type or 0)
            if self.explicit_curve is not None:
                w.push_bytes(self.explicit_curve.params)
            else:
                w.push_uint16(self.named_curve or 0)
            w.push_vector(1, self.public or b"")
        elif kx in _DH:
            for value in (self.dh_p, self.dh_g, self.public):
                w.push_vector(2, value or b"")
        elif kx == "RSA":
            w.push_vector(2, self.rsa_modulus or b"")
            w.push_vector(2, self.rsa_exponent or b"")

    def push(self, w: Writer) -> None:
        if self.key_exchange is None:
            w.push_bytes(self.raw)
            return
        if self.key_exchange in _PSK:
            w.push_vector(2, self.psk_identity_hint or b"")
        self._push_params(w)
        if self.signature is not None:
            if self.algorithm is not None:
                w.push_uint16(self.algorithm)
            w.push_vector(2, self.signature)

    @property
    def signed_params(self) -> bytes:
        """ServerECDHParams / ServerDHParams / ServerRSAParams as sent: what the signature
        covers after client_random + server_random."""
        w = Writer()
        self._push_params(w)
        return w.data()


@dataclass(frozen=True)
class ClientKeyExchange(Message):
    """ClientKeyExchange. `exchange_keys` is ecdh_Yc, dh_Yc, the EncryptedPreMasterSecret
    (without length for SSL 3.0: `ssl3`), empty for PSK-only or an implicit static (EC)DH
    key, or the raw body when `key_exchange` is None."""

    msg_type: ClassVar[int] = 16

    key_exchange: str | None
    exchange_keys: bytes
    psk_identity: bytes | None = None
    ssl3: bool = False

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> ClientKeyExchange:
        kx = ctx.key_exchange
        if kx not in _CKE_KINDS:
            return cls(None, buf.pull_rest())
        identity = pull_opaque(buf, 2, "psk_identity") if kx in _PSK else None
        implicit = kx in ("ECDH", "DH") and buf.eof()  # RFC 4492 5.7: fixed client key
        if kx == "PSK" or implicit:
            return cls(kx, b"", identity)
        if kx in _EC:
            return cls(kx, pull_opaque(buf, 1, "ecdh_Yc", minimum=1), identity)
        if kx in _DH:
            return cls(kx, pull_opaque(buf, 2, "dh_Yc", minimum=1), identity)
        head = buf.peek(2)
        legacy = kx == "RSA" and (ctx.version == SSL3 or (
            ctx.version is None and (len(head) < 2
                                     or int.from_bytes(head, "big") != buf.remaining - 2)))
        if legacy:
            at = buf.tell()
            data = buf.pull_rest()
            buf.note("encrypted_pre_master_secret", at, len(data), f"{len(data)} bytes", "bytes")
            return cls(kx, data, identity, ssl3=True)
        return cls(kx, pull_opaque(buf, 2, "encrypted_pre_master_secret"), identity)

    def push(self, w: Writer) -> None:
        kx = self.key_exchange
        if self.psk_identity is not None:
            w.push_vector(2, self.psk_identity)
        if kx is None or self.ssl3:
            w.push_bytes(self.exchange_keys)
        elif kx == "PSK" or (kx in ("ECDH", "DH") and not self.exchange_keys):
            pass
        elif kx in _EC:
            w.push_vector(1, self.exchange_keys)
        else:
            w.push_vector(2, self.exchange_keys)


MESSAGE_CLASSES: list[type[Message]] = [ServerKeyExchange, ClientKeyExchange]
