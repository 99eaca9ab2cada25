"""Fast summaries of the hellos: the fields a capture report and the fingerprints need.

The wire codec (`tlsprobe.wire`) builds annotated dataclasses for every field, which is what
the trace needs but costs ~100 us per ClientHello in Python. A capture of a million packets
holds tens of thousands of hellos, so the offline reader extracts only what it reports
(offered lists, extension order, SNI, ALPN, key-share groups, chosen version/suite/group)
in one flat pass with `struct`, several times faster. This pass is hand-inlined on purpose
(not built on `wire.buffer.Buffer`, whose per-field calls cost the speed it is here for);
its structure checks are the codec's (same vector bounds, same "block consumed exactly"
rule, the first extension of a type counts); on any doubt the caller falls back to the codec
(wire.hello_info), which stays the authority on what is malformed. Tests
(tests/wire/test_hello_summaries.py) compare both on every hello of the corpus and on
mutated ones. The summaries are NamedTuples: cheap to build, immutable, comparable.

Repeated hellos are answered from a `HelloShapes` memo that the caller owns (one per
capture analysis): nothing here is process-global.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.hello import HELLO_RETRY_REQUEST_RANDOM, is_draft_server_hello
from tlsprobe.wire.hello_fields import (
    ALPN,
    CLIENT_FIELDS,
    EMS,
    ETM,
    KEY_SHARE,
    KEY_SHARE_DRAFT,
    PRE_SHARED_KEY,
    SESSION_TICKET,
    SUPPORTED_VERSIONS,
    ClientHelloInfo,
    ServerHelloInfo,
)
from tlsprobe.wire.hello_fields import alpn as _alpn
from tlsprobe.wire.hello_fields import client_shares as _client_shares
from tlsprobe.wire.hello_fields import psk_identities as _psk_identities
from tlsprobe.wire.hello_fields import uint16s as _uint16s

_U16: Final = struct.Struct("!H").unpack_from


def _fail(reason: str, offset: int, path: str) -> DecodeError:
    return DecodeError(reason, offset, path)


_FIELD_INDEX = {name: ClientHelloInfo._fields.index(name)
                for name, _ in CLIENT_FIELDS.values()}
_READERS: Final = tuple((ext_type, name, _FIELD_INDEX[name], read)
                        for ext_type, (name, read) in CLIENT_FIELDS.items())
_HH: Final = struct.Struct("!HH").unpack_from
_DEFAULTS: Final = ClientHelloInfo(0, b"", b"", (), b"", ())


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
    #: (bytes before a cut, its frame, value): the frame of a key_share body is its bytes
    #: other than the keys, as (offset in the body, bytes) (`_frame_of`); None for a
    #: pre_shared_key body, whose value is compared
    pieces: tuple[tuple[bytes, tuple[tuple[int, bytes], ...] | None, object], ...]
    tail: bytes                                    # the bytes after the last cut
    info: ClientHelloInfo
    token: int                                     # its number in its HelloShapes


_MAX_CH_SHAPES: Final = 4096
_HEAD: Final = 64  # bytes of the cipher_suites vector in the index
#: (before the key, key length, tail, summary, token)
_SHShape = tuple[bytes, int, bytes, ServerHelloInfo, int]


class HelloShapes:
    """The hello shapes one capture analysis has met (bounded): owned by the analysis, so
    that two analyses share nothing and the memo goes with its analysis."""

    __slots__ = ("client", "last", "made", "server", "server_last")

    def __init__(self) -> None:
        self.client: dict[tuple[int, bytes, bytes], list[_Shape]] = {}
        #: the shape of the ClientHello last summarised with this memo: its token (a number
        #: no other shape of this memo has had, even once forgotten), None when the hello
        #: was not remembered. Hellos with the same token have equal summaries but for
        #: their random and session id (`ClientHelloInfo[3:]` equal): a cheap key for them.
        self.last: int | None = None
        self.made = 0
        #: ServerHello summaries by shape, as for ClientHellos: the bytes after the
        #: session id, without the server's key_share key (the group and key length stay)
        self.server: dict[tuple[int, bytes, bool, bytes], list[_SHShape]] = {}
        #: as `last`, for the ServerHello last summarised (`ServerHelloInfo[3:]` and the
        #: legacy version equal for equal tokens)
        self.server_last: int | None = None

    def count(self) -> int:
        """ClientHello shapes remembered (tests, statistics)."""
        return sum(len(shapes) for shapes in self.client.values())


def _frame_of(body: bytes, shares: tuple[tuple[int, int], ...]) -> tuple[tuple[int, bytes], ...]:
    """The bytes of a well-formed key_share body (`shares`: its `client_shares`) other
    than the keys: the list length with the first share's group and key length, then each
    further share's group and key length, at their offsets. A body of the same length has
    the same `client_shares` exactly when it has these bytes there (they are all the
    parse reads), so a repeated hello's shares are checked without parsing them."""
    frame = []
    p = 2
    for _group, size in shares:
        frame.append((0, body[:6]) if p == 2 else (p, body[p:p + 4]))
        p += 4 + size
    return tuple(frame) if frame else ((0, body[:2]),)


def _known_shape(table: dict[tuple[int, bytes, bytes], list[_Shape]], msg: bytes,
                 index: tuple[int, bytes, bytes], start: int) -> _Shape | None:
    for shape in table.get(index, ()):
        p = start
        for before, frame, value in shape.pieces:
            if not msg.startswith(before, p):
                break
            p += len(before)
            size = (msg[p - 2] << 8) | msg[p - 1]  # equal to the shape's: in `before`
            if frame is not None:  # key_share: its frame (the same length: in `before`)
                for at, part in frame:
                    if not msg.startswith(part, p + at):
                        break
                else:
                    p += size
                    continue
                break
            try:
                if _psk_identities(msg[p:p + size]) != value:
                    break
            except ValueError:
                break
            p += size
        else:
            if msg.startswith(shape.tail, p):
                return shape
    return None


def _remember(shapes: HelloShapes, msg: bytes, index: tuple[int, bytes, bytes], start: int,
              end: int, first: dict[int, int], info: ClientHelloInfo) -> None:
    ks = first.get(KEY_SHARE)
    if ks is None:
        ks = first.get(KEY_SHARE_DRAFT)
    cuts = sorted(at for at in (ks, first.get(PRE_SHARED_KEY)) if at is not None)
    pieces: list[tuple[bytes, tuple[tuple[int, bytes], ...] | None, object]] = []
    p = start
    try:
        for at in cuts:
            size = (msg[at - 2] << 8) | msg[at - 1]
            body = msg[at:at + size]
            if at == ks:
                pieces.append((msg[p:at], _frame_of(body, _client_shares(body)), None))
            else:
                pieces.append((msg[p:at], None, _psk_identities(body)))
            p = at + size
    except ValueError:
        return  # a malformed body: such hellos are not remembered
    if shapes.count() >= _MAX_CH_SHAPES:
        shapes.client.clear()
    known = shapes.client.setdefault(index, [])
    if len(known) >= 16:
        del known[0]
    shapes.made += 1
    shapes.last = shapes.made
    known.append(_Shape(tuple(pieces), msg[p:end], info, shapes.made))


def parse_client_hello(msg: bytes, shapes: HelloShapes | None = None) -> ClientHelloInfo:
    """Summarise one whole ClientHello message (4-byte header included); `shapes`: the
    memo of the hellos already read (None: none kept).

    Raises DecodeError when the message structure is malformed; a malformed extension body
    only leaves its field empty and is named in `problems`."""
    end = len(msg)
    if end < 4 or msg[0] != 1 or (msg[1] << 16) | (msg[2] << 8) | msg[3] != end - 4:
        _header(msg, 1, "ClientHello")  # (its error; the usual case tested inline)
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
    shape_index = (end, msg[4:6],  # (the index's bytes: at most _HEAD, without min())
                   msg[start:start + 2 + cs_len if cs_len < _HEAD - 2 else start + _HEAD])
    if shapes is not None:
        shapes.last = None
        shape = _known_shape(shapes.client, msg, shape_index, start)
        if shape is not None:  # the same bytes as a hello already read, but its own fields
            shapes.last = shape.token
            known = shape.info
            return tuple.__new__(ClientHelloInfo,
                                 (known[0], msg[6:38], msg[39:start]) + known[3:])
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
        if KEY_SHARE in first:  # as the codec: key_share wins over the draft-era type 40
            first.pop(KEY_SHARE_DRAFT, None)
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
    if shapes is not None:
        _remember(shapes, msg, shape_index, start, end, first, info)
    return info


_SH_PROBLEM: Final = {SUPPORTED_VERSIONS: "supported_versions", ALPN: "alpn",
                      PRE_SHARED_KEY: "pre_shared_key", KEY_SHARE: "key_share",
                      KEY_SHARE_DRAFT: "key_share"}


def parse_server_hello(msg: bytes, shapes: HelloShapes | None = None) -> ServerHelloInfo:
    """Summarise one whole ServerHello or HelloRetryRequest (4-byte header included);
    `shapes` as for `parse_client_hello`."""
    if shapes is not None:
        shapes.server_last = None
    end = len(msg)
    if end < 4 or msg[0] != 2 or (msg[1] << 16) | (msg[2] << 8) | msg[3] != end - 4:
        _header(msg, 2, "ServerHello")  # (its error; the usual case tested inline)
    if end < 38:
        raise _fail("ServerHello too short", end, "ServerHello")
    legacy_version = (msg[4] << 8) | msg[5]
    random = msg[6:38]
    shape_index = None
    if shapes is not None and end >= 42 and msg[38] <= 32 and 42 + msg[38] <= end:
        start = 39 + msg[38]
        shape_index = (end, msg[4:6], random == HELLO_RETRY_REQUEST_RANDOM,
                       msg[start:start + 3])
        # a shape seen before (the same bytes but for the random, the session id and the
        # key share): the earlier summary with those replaced
        for before, key_length, tail, known, token in shapes.server.get(shape_index, ()):
            if msg.startswith(before, start) and \
                    msg.startswith(tail, start + len(before) + key_length):
                shapes.server_last = token
                return tuple.__new__(ServerHelloInfo,
                                     (known[0], random, msg[39:start]) + known[3:])
    p = 38
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
    selected, key_share, hrr_group, alpn, psk, problems = _server_extensions(
        msg, first, random == HELLO_RETRY_REQUEST_RANDOM, legacy_version)
    info: ServerHelloInfo = tuple.__new__(ServerHelloInfo, (  # without its Python __new__
        legacy_version, random, session_id, suite, method, tuple(types), selected, key_share,
        hrr_group, alpn, psk, EMS in first, ETM in first, SESSION_TICKET in first, end,
        problems))
    if shapes is not None and shape_index is not None and \
            not is_draft_server_hello(legacy_version):
        _remember_server_hello(shapes, shape_index, msg, 39 + len(session_id), end, first,
                               info)
    return info


def _server_extensions(msg: bytes, first: dict[int, int], hrr: bool, selected: int
                       ) -> tuple[int, tuple[int, int] | None, int | None, bytes | None,
                                  int | None, tuple[str, ...]]:
    """The fields a ServerHello's extensions give (`first`: each type's first body
    offset), in the summary's order: selected version (`selected` when none says),
    key share (group, key length), HRR group, ALPN, PSK identity, problems."""
    key_share = hrr_group = alpn = psk = None
    problems: list[str] = []
    for ext_type in sorted(first, key=first.__getitem__):
        if ext_type not in _SH_PROBLEM:
            continue
        at = first[ext_type]
        data = msg[at:at + ((msg[at - 2] << 8) | msg[at - 1])]
        try:
            if ext_type == SUPPORTED_VERSIONS:
                if len(data) != 2:
                    raise ValueError("selected_version")
                selected = _U16(data)[0]
            elif ext_type in (KEY_SHARE, KEY_SHARE_DRAFT):
                if ext_type == KEY_SHARE_DRAFT and KEY_SHARE in first:
                    continue
                if hrr:
                    if len(data) != 2:
                        raise ValueError("selected_group")
                    hrr_group = _U16(data)[0]
                else:
                    if len(data) < 5 or (data[2] << 8) | data[3] != len(data) - 4:
                        raise ValueError("server_share")
                    key_share = (_U16(data)[0], len(data) - 4)
            elif ext_type == ALPN:
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
    return selected, key_share, hrr_group, alpn, psk, tuple(problems)


def _remember_server_hello(shapes: HelloShapes, shape_index: tuple[int, bytes, bool, bytes], msg: bytes,
                           start: int, end: int, first: dict[int, int],
                           info: ServerHelloInfo) -> None:
    """Keep a parsed ServerHello's shape (its bytes from `start`, after the session id,
    around the key share) for `parse_server_hello`."""
    cut, key_length = end, 0
    if info.key_share is not None:  # the key bytes follow the group and the key length
        cut = first[KEY_SHARE if KEY_SHARE in first else KEY_SHARE_DRAFT] + 4
        key_length = info.key_share[1]
    table = shapes.server
    known_sh = table.setdefault(shape_index, [])
    if len(table) >= _MAX_CH_SHAPES:
        table.clear()
        known_sh = table[shape_index] = []
    if len(known_sh) >= 16:
        del known_sh[0]
    shapes.made += 1
    shapes.server_last = shapes.made
    known_sh.append((msg[start:cut], key_length, msg[cut + key_length:end], info,
                     shapes.made))
