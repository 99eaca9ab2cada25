"""The fast hello summaries (wire.hello_summary) against the wire codec: same values on real
hellos, never stricter than the codec, and DecodeError as the only failure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.own_captures import all_hellos
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.handshake import decode_handshake
from tlsprobe.wire.hello_info import client_hello_info, server_hello_info
from tlsprobe.wire.hello_summary import HelloShapes, parse_client_hello, parse_server_hello

HELLOS = all_hellos()
#: one memo for the whole module, as an analysis has: repeated and mutated hellos are also
#: answered from it
MEMO = HelloShapes()


def fast(raw: bytes):
    return parse_client_hello(raw, MEMO) if raw[0] == 1 else parse_server_hello(raw, MEMO)


def codec(raw: bytes):
    decoded = decode_handshake(raw)
    if raw[0] == 1:
        return client_hello_info(decoded.message, len(raw))
    return server_hello_info(decoded.message, len(raw))


def test_project_captures_have_both_kinds_of_hello() -> None:
    kinds = {raw[0] for raw, _ in HELLOS}
    assert kinds == {1, 2} and len(HELLOS) > 40


@pytest.mark.parametrize("index", range(len(HELLOS)))
def test_fast_summary_equals_codec_summary(index: int) -> None:
    raw, _decoded = HELLOS[index]
    assert fast(raw) == codec(raw)


def test_corpus_hellos_agree_with_the_codec(captures_dir) -> None:
    """Every hello of the third-party corpus that the codec reads gives the same summary."""
    import tlsprobe.offline.facts as facts_module
    from tlsprobe.capture import CaptureError
    from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis
    seen: list[bytes] = []
    original = facts_module.Facts.on_message

    def spy(self, direction, msg, *args, **kw):  # collect the raw hellos the reader met
        if msg[0] in (1, 2) and len(seen) < 3000:
            seen.append(bytes(msg))
        return original(self, direction, msg, *args, **kw)
    facts_module.Facts.on_message = spy
    try:
        for path in sorted((captures_dir / "ja4" / "pcap").glob("*")):
            try:
                for _ in CaptureAnalysis(str(path), AnalyzerOptions()):
                    pass
            except CaptureError:
                continue
    finally:
        facts_module.Facts.on_message = original
    assert len(seen) > 50
    for raw in seen:
        try:
            expected = codec(raw)
        except DecodeError:
            continue
        assert fast(raw) == expected, raw.hex()


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(HELLOS) - 1), cuts=st.lists(
    st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1, max_size=4),
    truncate=st.integers(0, 3000))
def test_mutated_hellos(index: int, cuts: list[tuple[int, int]], truncate: int) -> None:
    raw = bytearray(HELLOS[index][0])
    for at, value in cuts:
        if 0 < at < len(raw):  # keep the message type: each reader is asked for its own
            raw[at] = value
    data = bytes(raw[:max(4, truncate)]) if truncate < len(raw) else bytes(raw)
    try:
        want = codec(data)
    except DecodeError:
        want = None
    try:
        got = fast(data)
    except DecodeError:
        got = None
    if want is not None:
        # never stricter than the codec, and the same values (malformed extension bodies:
        # the codec's typed view fails the same field the fast reader names)
        assert got is not None
        assert got == want


def _fresh_copy(raw: bytes, seed: int) -> bytes:
    """The same ClientHello as another connection of the same client would send it: new
    random, session id and key share bytes (the lengths stay)."""
    from tlsprobe.wire.hello import ClientHello
    hello = decode_handshake(raw).message
    assert isinstance(hello, ClientHello)
    out = bytearray(raw)
    out[6:38] = bytes((seed + i) & 0xFF for i in range(32))
    sid = out[38]
    out[39:39 + sid] = bytes((seed * 7 + i) & 0xFF for i in range(sid))
    for share in hello.key_shares:
        key = share.key_exchange
        at = bytes(out).find(key)
        if at >= 0 and len(key) >= 16:
            out[at + len(key) - 16:at + len(key)] = bytes((seed * 13 + i) & 0xFF
                                                          for i in range(16))
    return bytes(out)


def test_hello_shape_cache_gives_each_hello_its_own_values() -> None:
    client_hellos = [raw for raw, _ in HELLOS if raw[0] == 1]
    memo = HelloShapes()
    for raw in client_hellos:
        parse_client_hello(raw, memo)
    shapes = memo.count()
    assert 0 < shapes < len(client_hellos)  # the captures' clients repeat themselves
    for seed, raw in enumerate(client_hellos):
        again = _fresh_copy(raw, seed)
        assert again != raw
        assert parse_client_hello(again, memo) == codec(again)
    assert memo.count() == shapes  # all answered from the cache


def test_hello_shape_cache_tells_key_share_groups_apart() -> None:
    raw = next(r for r, d in HELLOS if r[0] == 1 and b"\x00\x33\x00\x26\x00\x24\x00\x1d" in r)
    at = raw.index(b"\x00\x33\x00\x26\x00\x24\x00\x1d") + 6
    other = raw[:at] + b"\x00\x1e" + raw[at + 2:]  # x25519 share relabelled x448
    memo = HelloShapes()
    assert parse_client_hello(raw, memo).key_shares[0] == (0x1D, 32)
    assert parse_client_hello(other, memo).key_shares[0] == (0x1E, 32) == \
        codec(other).key_shares[0]


def test_server_hello_shape_cache_gives_each_hello_its_own_values() -> None:
    server_hellos = [raw for raw, _ in HELLOS if raw[0] == 2]
    memo = HelloShapes()
    for raw in server_hellos:
        parse_server_hello(raw, memo)
    for seed, raw in enumerate(server_hellos):
        hello = decode_handshake(raw).message
        out = bytearray(raw)
        if not hello.is_hello_retry_request:
            out[6:38] = bytes((seed + i) & 0xFF for i in range(32))
        sid = out[38]
        out[39:39 + sid] = bytes((seed * 5 + i) & 0xFF for i in range(sid))
        share = hello.key_share
        if share is not None and len(share[1]) >= 8:
            at = bytes(out).find(share[1])
            out[at:at + 8] = bytes((seed * 11 + i) & 0xFF for i in range(8))
        again = bytes(out)
        assert parse_server_hello(again, memo) == codec(again)
    # a share of another group with the same key length is another shape
    raw = next(r for r in server_hellos if b"\x00\x33\x00\x24\x00\x1d\x00\x20" in r)
    at = raw.index(b"\x00\x33\x00\x24\x00\x1d\x00\x20") + 4
    other = raw[:at] + b"\x00\x1e" + raw[at + 2:]
    assert parse_server_hello(other, memo).key_share == (0x1E, 32) == codec(other).key_share


def test_server_hello_tokens_name_shapes() -> None:
    """`HelloShapes.server_last`: equal for ServerHellos whose summaries differ only in the
    random and session id (the report memo keys them by it), different otherwise, None
    when the hello was not summarised from or into the memo."""
    server_hellos = [raw for raw, _ in HELLOS if raw[0] == 2 and raw[6:38] !=
                     bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")]
    memo = HelloShapes()
    tokens: dict[int, tuple[object, ...]] = {}
    for seed, raw in enumerate(server_hellos):
        for copy in (raw, raw[:6] + bytes((seed + i) & 0xFF for i in range(32)) + raw[38:]):
            info = parse_server_hello(copy, memo)
            token = memo.server_last
            assert token is not None
            shape = (info[0],) + info[3:]
            assert tokens.setdefault(token, shape) == shape  # one shape per token
    assert len(set(tokens.values())) == len(tokens) > 1
    parse_server_hello(server_hellos[0], None)
    with pytest.raises(DecodeError):
        parse_server_hello(b"\x02\x00\x00\x01\x03", memo)
    assert memo.server_last is None  # a stale token never outlives a failed parse


def _key_share_body_at(raw: bytes) -> int:
    """Where a ClientHello's key_share body starts (walking its extensions)."""
    p = 39 + raw[38]
    p += 2 + int.from_bytes(raw[p:p + 2], "big")
    p += 1 + raw[p]
    p += 2
    while p < len(raw):
        ext_type, size = int.from_bytes(raw[p:p + 2], "big"), int.from_bytes(raw[p + 2:p + 4], "big")
        if ext_type == 0x33:
            return p + 4
        p += 4 + size
    raise AssertionError("no key_share")


def test_hello_shape_cache_tells_later_key_shares_apart() -> None:
    """The memo checks a repeated hello's key shares by the bytes around the keys: a
    second share's group and the split of the same bytes between two shares differ."""
    raw = next(r for r, _ in HELLOS if r[0] == 1 and len(codec(r).key_shares) >= 2)
    body = _key_share_body_at(raw)
    first = int.from_bytes(raw[body + 4:body + 6], "big")
    second = body + 6 + first  # the second share's group
    relabelled = raw[:second] + b"\x01\x00" + raw[second + 2:]   # ffdhe2048
    memo = HelloShapes()
    assert parse_client_hello(raw, memo) == codec(raw)
    assert parse_client_hello(relabelled, memo) == codec(relabelled)
    assert parse_client_hello(relabelled, memo).key_shares[1][0] == 0x100
    # the first key one byte shorter, the second one longer: the same length in all
    size2 = int.from_bytes(raw[second + 2:second + 4], "big")
    moved = bytearray(raw)
    moved[body + 4:body + 6] = (first - 1).to_bytes(2, "big")
    moved[second - 1:second + 3] = raw[second:second + 2] + (size2 + 1).to_bytes(2, "big")
    moved = bytes(moved)
    assert len(moved) == len(raw)
    assert parse_client_hello(moved, memo) == codec(moved)
    assert parse_client_hello(moved, memo).key_shares[:2] == (
        (codec(raw).key_shares[0][0], first - 1), (codec(raw).key_shares[1][0], size2 + 1))
