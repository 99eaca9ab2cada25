"""TLS 1.2 DHE with the server's own (p, g): our key and the shared secret.

A well-known prime (RFC 7919, 3526, 5114) goes through `DHShare`, cryptography throughout.
For any other prime the design's rule "all cryptography through cryptography" has one
stated exception, made openly: cryptography validates (p, g) with OpenSSL's DH_check each
time it loads the parameters or a public key on them, which costs tens of milliseconds at
1024 bits and seconds at 4096, per handshake. Handshake timing would then rank the group by
our own validation. So the check runs once per prime (through cryptography, its verdict
cached), our key pair comes from the cached parameters, and the shared secret is one
modular exponentiation in Python, after the RFC 7919 range and small-subgroup checks. Our
exponent is ephemeral and used once, so Python's non-constant-time `pow` exposes nothing
an attacker could collect.
"""

from __future__ import annotations

import json
import warnings
from collections import OrderedDict
from functools import lru_cache
from importlib import resources

from cryptography.hazmat.primitives.asymmetric import dh
from cryptography.utils import CryptographyDeprecationWarning

from .base import InvalidShare, KeyShare, UnsupportedGroup
from .ffdh import MAX_PRIME_BITS, MIN_PRIME_BITS, DHShare, check_dh_public

# -- DHE with the server's own parameters ---------------------------------------------------
# cryptography runs OpenSSL's DH_check (p prime, (p-1)/2 prime) whenever it loads explicit
# parameters or a public key on them; for a prime OpenSSL does not know by name that costs
# tens of milliseconds (1024 bits) to seconds (4096 bits), per handshake and twice (our key,
# the server's Ys). The check depends only on (p, g): it is done once per prime here and its
# verdict cached, so timed handshakes measure the handshake, not our validation of the prime.
_CHECKED: OrderedDict[tuple[int, int], dh.DHParameters | UnsupportedGroup] = OrderedDict()
_CHECKED_MAX = 32


@lru_cache(maxsize=1)
def _known_primes() -> frozenset[int]:
    """The RFC 7919/3526/5114 primes, which OpenSSL recognises and checks at no cost."""
    text = resources.files("tlsprobe.data").joinpath("known_dh_primes.json").read_text()
    return frozenset(int(row["p"], 16) for row in json.loads(text).values())


def _checked_parameters(p: int, g: int) -> dh.DHParameters:
    """cryptography's parameters for (p, g), validated once per prime (also a refusal)."""
    key = (p, g)
    verdict = _CHECKED.get(key)
    if verdict is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CryptographyDeprecationWarning)
                verdict = dh.DHParameterNumbers(p, g).parameters()
        except ValueError as exc:
            verdict = UnsupportedGroup(
                f"DHE: cryptography refuses these parameters ({exc}); p of "
                f"{p.bit_length()} bits may not be a safe prime")
        _CHECKED[key] = verdict
        if len(_CHECKED) > _CHECKED_MAX:
            _CHECKED.popitem(last=False)
    else:
        _CHECKED.move_to_end(key)
    if isinstance(verdict, UnsupportedGroup):
        raise verdict
    return verdict


def _precheck(p: int, g: int) -> None:
    """The cheap checks DHShare makes before asking cryptography."""
    if p < 3 or p % 2 == 0:
        raise InvalidShare("DHE: p is not an odd prime")
    if not 1 < g < p - 1:
        raise InvalidShare("DHE: generator g outside 1 < g < p-1")
    bits = p.bit_length()
    if bits < MIN_PRIME_BITS:
        raise UnsupportedGroup(f"DHE: p of {bits} bits is below the {MIN_PRIME_BITS}-bit "
                                   "minimum cryptography computes")
    if bits > MAX_PRIME_BITS:
        raise UnsupportedGroup(f"DHE: p of {bits} bits exceeds the {MAX_PRIME_BITS}-bit "
                                   "limit")


class CheckedDHShare(KeyShare):
    """TLS 1.2 DHE on an unknown prime whose (p, g) passed cryptography's check before.

    Our key pair comes from the cached parameters (no new check). The server's Ys gets the
    RFC 7919 range checks (1 < Ys < p-1) and the result the small-subgroup check; Z itself
    is one modular exponentiation, since loading Ys into cryptography would re-run the
    primality test on p."""

    group = 0

    def __init__(self, p: int, g: int) -> None:
        self.p, self.g = p, g
        self.p_size = (p.bit_length() + 7) // 8
        _precheck(p, g)
        private = _checked_parameters(p, g).generate_private_key()
        self._x = private.private_numbers().x
        self.public = private.public_key().public_numbers().y.to_bytes(self.p_size, "big")

    def _z(self, peer: bytes, exact_size: bool) -> bytes:
        y = check_dh_public("DHE", 0, self.p, peer, exact_size=exact_size)
        z = pow(y, self._x, self.p)
        if z in (0, 1, self.p - 1):
            raise InvalidShare("DHE: peer value lies in a small subgroup")
        return z.to_bytes(self.p_size, "big")

    def shared_secret(self, peer: bytes) -> bytes:
        return self._z(peer, True)

    def premaster_secret(self, peer: bytes) -> bytes:
        return self._z(peer, False).lstrip(b"\x00") or b"\x00"


def dhe_share(p: int, g: int) -> KeyShare:
    """Our DHE key for the server's (p, g): cryptography throughout for a well-known prime
    (checked at no cost), the cached check plus `CheckedDHShare` for any other."""
    if p in _known_primes():
        return DHShare(p, g)
    return CheckedDHShare(p, g)
