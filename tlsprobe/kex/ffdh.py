"""Finite-field Diffie-Hellman: RFC 7919 FFDHE groups and TLS 1.2 DHE with any parameters.

Two encodings of the same math, kept apart on purpose:
  * TLS 1.3 (RFC 8446 section 4.2.8.1, 7.4.1): public values and the shared secret are
    left-padded to the byte length of p; a share of any other length is invalid.
  * TLS 1.2 (RFC 5246 section 8.1.2): dh_Ys is an integer of any length, and the
    pre_master_secret is Z with its leading zero bytes stripped (RFC 7919 keeps this).
`shared_secret` gives the first, `premaster_secret` the second.

Peer values must satisfy 1 < Y < p-1 (RFC 7919 section 5.1). `cryptography` refuses some
parameters (p under 512 bits, or a p it cannot validate without q, e.g. `-dsaparam`
primes); those end in `UnsupportedGroup` with the reason. It also warns that finite-field
DH is deprecated; the warning is silenced here because probing DHE servers is our job.

Primes OpenSSL does not know, and the one stated exception to "all cryptography through
cryptography": cryptography validates (p, g) with OpenSSL's DH_check each time it loads the
parameters or a public key on them, which costs tens of milliseconds at 1024 bits and
seconds at 4096, per handshake; handshake timing would then rank the group by our own
validation. So parameters are validated once per (p, g) (through cryptography, the verdict
cached) and our key pair comes from the cached parameters. For a well-known prime (RFC 7919,
3526, 5114: OpenSSL checks those at no cost) the secret is computed by cryptography; for any
other it is one modular exponentiation in Python, after the same range and small-subgroup
checks. Our exponent is ephemeral and used once, so Python's non-constant-time `pow`
exposes nothing an attacker could collect.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources

from cryptography.hazmat.primitives.asymmetric import dh
from cryptography.utils import CryptographyDeprecationWarning

from .base import GroupKex, InvalidShare, KeyShare, UnsupportedGroup
from .ffdhe_primes import FFDHE_GENERATOR, FFDHE_GROUPS

MIN_PRIME_BITS = 512       # cryptography's lower limit
MAX_PRIME_BITS = 10000     # OpenSSL's OPENSSL_DH_MAX_MODULUS_BITS


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        yield


@lru_cache(maxsize=1)
def known_dh_primes() -> dict[int, str]:
    """The well-known primes (tlsprobe/data/known_dh_primes.json: RFC 7919 FFDHE, RFC 3526
    MODP, RFC 5114), prime -> name ('ffdhe2048', 'modp_2048', 'dh_2048_256', ...)."""
    text = resources.files("tlsprobe.data").joinpath("known_dh_primes.json").read_text()
    return {int(row["p"], 16): name for name, row in json.loads(text).items()}


@lru_cache(maxsize=32)
def checked_parameters(p: int, g: int) -> dh.DHParameters | str:
    """cryptography's parameters for (p, g), validated once per pair; the reason when
    cryptography refuses them (the refusal is cached too)."""
    try:
        with _quiet():
            return dh.DHParameterNumbers(p, g).parameters()
    except ValueError as exc:
        return str(exc)


def _strip(secret: bytes) -> bytes:
    stripped = secret.lstrip(b"\x00")
    return stripped or b"\x00"


def check_dh_public(name: str, group: int, p: int, peer: bytes, *, exact_size: bool) -> int:
    """Validate a DH public value against p and return it as an integer.

    `exact_size` demands the TLS 1.3 encoding (exactly the byte length of p)."""
    peer = bytes(peer)
    p_size = (p.bit_length() + 7) // 8
    if exact_size and len(peer) != p_size:
        raise InvalidShare(f"{name}: key share is {len(peer)} bytes, expected {p_size}",
                           group or None)
    if not peer:
        raise InvalidShare(f"{name}: empty public value", group or None)
    y = int.from_bytes(peer, "big")
    if y <= 1:
        raise InvalidShare(f"{name}: public value Y = {y} (must be 1 < Y < p-1)", group or None)
    if y >= p - 1:
        what = "p-1" if y == p - 1 else "p or more"
        raise InvalidShare(f"{name}: public value Y = {what} (must be 1 < Y < p-1)",
                           group or None)
    return y


class DHShare(KeyShare):
    """Our ephemeral DH key for explicit parameters (p, g), e.g. from a ServerKeyExchange.

    `public` is Yc left-padded to the byte length of p (valid in TLS 1.2 and required in
    TLS 1.3). `group` is the FFDHE code when the parameters are a named group, else 0.
    """

    def __init__(self, p: int, g: int, group: int = 0, name: str = "DHE") -> None:
        self.p = p
        self.g = g
        self.group = group
        self.name = name
        self.p_size = (p.bit_length() + 7) // 8
        self._check_parameters()
        parameters = checked_parameters(p, g)
        if isinstance(parameters, str):
            raise UnsupportedGroup(
                f"{name}: cryptography refuses these parameters ({parameters}); p of "
                f"{p.bit_length()} bits may not be a safe prime", group or None)
        with _quiet():
            self._private = parameters.generate_private_key()
        self._numbers = parameters.parameter_numbers()
        # unknown prime: the secret by pow (see the module docstring), else cryptography
        self._x = None if p in known_dh_primes() else self._private.private_numbers().x
        y = self._private.public_key().public_numbers().y
        self.public = y.to_bytes(self.p_size, "big")

    @property
    def p_bits(self) -> int:
        return self.p.bit_length()

    def _check_parameters(self) -> None:
        bits = self.p.bit_length()
        if self.p < 3 or self.p % 2 == 0:
            raise InvalidShare(f"{self.name}: p is not an odd prime", self.group or None)
        if not 1 < self.g < self.p - 1:
            raise InvalidShare(f"{self.name}: generator g outside 1 < g < p-1",
                               self.group or None)
        if bits < MIN_PRIME_BITS:
            raise UnsupportedGroup(f"{self.name}: p of {bits} bits is below the "
                                   f"{MIN_PRIME_BITS}-bit minimum cryptography computes",
                                   self.group or None)
        if bits > MAX_PRIME_BITS:
            raise UnsupportedGroup(f"{self.name}: p of {bits} bits exceeds the "
                                   f"{MAX_PRIME_BITS}-bit limit", self.group or None)

    def peer_value(self, peer: bytes, *, exact_size: bool) -> int:
        """The peer's Y as an integer, after the length and range checks."""
        return check_dh_public(self.name, self.group, self.p, peer, exact_size=exact_size)

    def _exchange(self, y: int) -> bytes:
        if self._x is not None:
            z = pow(y, self._x, self.p)
            secret = z.to_bytes(self.p_size, "big")
        else:
            try:
                with _quiet():
                    secret = self._private.exchange(
                        dh.DHPublicNumbers(y, self._numbers).public_key())
            except ValueError as exc:
                raise InvalidShare(f"{self.name}: DH computation failed ({exc})",
                                   self.group or None) from None
            z = int.from_bytes(secret, "big")
        if z in (1, self.p - 1):
            raise InvalidShare(f"{self.name}: peer value lies in a small subgroup",
                               self.group or None)
        return secret.rjust(self.p_size, b"\x00")

    def shared_secret(self, peer: bytes) -> bytes:
        """TLS 1.3: peer share exactly len(p) bytes; secret left-padded to len(p)."""
        return self._exchange(self.peer_value(peer, exact_size=True))

    def premaster_secret(self, peer: bytes) -> bytes:
        """TLS 1.2: dh_Ys of any length; pre_master_secret with leading zeros stripped."""
        return _strip(self._exchange(self.peer_value(peer, exact_size=False)))


class FFDHEKex(GroupKex):
    """One RFC 7919 group (ffdhe2048 .. ffdhe8192)."""

    def __init__(self, code: int, name: str, p: int) -> None:
        self.code = code
        self.name = name
        self.p = p
        self.g = FFDHE_GENERATOR
        self.client_size = self.server_size = (p.bit_length() + 7) // 8

    def generate(self) -> DHShare:
        return DHShare(self.p, self.g, self.code, self.name)

    def check_server_share(self, data: bytes) -> None:
        check_dh_public(self.name, self.code, self.p, data, exact_size=True)

    def respond(self, client_public: bytes) -> tuple[bytes, bytes]:
        share = self.generate()
        return share.public, share.shared_secret(client_public)


def ffdhe_groups() -> list[GroupKex]:
    return [FFDHEKex(code, name, p) for code, (name, p) in FFDHE_GROUPS.items()]
