"""Fast summaries of the hellos: the fields a capture report and the fingerprints need.

The wire codec (`tlsprobe.wire`) builds annotated dataclasses for every field, which is what
the trace needs but costs ~100 us per ClientHello in Python. A capture of a million packets
holds tens of thousands of hellos, so the offline reader extracts only what it reports
(offered lists, extension order, SNI, ALPN, key-share groups, chosen version/suite/group)
with flat `int.from_bytes`/`struct` reads, about ten times faster. The structure checks are
the codec's (same vector bounds, same "block consumed exactly" rule); on any doubt the caller
falls back to the codec, which stays the authority on what is malformed. Tests compare both
on every hello of the capture corpus and on mutated ones.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.hello import (
    HELLO_RETRY_REQUEST_RANDOM,
    ClientHello,
    ServerHello,
    is_draft_server_hello,
)
from tlsprobe.wire.record import SSLv2ClientHello

_SERVER_NAME, _SUPPORTED_GROUPS, _EC_POINT_FORMATS, _SIGNATURE_ALGORITHMS = 0, 10, 11, 13
_ALPN, _ETM, _EMS, _SESSION_TICKET = 16, 22, 23, 35
_KEY_SHARE_DRAFT, _PRE_SHARED_KEY, _EARLY_DATA, _SUPPORTED_VERSIONS = 40, 41, 42, 43
_KEY_SHARE = 51
_U16 = struct.Struct("!H").unpack_from


@dataclass(frozen=True, slots=True)
class ClientHelloInfo:
    """What a ClientHello offered, raw ints in wire order (GREASE kept).

    `extensions` are the extension types as sent; `key_shares` are (group, key length);
    `session_ticket` is the ticket length (None when the extension is absent);
    `problems` names extensions whose content was malformed (their fields stay empty)."""

    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suites: tuple[int, ...]
    compression_methods: bytes
    extensions: tuple[int, ...]
    sni: str | None = None
    alpn: tuple[bytes, ...] = ()
    supported_groups: tuple[int, ...] = ()
    ec_point_formats: tuple[int, ...] = ()
    signature_algorithms: tuple[int, ...] = ()
    supported_versions: tuple[int, ...] = ()
    key_shares: tuple[tuple[int, int], ...] = ()
    session_ticket: int | None = None
    psk_identities: int = 0
    early_data: bool = False
    size: int = 0
    sslv2: bool = False
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServerHelloInfo:
    """What a ServerHello (or HelloRetryRequest) chose."""

    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suite: int
    compression_method: int
    extensions: tuple[int, ...]
    selected_version: int
    key_share: tuple[int, int] | None = None     # (group, key length); not in an HRR
    hrr_group: int | None = None                 # HelloRetryRequest selected_group
    alpn: bytes | None = None
    psk_identity: int | None = None
    extended_master_secret: bool = False
    encrypt_then_mac: bool = False
    session_ticket: bool = False
    size: int = 0
    problems: tuple[str, ...] = ()

    @property
    def is_hello_retry_request(self) -> bool:
        return self.random == HELLO_RETRY_REQUEST_RANDOM


def _fail(reason: str, offset: int, path: str) -> DecodeError:
    return DecodeError(reason, offset, path)


def _header(msg: bytes, msg_type: int, name: str) -> int:
    """Check the 4-byte handshake header; returns the message end."""
    n = len(msg)
    if n < 4 or msg[0] != msg_type:
        raise _fail(f"not a {name}", 0, "handshake.msg_type")
    if int.from_bytes(msg[1:4], "big") != n - 4:
        raise _fail(f"length {int.from_bytes(msg[1:4], 'big')} but {n - 4} bytes", 1,
                    "handshake.length")
    return n


def _split_extensions(msg: bytes, p: int, end: int, path: str) -> list[tuple[int, int, int]]:
    """(type, data start, data end) of the extensions block at `p` (its 2-byte length)."""
    if p + 2 > end:
        raise _fail("need 2 bytes for the extensions length", p, path)
    total = int.from_bytes(msg[p:p + 2], "big")
    p += 2
    stop = p + total
    if stop > end:
        raise _fail(f"block of {total} bytes, only {end - p} left", p - 2, path)
    if stop != end:
        raise _fail(f"{end - stop} bytes after the extensions", stop, path)
    out = []
    while p < stop:
        if p + 4 > stop:
            raise _fail("truncated extension header", p, path)
        ext_type = int.from_bytes(msg[p:p + 2], "big")
        size = int.from_bytes(msg[p + 2:p + 4], "big")
        p += 4
        if p + size > stop:
            raise _fail(f"extension of {size} bytes, only {stop - p} left", p - 2, path)
        out.append((ext_type, p, p + size))
        p += size
    return out


def _u16_list(data: bytes, len_size: int, minimum: int, maximum: int = 0xFFFF) -> tuple[int, ...]:
    """A whole extension body that is one vector of uint16 (`len_size`-byte length)."""
    if len(data) < len_size:
        raise ValueError("short")
    n = int.from_bytes(data[:len_size], "big")
    if n != len(data) - len_size or n % 2 or n < minimum or n > maximum:
        raise ValueError("bad list length")
    return struct.unpack_from(f"!{n // 2}H", data, len_size)


def _u8_list(data: bytes, minimum: int) -> tuple[int, ...]:
    if not data or data[0] != len(data) - 1 or data[0] < minimum:
        raise ValueError("bad list length")
    return tuple(data[1:])


def _server_name(data: bytes) -> str | None:
    if len(data) < 2 or int.from_bytes(data[:2], "big") != len(data) - 2 or len(data) < 3:
        raise ValueError("bad server_name_list")
    p, host = 2, None
    while p < len(data):
        if p + 3 > len(data):
            raise ValueError("truncated name")
        name_type = data[p]
        size = int.from_bytes(data[p + 1:p + 3], "big")
        if size < 1 or p + 3 + size > len(data):
            raise ValueError("bad name length")
        if name_type == 0 and host is None:
            host = data[p + 3:p + 3 + size].decode("ascii", "backslashreplace")
        p += 3 + size
    return host


def _alpn(data: bytes) -> tuple[bytes, ...]:
    if len(data) < 4 or int.from_bytes(data[:2], "big") != len(data) - 2:
        raise ValueError("bad protocol_name_list")
    p, out = 2, []
    while p < len(data):
        size = data[p]
        if size < 1 or p + 1 + size > len(data):
            raise ValueError("bad protocol name")
        out.append(bytes(data[p + 1:p + 1 + size]))
        p += 1 + size
    return tuple(out)


def _client_shares(data: bytes) -> tuple[tuple[int, int], ...]:
    if len(data) < 2 or int.from_bytes(data[:2], "big") != len(data) - 2:
        raise ValueError("bad client_shares")
    p, out = 2, []
    while p < len(data):
        if p + 4 > len(data):
            raise ValueError("truncated share")
        group, size = struct.unpack_from("!HH", data, p)
        if size < 1 or p + 4 + size > len(data):
            raise ValueError("bad key_exchange length")
        out.append((group, size))
        p += 4 + size
    return tuple(out)


def _psk_identities(data: bytes) -> int:
    if len(data) < 2:
        raise ValueError("short")
    n = int.from_bytes(data[:2], "big")
    p, end, count = 2, 2 + n, 0
    if end > len(data):
        raise ValueError("bad identities length")
    while p < end:
        if p + 2 > end:
            raise ValueError("truncated identity")
        size = int.from_bytes(data[p:p + 2], "big")
        p += 2 + size + 4
        count += 1
    if p != end:
        raise ValueError("identities do not add up")
    return count


_CLIENT_FIELDS = {
    _SERVER_NAME: ("sni", _server_name),
    _SUPPORTED_GROUPS: ("supported_groups", lambda d: _u16_list(d, 2, 2)),
    _EC_POINT_FORMATS: ("ec_point_formats", lambda d: _u8_list(d, 1)),
    _SIGNATURE_ALGORITHMS: ("signature_algorithms", lambda d: _u16_list(d, 2, 2)),
    _ALPN: ("alpn", _alpn),
    _SUPPORTED_VERSIONS: ("supported_versions", lambda d: _u16_list(d, 1, 2, 254)),
    _KEY_SHARE: ("key_shares", _client_shares),
    _KEY_SHARE_DRAFT: ("key_shares", _client_shares),
    _SESSION_TICKET: ("session_ticket", len),
    _PRE_SHARED_KEY: ("psk_identities", _psk_identities),
    _EARLY_DATA: ("early_data", lambda d: True),
}


def parse_client_hello(msg: bytes) -> ClientHelloInfo:
    """Summarise one whole ClientHello message (4-byte header included).

    Raises DecodeError when the message structure is malformed; a malformed extension body
    only leaves its field empty and is named in `problems`."""
    end = _header(msg, 1, "ClientHello")
    if end < 4 + 2 + 32 + 1:
        raise _fail("ClientHello too short", end, "ClientHello")
    legacy_version = int.from_bytes(msg[4:6], "big")
    random = bytes(msg[6:38])
    sid_len = msg[38]
    if sid_len > 32:
        raise _fail(f"length {sid_len} outside 0..32", 38, "ClientHello.legacy_session_id")
    p = 39 + sid_len
    if p + 2 > end:
        raise _fail("need cipher_suites", p, "ClientHello.cipher_suites")
    session_id = bytes(msg[39:p])
    cs_len = int.from_bytes(msg[p:p + 2], "big")
    if cs_len < 2 or cs_len % 2 or p + 2 + cs_len > end:
        raise _fail(f"bad cipher_suites length {cs_len}", p, "ClientHello.cipher_suites")
    suites = struct.unpack_from(f"!{cs_len // 2}H", msg, p + 2)
    p += 2 + cs_len
    if p + 1 > end or msg[p] < 1 or p + 1 + msg[p] > end:
        raise _fail("bad legacy_compression_methods", p,
                    "ClientHello.legacy_compression_methods")
    methods = bytes(msg[p + 1:p + 1 + msg[p]])
    p += 1 + msg[p]
    fields: dict[str, object] = {}
    problems: list[str] = []
    types: tuple[int, ...] = ()
    if p < end:
        exts = _split_extensions(msg, p, end, "ClientHello.extensions")
        types = tuple(t for t, _, _ in exts)
        first: dict[int, tuple[int, int]] = {}
        for ext_type, start, stop in exts:
            first.setdefault(ext_type, (start, stop))
        if _KEY_SHARE in first:  # as the codec: key_share wins over the draft-era type 40
            first.pop(_KEY_SHARE_DRAFT, None)
        for ext_type, (name, read) in _CLIENT_FIELDS.items():
            span = first.get(ext_type)
            if span is None:
                continue
            try:
                fields[name] = read(msg[span[0]:span[1]])
            except (ValueError, struct.error):
                problems.append(name)
    return ClientHelloInfo(legacy_version, random, session_id, suites, methods, types,
                           size=end, problems=tuple(problems), **fields)  # type: ignore[arg-type]


def parse_server_hello(msg: bytes) -> ServerHelloInfo:
    """Summarise one whole ServerHello or HelloRetryRequest (4-byte header included)."""
    end = _header(msg, 2, "ServerHello")
    if end < 4 + 2 + 32:
        raise _fail("ServerHello too short", end, "ServerHello")
    legacy_version = int.from_bytes(msg[4:6], "big")
    random = bytes(msg[6:38])
    p = 38
    if is_draft_server_hello(legacy_version):
        session_id, method = b"", 0
        if p + 2 > end:
            raise _fail("need cipher_suite", p, "ServerHello.cipher_suite")
        suite = int.from_bytes(msg[p:p + 2], "big")
        p += 2
        exts = _split_extensions(msg, p, end, "ServerHello.extensions")
    else:
        sid_len = msg[p] if p < end else 0
        if p >= end or sid_len > 32 or p + 1 + sid_len + 3 > end:
            raise _fail("bad legacy_session_id_echo", p, "ServerHello.legacy_session_id_echo")
        session_id = bytes(msg[p + 1:p + 1 + sid_len])
        p += 1 + sid_len
        suite = int.from_bytes(msg[p:p + 2], "big")
        method = msg[p + 2]
        p += 3
        exts = _split_extensions(msg, p, end, "ServerHello.extensions") if p < end else []
    hrr = random == HELLO_RETRY_REQUEST_RANDOM
    types = tuple(t for t, _, _ in exts)
    selected = legacy_version
    key_share = hrr_group = alpn = psk = None
    problems: list[str] = []
    seen: set[int] = set()
    for ext_type, start, stop in exts:
        if ext_type in seen:
            continue
        seen.add(ext_type)
        data = msg[start:stop]
        try:
            if ext_type == _SUPPORTED_VERSIONS:
                if len(data) != 2:
                    raise ValueError("selected_version")
                selected = _U16(data)[0]
            elif ext_type in (_KEY_SHARE, _KEY_SHARE_DRAFT):
                if key_share is not None or hrr_group is not None:
                    continue
                if hrr:
                    if len(data) != 2:
                        raise ValueError("selected_group")
                    hrr_group = _U16(data)[0]
                else:
                    if len(data) < 5 or int.from_bytes(data[2:4], "big") != len(data) - 4:
                        raise ValueError("server_share")
                    key_share = (_U16(data)[0], len(data) - 4)
            elif ext_type == _ALPN:
                names = _alpn(data)
                if len(names) != 1:
                    raise ValueError("one protocol")
                alpn = names[0]
            elif ext_type == _PRE_SHARED_KEY:
                if len(data) != 2:
                    raise ValueError("selected_identity")
                psk = _U16(data)[0]
        except (ValueError, struct.error):
            problems.append({_SUPPORTED_VERSIONS: "supported_versions", _ALPN: "alpn",
                             _PRE_SHARED_KEY: "pre_shared_key"}.get(ext_type, "key_share"))
    return ServerHelloInfo(legacy_version, random, session_id, suite, method, types, selected,
                           key_share, hrr_group, alpn, psk, _EMS in seen, _ETM in seen,
                           _SESSION_TICKET in seen, end, tuple(problems))


@dataclass(frozen=True, slots=True)
class SSLv2ServerHelloInfo:
    """An SSL 2.0 SERVER-HELLO: the server speaks only SSL 2.0 (RFC 6176 forbids it)."""

    version: int
    cipher_specs: tuple[int, ...]
    certificate: bytes
    size: int


def sslv2_record_size(data: bytes | bytearray) -> int | None:
    """Total size of an SSLv2 record with a 2-byte header, None until 2 bytes are there."""
    if len(data) < 2:
        return None
    return 2 + (((data[0] & 0x7F) << 8) | data[1])


def parse_sslv2_server_hello(record: bytes) -> SSLv2ServerHelloInfo:
    """One whole SSLv2 record holding a SERVER-HELLO (msg_type 4)."""
    if len(record) < 13 or not record[0] & 0x80 or record[2] != 4:
        raise _fail("not an SSLv2 SERVER-HELLO", 0, "SSLv2ServerHello")
    if sslv2_record_size(record) != len(record):
        raise _fail("record length does not match", 0, "SSLv2ServerHello")
    version, cert_len, specs_len, cid_len = struct.unpack_from("!HHHH", record, 5)
    if specs_len % 3 or 13 + cert_len + specs_len + cid_len != len(record):
        raise _fail("lengths do not add up", 7, "SSLv2ServerHello")
    cert = bytes(record[13:13 + cert_len])
    p = 13 + cert_len
    specs = tuple(int.from_bytes(record[i:i + 3], "big") for i in range(p, p + specs_len, 3))
    return SSLv2ServerHelloInfo(version, specs, cert, len(record))


# -- the same summaries from the codec's typed messages (fallback and test oracle) -------

def _safe(get: object, default: object, problems: list[str] | None = None,
          name: str = "") -> object:
    try:
        return get()  # type: ignore[operator]
    except DecodeError:
        if problems is not None:
            problems.append(name)
        return default


def client_hello_info(hello: ClientHello, size: int = 0) -> ClientHelloInfo:
    """The summary of a ClientHello decoded by the wire codec."""
    def ext(t: int) -> bytes | None:
        e = hello.extension(t)
        return None if e is None else e.data
    problems = []
    fields: dict[str, object] = {}
    for ext_type, (name, _) in _CLIENT_FIELDS.items():
        if ext(ext_type) is None or name in fields or name in problems:
            continue
        try:
            if name == "sni":
                fields[name] = hello.server_name
            elif name == "key_shares":
                fields[name] = tuple((e.group, len(e.key_exchange)) for e in hello.key_shares)
            elif name == "alpn":
                fields[name] = tuple(hello.alpn_protocols)
            elif name == "session_ticket":
                fields[name] = len(ext(ext_type) or b"")
            elif name == "psk_identities":
                fields[name] = len(hello.extension(ext_type).decode().identities)  # type: ignore[union-attr]
            elif name == "early_data":
                fields[name] = True
            elif name == "ec_point_formats":
                fields[name] = tuple(hello.extension(ext_type).decode())  # type: ignore[union-attr]
            else:
                fields[name] = tuple(getattr(hello, name))
        except DecodeError:
            problems.append(name)
    return ClientHelloInfo(hello.legacy_version, hello.random, hello.legacy_session_id,
                           tuple(hello.cipher_suites), hello.legacy_compression_methods,
                           tuple(e.type for e in hello.extensions), size=size,
                           problems=tuple(problems), **fields)  # type: ignore[arg-type]


def sslv2_client_hello_info(hello: SSLv2ClientHello) -> ClientHelloInfo:
    """An SSLv2-format ClientHello. Its cipher specs are 3 bytes; those of the form 0x00XXYY
    name the TLS cipher suite 0xXXYY and are the offered suites here (SSLv2-only specs such
    as 0x010080 have no TLS equivalent and are left out)."""
    suites = tuple(s for s in hello.cipher_specs if s < 0x10000)
    return ClientHelloInfo(hello.version, hello.challenge.rjust(32, b"\x00")[-32:],
                           hello.session_id, suites, b"\x00", (), size=len(hello.raw),
                           sslv2=True)


def server_hello_info(hello: ServerHello, size: int = 0) -> ServerHelloInfo:
    """The summary of a ServerHello decoded by the wire codec."""
    types = tuple(e.type for e in hello.extensions)
    problems: list[str] = []
    version = _safe(lambda: hello.selected_version, hello.legacy_version, problems,
                    "supported_versions")
    share = _safe(lambda: hello.key_share, None, problems, "key_share")
    hrr_group = _safe(lambda: hello.hrr_selected_group, None, problems, "key_share")
    alpn_ext = hello.extension(_ALPN)
    alpn = None
    if alpn_ext is not None:
        names = _safe(lambda: alpn_ext.decode(hello.where), [], problems, "alpn")
        if isinstance(names, list) and len(names) == 1:
            alpn = names[0]
        elif "alpn" not in problems:
            problems.append("alpn")
    psk_ext = hello.extension(_PRE_SHARED_KEY)
    psk = _safe(lambda: psk_ext.decode(hello.where), None, problems, "pre_shared_key") \
        if psk_ext is not None else None
    order = {t: i for i, t in reversed(list(enumerate(types)))}
    ext_of = {"supported_versions": _SUPPORTED_VERSIONS, "key_share": _KEY_SHARE,
              "alpn": _ALPN, "pre_shared_key": _PRE_SHARED_KEY}
    problems.sort(key=lambda n: order.get(ext_of[n], order.get(_KEY_SHARE_DRAFT, 0)))
    return ServerHelloInfo(
        hello.legacy_version, hello.random, hello.legacy_session_id_echo, hello.cipher_suite,
        hello.legacy_compression_method, types, version,  # type: ignore[arg-type]
        (share[0], len(share[1])) if isinstance(share, tuple) else None,
        hrr_group, alpn, psk if isinstance(psk, int) else None,  # type: ignore[arg-type]
        _EMS in types, _ETM in types, _SESSION_TICKET in types, size, tuple(problems))
