"""The fast hello summaries (offline.hello) against the wire codec: same values on real
hellos, never stricter than the codec, and DecodeError as the only failure."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offline.helpers import all_hellos
from tlsprobe.offline.hello import parse_client_hello, parse_server_hello
from tlsprobe.offline.hello_codec import client_hello_info, server_hello_info
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.handshake import decode_handshake

HELLOS = all_hellos()


def fast(raw: bytes):
    return parse_client_hello(raw) if raw[0] == 1 else parse_server_hello(raw)


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
