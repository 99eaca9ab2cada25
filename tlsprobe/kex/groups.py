"""The registry of named groups we compute, and what we know of the ones we only offer.

`REGISTRY` maps every IANA group code `cryptography` (plus kyber-py for MLKEM512 only)
computes here to its `GroupKex`. Other groups can still be offered in a ClientHello with
`offer_only_share`: the server's choice is visible in its ServerHello even when we cannot
finish the handshake. Both tables are made on first use, and with them the implementations'
`cryptography` modules are imported: a scan that computes no key (a group audit: the
HelloRetryRequest and the ServerKeyExchange name the group) imports none (start-up, issue 35).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial

from .base import GroupKex, InvalidShare, KeyShare, UnsupportedGroup, label

ROLES = ("client", "server")
_TABLES: list[tuple[dict[int, GroupKex], dict[int, OfferOnly]]] = []


def _build() -> dict[int, GroupKex]:
    from .ecdh import ec_groups
    from .ffdh import ffdhe_groups
    from .hybrid import hybrid_groups
    from .mlkem import mlkem_groups
    registry: dict[int, GroupKex] = {}
    for kex in [*ec_groups(), *ffdhe_groups(), *mlkem_groups()]:
        registry[kex.code] = kex
    for kex in hybrid_groups(registry):
        registry[kex.code] = kex
    return dict(sorted(registry.items()))


def _tables() -> tuple[dict[int, GroupKex], dict[int, OfferOnly]]:
    """(the computed groups, the offer-only ones), made once on first use."""
    if not _TABLES:
        computed = _build()
        _TABLES.append((computed, _offer_only(computed)))
    return _TABLES[0]


def _computed() -> dict[int, GroupKex]:
    return _tables()[0]


class _Registry(Mapping[int, GroupKex]):
    """`REGISTRY`: the computed groups' table, made when first read."""

    def __getitem__(self, code: int) -> GroupKex:
        return _computed()[code]

    def __iter__(self) -> Iterator[int]:
        return iter(_computed())

    def __len__(self) -> int:
        return len(_computed())


REGISTRY: Mapping[int, GroupKex] = _Registry()


@dataclass(frozen=True)
class OfferOnly:
    """A group we can offer but not compute: its share sizes and a plausible share."""

    name: str
    client_size: int
    server_size: int
    make: Callable[[], bytes]


def _random_point() -> bytes:
    return b"\x04" + os.urandom(64)


def _offer_only(computed: dict[int, GroupKex]) -> dict[int, OfferOnly]:
    from .mlkem import MLKEM_PARAMETERS, random_encapsulation_key
    table = {
        0x0029: OfferOnly("curveSM2", 65, 65, _random_point),  # RFC 8998
        0x6399: OfferOnly("X25519Kyber768Draft00", 32 + 1184, 32 + 1088,
                          lambda: os.urandom(32) + random_encapsulation_key(3)),
        0x639a: OfferOnly("SecP256r1Kyber768Draft00", 65 + 1184, 65 + 1088,
                          lambda: _random_point() + random_encapsulation_key(3)),
    }
    for code, (name, k, ek, ct) in MLKEM_PARAMETERS.items():
        if code not in computed:  # MLKEM512 when kyber-py is missing
            table[code] = OfferOnly(name, ek, ct, partial(random_encapsulation_key, k))
    return table


def is_grease(code: int) -> bool:
    """RFC 8701 values 0x0a0a, 0x1a1a, ... 0xfafa."""
    return (code & 0x0F0F) == 0x0A0A and (code >> 8) == (code & 0xFF)


def kex_for(group: int) -> GroupKex:
    """The implementation of `group`, or `UnsupportedGroup` saying why there is none."""
    computed, offer_only = _tables()
    kex = computed.get(group)
    if kex is not None:
        return kex
    if is_grease(group):
        raise UnsupportedGroup(f"GREASE (0x{group:04x}) is never computed", group)
    known = offer_only.get(group)
    if known is not None:
        raise UnsupportedGroup(f"{label(group, known.name)} can be offered but not computed "
                               f"with the installed libraries", group)
    raise UnsupportedGroup(f"group 0x{group:04x} cannot be computed", group)


def generate(group: int) -> KeyShare:
    """A fresh client key share for `group` (`UnsupportedGroup` if we cannot compute it)."""
    return kex_for(group).generate()


def respond(group: int, client_public: bytes) -> tuple[bytes, bytes]:
    """Server side: validate the client's share and return (server share, shared secret).

    For ML-KEM this encapsulates to the client's key; for hybrids it does both parts."""
    return kex_for(group).respond(bytes(client_public))


def validate_server_share(group: int, data: bytes) -> None:
    """Raise `InvalidShare` unless `data` is a well-formed server share for `group`.

    For groups we only offer, just the size is checked when it is known."""
    computed, offer_only = _tables()
    known = offer_only.get(group)
    if group not in computed and known is not None:
        if len(data) != known.server_size:
            raise InvalidShare(f"{known.name}: key share is {len(data)} bytes, expected "
                               f"{known.server_size}", group)
        return
    kex_for(group).check_server_share(bytes(data))


def validate_client_share(group: int, data: bytes) -> None:
    """Raise `InvalidShare` unless `data` is a well-formed client share (server side)."""
    kex_for(group).check_client_share(bytes(data))


def share_size(group: int, role: str = "client") -> int | None:
    """Bytes of the key_share for `group` sent by `role`; None when not defined or unknown."""
    if role not in ROLES:
        raise ValueError(f"role must be 'client' or 'server', not {role!r}")
    computed, offer_only = _tables()
    entry: GroupKex | OfferOnly | None = computed.get(group) or offer_only.get(group)
    if entry is None:
        return None
    return entry.client_size if role == "client" else entry.server_size


def computable_groups() -> list[int]:
    """Every group code `generate` accepts, ascending."""
    return list(_computed())


def is_computable(group: int) -> bool:
    return group in _computed()


def offer_only_share(group: int, size: int | None = None) -> bytes:
    """Bytes to put in a key_share entry for a group whose key we will not use.

    With `size`, that many random bytes. Otherwise: GREASE gets one 0x00 byte (as Chrome
    sends); a computable group a real public value (its private key is dropped, so the
    share looks right to a strict server); a known offer-only group a random share of the
    right shape (ML-KEM keys pass the modulus check); anything else 32 random bytes."""
    if size is not None:
        if not 1 <= size <= 0xFFFF:
            raise ValueError(f"key share size {size} outside 1..65535")
        return os.urandom(size)
    if is_grease(group):
        return b"\x00"
    computed, offer_only = _tables()
    if group in computed:
        return computed[group].generate().public
    known = offer_only.get(group)
    return known.make() if known is not None else os.urandom(32)
