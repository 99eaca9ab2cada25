"""Key-share objects, group implementations and the two errors of the kex package.

Every named group is implemented by one `GroupKex` (the registry in `groups.py` maps the
IANA code to it). A `GroupKex` makes the client's `KeyShare` and plays the server side
(`respond`), and it validates a peer's share before any secret is computed, so a hostile
server's bytes end in `InvalidShare` with a readable reason rather than an OpenSSL error.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class InvalidShare(ValueError):
    """The peer's key share (or DH parameters) is malformed or unsafe to use.

    `reason` is one line naming the group and what is wrong, e.g.
    ``"secp256r1: point is not on the curve"``.
    """

    def __init__(self, reason: str, group: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.group = group


class UnsupportedGroup(ValueError):
    """We cannot compute this group (unknown code, GREASE, or a primitive we lack)."""

    def __init__(self, reason: str, group: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.group = group


def label(code: int, name: str) -> str:
    """`x25519 (0x001d)`, the same spelling as the registry's group_label."""
    return f"{name} (0x{code:04x})"


class KeyShare(ABC):
    """Our ephemeral key for one group.

    `public` is exactly the bytes sent in the TLS 1.3 key_share entry or the TLS 1.2
    ClientKeyExchange (without its length prefix): EC points uncompressed (0x04||X||Y),
    X25519/X448 raw, FFDHE left-padded to the prime length, ML-KEM the encapsulation key,
    hybrids the concatenation the draft defines.
    """

    group: int
    public: bytes

    @abstractmethod
    def shared_secret(self, peer: bytes) -> bytes:
        """TLS 1.3 shared secret from the peer's share (for KEMs: the server's ciphertext).

        Finite-field secrets keep their leading zeros (left-padded to the prime size, RFC
        8446 section 7.4.1). Raises `InvalidShare` for a bad peer share.
        """

    def premaster_secret(self, peer: bytes) -> bytes:
        """TLS 1.2 pre_master_secret from the server's ECDHE point or DHE Ys.

        Differs from `shared_secret` only for finite-field DH, where leading zero bytes are
        stripped (RFC 5246 section 8.1.2); ECDHE uses the fixed-size x coordinate in both
        versions (RFC 8422 section 5.10).
        """
        return self.shared_secret(peer)


class GroupKex(ABC):
    """One named group: sizes, key generation, the server side and share validation."""

    code: int
    name: str
    client_size: int
    server_size: int

    @property
    def label(self) -> str:
        return label(self.code, self.name)

    def invalid(self, reason: str) -> InvalidShare:
        return InvalidShare(f"{self.name}: {reason}", self.code)

    def check_size(self, data: bytes, expected: int, what: str = "key share") -> None:
        if len(data) != expected:
            raise self.invalid(f"{what} is {len(data)} bytes, expected {expected}")

    @abstractmethod
    def generate(self) -> KeyShare:
        """A fresh client key share."""

    @abstractmethod
    def respond(self, client_public: bytes) -> tuple[bytes, bytes]:
        """Server side: (server share, shared secret) for the client's share."""

    @abstractmethod
    def check_server_share(self, data: bytes) -> None:
        """Raise `InvalidShare` unless `data` is a well-formed server share."""

    def check_client_share(self, data: bytes) -> None:
        """Raise `InvalidShare` unless `data` is a well-formed client share.

        For Diffie-Hellman groups both directions carry the same kind of value."""
        self.check_server_share(data)
