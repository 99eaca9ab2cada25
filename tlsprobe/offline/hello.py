"""Fast summaries of the hellos: the fields a capture report and the fingerprints need.

The wire codec (`tlsprobe.wire`) builds annotated dataclasses for every field, which is what
the trace needs but costs ~100 us per ClientHello in Python. A capture of a million packets
holds tens of thousands of hellos, so the offline reader extracts only what it reports
(offered lists, extension order, SNI, ALPN, key-share groups, chosen version/suite/group)
in one flat pass with `struct`, several times faster. The structure checks are the codec's
(same vector bounds, same "block consumed exactly" rule, the first extension of a type
counts); on any doubt the caller falls back to the codec (offline.hello_codec), which stays
the authority on what is malformed. Tests compare both on every hello of the corpus and on
mutated ones. The summaries are NamedTuples: cheap to build, immutable, comparable.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from tlsprobe.offline.hello_fields import alpn as _alpn
from tlsprobe.offline.hello_fields import client_shares as _client_shares
from tlsprobe.offline.hello_fields import psk_identities as _psk_identities
from tlsprobe.offline.hello_fields import server_name as _server_name
from tlsprobe.offline.hello_fields import u8_list as _u8_list
from tlsprobe.offline.hello_fields import u16_list as _u16_list
from tlsprobe.offline.hello_fields import uint16s as _uint16s
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM, is_draft_server_hello

_SERVER_NAME, _SUPPORTED_GROUPS, _EC_POINT_FORMATS, _SIGNATURE_ALGORITHMS = 0, 10, 11, 13
_ALPN, _ETM, _EMS, _SESSION_TICKET = 16, 22, 23, 35
_KEY_SHARE_DRAFT, _PRE_SHARED_KEY, _EARLY_DATA, _SUPPORTED_VERSIONS = 40, 41, 42, 43
_KEY_SHARE = 51
_U16 = struct.Struct("!H").unpack_from


class ClientHelloInfo(NamedTuple):
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
    sslv2_cipher_specs: tuple[int, ...] = ()  # an SSLv2-format hello's 3-byte specs, all
    partial: bool = False  # cut short or malformed: only the fields before that are here


class ServerHelloInfo(NamedTuple):
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


#: extension type -> (ClientHelloInfo field, reader of the extension body), in the order
#: the codec-based summary checks them (problems are listed in this order)
CLIENT_FIELDS = {
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
_FIELD_INDEX = {name: ClientHelloInfo._fields.index(name)
                for name, _ in CLIENT_FIELDS.values()}
_READERS = tuple((ext_type, name, _FIELD_INDEX[name], read)
                 for ext_type, (name, read) in CLIENT_FIELDS.items())
_HH = struct.Struct("!HH").unpack_from
_DEFAULTS = ClientHelloInfo(0, b"", b"", (), b"", ())


def _extensions(msg: bytes, p: int, end: int, path: str) -> tuple[list[int], dict[int, int]]:
    """Types in wire order and, for the first extension of each type, its data offset (the
    data length is in the 2 bytes before it)."""
    if p + 2 > end:
        raise _fail("need 2 bytes for the extensions length", p, path)
    stop = p + 2 + ((msg[p] << 8) | msg[p + 1])
    if stop > end:
        raise _fail(f"block of {stop - p - 2} bytes, only {end - p - 2} left", p, path)
    if stop != end:
        raise _fail(f"{end - stop} bytes after the extensions", stop, path)
    p += 2
    types: list[int] = []
    first: dict[int, int] = {}
    append, keep, hh = types.append, first.setdefault, _HH
    try:
        while p < stop:  # stop is the end of msg: a header past it fails to unpack
            ext_type, size = hh(msg, p)
            p += 4
            append(ext_type)
            keep(ext_type, p)
            p += size
    except struct.error:
        raise _fail("truncated extension header", p, path) from None
    if p > stop:
        raise _fail(f"extension of {size} bytes, only {stop - (p - size)} left",
                    p - size - 2, path)
    return types, first


def _header(msg: bytes, msg_type: int, name: str) -> int:
    n = len(msg)
    if n < 4 or msg[0] != msg_type:
        raise _fail(f"not a {name}", 0, "handshake.msg_type")
    if (msg[1] << 16) | (msg[2] << 8) | msg[3] != n - 4:
        raise _fail(f"length {int.from_bytes(msg[1:4], 'big')} but {n - 4} bytes", 1,
                    "handshake.length")
    return n


#: ClientHello summaries by hello shape. A capture repeats the same few clients, whose
#: hellos differ only in the random, the session id and the key_share and pre_shared_key
#: bodies (fresh keys, tickets, binders). A shape is the hello's bytes from the cipher
#: suites on with those bodies cut out (what the summary takes from them is kept instead);
#: shapes are found by the hello's length, version and cipher suites, then compared byte
#: for byte, so a repeated hello costs neither its extension walk nor its decoding.
class _Shape(NamedTuple):
    pieces: tuple[tuple[bytes, bool, object], ...]  # (bytes before a cut, key_share?, value)
    tail: bytes                                    # the bytes after the last cut
    info: ClientHelloInfo


_CH_SHAPES: dict[tuple[int, bytes, bytes], list[_Shape]] = {}
_MAX_CH_SHAPES = 4096
_HEAD = 64  # bytes of the cipher_suites vector in the index


def shape_count() -> int:
    """ClientHello shapes remembered (tests, statistics)."""
    return sum(len(shapes) for shapes in _CH_SHAPES.values())


def _cut_value(body: bytes, key_share: bool) -> object:
    """What the summary takes from a cut body (ValueError when malformed)."""
    return _client_shares(body) if key_share else _psk_identities(body)


def _known_shape(msg: bytes, index: tuple[int, bytes, bytes],
                 start: int) -> ClientHelloInfo | None:
    for shape in _CH_SHAPES.get(index, ()):
        p = start
        for before, key_share, value in shape.pieces:
            if not msg.startswith(before, p):
                break
            p += len(before)
            size = (msg[p - 2] << 8) | msg[p - 1]  # equal to the shape's: in `before`
            try:
                if _cut_value(msg[p:p + size], key_share) != value:
                    break
            except ValueError:
                break
            p += size
        else:
            if msg.startswith(shape.tail, p):
                return shape.info
    return None


def _remember(msg: bytes, index: tuple[int, bytes, bytes], start: int, end: int,
              first: dict[int, int], info: ClientHelloInfo) -> None:
    ks = first.get(_KEY_SHARE)
    if ks is None:
        ks = first.get(_KEY_SHARE_DRAFT)
    cuts = sorted(at for at in (ks, first.get(_PRE_SHARED_KEY)) if at is not None)
    pieces = []
    p = start
    try:
        for at in cuts:
            size = (msg[at - 2] << 8) | msg[at - 1]
            pieces.append((msg[p:at], at == ks, _cut_value(msg[at:at + size], at == ks)))
            p = at + size
    except ValueError:
        return  # a malformed body: such hellos are not remembered
    if shape_count() >= _MAX_CH_SHAPES:
        _CH_SHAPES.clear()
    shapes = _CH_SHAPES.setdefault(index, [])
    if len(shapes) >= 16:
        del shapes[0]
    shapes.append(_Shape(tuple(pieces), msg[p:end], info))


def parse_client_hello(msg: bytes) -> ClientHelloInfo:
    """Summarise one whole ClientHello message (4-byte header included).

    Raises DecodeError when the message structure is malformed; a malformed extension body
    only leaves its field empty and is named in `problems`."""
    end = _header(msg, 1, "ClientHello")
    if end < 39:
        raise _fail("ClientHello too short", end, "ClientHello")
    sid_len = msg[38]
    if sid_len > 32:
        raise _fail(f"length {sid_len} outside 0..32", 38, "ClientHello.legacy_session_id")
    p = start = 39 + sid_len
    if p + 2 > end:
        raise _fail("need cipher_suites", p, "ClientHello.cipher_suites")
    cs_len = (msg[p] << 8) | msg[p + 1]
    if cs_len < 2 or cs_len % 2 or p + 2 + cs_len > end:
        raise _fail(f"bad cipher_suites length {cs_len}", p, "ClientHello.cipher_suites")
    shape_index = (end, msg[4:6], msg[start:start + min(2 + cs_len, _HEAD)])
    known = _known_shape(msg, shape_index, start)
    if known is not None:  # the same bytes as a hello already read, but for its own fields
        return tuple.__new__(ClientHelloInfo, (known[0], msg[6:38], msg[39:start]) + known[3:])
    p += 2 + cs_len
    if p >= end or msg[p] < 1 or p + 1 + msg[p] > end:
        raise _fail("bad legacy_compression_methods", p,
                    "ClientHello.legacy_compression_methods")
    p += 1 + msg[p]
    first: dict[int, int] = {}
    if p < end:
        types, first = _extensions(msg, p, end, "ClientHello.extensions")
    values = list(_DEFAULTS)
    values[0:6] = ((msg[4] << 8) | msg[5], msg[6:38], msg[39:start],
                   _uint16s(msg, start + 2, cs_len // 2), msg[start + cs_len + 3:p], ())
    values[16] = end
    if p < end:
        values[5] = tuple(types)
        if _KEY_SHARE in first:  # as the codec: key_share wins over the draft-era type 40
            first.pop(_KEY_SHARE_DRAFT, None)
        problems = []
        get = first.get
        for ext_type, name, index, read in _READERS:
            at = get(ext_type)
            if at is not None:
                try:
                    values[index] = read(msg[at:at + ((msg[at - 2] << 8) | msg[at - 1])])
                except (ValueError, struct.error):
                    problems.append(name)
        if problems:
            values[18] = tuple(problems)
    info = ClientHelloInfo._make(values)
    _remember(msg, shape_index, start, end, first, info)
    return info


_SH_PROBLEM = {_SUPPORTED_VERSIONS: "supported_versions", _ALPN: "alpn",
               _PRE_SHARED_KEY: "pre_shared_key", _KEY_SHARE: "key_share",
               _KEY_SHARE_DRAFT: "key_share"}


#: ServerHello summaries by shape, as for ClientHellos: the bytes after the session id,
#: without the server's key_share key (the group and key length stay)
_SH_SHAPES: dict[tuple[int, bytes, bool, bytes],
                 list[tuple[bytes, int, bytes, ServerHelloInfo]]] = {}


def parse_server_hello(msg: bytes) -> ServerHelloInfo:
    """Summarise one whole ServerHello or HelloRetryRequest (4-byte header included)."""
    end = _header(msg, 2, "ServerHello")
    if end < 38:
        raise _fail("ServerHello too short", end, "ServerHello")
    legacy_version = (msg[4] << 8) | msg[5]
    random = msg[6:38]
    p = 38
    shape_index = None
    if end >= 42 and msg[38] <= 32 and 42 + msg[38] <= end:
        start = 39 + msg[38]
        shape_index = (end, msg[4:6], random == HELLO_RETRY_REQUEST_RANDOM,
                       msg[start:start + 3])
        for before, key_length, tail, known in _SH_SHAPES.get(shape_index, ()):
            if msg.startswith(before, start) and \
                    msg.startswith(tail, start + len(before) + key_length):
                return tuple.__new__(ServerHelloInfo,
                                     (known[0], random, msg[39:start]) + known[3:])
    if is_draft_server_hello(legacy_version):
        if p + 2 > end:
            raise _fail("need cipher_suite", p, "ServerHello.cipher_suite")
        session_id, suite, method = b"", (msg[p] << 8) | msg[p + 1], 0
        types, first = _extensions(msg, p + 2, end, "ServerHello.extensions")
    else:
        sid_len = msg[p] if p < end else 0
        if p >= end or sid_len > 32 or p + 1 + sid_len + 3 > end:
            raise _fail("bad legacy_session_id_echo", p, "ServerHello.legacy_session_id_echo")
        session_id = msg[p + 1:p + 1 + sid_len]
        p += 1 + sid_len
        suite, method = (msg[p] << 8) | msg[p + 1], msg[p + 2]
        p += 3
        types, first = _extensions(msg, p, end, "ServerHello.extensions") if p < end \
            else ([], {})
    hrr = random == HELLO_RETRY_REQUEST_RANDOM
    selected = legacy_version
    key_share = hrr_group = alpn = psk = None
    problems: list[str] = []
    for ext_type in sorted(first, key=first.__getitem__):
        if ext_type not in _SH_PROBLEM:
            continue
        at = first[ext_type]
        data = msg[at:at + ((msg[at - 2] << 8) | msg[at - 1])]
        try:
            if ext_type == _SUPPORTED_VERSIONS:
                if len(data) != 2:
                    raise ValueError("selected_version")
                selected = _U16(data)[0]
            elif ext_type in (_KEY_SHARE, _KEY_SHARE_DRAFT):
                if ext_type == _KEY_SHARE_DRAFT and _KEY_SHARE in first:
                    continue
                if hrr:
                    if len(data) != 2:
                        raise ValueError("selected_group")
                    hrr_group = _U16(data)[0]
                else:
                    if len(data) < 5 or (data[2] << 8) | data[3] != len(data) - 4:
                        raise ValueError("server_share")
                    key_share = (_U16(data)[0], len(data) - 4)
            elif ext_type == _ALPN:
                names = _alpn(data)
                if len(names) != 1:
                    raise ValueError("one protocol")
                alpn = names[0]
            elif len(data) != 2:
                raise ValueError("selected_identity")
            else:
                psk = _U16(data)[0]
        except (ValueError, struct.error):
            problems.append(_SH_PROBLEM[ext_type])
    info: ServerHelloInfo = tuple.__new__(ServerHelloInfo, (  # without its Python __new__
        legacy_version, random, session_id, suite, method, tuple(types), selected, key_share,
        hrr_group, alpn, psk, _EMS in first, _ETM in first, _SESSION_TICKET in first, end,
        tuple(problems)))
    if shape_index is not None and not is_draft_server_hello(legacy_version):
        start = 39 + len(session_id)
        cut, key_length = end, 0
        if key_share is not None:  # the key bytes follow the group and the key length
            cut = first[_KEY_SHARE if _KEY_SHARE in first else _KEY_SHARE_DRAFT] + 4
            key_length = key_share[1]
        shapes = _SH_SHAPES.setdefault(shape_index, [])
        if len(_SH_SHAPES) >= _MAX_CH_SHAPES:
            _SH_SHAPES.clear()
            shapes = _SH_SHAPES[shape_index] = []
        if len(shapes) >= 16:
            del shapes[0]
        shapes.append((msg[start:cut], key_length, msg[cut + key_length:end], info))
    return info
