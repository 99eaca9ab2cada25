"""Finite-field Diffie-Hellman: RFC 7919 FFDHE groups and TLS 1.2 DHE with any parameters.

Two encodings of the same math, kept apart on purpose:
  * TLS 1.3 (RFC 8446 section 4.2.8.1, 7.4.1): public values and the shared secret are
    left-padded to the byte length of p; a share of any other length is invalid.
  * TLS 1.2 (RFC 5246 section 8.1.2): dh_Ys is an integer of any length, and the
    pre_master_secret is Z with its leading zero bytes stripped (RFC 7919 keeps this).
`shared_secret` gives the first, `premaster_secret` the second.

Peer values must satisfy 1 < Y < p-1 (RFC 7919 section 5.1). A p under 512 bits (below
what cryptography computes) or over 10000 bits (OpenSSL's limit) ends in `UnsupportedGroup`
with the reason. cryptography warns that finite-field DH is deprecated; the warning is
silenced here because probing DHE servers is our job.

Parameters other than a well-known group with its own generator take the one stated
exception to "all cryptography through cryptography". cryptography validates (p, g) with
OpenSSL's DH_check when it loads them, which is unbounded in the server's hands (64
Miller-Rabin rounds on p and on (p-1)/2: 49.6 s for a 9,984-bit prime, 7 s for ffdhe4096
with g = 5, and again for every new g). So p is judged once by `dhprime.check_dh_prime`
(bounded, within the probe's deadline, cached by p alone): a composite p is an invalid
share; a prime that is not a safe prime, or an unknown p over 4096 bits, is not used
(`UnsupportedGroup`); our key pair and the secret are modular exponentiations in Python,
after the same range and small-subgroup checks. Our exponent is ephemeral, used once and
short (512 bits: a discrete logarithm in a safe prime's large subgroup then costs about
2^256), so Python's non-constant-time `pow` exposes nothing an attacker could collect and
costs milliseconds. A well-known group with its generator (RFC 7919, 3526 with g = 2:
OpenSSL knows those and checks nothing) is computed by cryptography.
"""

from __future__ import annotations

import json
import secrets
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric import dh
from cryptography.utils import CryptographyDeprecationWarning

from tlsprobe.data import read_text

from .base import GroupKex, InvalidShare, KeyShare, UnsupportedGroup
from .dhprime import (
    COMPOSITE,
    KNOWN,
    NOT_SAFE,
    SAFE,
    WorkDeadline,
    check_dh_prime,
    known_dh_primes,  # re-exported; its home is dhprime (no import cycle)
)
from .ffdhe_primes import FFDHE_GENERATOR, FFDHE_GROUPS

MIN_PRIME_BITS = 512       # cryptography's lower limit
MAX_PRIME_BITS = 10000     # OpenSSL's OPENSSL_DH_MAX_MODULUS_BITS
EXPONENT_BITS = 512        # our private exponent on parameters computed in Python


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        yield


@lru_cache(maxsize=1)
def _standard_groups() -> dict[int, int]:
    """The well-known safe primes with the generator OpenSSL knows them by (RFC 7919, RFC
    3526: g = 2), for which cryptography's parameter check costs nothing."""
    text = read_text("known_dh_primes.json")
    rows = json.loads(text).values()
    return {int(row["p"], 16): int(str(row["g"]), 0) for row in rows
            if int(str(row["g"]), 0) == FFDHE_GENERATOR}


@lru_cache(maxsize=16)
def _standard_parameters(p: int) -> dh.DHParameters:
    with _quiet():
        return dh.DHParameterNumbers(p, FFDHE_GENERATOR).parameters()


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
        self._private: dh.DHPrivateKey | None = None
        if _standard_groups().get(p) == g:
            with _quiet():
                self._private = _standard_parameters(p).generate_private_key()
            self._numbers = self._private.parameters().parameter_numbers()
            y = self._private.public_key().public_numbers().y
        else:
            self._judge_prime()
            self._x = 2 + secrets.randbelow(min(p - 4, 1 << EXPONENT_BITS))
            y = pow(g, self._x, p)
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

    def _judge_prime(self) -> None:
        """Refuse a p that is not prime, or that tlsprobe will not use (dhprime.py)."""
        bits, code = self.p.bit_length(), self.group or None
        check = check_dh_prime(self.p)
        if check.verdict == COMPOSITE:
            raise InvalidShare(f"{self.name}: p ({bits} bits) is not prime: {check.detail}",
                               code)
        if check.verdict == NOT_SAFE:
            raise UnsupportedGroup(f"{self.name}: p of {bits} bits is a prime but not a safe "
                                   f"prime ({check.detail}); tlsprobe computes DH only with "
                                   "safe primes and the well-known groups", code)
        if check.verdict not in (SAFE, KNOWN):
            if check.out_of_time:
                raise WorkDeadline(f"timed out: the time limit was reached while checking the "
                                   f"server's {bits}-bit DH prime")
            raise UnsupportedGroup(f"{self.name}: unknown {bits}-bit modulus not used: "
                                   f"{check.detail}", code)

    def peer_value(self, peer: bytes, *, exact_size: bool) -> int:
        """The peer's Y as an integer, after the length and range checks."""
        return check_dh_public(self.name, self.group, self.p, peer, exact_size=exact_size)

    def _exchange(self, y: int) -> bytes:
        if self._private is None:
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


__all__ = ["EXPONENT_BITS", "MAX_PRIME_BITS", "MIN_PRIME_BITS", "DHShare", "FFDHEKex",
           "check_dh_public", "ffdhe_groups", "known_dh_primes"]
