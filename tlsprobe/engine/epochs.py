"""TLS 1.3 traffic-key epochs of one connection (RFC 8446 7.1-7.3, 4.6.3).

Each direction's records are protected under one traffic secret at a time: the handshake
traffic secret after the ServerHello, the application traffic secret 0 after that side's
Finished, and the next application secret after each KeyUpdate that side sends. The
client engine (engine.tls13) gets the secrets from its key schedule; offline decryption
(offline.decrypt) from a key log. Both go through `TrafficEpochs`, so the switch points
and the derivation are written once.
"""

from __future__ import annotations

from tlsprobe.engine.keyschedule import next_traffic_secret, traffic_keys
from tlsprobe.engine.protection import Tls13Protection

#: the AEAD nonce length of every TLS 1.3 suite (RFC 8446 5.3)
IV_LEN = 12


def tls13_protection(cipher: str, key_len: int, hash_name: str,
                     secret: bytes) -> Tls13Protection:
    """A fresh record protection (sequence number 0) for one traffic secret."""
    key, iv = traffic_keys(secret, key_len, IV_LEN, hash_name)
    return Tls13Protection(cipher, key, iv)


class TrafficEpochs:
    """The application traffic secrets of both directions and the protection of each epoch.

    Directions are opaque keys (the engine and offline decryption number them alike).
    Methods that switch an epoch return the secret now in force, or None when it is not
    known (a key log without the line): the caller then has no keys for that direction."""

    def __init__(self, cipher: str, key_len: int, hash_name: str) -> None:
        self.cipher = cipher
        self.key_len = key_len
        self.hash_name = hash_name
        self.application: dict[int, bytes] = {}  # each direction's latest application secret

    def protection(self, secret: bytes) -> Tls13Protection:
        """A fresh protection for `secret` with this connection's suite."""
        return tls13_protection(self.cipher, self.key_len, self.hash_name, secret)

    def set_application(self, direction: int, secret: bytes) -> None:
        """The application traffic secret 0 of `direction` (in force after its Finished)."""
        self.application[direction] = secret

    def finished(self, direction: int) -> bytes | None:
        """That side sent its Finished: its next records use its application secret."""
        return self.application.get(direction)

    def key_update(self, direction: int) -> bytes | None:
        """That side sent a KeyUpdate: its next records use the next application secret
        (RFC 8446 7.2); None, and nothing changes, when its secret is not known."""
        secret = self.application.get(direction)
        if secret is None:
            return None
        self.application[direction] = next_traffic_secret(secret, self.hash_name)
        return self.application[direction]
