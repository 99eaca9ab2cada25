"""A client profile's ClientHello made fresh for one connection, and its second hello after a
HelloRetryRequest: the recorded bytes with only what must be fresh replaced.

Fresh per connection (docs/CLIENTS.md "What simulation sends"):
  - `random`: 32 new bytes; `legacy_session_id`: new random bytes of the recorded length
    (an empty one stays empty);
  - each key_share entry: a new key pair of its group through tlsprobe.kex, whose public key
    must have the recorded length (else the profile is refused); a group kex cannot compute
    (X25519Kyber768Draft00, ...) gets random bytes of the recorded length (of its known form
    where kex knows one) and is `unusable`: a server choosing it makes the simulation
    inconclusive; a GREASE entry keeps its recorded bytes under a redrawn GREASE group
    (BoringSSL sends one zero byte there on every connection: nothing in it is fresh);
  - GREASE values (RFC 8701), redrawn as BoringSSL draws them per connection: one value per
    role (the cipher suite, the group - in supported_groups and key_share alike -, the
    version, each GREASE extension, the signature scheme), each drawn at random, the second
    GREASE extension differing from the first (BoringSSL's rule);
  - the encrypted_client_hello GREASE extension (draft-ietf-tls-esni, outer form): a new
    config_id, enc and payload of the recorded lengths;
  - server_name: the target's host name (replacing the recorded one, or inserted as the
    first non-GREASE extension where the recording has none, unless it has no extensions
    at all: an SSL 3.0 hello); for an IP-literal target, no
    server_name at all (RFC 6066 3 forbids IP literals there, and clients send none);
  - padding (RFC 7685): where the recording has one, its length brings the hello back to the
    recorded total; where the hello without padding is longer than that total, the padding
    extension goes (BoringSSL and OpenSSL pad only hellos shorter than 512 bytes). A
    recording without padding gets none.
Everything else is sent byte for byte as recorded (the ClientHello is re-encoded by the wire
codec, whose extensions carry their raw data). A profile carrying pre_shared_key,
early_data, a cookie or a session ticket is not a first hello and is refused.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tlsprobe import kex, registry
from tlsprobe.engine.config import TLS12, TLS13, BuiltHello, ClientConfig
from tlsprobe.wire import decode_handshake
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.buffer import Buffer, Writer
from tlsprobe.wire.hello import ClientHello

__all__ = ["FreshHello", "ProfileError", "derived_config", "fresh_hello", "recorded_hello",
           "retry_hello", "server_name_for"]

GREASE_VALUES = tuple(0x0A0A + 0x1010 * i for i in range(16))
ECH = 0xFE0D
#: extensions that make a hello something other than a first, full ClientHello
NOT_FIRST = {ext.PRE_SHARED_KEY: "pre_shared_key", ext.EARLY_DATA: "early_data",
             ext.COOKIE: "cookie"}
#: u16 lists inside extensions where clients put GREASE, and the role of their GREASE value
_GREASE_LISTS = {ext.SUPPORTED_GROUPS: (2, "group"), ext.SUPPORTED_VERSIONS: (1, "version"),
                 ext.SIGNATURE_ALGORITHMS: (2, "sigalg"), 50: (2, "sigalg")}


class ProfileError(ValueError):
    """A profile whose hello cannot be sent as a first hello (PSK, cookie, bad share)."""


@dataclass
class FreshHello:
    """The hello to send (`built`: the ClientHello and the private key shares behind it),
    the groups whose shares are random bytes (`unusable`), and the GREASE values drawn for
    this connection, by role (a retry after a HelloRetryRequest keeps them)."""

    built: BuiltHello
    unusable: tuple[int, ...] = ()
    grease: dict[str, int] = field(default_factory=dict)
    target_length: int | None = None   # the recorded length padding restores (None: no padding)


def recorded_hello(hello: bytes) -> ClientHello:
    """The profile's ClientHello, refused (ProfileError) when it is not a first hello."""
    try:
        msg = decode_handshake(hello).message
    except ValueError as exc:
        raise ProfileError(f"the profile's hello does not decode: {exc}") from None
    if not isinstance(msg, ClientHello):
        raise ProfileError("the profile's hello is not a ClientHello")
    for e in msg.extensions:
        if e.type in NOT_FIRST:
            raise ProfileError(f"the profile's hello carries {NOT_FIRST[e.type]}: not a first "
                               "ClientHello (profiles are first hellos)")
        if e.type == ext.SESSION_TICKET and e.data:
            raise ProfileError("the profile's hello presents a session ticket: not a first "
                               "ClientHello (profiles are first hellos)")
    return msg


def server_name_for(host: str) -> str | None:
    """The server_name a client sends to `host`: the name, or None for an IP literal."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return None
    except ValueError:
        return host


def fresh_hello(hello: bytes, server_name: str | None) -> FreshHello:
    """The profile's `hello` (handshake message bytes) made fresh for one connection to
    `server_name` (None: no server_name extension); ProfileError when it cannot be."""
    recorded = recorded_hello(hello)
    draw = _Grease()
    shares: dict[int, kex.KeyShare] = {}
    unusable: list[int] = []
    exts: list[ext.Extension] = []
    ext_grease = 0
    for e in recorded.extensions:
        if registry.is_grease(e.type):
            ext_grease += 1
            exts.append(ext.Extension(draw.extension(ext_grease), e.data))
        elif e.type in (ext.KEY_SHARE, ext.KEY_SHARE_DRAFT):  # 40: TLS 1.3 drafts <= 22
            exts.append(_fresh_shares(e, draw, shares, unusable))
        elif e.type == ext.SERVER_NAME:
            if server_name is not None:
                exts.append(ext.server_name(server_name))
        elif e.type == ECH:
            exts.append(_fresh_ech(e))
        elif e.type in _GREASE_LISTS:
            size, role = _GREASE_LISTS[e.type]
            exts.append(_regrease_list(e, size, role, draw))
        else:
            exts.append(e)
    if server_name is not None and recorded.extension(ext.SERVER_NAME) is None and \
            not recorded.extensions_absent:   # a hello without extensions (SSL 3.0) has none
        at = next((i for i, e in enumerate(exts) if not registry.is_grease(e.type)), len(exts))
        exts.insert(at, ext.server_name(server_name))
    suites = [draw.value("cipher") if registry.is_grease(s) else s
              for s in recorded.cipher_suites]
    fresh = replace(recorded, random=os.urandom(32),
                    legacy_session_id=os.urandom(len(recorded.legacy_session_id)),
                    cipher_suites=suites, extensions=exts)
    target = len(hello) if recorded.extension(ext.PADDING) is not None else None
    return FreshHello(BuiltHello(_padded(fresh, target), shares), tuple(unusable),
                      draw.drawn, target)


def retry_hello(first: FreshHello, group: int | None, cookie: bytes | None) -> BuiltHello:
    """The second ClientHello after a HelloRetryRequest (RFC 8446 4.1.2): the first one
    (same random, session id and GREASE values) with its key_share holding one fresh share
    for `group` (when the HRR names one) and the HRR's `cookie` added right after key_share
    (OpenSSL's order; a recording does not show where its client puts it), the padding
    recomputed by the first hello's rule."""
    hello = first.built.hello
    shares = dict(first.built.shares)
    exts: list[ext.Extension] = []
    for e in hello.extensions:
        if e.type == ext.KEY_SHARE and group is not None:
            public, share = _new_share(group, kex.share_size(group) or 32)
            shares = {group: share} if share is not None else {}
            exts.append(ext.key_share_client([(group, public)]))
        else:
            exts.append(e)
        if e.type == ext.KEY_SHARE and cookie is not None:
            exts.append(ext.cookie(cookie))   # right after key_share, where OpenSSL puts it
    return BuiltHello(_padded(replace(hello, extensions=exts), first.target_length), shares)


def _padded(hello: ClientHello, target: int | None) -> ClientHello:
    """`hello` with its padding extension sized so that the handshake message is `target`
    bytes; without it when the rest is already longer (None: unchanged)."""
    at = next((i for i, e in enumerate(hello.extensions) if e.type == ext.PADDING), None)
    if target is None or at is None:
        return hello
    exts = list(hello.extensions)
    exts[at] = ext.padding(0)
    unpadded = 4 + len(replace(hello, extensions=exts).serialize())
    if unpadded > target:
        del exts[at]
    else:
        exts[at] = ext.padding(target - unpadded)
    return replace(hello, extensions=exts)


class _Grease:
    """GREASE values drawn for one connection, one per role (BoringSSL's seeds)."""

    def __init__(self) -> None:
        self.drawn: dict[str, int] = {}

    def value(self, role: str) -> int:
        if role not in self.drawn:
            self.drawn[role] = secrets.choice(GREASE_VALUES)
        return self.drawn[role]

    def extension(self, n: int) -> int:
        """The n-th GREASE extension's type; the second differs from the first."""
        value = self.value(f"extension {n}")
        if n == 2 and value == self.drawn.get("extension 1"):
            value ^= 0x1010
            self.drawn["extension 2"] = value
        return value


def _u16s(data: bytes, len_size: int) -> list[int] | None:
    buf = Buffer(data)
    try:
        body = buf.pull_bytes(int.from_bytes(buf.pull_bytes(len_size), "big"))
    except ValueError:
        return None
    if not buf.eof() or len(body) % 2:
        return None
    return [int.from_bytes(body[i:i + 2], "big") for i in range(0, len(body), 2)]


def _regrease_list(e: ext.Extension, len_size: int, role: str, draw: _Grease) -> ext.Extension:
    """A u16 list extension with its GREASE values redrawn (unchanged when it holds none or
    does not decode as a list)."""
    values = _u16s(e.data, len_size)
    if values is None or not any(registry.is_grease(v) for v in values):
        return e
    w = Writer()
    with w.block(len_size):
        for v in values:
            w.push_uint16(draw.value(role) if registry.is_grease(v) else v)
    return ext.Extension(e.type, w.data())


def _new_share(group: int, size: int) -> tuple[bytes, kex.KeyShare | None]:
    """A fresh public key for `group` of `size` bytes and its private half (None: a group
    kex cannot compute, whose share is random bytes of that size)."""
    try:
        share = kex.generate(group)
    except kex.UnsupportedGroup:
        known = kex.share_size(group)
        return (kex.offer_only_share(group) if known == size else
                kex.offer_only_share(group, size)), None
    if len(share.public) != size:
        raise ProfileError(f"the profile's key share for {registry.group_label(group)} has "
                           f"{size} bytes, a fresh one {len(share.public)}")
    return share.public, share


def _fresh_shares(e: ext.Extension, draw: _Grease, shares: dict[int, kex.KeyShare],
                  unusable: list[int]) -> ext.Extension:
    try:   # the draft-era type 40 has the same client_shares layout
        entries = ext.Extension(ext.KEY_SHARE, e.data).decode()
    except ValueError as exc:
        raise ProfileError(f"the profile's key_share does not decode: {exc}") from None
    out: list[tuple[int, bytes]] = []
    for entry in entries:
        size = len(entry.key_exchange)
        if registry.is_grease(entry.group):    # fixed content (BoringSSL: one zero byte)
            out.append((draw.value("group"), entry.key_exchange))
            continue
        public, share = _new_share(entry.group, size)
        if share is None:
            unusable.append(entry.group)
        else:
            shares[entry.group] = share
        out.append((entry.group, public))
    return ext.Extension(e.type, ext.key_share_client(out).data)


def _fresh_ech(e: ext.Extension) -> ext.Extension:
    """A GREASE encrypted_client_hello (outer: type 0, kdf, aead, config_id, enc, payload)
    with new config_id, enc and payload; any other form unchanged."""
    buf = Buffer(e.data)
    try:
        kind = buf.pull_uint8()
        suite = buf.pull_bytes(4)
        buf.pull_uint8()
        enc = buf.pull_bytes(buf.pull_uint16())
        payload = buf.pull_bytes(buf.pull_uint16())
    except ValueError:
        return e
    if kind != 0 or not buf.eof():
        return e
    w = Writer()
    w.push_uint8(0)
    w.push_bytes(suite)
    w.push_uint8(secrets.randbelow(256))
    w.push_vector(2, os.urandom(len(enc)))
    w.push_vector(2, os.urandom(len(payload)))
    return ext.Extension(ECH, w.data())


def derived_config(hello: bytes, server_name: str | None) -> ClientConfig:
    """The engine's ClientConfig of the offer a profile sends: its versions, groups, key
    share groups, suites, signature schemes and ALPN, so that the engine judges the server's
    answer against what was actually offered. A hello without supported_versions offers
    its legacy_version and every version down to TLS 1.0 (its minimum is not in it; SSL 3.0
    only for an SSL 3.0 hello)."""
    msg = recorded_hello(hello)
    real: Callable[[list[int]], tuple[int, ...]] = \
        lambda values: tuple(v for v in values if not registry.is_grease(v))
    versions = real(msg.supported_versions) or tuple(
        range(min(msg.legacy_version, TLS12), 0x0300, -1)) or (msg.legacy_version,)
    suites = real(msg.cipher_suites)
    tls13 = tuple(s for s in suites if s >> 8 == 0x13)
    alpn = tuple(p.decode("latin-1") for p in msg.alpn_protocols)
    names = {e.type for e in msg.extensions}
    return ClientConfig(
        server_name=server_name, versions=versions, groups=real(msg.supported_groups),
        key_share_groups=real([k.group for k in msg.key_shares]) if TLS13 in versions else None,
        cipher_suites_13=tls13, cipher_suites_12=tuple(s for s in suites if s not in tls13),
        signature_algorithms=real(msg.signature_algorithms), alpn=alpn, grease=False,
        session_ticket=ext.SESSION_TICKET in names,
        extended_master_secret=ext.EXTENDED_MASTER_SECRET in names,
        encrypt_then_mac=ext.ENCRYPT_THEN_MAC in names, status_request=ext.STATUS_REQUEST in names,
        renegotiation_info=ext.RENEGOTIATION_INFO in names or 0x00FF in suites,
        padding=ext.PADDING in names, max_version_legacy=min(msg.legacy_version, TLS12),
        compression_methods=msg.legacy_compression_methods)
