"""What a benchmark is: an algorithm that, once set up, yields timed operations.

An `Op` is a callable and its arguments, exactly as the tight loop will call it
(`func(*args)`), so that nothing but the library call itself runs per iteration.
An `Algorithm` names a primitive, tells how `openssl speed` calls the same thing, and
builds its `Op`s (generating keys and inputs is setup, never timed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# Kinds, in the order the report prints their tables.
KINDS: tuple[str, ...] = ("kex", "kem", "sig", "aead")

# AEAD block sizes, as `openssl speed` uses them.
DEFAULT_BLOCK_SIZES: tuple[int, ...] = (16, 64, 256, 1024, 8192, 16384)


@dataclass(frozen=True)
class Op:
    """One timed operation: the loop calls `func(*args)`; `block_size` bytes per call (AEAD)."""

    name: str
    func: Callable[..., object]
    args: tuple[object, ...] = ()
    block_size: int | None = None


@dataclass(frozen=True)
class OpensslSpec:
    """How `openssl speed` measures the same primitive.

    Public-key primitives: `names` go on the `openssl speed` command line, `row` is a regular
    expression that finds the result row in its output table, `columns` maps our operation to
    the accepted column headers (they differ between OpenSSL versions).
    AEADs: `cipher` is the `-evp` name and `row` the row name printed by `openssl speed -aead`.
    `since` is the first OpenSSL (major, minor) whose `speed` knows the primitive, `family` its
    name in a note ("ML-KEM"): an older openssl is not asked at all.
    """

    row: str
    names: tuple[str, ...] = ()
    columns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cipher: str | None = None
    since: tuple[int, int] | None = None
    family: str = ""

    def missing_in(self, version: tuple[int, int] | None) -> str | None:
        """Why an OpenSSL of `version` cannot measure this (None: it can, or unknown)."""
        if self.since is None or version is None or version >= self.since:
            return None
        return (f"openssl {version[0]}.{version[1]} has no {self.family or self.names[0]} "
                f"({self.since[0]}.{self.since[1]}+)")

    @property
    def needs(self) -> str | None:
        """The OpenSSL it needs, e.g. "OpenSSL 3.5+", or None for any."""
        return None if self.since is None else f"OpenSSL {self.since[0]}.{self.since[1]}+"

    def column_headers(self, operation: str) -> tuple[str, ...]:
        return dict(self.columns).get(operation, ())


@dataclass(frozen=True)
class Algorithm:
    """A benchmarked primitive: canonical `name`, accepted `aliases`, `groups` it belongs to."""

    name: str
    kind: str
    description: str
    operations: tuple[str, ...]
    build: Callable[[Sequence[int]], list[Op]] = field(repr=False, compare=False)
    aliases: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    openssl: OpensslSpec | None = None

    def operation_names(self, block_sizes: Sequence[int]) -> tuple[str, ...]:
        """Names of the figures this algorithm yields (AEAD: one per block size)."""
        if self.kind == "aead":
            return tuple(f"encrypt {size} bytes" for size in block_sizes)
        return self.operations


def ecdh_columns() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`openssl speed` column headers for key exchange rows."""
    return (("derive", ("op/s",)), ("keygen", ("keygens/s", "keygen/s")))


def kem_columns() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`openssl speed` (3.5+) column headers for KEM rows."""
    return (("keygen", ("keygens/s", "keygen/s")), ("encaps", ("encaps/s",)),
            ("decaps", ("decaps/s",)))


def sig_columns() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`openssl speed` column headers for signature rows."""
    return (("sign", ("sign/s", "signs/s")), ("verify", ("verify/s", "verifys/s")))
