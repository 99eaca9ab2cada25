"""Key-log decryption glue: SSLKEYLOGFILE secrets -> record protection on a connection.

When the ServerHello of a connection is seen, its client random selects the logged
secrets. TLS 1.3: the handshake traffic secrets (CLIENT_/SERVER_HANDSHAKE_TRAFFIC_SECRET)
decrypt the encrypted handshake (a client that offered 0-RTT first sends early data under
CLIENT_EARLY_TRAFFIC_SECRET, up to its EndOfEarlyData; records no known key opens in that
phase are skipped, as the server skips them, RFC 8446 4.2.10); each side switches to its application traffic secret
(CLIENT_/SERVER_TRAFFIC_SECRET_0) after its handshake's Finished (not after a Finished of
post-handshake authentication), and to the next one after each KeyUpdate it sends. TLS 1.0-1.2: the master secret (CLIENT_RANDOM, or an ``RSA Session-ID:`` line
for the ServerHello's session id) and both randoms give the key block; the session.Flow applies the protection after each side's ChangeCipherSpec.
A TLS 1.0-1.2 connection that resumes a session (the ServerHello echoes the session id the
ClientHello offered) whose client random the key log lacks takes the master secret of the
connection of the capture that established it, by session id or ticket (tshark's session
cache). A TLS 1.0-1.2 renegotiation (a ClientHello and ServerHello read under the current keys)
takes the keys logged for its own client random, each side from its next ChangeCipherSpec;
without them, that side's later records are left encrypted and said so (never "malformed").
A TLS 1.0-1.2 ServerHello that chose DEFLATE (RFC 3749) compresses every protected record
after decryption: one zlib stream per direction, each record's output bounded to 2^14
bytes (RFC 5246 6.2.2 allows 1024 more), so a decompression bomb costs no memory.
All cryptography is the engine's (keyschedule, prf, protection); the TLS 1.3 epochs
(handshake, application after Finished, next after KeyUpdate) are engine.epochs', as in
the client engine.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Final

from tlsprobe import registry
from tlsprobe.engine import keylog as kl
from tlsprobe.engine.common import RecordDeprotector
from tlsprobe.engine.epochs import TrafficEpochs, tls13_protection
from tlsprobe.engine.keylog import KeyLog
from tlsprobe.engine.keyschedule import tls13_hash_name
from tlsprobe.engine.prf import key_block
from tlsprobe.engine.protection import Tls13Protection, protections_from_key_block
from tlsprobe.engine.suites import (
    SuiteParams,
    protection_params,
    suite_params,
    unsupported_reason,
)
from tlsprobe.offline.facts import CLIENT, SERVER, Facts
from tlsprobe.session.flow import Deprotector, UndecryptableEarlyData, UnknownRecordKey
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.hello_fields import ServerHelloInfo
from tlsprobe.wire.record import Record
from tlsprobe.wire.summary import offered_session, tls12_session_ticket

SetDeprotector = Callable[[int, Deprotector | None], None]
DEFLATE: Final = 1
#: RFC 5246 6.2.2: TLSCompressed.length is at most 2^14 + 1024; the plaintext at most 2^14
MAX_PLAINTEXT: Final = 1 << 14


class InflatingDeprotector(RecordDeprotector):
    """Record protection, then RFC 3749 DEFLATE decompression of the fragment.

    The zlib stream spans the whole direction (the compressor's history is kept across
    records), so one object serves every record of its direction after ChangeCipherSpec.
    Failures are ValueError, as for a bad MAC: session.Flow reports them."""

    def __init__(self, inner: RecordDeprotector) -> None:
        super().__init__(inner.protection)
        self.inner = inner
        self._zlib = zlib.decompressobj()

    def decrypt(self, record: Record) -> tuple[int, bytes]:
        content_type, compressed = self.inner.decrypt(record)
        if len(compressed) > MAX_PLAINTEXT + 1024:
            raise ValueError(f"compressed fragment of {len(compressed)} bytes "
                             f"over {MAX_PLAINTEXT + 1024}")
        try:
            plain = self._zlib.decompress(compressed, MAX_PLAINTEXT + 1)
        except zlib.error as exc:
            raise ValueError(f"DEFLATE decompression failed: {exc}") from None
        if len(plain) > MAX_PLAINTEXT or self._zlib.unconsumed_tail:
            raise ValueError(f"record decompresses to over {MAX_PLAINTEXT} bytes")
        return content_type, plain
_APP: Final = {CLIENT: kl.CLIENT_TRAFFIC_SECRET_0, SERVER: kl.SERVER_TRAFFIC_SECRET_0}
_HASH_LEN: Final = {"sha256": 32, "sha384": 48}
_HANDSHAKE: Final = {CLIENT: kl.CLIENT_HANDSHAKE_TRAFFIC_SECRET,
                     SERVER: kl.SERVER_HANDSHAKE_TRAFFIC_SECRET}


class EarlyDataDeprotector:
    """The client's records while 0-RTT data may come: the early traffic key (its suite
    found by trial among the offered TLS 1.3 suites until the ServerHello names it), then,
    from the first record it opens, the handshake key. A record neither opens is early
    data without a known key: `UndecryptableEarlyData` (the Flow skips it)."""

    def __init__(self, early: list[RecordDeprotector]) -> None:
        self.early = early            # candidate protections (one once a record opened)
        self.handshake: RecordDeprotector | None = None
        self.records = 0              # early records decrypted
        self.over = False             # a record opened with the handshake key

    def decrypt(self, record: Record) -> tuple[int, bytes]:
        handshake = self.handshake
        if self.over and handshake is not None:
            return handshake.decrypt(record)
        for candidate in self.early:
            try:
                out = candidate.decrypt(record)
            except ValueError:
                continue
            self.early = [candidate]
            self.records += 1
            return out
        if handshake is not None:
            try:
                out = handshake.decrypt(record)
            except ValueError:
                pass
            else:
                self.early = []  # the handshake key has begun: no more early data
                self.over = True
                return out
        raise UndecryptableEarlyData("0-RTT record that no known key opens")


#: TLS 1.3, the first record after a capture gap: sequence numbers tried per key at most
MAX_RESYNC_TRIES: Final = 16
#: the largest protected TLS 1.3 record on the wire (RFC 8446 5.2: 2^14 + 256, its header)
MAX_TLS13_RECORD: Final = 5 + (1 << 14) + 256


class GapResync:
    """A TLS 1.3 side's records after a capture gap: the records the gap took moved the
    sequence number by a count not known, but bounded by the gap's size (each record takes
    at least its header, its content type and its AEAD tag; at most 2^14 + 256 bytes and
    its header; a middlebox ChangeCipherSpec takes none). The first record after it is tried with each sequence number the bounds
    allow (at most `MAX_RESYNC_TRIES`), and with the side's application key from 0 when
    its handshake Finished was not read (the gap may have held it); the AEAD tag tells
    the right one, so what it opens is certain. Found: every later record uses it. None
    found: this side's later records are left not decrypted (`UnknownRecordKey`), as
    without the resync, which says nothing wrong of them."""

    def __init__(self, decryptor: Decryptor, direction: int, current: RecordDeprotector,
                 lost: int) -> None:
        self.decryptor = decryptor
        self.direction = direction
        self.current = current     # the protection in force before the gap
        self.lost = lost           # bytes the gaps since the last record read took
        self.found: RecordDeprotector | None = None
        self.failed = False

    def decrypt(self, record: Record) -> tuple[int, bytes]:
        found = self.found
        if found is not None:
            return found.decrypt(record)
        if self.failed:
            raise UnknownRecordKey("sequence number after a capture gap not known")
        for deprotector, seq, application in self._candidates():
            protection = deprotector.protection
            protection.seq = seq
            try:
                out = deprotector.decrypt(record)
            except ValueError:
                continue
            self.found = deprotector
            self.decryptor.resynced(self.direction, deprotector, application)
            return out
        self.failed = True
        raise UnknownRecordKey("sequence number after a capture gap not known")

    def _candidates(self) -> list[tuple[RecordDeprotector, int, bool]]:
        """(deprotection, sequence number, whether it is the application key) to try."""
        protection = self.current.protection
        tag = protection.tag_len if isinstance(protection, Tls13Protection) else 16
        most = min(MAX_RESYNC_TRIES, -(-self.lost // (5 + 1 + tag)) + 1)
        # (none protected lost: a gap of ChangeCipherSpec records only, which take none)
        least = self.lost // MAX_TLS13_RECORD
        seq = protection.seq
        out = [(self.current, seq + n, False) for n in range(least, least + most)]
        application = self.decryptor.application_after_gap(self.direction)
        if application is not None:
            out += [(application, n, True) for n in range(most)]
        return out


#: the key log's note for connections whose logged keys opened none of their records
WRONG_KEYS: Final = "the logged keys do not decrypt its records (wrong keys for this connection)"


class Decryptor:
    """Per-connection: installs deprotectors through `set_deprotector(direction, d)`."""

    def __init__(self, keylog: KeyLog, set_deprotector: SetDeprotector) -> None:
        self.keylog = keylog
        self._setter = set_deprotector
        #: per side, the deprotection installed last (what a gap's resync starts from)
        self.current: list[Deprotector | None] = [None, None]
        self.active = False
        self.matched = False  # the key log has secrets for this connection
        #: why matched keys could not be used: (suite name or "", reason)
        self.unsupported: tuple[str, str] | None = None
        self._epochs: TrafficEpochs | None = None   # TLS 1.3, once the keys are installed
        self._early: EarlyDataDeprotector | None = None
        self._client_handshake: RecordDeprotector | None = None
        self.opened = [False, False]  # per side: a protected record opened with the keys
        #: TLS 1.0-1.2 renegotiation: the client random of the ClientHello read under keys,
        #: then per side the protection its next ChangeCipherSpec starts (None: no keys)
        self._renegotiation_random: bytes | None = None
        self._next: list[RecordDeprotector | None] | None = None
        self._renegotiating = [False, False]
        #: TLS 1.3: the side whose handshake traffic secret the key log lacks (its records
        #: stay encrypted, so whether its Finished came is not known); None: both logged
        self.keyless_side: int | None = None
        self._finished = [False, False]  # TLS 1.3: per side, its handshake Finished read
        #: TLS 1.0-1.2: the session the ClientHello offers (keys of the analysis's session
        #: memo) and this connection's master secret once known
        self._offered: tuple[bytes, ...] = ()
        self._master: bytes | None = None

    def set(self, direction: int, deprotector: Deprotector | None) -> None:
        """Install `direction`'s deprotection (None: its records are not decrypted)."""
        self.current[direction] = deprotector
        self._setter(direction, deprotector)

    def after_gap(self, direction: int, lost: int) -> GapResync | None:
        """TLS 1.3: the deprotection of `direction`'s records after a capture gap of
        `lost` bytes (`GapResync`); None when there is none to resume (no keys in force,
        0-RTT data, TLS 1.0-1.2)."""
        current = self.current[direction]
        if isinstance(current, GapResync):
            if current.found is None and not current.failed:
                current.lost += lost  # a second gap before any record after the first
                return current
            current = current.found
        if lost <= 0 or self._epochs is None or not isinstance(current, RecordDeprotector) \
                or not isinstance(current.protection, Tls13Protection):
            return None
        resync = GapResync(self, direction, current, lost)
        self.current[direction] = resync
        return resync

    def application_after_gap(self, direction: int) -> RecordDeprotector | None:
        """The application key of a side whose handshake Finished was not read (a gap may
        have held it), to try after the gap; None when read already or not logged."""
        if self._epochs is None or self._finished[direction]:
            return None
        secret = self._epochs.finished(direction)
        return self._protection(secret) if secret is not None else None

    def resynced(self, direction: int, found: RecordDeprotector, application: bool) -> None:
        """`GapResync` opened a record: with the application key, the side's handshake
        is over (its Finished lost in the gap); later gaps resume from `found`."""
        if application:
            self._finished[direction] = True
        if isinstance(self.current[direction], GapResync):
            self.current[direction] = found

    def on_client_hello(self, facts: Facts, raw: bytes = b"") -> None:
        """A ClientHello (`raw`: the message): the session it offers to resume. One of
        TLS 1.3 offering early_data: its 0-RTT records use the logged
        CLIENT_EARLY_TRAFFIC_SECRET (tried with each offered TLS 1.3 suite of its hash
        length, since only the ServerHello will say which one the PSK has)."""
        session_id, ticket = offered_session(raw)
        self._offered = tuple(key for key, value in ((b"t" + ticket, ticket),
                                                     (b"i" + session_id, session_id)) if value)
        hello = facts.client_hellos[-1] if facts.client_hellos else None
        self._early = None
        if hello is None or not hello.early_data or len(facts.client_hellos) > 1:
            return
        secrets = self.keylog.secrets(hello.random)
        secret = secrets.get(kl.CLIENT_EARLY_TRAFFIC_SECRET) if secrets else None
        if secret is None:
            return
        candidates = []
        for code in hello.cipher_suites:
            params = suite_params(code) if code >> 8 == 0x13 else None
            if params is None:
                continue
            hash_name = tls13_hash_name(code)
            if hash_name is None or _HASH_LEN.get(hash_name) != len(secret):
                continue
            candidates.append(RecordDeprotector(tls13_protection(params.cipher, params.key_len,
                                                                 hash_name, secret)))
        if candidates:
            self._early = EarlyDataDeprotector(candidates)
            self.set(CLIENT, self._early)

    @property
    def early_records(self) -> int:
        """0-RTT records decrypted so far."""
        return self._early.records if self._early is not None else 0

    def _secrets(self, client_random: bytes, sh: ServerHelloInfo,
                 tls13: bool) -> dict[str, bytes] | None:
        """The logged secrets of a handshake: by its client random, or (TLS 1.0-1.2) a
        master secret logged for the ServerHello's session id."""
        secrets = self.keylog.secrets(client_random)
        if not secrets and not tls13:
            master = self.keylog.master_secret_by_session_id(sh.session_id)
            secrets = {kl.CLIENT_RANDOM: master} if master is not None else None
        return secrets

    def _resumed(self, facts: Facts, sh: ServerHelloInfo) -> dict[str, bytes] | None:
        """TLS 1.0-1.2 resumption of a session a connection of this capture established
        with known keys: its master secret, by the offered ticket or session id."""
        if facts.tls13 or not sh.session_id or sh.session_id != facts.client_hellos[0].session_id:
            return None
        for key in self._offered:
            master = facts.caches.sessions.get(key)
            if master is not None:
                return {kl.CLIENT_RANDOM: master}
        return None

    def on_session_ticket(self, facts: Facts, raw: bytes) -> None:
        """A TLS 1.0-1.2 NewSessionTicket: its session's master secret, when known, is
        remembered under the ticket for the connections that resume it."""
        if self._master is not None:
            try:
                ticket = tls12_session_ticket(raw)
            except DecodeError:
                return
            if ticket:
                facts.caches.remember_session(b"t" + ticket, self._master)

    def on_server_hello(self, facts: Facts) -> str | None:
        """Install the keys of this connection; returns a problem text or None."""
        sh = facts.server_hello
        if sh is None or not facts.client_hellos:
            return None
        secrets = self._secrets(facts.client_hellos[0].random, sh, facts.tls13) or \
            self._resumed(facts, sh)
        if not secrets:
            return None
        self.matched = True
        if sh.selected_version < 0x0301:
            self.unsupported = ("", "SSL 3.0 (not supported)")
            return "SSL 3.0 records are not decrypted (its key derivation is not implemented)"
        params = protection_params(sh.cipher_suite)
        if params is None:
            reason = unsupported_reason(sh.cipher_suite)
            self.unsupported = (registry.suite_name(sh.cipher_suite), reason)
            return (f"no record protection known for suite 0x{sh.cipher_suite:04x} "
                    f"({reason})")
        try:
            if facts.tls13:
                hello = facts.client_hellos[-1]
                problem = self._tls13(params, secrets, hello.early_data and facts.hrr is None)
            else:
                problem = self._tls12(params, secrets, facts)
        except ValueError as exc:
            problem = f"cannot use the logged keys: {exc}"
        if problem is not None:
            self.unsupported = ("", problem)
        elif self.keyless_side is not None:
            side = "client" if self.keyless_side == CLIENT else "server"
            problem = (f"key log has no {_HANDSHAKE[self.keyless_side]} for this connection: "
                       f"the {side}'s protected records are not decrypted (whether its "
                       "handshake finished is not known)")
        return problem

    def keys_failed(self, direction: int, error: str) -> str | None:
        """A protected record of `direction` that the installed keys did not open: when
        none of that side's records opened before, the keys are wrong for this connection
        (a key log of other sessions, corrupted or edited secrets), which says nothing
        about the records; returns that problem text (None: keys that worked before, so
        the record is what is wrong)."""
        if self.opened[direction]:
            return None
        self.unsupported = ("", WRONG_KEYS)
        side = "client" if direction == CLIENT else "server"
        return (f"the logged keys do not decrypt the {side}'s records ({error}): wrong keys "
                "for this connection, or its records were altered")

    def _tls13(self, params: SuiteParams, secrets: dict[str, bytes],
               early_data: bool) -> str | None:
        if not any(label in secrets for label in _HANDSHAKE.values()):
            return "key log has no TLS 1.3 handshake traffic secrets for this connection"
        epochs = self._epochs = TrafficEpochs(params.cipher, params.key_len,
                                              tls13_hash_name(params.code))
        for side in (CLIENT, SERVER):
            secret = secrets.get(_HANDSHAKE[side])
            protection = self._protection(secret) if secret is not None else None
            if side == CLIENT and early_data:
                # 0-RTT records may come before the client's handshake records: whether
                # the server accepted them or not, they are skipped when no key opens them
                early = self._early or EarlyDataDeprotector([])
                early.handshake = protection
                self._early = early
                self._client_handshake = protection
                self.set(side, early)
            elif protection is not None:
                self.set(side, protection)
            if secret is None:
                self.keyless_side = side
            if _APP[side] in secrets:
                epochs.set_application(side, secrets[_APP[side]])
        self.active = True
        return None

    def _tls12(self, params: SuiteParams, secrets: dict[str, bytes],
               facts: Facts) -> str | None:
        sh = facts.server_hello
        if sh is None:
            return "key log has no CLIENT_RANDOM master secret for this connection"
        got = _tls12_deprotectors(params, secrets, facts.client_hellos[0].random, sh)
        if isinstance(got, str):
            return got
        for side in (CLIENT, SERVER):
            self.set(side, got[side])
        self.active = True
        self._master = secrets[kl.CLIENT_RANDOM]
        if sh.session_id:
            facts.caches.remember_session(b"i" + sh.session_id, self._master)
        return None

    def on_renegotiation_hello(self, client_random: bytes) -> None:
        """TLS 1.0-1.2: a ClientHello read under the keys in force (a renegotiation)."""
        self._renegotiation_random = client_random

    def on_renegotiation(self, sh: ServerHelloInfo) -> str | None:
        """TLS 1.0-1.2: the ServerHello of a renegotiation, read under the keys in force.
        Each side keeps those keys up to its next ChangeCipherSpec, then takes the new
        handshake's (logged under its own client random); returns a problem text when
        they cannot be had (that side's records from then on stay encrypted)."""
        client_random, self._renegotiation_random = self._renegotiation_random, None
        self._renegotiating = [True, True]
        self._next = [None, None]
        if client_random is None:
            return ("renegotiation: its ClientHello was not read, so its keys are unknown: "
                    "the records after its ChangeCipherSpec are not decrypted")
        secrets = self._secrets(client_random, sh, False)
        params = protection_params(sh.cipher_suite)
        problem = None
        if not secrets:
            problem = ("the key log has no secrets for its client random "
                       f"{client_random.hex()}")
        elif params is None:
            problem = (f"no record protection known for suite 0x{sh.cipher_suite:04x} "
                       f"({unsupported_reason(sh.cipher_suite)})")
        else:
            try:
                got = _tls12_deprotectors(params, secrets, client_random, sh)
            except ValueError as exc:
                got = f"cannot use the logged keys: {exc}"
            if isinstance(got, str):
                problem = got
            else:
                self._next = got
        if problem is None:
            return None
        return (f"renegotiation: {problem}; the records after its ChangeCipherSpec are not "
                "decrypted")

    def on_change_cipher_spec(self, direction: int) -> None:
        """TLS 1.0-1.2: a side's ChangeCipherSpec during a renegotiation starts the new
        handshake's keys (None: records left encrypted)."""
        if self._next is not None and self._renegotiating[direction]:
            self._renegotiating[direction] = False
            self.set(direction, self._next[direction])

    def _protection(self, secret: bytes) -> RecordDeprotector:
        if self._epochs is None:
            raise ValueError("TLS 1.3 keys before the ServerHello")
        return RecordDeprotector(self._epochs.protection(secret))

    def on_end_of_early_data(self) -> None:
        """The client's EndOfEarlyData: its next records use the handshake key."""
        if self._early is not None and self._epochs is not None:
            self.set(CLIENT, self._client_handshake)

    def on_finished(self, direction: int) -> None:
        """TLS 1.3: that side's next records use its application traffic secret. Only
        its handshake's Finished: one of post-handshake authentication (RFC 8446 4.6.2)
        is sent under the application keys in force and changes none."""
        if self._epochs is not None and not self._finished[direction]:
            self._finished[direction] = True
            secret = self._epochs.finished(direction)
            self.set(direction, self._protection(secret) if secret is not None else None)

    def on_key_update(self, direction: int) -> None:
        """TLS 1.3 KeyUpdate sent by `direction`: its next records use the next secret."""
        if self._epochs is not None:
            secret = self._epochs.key_update(direction)
            if secret is not None:
                self.set(direction, self._protection(secret))


def _tls12_deprotectors(params: SuiteParams, secrets: dict[str, bytes], client_random: bytes,
                        sh: ServerHelloInfo) -> list[RecordDeprotector | None] | str:
    """The client's and the server's record deprotection of a TLS 1.0-1.2 handshake from
    its logged master secret, or why there is none."""
    master = secrets.get(kl.CLIENT_RANDOM)
    if master is None:
        return "key log has no CLIENT_RANDOM master secret for this connection"
    if sh.compression_method not in (0, DEFLATE):
        return (f"compression method {sh.compression_method} is not one tlsprobe can "
                "undo: the protected records are not read")
    version = sh.selected_version
    mac_len, key_len, iv_len = params.key_material(version)
    block = key_block(version, params.prf_hash, master, client_random, sh.random, mac_len,
                      key_len, iv_len)
    out: list[RecordDeprotector | None] = []
    for protection in protections_from_key_block(params, block, version, sh.encrypt_then_mac):
        deprotector = RecordDeprotector(protection)
        out.append(InflatingDeprotector(deprotector)
                   if sh.compression_method == DEFLATE else deprotector)
    return out
