"""Is a server's finite-field DH modulus prime, and a safe prime? One bounded check for all.

The probe (`DHShare`, before it computes anything on the parameters) and the audit (the
verdict on the fixed parameters a server sends) ask this one function, so the two cannot
disagree. Verdicts (`DhPrimeCheck.verdict`):

  known      a well-known prime (RFC 7919, 3526, 5114; tlsprobe/data/known_dh_primes.json)
  safe       p is prime and so is q = (p-1)/2: q passes Baillie-PSW (a strong probable-prime
             test to base 2 and a strong Lucas test: no composite is known to pass both),
             and then p = 2q+1 with 2^(p-1) = 1 mod p and 3 not dividing p is prime
             (Pocklington's theorem)
  not_safe   p passes the same Baillie-PSW test, (p-1)/2 is composite: a prime, not a safe one
  composite  p is not prime, with the witness: a small factor, or 2 is a witness that it is
             composite (it fails the strong test to base 2), or it fails the Lucas test
  unchecked  not decided: p is over MAX_CHECKED_BITS, or the time limit came first

Why bounded: servers choose p, and a full check is what OpenSSL's DH_check does (64
Miller-Rabin rounds on p and on q); on a 9,984-bit prime that took a probe with a 3 s limit
49.6 s. Here the work is a fixed handful of modular exponentiations on at most 4096 bits
(about a second of CPU at 4096 bits, a fifth of one at 2048), the time limit is looked at between them
(`work_deadline`), and verdicts are cached by p alone (varying g cannot defeat the cache).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from math import gcd, isqrt, prod

from tlsprobe.data import read_text
from tlsprobe.errors import NetworkError

#: unknown moduli above this many bits are not checked (verdict "unchecked")
MAX_CHECKED_BITS = 4096
CACHE_SIZE = 64

KNOWN, SAFE, NOT_SAFE, COMPOSITE, UNCHECKED = "known", "safe", "not_safe", "composite", \
    "unchecked"
OUT_OF_TIME = "the time limit came first"


@lru_cache(maxsize=1)
def _small_primes() -> tuple[tuple[int, ...], int]:
    """The odd primes under 2000 and their product, made when a modulus is first checked
    (trial division: 2 to 5 ms, which every scan's start-up paid when it was module-level)."""
    primes = tuple(n for n in range(3, 2000, 2) if all(n % d for d in range(3, isqrt(n) + 1, 2)))
    return primes, prod(primes)


#: absolute time.monotonic() by which CPU work on peer data must stop (None: no limit)
_DEADLINE: ContextVar[float | None] = ContextVar("tlsprobe_kex_deadline", default=None)


class WorkDeadline(NetworkError):
    """The time limit came while checking peer parameters; a timeout like any other
    (a NetworkError: exit 3), never mistaken for a verdict on the server."""


@contextmanager
def work_deadline(deadline: float | None) -> Iterator[None]:
    """Within this block, CPU work on server data stops at `deadline` (time.monotonic())."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


@dataclass(frozen=True)
class DhPrimeCheck:
    """The verdict on one modulus p and a one-line reason ("divisible by 3", ...)."""

    verdict: str
    detail: str = ""

    @property
    def is_prime(self) -> bool | None:
        """True (known, safe, not_safe), False (composite), None (unchecked)."""
        if self.verdict == COMPOSITE:
            return False
        return None if self.verdict == UNCHECKED else True

    @property
    def out_of_time(self) -> bool:
        """Not decided because the deadline came (not cached: another call may decide)."""
        return self.verdict == UNCHECKED and self.detail == OUT_OF_TIME


class _OutOfTime(Exception):
    pass


_cache: OrderedDict[int, DhPrimeCheck] = OrderedDict()


@lru_cache(maxsize=1)
def known_dh_primes() -> dict[int, str]:
    """The well-known primes (tlsprobe/data/known_dh_primes.json: RFC 7919 FFDHE, RFC 3526
    MODP, RFC 5114), prime -> name ('ffdhe2048', 'modp_2048', 'dh_2048_256', ...)."""
    text = read_text("known_dh_primes.json")
    return {int(row["p"], 16): name for name, row in json.loads(text).items()}


def dh_group_name(p: int) -> str | None:
    """'ffdhe2048', 'modp_2048', 'dh_2048_256', ... or None for an unknown prime."""
    return known_dh_primes().get(p)


def check_dh_prime(p: int, known: dict[int, str] | None = None) -> DhPrimeCheck:
    """The verdict on modulus p, within the current `work_deadline` (see module docstring).

    A verdict is cached by p; "unchecked" for want of time is not (more time may come)."""
    if known is None:
        known = known_dh_primes()
    if p in known:
        return DhPrimeCheck(KNOWN, known[p])
    cached = _cache.get(p)
    if cached is not None:
        _cache.move_to_end(p)
        return cached
    bits = p.bit_length()
    if bits > MAX_CHECKED_BITS:
        return DhPrimeCheck(UNCHECKED, f"over the {MAX_CHECKED_BITS}-bit limit of tlsprobe's "
                                       "primality check")
    try:
        result = _classify(p)
    except _OutOfTime:
        return DhPrimeCheck(UNCHECKED, OUT_OF_TIME)
    _cache[p] = result
    if len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return result


def _tick() -> None:
    deadline = _DEADLINE.get()
    if deadline is not None and time.monotonic() >= deadline:
        raise _OutOfTime


def _classify(p: int) -> DhPrimeCheck:
    if p < 5 or p % 2 == 0:
        return DhPrimeCheck(NOT_SAFE, "too small") if p in (2, 3) else \
            DhPrimeCheck(COMPOSITE, f"{p} is not prime" if p < 5 else "it is even")
    small = _small_factor(p)
    if small:
        return DhPrimeCheck(COMPOSITE, f"divisible by {small}")
    _tick()
    if not _strong_probable_prime(p, 2):
        return DhPrimeCheck(COMPOSITE, "2 is a witness that it is composite (Miller-Rabin)")
    q = (p - 1) // 2
    q_small = 2 if q % 2 == 0 else _small_factor(q)
    q_prime = not q_small
    if q_prime:
        _tick()
        q_prime = _strong_probable_prime(q, 2)
    if q_prime:
        _tick()
        q_prime = _strong_lucas(q)
    if q_prime:
        return DhPrimeCheck(SAFE)      # Pocklington: p = 2q+1 prime given q prime
    _tick()
    if not _strong_lucas(p):
        return DhPrimeCheck(COMPOSITE, "it fails the strong Lucas probable-prime test")
    why = f"divisible by {q_small}" if q_small else "composite"
    return DhPrimeCheck(NOT_SAFE, f"(p-1)/2 is {why}")


def _small_factor(n: int) -> int:
    """The smallest odd prime under 2000 dividing n (n itself excluded), else 0."""
    primes, primorial = _small_primes()
    if gcd(n, primorial) == 1:
        return 0
    return next((d for d in primes if n % d == 0 and n != d), 0)


def _strong_probable_prime(n: int, base: int) -> bool:
    """Miller-Rabin to one base (n odd, n > base + 1)."""
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    x = pow(base, d, n)
    if x in (1, n - 1):
        return True
    for _ in range(s - 1):
        x = x * x % n
        if x == n - 1:
            return True
    return False


def _jacobi(a: int, n: int) -> int:
    a %= n
    result = 1
    while a:
        while a % 2 == 0:
            a //= 2
            if n % 8 in (3, 5):
                result = -result
        a, n = n, a
        if a % 4 == 3 and n % 4 == 3:
            result = -result
        a %= n
    return result if n == 1 else 0


def _strong_lucas(n: int) -> bool:
    """The strong Lucas probable-prime test with Selfridge's parameters (n odd, > 5)."""
    if isqrt(n) ** 2 == n:
        return False
    d_param = 5
    while True:
        j = _jacobi(d_param, n)
        if j == -1:
            break
        if j == 0 and abs(d_param) != n:
            return False
        d_param = -d_param - 2 if d_param > 0 else -d_param + 2
    p_param, q_param = 1, (1 - d_param) // 4
    d, s = n + 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    u, v, qk = 1, p_param, q_param % n      # U_1, V_1, Q^1
    for i, bit in enumerate(bin(d)[3:]):
        if i % 256 == 255:
            _tick()
        u, v, qk = u * v % n, (v * v - 2 * qk) % n, qk * qk % n
        if bit == "1":
            u, v = p_param * u + v, d_param * u + p_param * v
            u = (u + n if u % 2 else u) // 2 % n
            v = (v + n if v % 2 else v) // 2 % n
            qk = qk * q_param % n
    if u == 0 or v == 0:
        return True
    for _ in range(s - 1):
        v = (v * v - 2 * qk) % n
        if v == 0:
            return True
        qk = qk * qk % n
    return False
