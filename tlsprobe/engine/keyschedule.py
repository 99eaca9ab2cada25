"""TLS 1.3 key schedule (RFC 8446 section 7.1) and the handshake transcript hash.

HKDF-Extract and HKDF-Expand-Label are written here on top of `cryptography`'s HMAC so the
exact bytes of every label are visible. `KeySchedule` walks the secrets in the order the
handshake produces them (early -> handshake -> master); `Transcript` keeps the running hash
over handshake messages, including the HelloRetryRequest ``message_hash`` substitution of
RFC 8446 section 4.4.1, and also serves TLS 1.2 and 1.0/1.1 (MD5 || SHA-1) Finished hashes.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # cryptography is imported when a hash is first computed (start-up)
    from cryptography.hazmat.primitives import hashes, hmac

#: Hash names used throughout the engine, by class (`_hash_classes`, on first use: a scan
#: that computes no hash, a group audit, imports no `cryptography`). "md5sha1" is the TLS
#: 1.0/1.1 handshake hash (MD5 digest followed by SHA-1 digest, 36 bytes); it has no
#: HMAC/HKDF use.
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {}


def _hash_classes() -> dict[str, type[hashes.HashAlgorithm]]:
    if not _HASHES:
        from cryptography.hazmat.primitives import hashes
        _HASHES.update(md5=hashes.MD5, sha1=hashes.SHA1, sha256=hashes.SHA256,
                       sha384=hashes.SHA384, sha512=hashes.SHA512)
    return _HASHES

HANDSHAKE_MESSAGE_HASH = 254  # HandshakeType.message_hash (RFC 8446 section 4)

#: TLS 1.3 cipher suites whose HKDF hash is SHA-384; every other TLS 1.3 suite uses SHA-256.
_TLS13_SHA384_SUITES = frozenset({0x1302})


@functools.cache
def _hash_and_hmac() -> tuple[type[hashes.Hash], type[hmac.HMAC]]:
    """cryptography's Hash and HMAC, imported on first use and then held (an import
    statement per call cost as much as a short HMAC: the PRF makes dozens a handshake)."""
    from cryptography.hazmat.primitives import hashes, hmac
    return hashes.Hash, hmac.HMAC


def hash_algorithm(hash_name: str) -> hashes.HashAlgorithm:
    """A fresh `cryptography` hash object for a name ("sha256", "sha384", "sha1", "md5")."""
    try:
        return _hash_classes()[hash_name]()
    except KeyError:
        raise ValueError(f"unknown hash {hash_name!r}") from None


def hash_len(hash_name: str) -> int:
    """Digest size in bytes; "md5sha1" is 36."""
    if hash_name == "md5sha1":
        return 36
    return hash_algorithm(hash_name).digest_size


def digest(hash_name: str, data: bytes) -> bytes:
    """Hash(data); "md5sha1" gives MD5(data) || SHA1(data)."""
    if hash_name == "md5sha1":
        return digest("md5", data) + digest("sha1", data)
    h = _hash_and_hmac()[0](hash_algorithm(hash_name))
    h.update(data)
    return h.finalize()


def hmac_digest(hash_name: str, key: bytes, data: bytes) -> bytes:
    """HMAC-Hash(key, data)."""
    h = _hash_and_hmac()[1](key, hash_algorithm(hash_name))
    h.update(data)
    return h.finalize()


def tls13_hash_name(cipher_suite: int) -> str:
    """The HKDF/transcript hash of a TLS 1.3 cipher suite: SHA-384 for 0x1302, else SHA-256."""
    return "sha384" if cipher_suite in _TLS13_SHA384_SUITES else "sha256"


# -- HKDF (RFC 5869) with the TLS 1.3 labels (RFC 8446 section 7.1) -------------------------
def hkdf_extract(salt: bytes, ikm: bytes, hash_name: str = "sha256") -> bytes:
    """HKDF-Extract(salt, IKM) = HMAC-Hash(salt, IKM); an empty salt means HashLen zeros."""
    if not salt:
        salt = bytes(hash_len(hash_name))
    return hmac_digest(hash_name, salt, ikm)


def hkdf_expand(prk: bytes, info: bytes, length: int, hash_name: str = "sha256") -> bytes:
    """HKDF-Expand(PRK, info, L): T(i) = HMAC(PRK, T(i-1) || info || i), at most 255 blocks."""
    size = hash_len(hash_name)
    if length < 0 or length > 255 * size:
        raise ValueError(f"HKDF-Expand length {length} outside 0..{255 * size}")
    out = bytearray()
    block = b""
    counter = 1
    while len(out) < length:
        block = hmac_digest(hash_name, prk, block + info + bytes([counter]))
        out += block
        counter += 1
    return bytes(out[:length])


def hkdf_label(label: bytes | str, context: bytes, length: int) -> bytes:
    """The serialized HkdfLabel: uint16 length, opaque label<7..255> ("tls13 " + label),
    opaque context<0..255>."""
    raw = label.encode("ascii") if isinstance(label, str) else bytes(label)
    full = b"tls13 " + raw
    if len(full) > 255 or len(context) > 255 or not 0 <= length <= 0xFFFF:
        raise ValueError("HkdfLabel field out of range")
    return length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context


def hkdf_expand_label(secret: bytes, label: bytes | str, context: bytes, length: int,
                      hash_name: str = "sha256") -> bytes:
    """HKDF-Expand-Label(Secret, Label, Context, Length); `label` without the "tls13 " prefix."""
    return hkdf_expand(secret, hkdf_label(label, context, length), length, hash_name)


def derive_secret(secret: bytes, label: bytes | str, transcript_hash: bytes,
                  hash_name: str = "sha256") -> bytes:
    """Derive-Secret(Secret, Label, Messages), given Transcript-Hash(Messages) already computed."""
    return hkdf_expand_label(secret, label, transcript_hash, hash_len(hash_name), hash_name)


def traffic_keys(secret: bytes, key_len: int, iv_len: int,
                 hash_name: str = "sha256") -> tuple[bytes, bytes]:
    """[sender]_write_key and [sender]_write_iv from a traffic secret (RFC 8446 section 7.3)."""
    return (hkdf_expand_label(secret, b"key", b"", key_len, hash_name),
            hkdf_expand_label(secret, b"iv", b"", iv_len, hash_name))


def finished_key(base_key: bytes, hash_name: str = "sha256") -> bytes:
    """finished_key = HKDF-Expand-Label(BaseKey, "finished", "", Hash.length)."""
    return hkdf_expand_label(base_key, b"finished", b"", hash_len(hash_name), hash_name)


def verify_data(finished_key_: bytes, transcript_hash: bytes, hash_name: str = "sha256") -> bytes:
    """Finished.verify_data = HMAC(finished_key, Transcript-Hash(... up to Finished))."""
    return hmac_digest(hash_name, finished_key_, transcript_hash)


def next_traffic_secret(secret: bytes, hash_name: str = "sha256") -> bytes:
    """application_traffic_secret_N+1 after a KeyUpdate (RFC 8446 section 7.2)."""
    return hkdf_expand_label(secret, b"traffic upd", b"", hash_len(hash_name), hash_name)


def resumption_psk(resumption_master_secret: bytes, ticket_nonce: bytes,
                   hash_name: str = "sha256") -> bytes:
    """The PSK of a NewSessionTicket (RFC 8446 section 4.6.1)."""
    return hkdf_expand_label(resumption_master_secret, b"resumption", ticket_nonce,
                             hash_len(hash_name), hash_name)


def tls13_export(exporter_master_secret: bytes, label: bytes | str, context: bytes,
                 length: int, hash_name: str = "sha256") -> bytes:
    """TLS-Exporter(label, context_value, key_length) (RFC 8446 section 7.5), e.g. from an
    EXPORTER_SECRET key log line."""
    raw = label.encode("ascii") if isinstance(label, str) else bytes(label)
    inner = derive_secret(exporter_master_secret, raw, digest(hash_name, b""), hash_name)
    return hkdf_expand_label(inner, b"exporter", digest(hash_name, context), length, hash_name)


class KeySchedule:
    """The TLS 1.3 secrets of one connection, derived in handshake order.

    Usage: ``ks = KeySchedule("sha256")``; after ServerHello
    ``ks.handshake(shared_secret, transcript.digest())``; after the server Finished
    ``ks.application(transcript.digest())``; after the client Finished
    ``ks.resumption(transcript.digest())``. Secrets not yet derived are None.
    """

    def __init__(self, hash_name: str = "sha256", psk: bytes | None = None) -> None:
        self.hash_name = hash_name
        self.hash_len = hash_len(hash_name)
        self._empty_hash = digest(hash_name, b"")
        zeros = bytes(self.hash_len)
        self.early_secret: bytes = hkdf_extract(zeros, psk if psk is not None else zeros, hash_name)
        self.handshake_secret: bytes | None = None
        self.master_secret: bytes | None = None
        self.client_early_traffic_secret: bytes | None = None
        self.early_exporter_master_secret: bytes | None = None
        self.client_handshake_traffic_secret: bytes | None = None
        self.server_handshake_traffic_secret: bytes | None = None
        self.client_application_traffic_secret_0: bytes | None = None
        self.server_application_traffic_secret_0: bytes | None = None
        self.exporter_master_secret: bytes | None = None
        self.resumption_master_secret: bytes | None = None

    def _derive(self, secret: bytes, label: bytes, transcript_hash: bytes) -> bytes:
        return derive_secret(secret, label, transcript_hash, self.hash_name)

    def _check_hash(self, transcript_hash: bytes) -> None:
        if len(transcript_hash) != self.hash_len:
            raise ValueError(f"transcript hash of {len(transcript_hash)} bytes, "
                             f"expected {self.hash_len} for {self.hash_name}")

    def binder_key(self, external: bool = False) -> bytes:
        """binder_key ("ext binder" for external PSKs, "res binder" for resumption)."""
        label = b"ext binder" if external else b"res binder"
        return self._derive(self.early_secret, label, self._empty_hash)

    def early(self, client_hello_hash: bytes) -> None:
        """Derive client_early_traffic_secret and early_exporter_master_secret (0-RTT)."""
        self._check_hash(client_hello_hash)
        self.client_early_traffic_secret = self._derive(self.early_secret, b"c e traffic",
                                                        client_hello_hash)
        self.early_exporter_master_secret = self._derive(self.early_secret, b"e exp master",
                                                         client_hello_hash)

    def handshake(self, shared_secret: bytes, hello_hash: bytes) -> None:
        """Mix in the (EC)DHE/KEM shared secret; `hello_hash` covers ClientHello..ServerHello.

        Derives the handshake secret, both handshake traffic secrets and the master secret."""
        self._check_hash(hello_hash)
        salt = self._derive(self.early_secret, b"derived", self._empty_hash)
        self.handshake_secret = hkdf_extract(salt, shared_secret, self.hash_name)
        self.client_handshake_traffic_secret = self._derive(self.handshake_secret,
                                                            b"c hs traffic", hello_hash)
        self.server_handshake_traffic_secret = self._derive(self.handshake_secret,
                                                            b"s hs traffic", hello_hash)
        salt = self._derive(self.handshake_secret, b"derived", self._empty_hash)
        self.master_secret = hkdf_extract(salt, bytes(self.hash_len), self.hash_name)

    def application(self, server_finished_hash: bytes) -> None:
        """Application traffic secrets and exporter secret; the hash covers ClientHello..server
        Finished."""
        if self.master_secret is None:
            raise ValueError("application secrets requested before the handshake secret")
        self._check_hash(server_finished_hash)
        ms = self.master_secret
        self.client_application_traffic_secret_0 = self._derive(ms, b"c ap traffic",
                                                                server_finished_hash)
        self.server_application_traffic_secret_0 = self._derive(ms, b"s ap traffic",
                                                                server_finished_hash)
        self.exporter_master_secret = self._derive(ms, b"exp master", server_finished_hash)

    def resumption(self, client_finished_hash: bytes) -> bytes:
        """resumption_master_secret; the hash covers ClientHello..client Finished."""
        if self.master_secret is None:
            raise ValueError("resumption secret requested before the handshake secret")
        self._check_hash(client_finished_hash)
        self.resumption_master_secret = self._derive(self.master_secret, b"res master",
                                                     client_finished_hash)
        return self.resumption_master_secret

    def traffic_keys(self, secret: bytes, key_len: int, iv_len: int) -> tuple[bytes, bytes]:
        """(key, iv) for a traffic secret with this schedule's hash."""
        return traffic_keys(secret, key_len, iv_len, self.hash_name)

    def finished_key(self, base_key: bytes) -> bytes:
        return finished_key(base_key, self.hash_name)

    def verify_data(self, finished_key_: bytes, transcript_hash: bytes) -> bytes:
        return verify_data(finished_key_, transcript_hash, self.hash_name)

    def next_traffic_secret(self, secret: bytes) -> bytes:
        return next_traffic_secret(secret, self.hash_name)

    def export(self, label: bytes | str, context: bytes, length: int) -> bytes:
        """TLS-Exporter(label, context_value, key_length) (RFC 8446 section 7.5)."""
        if self.exporter_master_secret is None:
            raise ValueError("exporter used before the application secrets")
        return tls13_export(self.exporter_master_secret, label, context, length,
                            self.hash_name)


class Transcript:
    """Running hash over the handshake messages (each with its 4-byte header).

    The hash need not be known when the first message is added (the ClientHello goes out
    before the suite is chosen): messages are kept, and a running hash per requested name
    is started on first use. `digest(name)` returns the hash of everything so far without
    ending it. For HelloRetryRequest call `apply_hello_retry(hash_name)` after adding
    ClientHello1 and before adding the HelloRetryRequest.
    """

    def __init__(self, hash_name: str | None = None) -> None:
        self.hash_name = hash_name
        self._data = bytearray()
        self._running: dict[str, list[hashes.Hash]] = {}
        self.hello_retry_applied = False

    @property
    def data(self) -> bytes:
        """All transcript bytes (after any message_hash substitution)."""
        return bytes(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def add(self, message: bytes) -> None:
        """Append one whole handshake message (msg_type, uint24 length, body)."""
        self._data += message
        for contexts in self._running.values():
            for ctx in contexts:
                ctx.update(message)

    def _contexts(self, hash_name: str) -> list[hashes.Hash]:
        contexts = self._running.get(hash_name)
        if contexts is None:
            names = ["md5", "sha1"] if hash_name == "md5sha1" else [hash_name]
            new_hash = _hash_and_hmac()[0]
            contexts = [new_hash(hash_algorithm(n)) for n in names]
            for ctx in contexts:
                ctx.update(bytes(self._data))
            self._running[hash_name] = contexts
        return contexts

    def digest(self, hash_name: str | None = None) -> bytes:
        """Transcript-Hash of the messages so far, with `hash_name` or the default hash."""
        name = hash_name or self.hash_name
        if name is None:
            raise ValueError("transcript hash requested before the hash is known")
        return b"".join(ctx.copy().finalize() for ctx in self._contexts(name))

    def apply_hello_retry(self, hash_name: str | None = None) -> None:
        """Replace ClientHello1 by message_hash: 254, 00 00 Hash.length, Hash(ClientHello1)."""
        name = hash_name or self.hash_name
        if name is None or name == "md5sha1":
            raise ValueError("HelloRetryRequest needs a TLS 1.3 transcript hash")
        inner = digest(name, bytes(self._data))
        self.hash_name = name
        self._data = bytearray(bytes([HANDSHAKE_MESSAGE_HASH, 0, 0, len(inner)]) + inner)
        self._running = {}
        self.hello_retry_applied = True
