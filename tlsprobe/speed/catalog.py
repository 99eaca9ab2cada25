"""All benchmarked algorithms and the names the command line accepts for them.

Names are matched ignoring case, '-', '_' and spaces, so `ML-KEM-768`, `mlkem768` and
`MLKEM_768` are one name. Accepted: our canonical names (`p256`, `mlkem768`,
`x25519mlkem768`, `ffdhe2048`, `mldsa65`, `rsa2048-pss`, ...), `openssl speed`'s where it has
them (`ecdhp256`, `ecdsap256`, `rsa2048`, `ed25519`, `ffdh2048`, `aes-128-gcm`, ...), IANA
group names (`secp256r1`, `X25519MLKEM768`) and group words such as `ecdh`, `rsa`, `aead`
or `all` that select several algorithms (see `groups()`).
"""

from __future__ import annotations

from collections.abc import Iterable

from tlsprobe.speed import aead, kex, sig
from tlsprobe.speed.base import KINDS, Algorithm

ALGORITHMS: tuple[Algorithm, ...] = kex.ALGORITHMS + sig.ALGORITHMS + aead.ALGORITHMS


class UnknownAlgorithm(ValueError):
    """A name on the command line that is neither an algorithm nor a group."""

    def __init__(self, name: str, message: str | None = None) -> None:
        self.name = name
        super().__init__(message or f"unknown algorithm {name!r} (see 'tlsprobe speed --list')")


class UnavailableAlgorithm(UnknownAlgorithm):
    """A TLS group the probe knows (e.g. ML-KEM-512, offer-only) that cannot be timed here."""


def normalise(name: str) -> str:
    """The lookup key of a name: lower case without '-', '_' or spaces."""
    return "".join(ch for ch in name.lower() if ch not in "-_ ")


def _index() -> dict[str, Algorithm]:
    table: dict[str, Algorithm] = {}
    for algorithm in ALGORITHMS:
        for name in (algorithm.name, *algorithm.aliases):
            key = normalise(name)
            if table.get(key, algorithm) is not algorithm:
                raise RuntimeError(f"speed name {name!r} is ambiguous")  # a bug in the tables
            table[key] = algorithm
    return table


_BY_NAME = _index()


def groups() -> dict[str, tuple[Algorithm, ...]]:
    """Group word -> its algorithms, e.g. `ecdh`, `ffdh`, `hybrid`, `rsa`, `aead`, `all`."""
    result: dict[str, list[Algorithm]] = {}
    for algorithm in ALGORITHMS:
        for word in algorithm.groups:
            result.setdefault(word, []).append(algorithm)
    result["all"] = list(ALGORITHMS)
    return {word: tuple(members) for word, members in result.items()}


_BY_GROUP = {normalise(word): members for word, members in groups().items()}


def lookup(name: str) -> tuple[Algorithm, ...]:
    """The algorithms `name` selects; raises `UnknownAlgorithm`."""
    key = normalise(name)
    if key in _BY_NAME:
        return (_BY_NAME[key],)
    if key in _BY_GROUP:
        return _BY_GROUP[key]
    reason = unavailable_reason(name)
    if reason is not None:
        raise UnavailableAlgorithm(name, reason)
    raise UnknownAlgorithm(name)


def unavailable_reason(name: str) -> str | None:
    """Why a TLS group name the probe knows is not benchmarked, or None if it is no group.

    ML-KEM-512 is the case in point: the probe offers it (and completes it with kyber-py when
    that is installed), but `cryptography` has no ML-KEM-512, and kyber-py is a pure-Python
    reference whose figures would say nothing about a TLS stack.
    """
    import cryptography

    from tlsprobe.kex.groups import REGISTRY
    from tlsprobe.registry.lookup import all_groups

    key = normalise(name)
    group = next((g for g in all_groups()
                  if key in {normalise(n) for n in (g.name, *g.aliases)}), None)
    if group is None:
        return None
    label = next((a for a in group.aliases if a.startswith("ML-KEM-")), group.name)
    library = f"cryptography {cryptography.__version__}"
    computed = REGISTRY.get(group.code)
    source = getattr(getattr(computed, "backend", None), "source", "cryptography")
    if computed is None:
        return f"{label}: not available in {library} (offer-only group)"
    if source != "cryptography":
        return (f"{label}: not available in {library}; the probe computes it with {source} "
                "(pure Python), whose speed would say nothing about a TLS library, so it is "
                "not timed")
    return f"{label}: a TLS group tlsprobe speed does not time (see 'tlsprobe speed --list')"


def resolve(names: Iterable[str]) -> list[Algorithm]:
    """The algorithms selected by `names` (all when empty), in report order, without repeats."""
    names = list(names)
    if not names:
        return list(ALGORITHMS)
    chosen: set[str] = set()
    for name in names:
        chosen.update(algorithm.name for algorithm in lookup(name))
    return [algorithm for algorithm in ALGORITHMS if algorithm.name in chosen]


def by_kind(algorithms: Iterable[Algorithm]) -> list[tuple[str, list[Algorithm]]]:
    """Algorithms grouped by kind, in the order the report prints its tables."""
    algorithms = list(algorithms)
    return [(kind, [a for a in algorithms if a.kind == kind]) for kind in KINDS
            if any(a.kind == kind for a in algorithms)]
