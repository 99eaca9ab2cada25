"""Signature checks of the server's handshake: TLS 1.3 CertificateVerify, TLS 1.0-1.2
ServerKeyExchange.

A completed handshake only proves that the server holds its certificate's key when these
signatures verify, so every failure is one `SignatureError` with a readable reason (the
engine turns it into a protocol error). SignatureScheme codes follow RFC 8446 4.2.3 and the
IANA registry; TLS 1.0/1.1 have no scheme: RSA signs MD5(x)||SHA1(x) with PKCS#1 type 1
padding and no DigestInfo, ECDSA and DSA sign SHA1(x) (RFC 2246 7.4.3, RFC 4492 5.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import (
    ec,
    ed448,
    ed25519,
    padding,
    rsa,
)

from tlsprobe import registry
from tlsprobe.engine.keyschedule import digest
from tlsprobe.model import pubkey
from tlsprobe.model.pubkey import is_dsa_key

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import (
        CertificatePublicKeyTypes,
    )

    #: a certificate's public key (DSA named only for mypy: naming it at run time warns)
    PublicKey = CertificatePublicKeyTypes


class _HashVerifier(Protocol):
    """A DSA key's verify (the class is not named at run time: model/pubkey.py)."""

    def verify(self, signature: bytes, data: bytes,
               algorithm: hashes.HashAlgorithm, /) -> None: ...


class _MessageVerifier(Protocol):
    """The verify of a key that signs the message itself (EdDSA, ML-DSA)."""

    def verify(self, signature: bytes, data: bytes, /) -> None: ...

TLS13_SERVER_CONTEXT = b"TLS 1.3, server CertificateVerify"
TLS13_CLIENT_CONTEXT = b"TLS 1.3, client CertificateVerify"

_HASHES: dict[str, type[hashes.HashAlgorithm]] = {
    "md5": hashes.MD5, "sha1": hashes.SHA1, "sha224": hashes.SHA224, "sha256": hashes.SHA256,
    "sha384": hashes.SHA384, "sha512": hashes.SHA512}


class SignatureError(ValueError):
    """A signature is wrong, uses a scheme that does not fit the key, or cannot be checked."""


class UnsupportedKey(SignatureError):
    """The certificate's key is well-formed but of a kind `cryptography` cannot use here
    (an EC key on an unknown curve, ...): its signatures cannot be checked, which is not
    the server's fault."""


@dataclass(frozen=True)
class Scheme:
    """How one SignatureScheme signs: algorithm family, hash, and (TLS 1.3 ECDSA) curve."""

    kind: str                 # rsa_pkcs1, rsa_pss_rsae, rsa_pss_pss, ecdsa, dsa, ed25519, ...
    hash: str | None
    curve: str | None = None  # the curve TLS 1.3 binds an ECDSA scheme to


SCHEMES: dict[int, Scheme] = {
    0x0101: Scheme("rsa_pkcs1", "md5"), 0x0201: Scheme("rsa_pkcs1", "sha1"),
    0x0301: Scheme("rsa_pkcs1", "sha224"), 0x0401: Scheme("rsa_pkcs1", "sha256"),
    0x0501: Scheme("rsa_pkcs1", "sha384"), 0x0601: Scheme("rsa_pkcs1", "sha512"),
    0x0102: Scheme("dsa", "md5"), 0x0202: Scheme("dsa", "sha1"), 0x0302: Scheme("dsa", "sha224"),
    0x0402: Scheme("dsa", "sha256"), 0x0502: Scheme("dsa", "sha384"),
    0x0602: Scheme("dsa", "sha512"),
    0x0103: Scheme("ecdsa", "md5"), 0x0203: Scheme("ecdsa", "sha1"),
    0x0303: Scheme("ecdsa", "sha224"), 0x0403: Scheme("ecdsa", "sha256", "secp256r1"),
    0x0503: Scheme("ecdsa", "sha384", "secp384r1"), 0x0603: Scheme("ecdsa", "sha512", "secp521r1"),
    0x081A: Scheme("ecdsa", "sha256", "brainpoolP256r1"),
    0x081B: Scheme("ecdsa", "sha384", "brainpoolP384r1"),
    0x081C: Scheme("ecdsa", "sha512", "brainpoolP512r1"),
    0x0804: Scheme("rsa_pss_rsae", "sha256"), 0x0805: Scheme("rsa_pss_rsae", "sha384"),
    0x0806: Scheme("rsa_pss_rsae", "sha512"), 0x0809: Scheme("rsa_pss_pss", "sha256"),
    0x080A: Scheme("rsa_pss_pss", "sha384"), 0x080B: Scheme("rsa_pss_pss", "sha512"),
    0x0807: Scheme("ed25519", None), 0x0808: Scheme("ed448", None),
    0x0904: Scheme("mldsa44", None), 0x0905: Scheme("mldsa65", None),
    0x0906: Scheme("mldsa87", None),
}

#: Schemes RFC 8446 4.4.3 forbids in a TLS 1.3 CertificateVerify.
_NOT_IN_TLS13 = ("rsa_pkcs1", "dsa")


def _hash(name: str) -> hashes.HashAlgorithm:
    return _HASHES[name]()


def key_kind(public_key: object) -> str:
    """A short name of the key type, for messages: RSA, EC secp256r1, Ed25519, ..."""
    if isinstance(public_key, rsa.RSAPublicKey):
        return f"RSA {public_key.key_size}"
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        return f"EC {public_key.curve.name}"
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        return "Ed25519"
    if isinstance(public_key, ed448.Ed448PublicKey):
        return "Ed448"
    if is_dsa_key(public_key):
        return "DSA"
    return type(public_key).__name__.replace("PublicKey", "").lstrip("_")


#: what the RSA schemes need of the certificate's key OID (RFC 8446 4.2.3; RFC 4055: an
#: RSASSA-PSS key signs with PSS only); `cryptography` loads both kinds as an RSAPublicKey
_RSA_OID_NEEDED = {"rsa_pkcs1": (False, "rsaEncryption"), "rsa_pss_rsae": (False, "rsaEncryption"),
                   "rsa_pss_pss": (True, "RSASSA-PSS")}


def _check_key_fits(public_key: PublicKey, scheme: Scheme, label: str, tls13: bool,
                    pss_only: bool) -> None:
    is_rsa = isinstance(public_key, rsa.RSAPublicKey)
    ok = {
        "rsa_pkcs1": is_rsa,
        "rsa_pss_rsae": is_rsa,
        "rsa_pss_pss": is_rsa,
        "dsa": is_dsa_key(public_key),
        "ecdsa": isinstance(public_key, ec.EllipticCurvePublicKey),
        "ed25519": isinstance(public_key, ed25519.Ed25519PublicKey),
        "ed448": isinstance(public_key, ed448.Ed448PublicKey),
    }.get(scheme.kind)
    if ok is None:  # ML-DSA: the class name carries the parameter set
        ok = type(public_key).__name__.upper().startswith(scheme.kind.upper())
    if not ok:
        raise SignatureError(f"signature scheme {label} does not fit the certificate's "
                             f"{key_kind(public_key)} key")
    needed = _RSA_OID_NEEDED.get(scheme.kind)
    if needed is not None and needed[0] != pss_only:
        kind = "an RSASSA-PSS" if pss_only else "an rsaEncryption"
        raise SignatureError(f"signature scheme {label} does not fit the certificate's "
                             f"key, {kind} RSA key: it needs one with the {needed[1]} OID "
                             "(RFC 8446 4.2.3)")
    if tls13 and isinstance(public_key, ec.EllipticCurvePublicKey) \
            and scheme.curve is not None and public_key.curve.name != scheme.curve:
        raise SignatureError(f"signature scheme {label} needs a {scheme.curve} key, the "
                             f"certificate's is {public_key.curve.name}")


def verify_scheme(public_key: PublicKey, scheme_code: int, signature: bytes, data: bytes, *,
                  tls13: bool = False, pss_only: bool = False) -> None:
    """Check `signature` over `data` with SignatureScheme `scheme_code` (TLS 1.2 or 1.3).
    `pss_only`: the certificate's RSA key is an RSASSA-PSS key (`leaf_key`).

    Raises SignatureError when it does not verify, the scheme does not fit the key (its
    kind, or an RSA key's OID), or the scheme is unknown (or, with `tls13`, forbidden in
    TLS 1.3)."""
    label = registry.sigscheme_label(scheme_code)
    scheme = SCHEMES.get(scheme_code)
    if scheme is None:
        raise SignatureError(f"cannot check signature scheme {label}")
    if tls13 and (scheme.kind in _NOT_IN_TLS13 or scheme.hash in ("md5", "sha1", "sha224")):
        raise SignatureError(f"signature scheme {label} is not allowed in TLS 1.3")
    _check_key_fits(public_key, scheme, label, tls13, pss_only)
    try:
        _verify(public_key, scheme, bytes(signature), bytes(data))
    except InvalidSignature:
        raise SignatureError(f"{label} signature does not verify with the certificate's "
                             f"{key_kind(public_key)} key") from None
    except (UnsupportedAlgorithm, ValueError, TypeError) as exc:
        raise SignatureError(f"cannot check the {label} signature: {exc}") from None


def _verify(public_key: PublicKey, scheme: Scheme, signature: bytes, data: bytes) -> None:
    """`public_key` fits `scheme` (_check_key_fits)."""
    kind = scheme.kind
    if isinstance(public_key, rsa.RSAPublicKey):
        h = _hash(scheme.hash or "sha256")
        pad = padding.PKCS1v15() if kind == "rsa_pkcs1" else \
            padding.PSS(padding.MGF1(h), h.digest_size)
        public_key.verify(signature, data, pad, h)
    elif isinstance(public_key, ec.EllipticCurvePublicKey):
        public_key.verify(signature, data, ec.ECDSA(_hash(scheme.hash or "sha256")))
    elif kind == "dsa":
        cast("_HashVerifier", public_key).verify(signature, data, _hash(scheme.hash or "sha1"))
    else:  # Ed25519, Ed448, ML-DSA sign the message itself
        cast("_MessageVerifier", public_key).verify(signature, data)


def verify_legacy(public_key: PublicKey, signature: bytes, data: bytes) -> str:
    """TLS 1.0/1.1 signature (no SignatureScheme): RSA over MD5||SHA1, ECDSA/DSA over SHA1.

    Returns a description of what was checked ("RSA MD5+SHA1")."""
    try:
        if isinstance(public_key, rsa.RSAPublicKey):
            recovered = public_key.recover_data_from_signature(bytes(signature),
                                                               padding.PKCS1v15(), None)
            if recovered != digest("md5", data) + digest("sha1", data):
                raise InvalidSignature()
            return "RSA MD5+SHA1"
        if isinstance(public_key, ec.EllipticCurvePublicKey):
            public_key.verify(bytes(signature), data, ec.ECDSA(hashes.SHA1()))
            return "ECDSA SHA1"
        if is_dsa_key(public_key):
            cast("_HashVerifier", public_key).verify(bytes(signature), data, hashes.SHA1())
            return "DSA SHA1"
    except InvalidSignature:
        raise SignatureError(f"TLS 1.0/1.1 signature does not verify with the certificate's "
                             f"{key_kind(public_key)} key") from None
    except (UnsupportedAlgorithm, ValueError, TypeError) as exc:
        raise SignatureError(f"cannot check the TLS 1.0/1.1 signature: {exc}") from None
    raise SignatureError(f"TLS 1.0/1.1 signatures cannot use a {key_kind(public_key)} key")


def certificate_verify_input(transcript_hash: bytes, server: bool = True) -> bytes:
    """What a TLS 1.3 CertificateVerify signs (RFC 8446 4.4.3): 64 spaces, the context
    string, a zero byte, then Transcript-Hash(ClientHello .. Certificate)."""
    context = TLS13_SERVER_CONTEXT if server else TLS13_CLIENT_CONTEXT
    return b"\x20" * 64 + context + b"\x00" + transcript_hash


def ske_signed_data(client_random: bytes, server_random: bytes, params: bytes) -> bytes:
    """What a ServerKeyExchange signs: client_random + server_random + the server params."""
    return client_random + server_random + params


def leaf_key(der: bytes) -> tuple[PublicKey, bool]:
    """The public key of a DER certificate, and whether it is an RSASSA-PSS key (model/
    pubkey.py `pss_only`: it signs with rsa_pss_pss_* only), from one reading of the
    certificate; SignatureError when the key cannot be read. A certificate `cryptography`
    refuses as a whole (BER lengths: OpenSSL reads it) gives the key of its
    subjectPublicKeyInfo (model/pubkey.py `certificate_key`): its signatures are checked."""
    try:
        key: PublicKey
        key, pss = pubkey.certificate_key(der)
    except UnsupportedAlgorithm as exc:
        raise UnsupportedKey(f"the certificate's key is not supported: {exc}") from None
    except ValueError as exc:
        raise SignatureError(f"cannot read the server certificate's public key: {exc}") from None
    return key, pss


def transport_key(der: bytes) -> x509.Certificate | rsa.RSAPublicKey:
    """What RSA key transport encrypts to: the leaf certificate (kex/rsa.py takes its key),
    or the key alone of one `cryptography` does not parse as a whole (`leaf_key`; its
    SignatureError is a ValueError, as kex's InvalidShare for a key that is not RSA)."""
    try:
        return pubkey.load_certificate(der)
    except ValueError:
        key = leaf_key(der)[0]
    if not isinstance(key, rsa.RSAPublicKey):
        from tlsprobe.kex import InvalidShare
        raise InvalidShare(f"RSA key exchange needs an RSA key, the server's is {key_kind(key)}")
    return key
