"""Recognise well-known Diffie-Hellman primes in TLS 1.2 DHE parameters.

The table (tlsprobe/data/known_dh_primes.json) holds the RFC 7919 FFDHE groups, the RFC 3526
MODP groups and the RFC 5114 groups, copied from the project's lab notes (prime -> name).
"""

from __future__ import annotations

from tlsprobe.kex.ffdh import known_dh_primes


def dh_group_name(p: int) -> str | None:
    """'ffdhe2048', 'modp_2048', 'dh_2048_256', ... or None for an unknown prime."""
    return known_dh_primes().get(p)
