"""Every scan of a stream's bytes resumes where it stopped (issue 35): a direction that is
not (yet) recognised as TLS, fed in 1-byte segments, costs time linear in its length.

Before, `framing.find_hello` searched the whole buffer again from offset 0 on every new
segment, up to 64 KiB (MAX_PREAMBLE, MAX_SCAN): a 64 KiB stream in 1-byte segments took
seconds of CPU (2 to 10 s here), quadratic in its length."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from tlsprobe.offline.facts import Facts
from tlsprobe.offline.fast import FastReader
from tlsprobe.offline.flowreader import FlowReader
from tlsprobe.offline.framing import CLIENT, MAX_PREAMBLE, SERVER, Aligner, find_hello

# pieces that start a hello or an alert record without completing one (a length of 0 or
# too large, a handshake type that is no hello, a minor version of 5), so that the
# searches have partial matches to try every few bytes; a plausible header of a 1-byte
# record that no second header follows; plain text
_PIECES = (b"\x16\x03\x01\x50", b"\x16\x03\x03\x00\x00\x03\x00", b"\x15\x03\x05\x00\x02",
           b"\x16\x03\x01\x00\x00\x0b\x00", b"\x17\x03\x03\x00\x01",
           b"EHLO client.example\r\n", b"+OK ready\r\n")


def _unrecognised(size: int, seed: int = 35) -> bytes:
    rng = random.Random(seed)
    out = bytearray(b"EHLO client.example\r\n")  # (a first record header would be TLS)
    while len(out) < size:
        out += rng.choice(_PIECES)
    return bytes(out[:size])


def _cpu_of_one_byte_segments(data: bytes, direction: int, resync: bool) -> float:
    """CPU seconds to feed `data` one byte at a time to an Aligner (after a gap when
    `resync`); the Aligner must not find TLS in it."""
    best = float("inf")
    for _ in range(2):
        aligner = Aligner(direction)
        if resync:
            aligner.feed(b"\x17\x03\x03\x00\x01\x00")
            aligner.lost()
        start = time.process_time()
        for i in range(len(data)):
            assert aligner.feed(data[i:i + 1]) == b""
        best = min(best, time.process_time() - start)
        assert aligner.state == ("resync" if resync else "start")
    return best


@pytest.mark.parametrize("resync", [False, True], ids=["start", "after-gap"])
@pytest.mark.parametrize("direction", [CLIENT, SERVER], ids=["client", "server"])
def test_a_64k_unrecognised_stream_in_1_byte_segments_costs_linear_cpu(
        direction: int, resync: bool) -> None:
    """64 KiB in 1-byte segments: well under a second of CPU (a few microseconds a
    byte; it took 2 to 10 s when each segment searched from offset 0), and four times the
    bytes cost about four times the CPU, not the sixteen of a quadratic scan."""
    data = _unrecognised(MAX_PREAMBLE)
    assert len(data) == 64 << 10
    whole = _cpu_of_one_byte_segments(data, direction, resync)
    quarter = _cpu_of_one_byte_segments(data[:len(data) // 4], direction, resync)
    assert whole < 1.0, f"{whole:.2f} s of CPU for 64 KiB in 1-byte segments"
    assert whole < 8 * quarter + 0.05, (whole, quarter)


@pytest.mark.parametrize("reader", ["fast", "flow"])
def test_both_readers_give_up_on_64k_unrecognised_bytes_in_linear_cpu(reader: str) -> None:
    """The same through a connection's reader (what `tlsprobe pcap` feeds): past
    MAX_PREAMBLE bytes without TLS the direction is only counted, within a bounded CPU."""
    data = _unrecognised(MAX_PREAMBLE + 64)
    facts = Facts()
    r: Any = FastReader(facts) if reader == "fast" else \
        FlowReader(facts, formatter=None, keylog=None)
    start = time.process_time()
    for direction in (CLIENT, SERVER):
        half = r.halves[direction]
        for i in range(len(data)):
            if half.counting:
                break
            r.feed(half, data[i:i + 1], 0.0, i)
        assert half.counting and half.aligner.state == "dead"
    cpu = time.process_time() - start
    assert cpu < 2.0, f"{cpu:.2f} s of CPU for 2 x 64 KiB in 1-byte segments"
    assert not facts.client_hellos and not facts.server_hellos


def test_a_hello_met_in_a_resumed_search_is_found_where_it_starts() -> None:
    """A search that resumes still finds a hello whose first bytes came in an earlier
    segment (the resume point stays a match's length back), at the same offset as one
    search of the whole buffer."""
    hello = bytes.fromhex("16030100c4010000c00303") + bytes(64)
    stream = _unrecognised(3000) + hello
    for direction in (CLIENT, SERVER):
        whole, _ = find_hello(stream, direction)
        assert whole == 3000
        for size in (1, 2, 3, 5, 7, 11):
            aligner = Aligner(direction)
            out = b""
            for i in range(0, len(stream), size):
                out += aligner.feed(stream[i:i + size])
            assert out == hello and aligner.state == "aligned"
            assert aligner.skipped == 3000 and aligner.preamble == stream[:256]


def test_a_swap_of_roles_searches_the_kept_bytes_again() -> None:
    """Bytes searched as the client's, then taken for the server's (the roles swapped on
    the other side's first record): the server's pattern also takes an alert record,
    which an earlier search for the client's hello passed over."""
    alert = bytes.fromhex("1503030002022e")
    stream = b"EHLO client.example\r\n" * 4 + alert + b"+OK ready\r\n"
    aligner = Aligner(CLIENT)
    for i in range(len(stream)):
        assert aligner.feed(stream[i:i + 1]) == b""
    aligner.direction = SERVER
    out = aligner.feed(b"x")
    assert out.startswith(alert) and aligner.state == "aligned"
    assert aligner.skipped == stream.index(alert)


def test_the_fast_searches_find_what_the_set_patterns_find() -> None:
    """`find_hello` and `find_chain` look for a fixed byte first (a fast scan); they must
    find the same offsets as the plain patterns they stand for, from any start, in bytes
    dense with near-misses."""
    import re

    from tlsprobe.offline.framing import chain_ok, find_chain

    header = re.compile(rb"[\x14-\x18]\x03[\x00-\x04]")
    ch_sh = rb"\x16\x03[\x00-\x04][\x00-\x48].[\x01\x02]\x00"
    hello = {CLIENT: re.compile(ch_sh, re.DOTALL),
             SERVER: re.compile(ch_sh + rb"|\x15\x03[\x00-\x04]\x00\x02", re.DOTALL)}

    def chain_reference(buf: bytes, start: int, need: int) -> tuple[int | None, int]:
        for m in header.finditer(buf, start):
            verdict = chain_ok(buf, m.start(), need)
            if verdict:
                return m.start(), m.start()
            if verdict is None:
                return None, m.start()
        return None, max(start, len(buf) - 4)

    rng = random.Random(35)
    pieces = (b"\x00", b"\x01", b"\x02", b"\x03", b"\x05", b"\x14", b"\x15", b"\x16",
              b"\x18", b"\x48", b"\x16\x03\x01\x00\x02", b"\x17\x03\x03\x00\x01",
              b"\x15\x03\x03\x00\x02", b"\x16\x03\x03\x00\x30\x01\x00")
    for _ in range(3000):
        buf = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 24)))
        start = rng.randrange(len(buf))
        for direction in (CLIENT, SERVER):
            m = hello[direction].search(buf, start)
            assert find_hello(buf, direction, start)[0] == (m.start() if m else None), buf
        for need in (2, 3):
            assert find_chain(buf, start, need) == chain_reference(buf, start, need), buf


def test_find_start_is_find_hello_and_find_chain_in_one_walk() -> None:
    """`find_start` (the start of a stream: one walk for both searches) gives what
    `find_hello` and `find_chain` give from their own resume offsets, in bytes dense with
    near-misses; the chain's values only where no hello was found (a hello is taken)."""
    from tlsprobe.offline.framing import find_chain, find_start

    rng = random.Random(37)
    pieces = (b"\x00", b"\x01", b"\x02", b"\x03", b"\x05", b"\x14", b"\x15", b"\x16",
              b"\x18", b"\x48", b"\x16\x03\x01\x00\x02", b"\x17\x03\x03\x00\x01",
              b"\x15\x03\x03\x00\x02", b"\x16\x03\x03\x00\x30\x01\x00")
    hellos = 0
    for _ in range(4000):
        buf = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        hello_from, chain_from = rng.randrange(len(buf)), rng.randrange(len(buf))
        for direction in (CLIENT, SERVER):
            for need in (2, 3):
                at, resume, chain, chain_resume = find_start(
                    bytearray(buf), direction, hello_from, chain_from, need)
                assert (at, resume) == find_hello(buf, direction, hello_from), buf
                if at is None:
                    assert (chain, chain_resume) == find_chain(buf, chain_from, need), buf
                else:
                    hellos += 1
    assert hellos > 1000  # both outcomes were met
