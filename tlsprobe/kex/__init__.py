"""Key exchange for every named group we can compute, through `cryptography`.

    share = generate(0x11ec)                  # X25519MLKEM768 client share
    hello_key_share = share.public            # bytes for key_share / ClientKeyExchange
    secret = share.shared_secret(server_key_share)      # TLS 1.3 form
    pms = generate(0x17).premaster_secret(server_point) # TLS 1.2 pre_master_secret
    server_share, secret = respond(0x11ec, hello_key_share)  # server side (tests, hostile server)

Finite-field DH has two encodings: `shared_secret` (TLS 1.3: left-padded to the prime
size) and `premaster_secret` (TLS 1.2: leading zeros stripped). `DHShare(p, g)` covers
TLS 1.2 DHE with the server's own parameters. Bad peer shares raise `InvalidShare`, groups
we cannot compute `UnsupportedGroup` (both ValueError, both one readable line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import GroupKex, InvalidShare, KeyShare, UnsupportedGroup
from .groups import (
    REGISTRY,
    computable_groups,
    generate,
    is_computable,
    is_grease,
    kex_for,
    offer_only_share,
    respond,
    share_size,
    validate_client_share,
    validate_server_share,
)

if TYPE_CHECKING:
    from .ffdh import DHShare
    from .rsa import rsa_encrypt_premaster


def __getattr__(name: str) -> object:
    """`DHShare` and `rsa_encrypt_premaster`, imported (with their `cryptography` modules)
    when first named: a scan that computes no key imports none (start-up, issue 35)."""
    if name == "DHShare":
        from .ffdh import DHShare
        return DHShare
    if name == "rsa_encrypt_premaster":
        from .rsa import rsa_encrypt_premaster
        return rsa_encrypt_premaster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "REGISTRY",
    "DHShare",
    "GroupKex",
    "InvalidShare",
    "KeyShare",
    "UnsupportedGroup",
    "computable_groups",
    "generate",
    "is_computable",
    "is_grease",
    "kex_for",
    "offer_only_share",
    "respond",
    "rsa_encrypt_premaster",
    "share_size",
    "validate_client_share",
    "validate_server_share",
]
