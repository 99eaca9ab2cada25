"""ClientHello and ServerHello / HelloRetryRequest (RFC 8446 4.1.2-4.1.4, RFC 5246 7.4.1).

Both keep every field raw and every extension in wire order, so `serialize()` reproduces
the parsed bytes exactly (fingerprinting and transcript hashing depend on that). Hellos
from SSLv3/TLS 1.0 peers may end without an extensions block; `extensions_absent` records
that so the round trip still holds. Typed views of the key-exchange extensions are
properties that decode on access and raise DecodeError on malformed data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, TypeVar

from ._util import (
    bytes_label,
    enum_label,
    pull_list,
    pull_opaque,
    pull_uint_noted,
    suite_label,
    version_label,
)
from .buffer import Buffer, Writer
from .context import Message, ParseContext
from .ext_decoders import (
    WHERE_CLIENT_HELLO,
    WHERE_HRR,
    WHERE_SERVER_HELLO,
    KeyShareEntry,
    ServerName,
)
from .extensions import (
    ALPN,
    KEY_SHARE,
    KEY_SHARE_DRAFT,
    PRE_SHARED_KEY,
    SERVER_NAME,
    SIGNATURE_ALGORITHMS,
    SUPPORTED_GROUPS,
    SUPPORTED_VERSIONS,
    Extension,
    find,
    padding,
    padding_length,
    pull_extensions,
    push_extensions,
)

#: RFC 8446 4.1.3: a ServerHello with this random is a HelloRetryRequest.
HELLO_RETRY_REQUEST_RANDOM = bytes.fromhex(
    "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
#: RFC 8446 4.1.3 downgrade sentinels in the last 8 bytes of ServerHello.random
DOWNGRADE_TLS12 = b"DOWNGRD\x01"
DOWNGRADE_TLS11 = b"DOWNGRD\x00"
COMPRESSION_METHODS = {0: "null", 1: "DEFLATE", 64: "LZS"}

_T = TypeVar("_T")


def is_draft_server_hello(version: int) -> bool:
    """TLS 1.3 drafts up to 21 sent their version (0x7fXX; early drafts such as 14 sent
    0x0304) in ServerHello.version and had no legacy_session_id_echo nor legacy_compression_method
    (draft-ietf-tls-tls13-21 4.1.3); RFC 8446 servers always send 0x0303 there."""
    return 0x7F00 <= version <= 0x7F15 or version == 0x0304


def _pull_random(buf: Buffer, hrr_label: bool = False) -> bytes:
    at = buf.tell()
    with buf.field("random"):
        random = buf.pull_bytes(32)
    label = ("HelloRetryRequest magic" if hrr_label and random == HELLO_RETRY_REQUEST_RANDOM
             else bytes_label(32))
    buf.note("random", at, 32, label, "bytes")
    return random


def _pull_tail(buf: Buffer, where: str) -> tuple[list[Extension], bool]:
    """The optional extensions block at the end of a hello: (extensions, absent)."""
    if buf.eof():
        return [], True
    return pull_extensions(buf, where), False


def _push_tail(w: Writer, extensions: list[Extension], absent: bool) -> None:
    if extensions or not absent:
        push_extensions(w, extensions)


@dataclass(frozen=True)
class ClientHello(Message):
    msg_type: ClassVar[int] = 1

    legacy_version: int
    random: bytes
    legacy_session_id: bytes
    cipher_suites: list[int]
    legacy_compression_methods: bytes
    extensions: list[Extension]
    extensions_absent: bool = False

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> ClientHello:
        version = pull_uint_noted(buf, 2, "legacy_version", version_label)
        random = _pull_random(buf)
        session_id = pull_opaque(buf, 1, "legacy_session_id", maximum=32)
        suites = pull_list(buf, 2, 2, "cipher_suites", suite_label, minimum=2)
        methods = pull_list(buf, 1, 1, "legacy_compression_methods",
                            lambda v: enum_label(COMPRESSION_METHODS, v), minimum=1)
        extensions, absent = _pull_tail(buf, WHERE_CLIENT_HELLO)
        return cls(version, random, session_id, suites, bytes(methods), extensions, absent)

    def push(self, w: Writer) -> None:
        w.push_uint16(self.legacy_version)
        w.push_bytes(self.random)
        w.push_vector(1, self.legacy_session_id)
        with w.block(2):
            for suite in self.cipher_suites:
                w.push_uint16(suite)
        w.push_vector(1, self.legacy_compression_methods)
        _push_tail(w, self.extensions, self.extensions_absent)

    # -- typed views (decode on access; DecodeError when malformed) --------------------------
    def extension(self, ext_type: int) -> Extension | None:
        return find(self.extensions, ext_type)

    def _decoded(self, ext_type: int, item: type[_T]) -> list[_T]:
        """An extension's decoded list (its items of type `item`, as `decode_extension`
        gives them in a ClientHello); [] when absent."""
        ext = self.extension(ext_type)
        if ext is None and ext_type == KEY_SHARE:
            ext = self.extension(KEY_SHARE_DRAFT)
        if ext is None:
            return []
        value: list[_T] = ext.decode(WHERE_CLIENT_HELLO)
        return value

    @property
    def server_name(self) -> str | None:
        names = self._decoded(SERVER_NAME, ServerName)
        return next((n.host_name for n in names if n.name_type == 0), None)

    @property
    def supported_groups(self) -> list[int]:
        return self._decoded(SUPPORTED_GROUPS, int)

    @property
    def key_shares(self) -> list[KeyShareEntry]:
        """key_share client_shares (or those of the draft-era key_share, type 40)."""
        return self._decoded(KEY_SHARE, KeyShareEntry)

    @property
    def supported_versions(self) -> list[int]:
        return self._decoded(SUPPORTED_VERSIONS, int)

    @property
    def signature_algorithms(self) -> list[int]:
        return self._decoded(SIGNATURE_ALGORITHMS, int)

    @property
    def alpn_protocols(self) -> list[bytes]:
        return self._decoded(ALPN, bytes)

    def padded(self, target: int = 512) -> ClientHello:
        """This hello with a padding extension bringing the whole message (header
        included) to `target` bytes, as browsers do; inserted before pre_shared_key,
        which must stay last. Unchanged when long enough or already padded."""
        n = padding_length(4 + len(self.serialize()) + (2 if self.extensions_absent else 0),
                           target)
        if n is None or find(self.extensions, padding(0).type) is not None:
            return self
        exts = list(self.extensions)
        at = next((i for i, e in enumerate(exts) if e.type == PRE_SHARED_KEY), len(exts))
        exts.insert(at, padding(n))
        return replace(self, extensions=exts, extensions_absent=False)


@dataclass(frozen=True)
class ServerHello(Message):
    """ServerHello, or HelloRetryRequest when `random` is HELLO_RETRY_REQUEST_RANDOM.

    The short form of TLS 1.3 drafts <= 21 (legacy_version 0x7f00..0x7f15) is read too;
    it has no session id echo nor compression method (kept as b"" and 0)."""

    msg_type: ClassVar[int] = 2

    legacy_version: int
    random: bytes
    legacy_session_id_echo: bytes
    cipher_suite: int
    legacy_compression_method: int
    extensions: list[Extension]
    extensions_absent: bool = False

    @classmethod
    def pull(cls, buf: Buffer, ctx: ParseContext) -> ServerHello:
        version = pull_uint_noted(buf, 2, "legacy_version", version_label)
        random = _pull_random(buf, hrr_label=True)
        if is_draft_server_hello(version):
            suite = pull_uint_noted(buf, 2, "cipher_suite", suite_label)
            return cls(version, random, b"", suite, 0,
                       pull_extensions(buf, WHERE_SERVER_HELLO))
        session_id = pull_opaque(buf, 1, "legacy_session_id_echo", maximum=32)
        suite = pull_uint_noted(buf, 2, "cipher_suite", suite_label)
        method = pull_uint_noted(buf, 1, "legacy_compression_method",
                                 lambda v: enum_label(COMPRESSION_METHODS, v))
        where = WHERE_HRR if random == HELLO_RETRY_REQUEST_RANDOM else WHERE_SERVER_HELLO
        extensions, absent = _pull_tail(buf, where)
        return cls(version, random, session_id, suite, method, extensions, absent)

    def push(self, w: Writer) -> None:
        w.push_uint16(self.legacy_version)
        w.push_bytes(self.random)
        if is_draft_server_hello(self.legacy_version):
            w.push_uint16(self.cipher_suite)
            push_extensions(w, self.extensions)
            return
        w.push_vector(1, self.legacy_session_id_echo)
        w.push_uint16(self.cipher_suite)
        w.push_uint8(self.legacy_compression_method)
        _push_tail(w, self.extensions, self.extensions_absent)

    @property
    def is_hello_retry_request(self) -> bool:
        return self.random == HELLO_RETRY_REQUEST_RANDOM

    @property
    def where(self) -> str:
        """Extension context of this message (for `Extension.decode`)."""
        return WHERE_HRR if self.is_hello_retry_request else WHERE_SERVER_HELLO

    def extension(self, ext_type: int) -> Extension | None:
        return find(self.extensions, ext_type)

    def _key_share_extension(self) -> Extension | None:
        return self.extension(KEY_SHARE) or self.extension(KEY_SHARE_DRAFT)

    @property
    def selected_version(self) -> int:
        """supported_versions.selected_version when present, else legacy_version."""
        ext = self.extension(SUPPORTED_VERSIONS)
        return self.legacy_version if ext is None else ext.decode(self.where)

    @property
    def key_share(self) -> tuple[int, bytes] | None:
        """(group, key_exchange) of the server share; None when absent or in an HRR.
        TLS 1.3 drafts up to 22 used type 40 for key_share; it is read as well."""
        ext = self._key_share_extension()
        if ext is None or self.is_hello_retry_request:
            return None
        share: KeyShareEntry = ext.decode(WHERE_SERVER_HELLO)
        return share.group, share.key_exchange

    @property
    def hrr_selected_group(self) -> int | None:
        """The group a HelloRetryRequest asks for; None otherwise."""
        ext = self._key_share_extension()
        if ext is None or not self.is_hello_retry_request:
            return None
        group: int = ext.decode(WHERE_HRR)
        return group

    @property
    def downgrade_sentinel(self) -> int | None:
        """0x0303 / 0x0302 when random ends with the RFC 8446 TLS 1.2 / TLS 1.1 sentinel."""
        tail = self.random[-8:]
        return {DOWNGRADE_TLS12: 0x0303, DOWNGRADE_TLS11: 0x0302}.get(tail)


MESSAGE_CLASSES: list[type[Message]] = [ClientHello, ServerHello]
