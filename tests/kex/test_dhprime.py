"""The one DH modulus check (kex/dhprime.py) the probe and the audit share: right verdicts,
bounded work (a size cap, a deadline between steps), a cache by p alone."""
from __future__ import annotations

import time

import pytest

from tlsprobe import kex
from tlsprobe.errors import NetworkError
from tlsprobe.kex import dhprime
from tlsprobe.kex.ffdhe_primes import FFDHE_GROUPS

M9941 = 2**9941 - 1          # Mersenne primes: prime, not safe ((p-1)/2 divisible by 3)
M3217 = 2**3217 - 1
COMPOSITE_2013 = (2**1279 - 1) * (2**607 - 1) * (2**127 - 1)   # no factor under 2000
FFDHE2048 = FFDHE_GROUPS[0x0100][1]
FFDHE4096 = FFDHE_GROUPS[0x0102][1]
FFDHE8192 = FFDHE_GROUPS[0x0104][1]


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    dhprime._cache.clear()


@pytest.mark.parametrize(("p", "verdict", "detail"), [
    (FFDHE2048, "safe", ""),
    (M3217, "not_safe", "(p-1)/2 is divisible by 3"),
    (2**607 - 1, "not_safe", "(p-1)/2 is divisible by 3"),
    (COMPOSITE_2013, "composite", "2 is a witness"),
    (FFDHE2048 * 3, "composite", "divisible by 3"),
    (FFDHE2048 + 1, "composite", "even"),
    # 3511^2 passes the strong test to base 2 and has no factor under 2000: Lucas catches it
    (3511**2, "composite", "Lucas"),
])
def test_verdicts(p: int, verdict: str, detail: str) -> None:
    check = dhprime.check_dh_prime(p, known={})
    assert check.verdict == verdict and detail in check.detail, check


def test_base_2_alone_would_call_3511_squared_prime() -> None:
    assert dhprime._strong_probable_prime(3511**2, 2)


def test_known_primes_cost_nothing_and_huge_unknown_ones_are_not_checked() -> None:
    assert dhprime.check_dh_prime(FFDHE8192) == dhprime.DhPrimeCheck("known", "ffdhe8192")
    t0 = time.process_time()
    check = dhprime.check_dh_prime(M9941)
    assert time.process_time() - t0 < 0.5     # OpenSSL's DH_check: most of a minute
    assert check.verdict == "unchecked" and "4096-bit limit" in check.detail
    assert check.is_prime is None and not check.out_of_time


def test_the_deadline_stops_the_check_and_is_not_cached() -> None:
    with dhprime.work_deadline(time.monotonic()):
        check = dhprime.check_dh_prime(M3217)
        assert check == dhprime.DhPrimeCheck("unchecked", "the time limit came first")
        assert check.out_of_time
        with pytest.raises(NetworkError, match="time limit"):   # a timeout: exit 3
            kex.DHShare(M3217, 3)
    assert M3217 not in dhprime._cache
    assert dhprime.check_dh_prime(M3217).verdict == "not_safe"


def test_dhshare_says_not_prime_and_refuses_what_it_will_not_use() -> None:
    with pytest.raises(kex.InvalidShare, match=r"p \(2013 bits\) is not prime"):
        kex.DHShare(COMPOSITE_2013, 2)
    with pytest.raises(kex.UnsupportedGroup, match="not a safe prime"):
        kex.DHShare(M3217, 3)
    with pytest.raises(kex.UnsupportedGroup, match="9941-bit modulus not used"):
        kex.DHShare(M9941, 3)


def test_a_new_generator_does_not_buy_a_new_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """ffdhe4096 with g = 5 cost cryptography's DH_check 7 s, for each new g."""
    t0 = time.process_time()
    shares = [kex.DHShare(FFDHE4096, g) for g in (3, 5, 7, 11)]
    assert time.process_time() - t0 < 2.0
    unknown = FFDHE2048 - 2**64 * 1000  # any odd number: judged once, whatever g
    calls: list[int] = []
    real = dhprime._classify
    monkeypatch.setattr(dhprime, "_classify", lambda p: calls.append(p) or real(p))
    for g in (2, 3, 5):
        try:
            kex.DHShare(unknown | 1, g)
        except ValueError:      # not prime, or not safe: refused, the verdict cached
            pass
    assert calls == [unknown | 1]
    # the pow path agrees with itself from both sides
    a, b = shares[0], kex.DHShare(FFDHE4096, 3)
    assert a.premaster_secret(b.public) == b.premaster_secret(a.public)
