"""What the client offers, and the ClientHello built from it.

Defaults follow a current browser: TLS 1.3 and 1.2, X25519MLKEM768 first with key shares for
X25519MLKEM768 and X25519 (as Chrome sends them), then P-256 and P-384, the common AEAD suites.
Every list takes any codepoint, so unknown, GREASE or private values can be offered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from tlsprobe import kex, registry
from tlsprobe.engine.keyschedule import KeySchedule, digest, tls13_hash_name
from tlsprobe.errors import UsageError
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.handshake import frame
from tlsprobe.wire.hello import ClientHello

TLS13, TLS12, TLS11, TLS10, SSL30 = 0x0304, 0x0303, 0x0302, 0x0301, 0x0300

DEFAULT_VERSIONS = (TLS13, TLS12)
DEFAULT_GROUPS = (0x11EC, 0x001D, 0x0017, 0x0018)   # X25519MLKEM768, x25519, P-256, P-384
DEFAULT_SUITES_13 = (0x1301, 0x1302, 0x1303)
DEFAULT_SUITES_12 = (0xC02B, 0xC02F, 0xC02C, 0xC030, 0xCCA9, 0xCCA8, 0xC009, 0xC013, 0xC00A,
                     0xC014, 0x009E, 0x009F, 0x009C, 0x009D, 0x002F, 0x0035)
DEFAULT_SIGALGS = (0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601, 0x0807,
                   0x0808, 0x0809, 0x080A, 0x080B, 0x0603, 0x0203, 0x0201)
DEFAULT_ALPN = ("h2", "http/1.1")


@dataclass(frozen=True)
class Resumption:
    """A session to resume. TLS 1.2 (RFC 5246 7.4.1.2, RFC 5077): `session_id` (sent as the
    legacy_session_id; the server echoes it when it resumes) and/or the session `ticket`,
    with the session's `master_secret`. TLS 1.3 (RFC 8446 4.2.11): `ticket` is the PSK
    identity, `psk` the resumption PSK, `obfuscated_age` the obfuscated_ticket_age and
    `cipher_suite` the session's suite (its hash is the binder's); `early_data`, when set,
    is sent as 0-RTT data after the ClientHello, which then offers early_data."""

    ticket: bytes | None = None
    session_id: bytes = b""
    master_secret: bytes = b""
    psk: bytes | None = None
    obfuscated_age: int = 0
    cipher_suite: int = 0x1301
    early_data: bytes | None = None

    @property
    def hash_name(self) -> str:
        return tls13_hash_name(self.cipher_suite)


@dataclass(frozen=True)
class ClientConfig:
    """Everything the ClientHello says. `key_share_groups` None = the first one or two groups."""

    server_name: str | None = None
    versions: tuple[int, ...] = DEFAULT_VERSIONS
    groups: tuple[int, ...] = DEFAULT_GROUPS
    key_share_groups: tuple[int, ...] | None = None
    cipher_suites_13: tuple[int, ...] = DEFAULT_SUITES_13
    cipher_suites_12: tuple[int, ...] = DEFAULT_SUITES_12
    signature_algorithms: tuple[int, ...] = DEFAULT_SIGALGS
    alpn: tuple[str, ...] = DEFAULT_ALPN
    grease: bool = False
    session_ticket: bool = True
    extended_master_secret: bool = True
    encrypt_then_mac: bool = True
    status_request: bool = True
    renegotiation_info: bool = True
    padding: bool = True
    max_version_legacy: int = TLS12
    #: QUIC (RFC 9001 8.2, 8.4): the quic_transport_parameters extension (0x39) to send; when
    #: set, the legacy_session_id is empty (QUIC has no middlebox compatibility mode)
    quic_transport_parameters: bytes | None = None
    #: extensions sent as given, (type, data), after the engine's own and before padding:
    #: what an active check offers beyond them (heartbeat, a session ticket to present)
    extra_extensions: tuple[tuple[int, bytes], ...] = ()
    #: the legacy_session_id to send (None: the engine's own choice)
    session_id: bytes | None = None
    #: a session to resume (None: a full handshake)
    resume: Resumption | None = None

    @property
    def psk_offer(self) -> Resumption | None:
        """`resume` when it offers a TLS 1.3 PSK (and this hello offers TLS 1.3)."""
        resume = self.resume
        return resume if resume is not None and resume.psk is not None and \
            resume.ticket and self.offers_tls13 else None
    #: legacy_compression_methods; null (0) alone unless a check offers DEFLATE (1, CRIME)
    compression_methods: bytes = b"\x00"
    #: the client's Finished verify_data of the handshake this hello renegotiates (RFC 5746
    #: 3.5): sent in renegotiation_info, and the SCSV left out; None for an initial hello
    renegotiating: bytes | None = None

    @property
    def offers_tls13(self) -> bool:
        return any(v >= TLS13 or v >> 8 == 0x7F for v in self.versions)

    @property
    def max_legacy(self) -> int:
        legacy = [v for v in self.versions if v <= TLS12]
        return max(legacy) if legacy else TLS12

    def cipher_suites(self) -> tuple[int, ...]:
        suites: list[int] = []
        if self.offers_tls13:
            suites += self.cipher_suites_13
        if any(v <= TLS12 for v in self.versions):
            suites += self.cipher_suites_12
        if any(v <= TLS12 for v in self.versions) and self.renegotiation_info and \
                self.renegotiating is None:
            suites.append(0x00FF)  # TLS_EMPTY_RENEGOTIATION_INFO_SCSV
        return tuple(dict.fromkeys(suites))

    def offered_groups(self) -> tuple[int, ...]:
        """Groups to list: TLS 1.3-only groups are dropped from a hello without TLS 1.3."""
        if self.offers_tls13:
            return self.groups
        kept = []
        for g in self.groups:
            info = registry.group(g)
            if info is None or info.tls12:
                kept.append(g)
        return tuple(kept)

    def share_groups(self) -> tuple[int, ...]:
        if not self.offers_tls13:
            return ()
        if self.key_share_groups is not None:
            return self.key_share_groups
        groups = self.offered_groups()
        if not groups:
            return ()
        first = groups[0]
        info = registry.group(first)
        # Browsers send a PQ hybrid share together with a classic one.
        if info is not None and info.kind in ("hybrid", "mlkem") and len(groups) > 1:
            return (first, groups[1])
        return (first,)

    def with_server_name(self, name: str | None) -> ClientConfig:
        return replace(self, server_name=name)


def parse_server_name(text: str, what: str = "--sni") -> str:
    """A server_name to send, as given to `what` (an option or argument name): a non-empty
    host name without spaces or control characters that fits the extension (1..65532 bytes;
    IDNA for a non-ASCII name). Anything else is a UsageError naming `what`."""
    name = text.strip()
    if not name or name.strip(".") == "":
        raise UsageError(f"{what}: empty name; give a host name, or "
                         f"{'--no-sni' if what.startswith('--') else 'send_sni=False'} to "
                         "send none")
    if any(c.isspace() or not c.isprintable() for c in name):
        raise UsageError(f"{what}: {name[:40]!r}: a host name has no spaces or control "
                         "characters")
    try:
        encoded = name.encode("ascii") if name.isascii() else name.encode("idna")
    except UnicodeError:
        raise UsageError(f"{what}: {name[:40]!r} is not a valid internationalised host "
                         "name") from None
    if len(encoded) > 0xFFFF - 3:
        raise UsageError(f"{what}: {len(encoded)} bytes; a server_name holds at most 65532 "
                         "(a DNS name at most 253)")
    return name


def conformant_shares(groups: tuple[int, ...], shares: tuple[int, ...]) -> tuple[int, ...]:
    """`shares` as RFC 8446 section 4.2.8 wants them: each group once, only groups that
    `groups` (supported_groups) lists, in the same relative order. Servers such as tlslite-ng
    refuse anything else with illegal_parameter."""
    wanted = set(shares)
    return tuple(dict.fromkeys(g for g in groups if g in wanted))


def share_order_problem(config: ClientConfig) -> str | None:
    """Why the key shares `config` sends break RFC 8446 section 4.2.8, or None."""
    shares = config.share_groups()
    if shares == conformant_shares(config.offered_groups(), shares):
        return None
    if len(set(shares)) != len(shares):
        return "a group has two key shares"
    groups = config.offered_groups()
    missing = [g for g in shares if g not in groups]
    if missing:
        return f"a key share for {registry.group_label(missing[0])}, which supported_groups " \
            "does not list"
    return "the key shares are not in the order of supported_groups"


@dataclass
class BuiltHello:
    hello: ClientHello
    shares: dict[int, kex.KeyShare] = field(default_factory=dict)
    #: the version of the record carrying the first hello (None: the engine's rule, TLS
    #: 1.0); client simulation sends a real client's as recorded
    record_version: int | None = None


def _share_for(group: int) -> tuple[bytes, kex.KeyShare | None]:
    try:
        share = kex.generate(group)
    except kex.UnsupportedGroup:
        return kex.offer_only_share(group), None
    return share.public, share


def grease_values(random: bytes) -> list[int]:
    """Five RFC 8701 GREASE values (0x?a?a) for suite, group, version and two extensions.

    They are derived from the client random, so the ClientHello sent after a
    HelloRetryRequest repeats them, as browsers do; the two extension types differ."""
    values = [((b & 0xF0) | 0x0A) * 0x0101 for b in random[:5]]
    if values[4] == values[3]:
        values[4] ^= 0x1010
    return values


def build_client_hello(config: ClientConfig, *, share_groups: tuple[int, ...] | None = None,
                       session_id: bytes | None = None, cookie: bytes | None = None,
                       random: bytes | None = None,
                       reuse: dict[int, kex.KeyShare] | None = None) -> BuiltHello:
    """Build a ClientHello (and the key shares behind it) from `config`."""
    random = random if random is not None else os.urandom(32)
    grease = grease_values(random) if config.grease else None
    entries, shares = _key_shares(config, grease, share_groups, reuse)
    psk = config.psk_offer
    exts = _extensions(config, grease, entries, cookie)
    suites = ([grease[0]] if grease else []) + list(config.cipher_suites())
    if session_id is None and config.resume is not None and config.resume.session_id:
        session_id = config.resume.session_id
    if session_id is None:
        session_id = config.session_id
    hello = ClientHello(
        legacy_version=config.max_legacy,
        random=random,
        legacy_session_id=session_id if session_id is not None else
        (os.urandom(32) if config.offers_tls13 and config.quic_transport_parameters is None
         else b""),
        cipher_suites=suites,
        legacy_compression_methods=config.compression_methods,
        extensions=exts,
    )
    if config.padding:
        hello = hello.padded()
    if psk is not None:
        hello = _bind(hello, psk)
    return BuiltHello(hello, shares)


def _key_shares(config: ClientConfig, grease: list[int] | None,
                share_groups: tuple[int, ...] | None, reuse: dict[int, kex.KeyShare] | None
                ) -> tuple[list[tuple[int, bytes]], dict[int, kex.KeyShare]]:
    """The key_share entries (group, public key) and the private shares behind them (none
    for a group this build cannot compute: an offer-only share); `reuse`d shares are sent
    again (the second hello after a HelloRetryRequest)."""
    shares: dict[int, kex.KeyShare] = {}
    # A GREASE share only in a first hello: after a HelloRetryRequest the key_share must
    # hold exactly one share, for the group the server asked for (RFC 8446 4.1.2).
    entries: list[tuple[int, bytes]] = \
        [(grease[1], b"\x00")] if grease and share_groups is None else []
    for group in (config.share_groups() if share_groups is None else share_groups):
        if reuse and group in reuse:
            entries.append((group, reuse[group].public))
            shares[group] = reuse[group]
            continue
        public, share = _share_for(group)
        entries.append((group, public))
        if share is not None:
            shares[group] = share
    return entries, shares


def _extensions(config: ClientConfig, grease: list[int] | None,
                entries: list[tuple[int, bytes]], cookie: bytes | None) -> list[ext.Extension]:
    """The hello's extensions in the order tlsprobe sends them (pre_shared_key last, with a
    zero binder that _bind replaces)."""
    legacy = any(v <= TLS12 for v in config.versions)
    exts: list[ext.Extension] = [ext.grease(grease[3])] if grease else []
    psk = config.psk_offer
    if config.server_name:
        exts.append(ext.server_name(config.server_name))
    if config.extended_master_secret and legacy:
        exts.append(ext.extended_master_secret())
    if config.renegotiation_info and legacy:
        exts.append(ext.renegotiation_info(config.renegotiating or b""))
    groups = ((grease[1],) if grease else ()) + config.offered_groups()
    if groups:
        exts.append(ext.supported_groups(list(groups)))
    if legacy:
        exts.append(ext.ec_point_formats([0]))
    if config.session_ticket:
        resume = config.resume
        ticket = resume.ticket if resume is not None and resume.psk is None else None
        exts.append(ext.session_ticket(ticket or b""))
    if config.alpn:
        exts.append(ext.alpn(list(config.alpn)))
    if config.quic_transport_parameters is not None:
        exts.append(ext.Extension(0x39, config.quic_transport_parameters))
    if config.status_request:
        exts.append(ext.status_request())
    if config.signature_algorithms and config.max_legacy >= TLS12 or config.offers_tls13:
        exts.append(ext.signature_algorithms(list(config.signature_algorithms)))
    if config.encrypt_then_mac and legacy:
        exts.append(ext.encrypt_then_mac())
    if config.offers_tls13:
        exts.append(ext.key_share_client(entries))
        exts.append(ext.psk_key_exchange_modes([1]))
        exts.append(ext.supported_versions_client(([grease[2]] if grease else []) +
                                                  list(config.versions)))
        if cookie is not None:
            exts.append(ext.cookie(cookie))
        if psk is not None and psk.early_data is not None:
            exts.append(ext.early_data())
    exts += [ext.Extension(t, data) for t, data in config.extra_extensions]
    if grease:
        exts.append(ext.grease(grease[4], b"\x00"))
    if psk is not None:   # last (RFC 8446 4.2.11); the binder is computed once padded
        exts.append(_offered_psk(psk, bytes(_hash_len(psk))))
    return exts


def _hash_len(resume: Resumption) -> int:
    """The length of the PSK's hash: its binder's length."""
    return len(digest(resume.hash_name, b""))


def _offered_psk(resume: Resumption, binder: bytes) -> ext.Extension:
    return ext.pre_shared_key_client([(resume.ticket or b"", resume.obfuscated_age)], [binder])


def _bind(hello: ClientHello, resume: Resumption) -> ClientHello:
    """`hello` with its PSK binder: the HMAC (as a Finished, under the "res binder" key)
    of the hash of the ClientHello up to the binders list (RFC 8446 4.2.11.2)."""
    binders_len = 2 + 1 + _hash_len(resume)
    partial = frame(1, hello.serialize())[:-binders_len]
    ks = KeySchedule(resume.hash_name, resume.psk)
    binder = ks.verify_data(ks.finished_key(ks.binder_key()),
                            digest(resume.hash_name, partial))
    exts = list(hello.extensions)
    exts[-1] = _offered_psk(resume, binder)
    return replace(hello, extensions=exts)
