"""TCP reassembly and connection tracking, on pcaps built packet by packet."""

from __future__ import annotations

import io
from itertools import pairwise

import pytest
from tests.helpers.capbuild import Conv, collect, ether, pcap_bytes, streams
from hypothesis import given, settings
from hypothesis import strategies as st

from tlsprobe.capture import StreamClose, StreamData, StreamGap, StreamOpen


def run(packets: list[bytes], **kw: object) -> tuple[list, object]:
    return collect(io.BytesIO(pcap_bytes([ether(p) for p in packets])), **kw)


def test_in_order_connection_events_frames_and_endpoints() -> None:
    c = Conv()
    pkts = c.handshake() + [c.c(b"hello"), c.ack(False), c.s(b"world!"), c.c(b"", "FA"),
                            c.s(b"", "FA"), c.ack()]
    events, stream = run(pkts)
    assert [type(e).__name__ for e in events] == ["StreamOpen", "StreamData", "StreamData",
                                                  "StreamClose"]
    opened, d1, d2, closed = events
    assert opened.frame == 1 and opened.conn.id == 0
    assert opened.conn.client == "10.0.0.1:40000" and opened.conn.server == "10.0.0.2:443"
    assert (d1.direction, d1.data, d1.frame, d1.ts) == (0, b"hello", 4, 1003.0)
    assert (d2.direction, d2.data, d2.frame) == (1, b"world!", 6)
    assert closed.reason == "fin" and closed.frame == 8
    assert stream.stats.tcp_connections == 1 and stream.stats.packets == 9
    assert stream.stats.tcp_gaps == 0 and stream.stats.tcp_retransmissions == 0


def test_out_of_order_segments_are_reordered() -> None:
    c = Conv()
    hs = c.handshake()
    a, b, cc = c.c(b"AAAA"), c.c(b"BBBB"), c.c(b"CCCC")
    events, stream = run(hs + [cc, a, b])
    data = [e for e in events if isinstance(e, StreamData)]
    assert b"".join(d.data for d in data) == b"AAAABBBBCCCC"
    assert [d.frame for d in data] == [5, 6, 6]  # C waits until B arrives in frame 6
    assert stream.stats.tcp_out_of_order == 1


def test_early_segments_of_interleaved_connections_wait_each_in_its_own_list() -> None:
    """A half's pending list is a shared empty one until its first early segment (no list
    made per half): each early segment waits in a list of its own half, the shared one
    stays empty, and each connection's bytes come out whole and unmixed."""
    from tlsprobe.capture.reassembly import NO_PENDING

    convs = [Conv(client=("10.0.0.1", 40000 + i)) for i in range(3)]
    pkts = [p for c in convs for p in c.handshake()]
    parts = [(c.c(b"a%d" % i * 3), c.s(b"s%d" % i), c.c(b"b%d" % i * 3))
             for i, c in enumerate(convs)]
    pkts += [b for _, _, b in parts] + [s for _, s, _ in parts] + [a for a, _, _ in parts]
    events, stream = run(pkts)
    got = streams(events)
    for i in range(3):
        assert got[i]["data"] == [b"a%d" % i * 3 + b"b%d" % i * 3, b"s%d" % i]
    assert NO_PENDING == [] and stream.stats.tcp_out_of_order == 3


def test_retransmission_is_dropped_and_counted() -> None:
    c = Conv()
    hs = c.handshake()
    a = c.c(b"first")
    b = c.c(b"second")
    events, stream = run(hs + [a, a, b, b])
    assert streams(events)[0]["data"][0] == b"firstsecond"
    assert stream.stats.tcp_retransmissions == 2


def test_overlap_first_seen_bytes_win() -> None:
    c = Conv(cisn=99)
    hs = c.handshake()  # data starts at seq 100
    pkts = hs + [c.c(b"abcdef", seq=100), c.c(b"XYZghi", seq=103)]
    events, stream = run(pkts)
    assert streams(events)[0]["data"][0] == b"abcdefghi"
    assert stream.stats.tcp_overlaps == 1


def test_overlap_between_pending_segments_keeps_first_and_counts_conflict() -> None:
    c = Conv(cisn=99)
    hs = c.handshake()
    pkts = hs + [c.c(b"KLMN", seq=110), c.c(b"ijXXXX", seq=108), c.c(b"abcdefgh", seq=100)]
    events, stream = run(pkts)
    assert streams(events)[0]["data"][0] == b"abcdefghijKLMN"
    assert stream.stats.tcp_overlap_conflicts == 1
    assert stream.stats.tcp_gaps == 0


def test_missing_segment_becomes_exact_gap_at_end() -> None:
    c = Conv()
    hs = c.handshake()
    a, lost, b = c.c(b"A" * 10), c.c(b"B" * 7), c.c(b"C" * 5)
    events, stream = run(hs + [a, b, c.c(b"", "FA"), c.s(b"", "FA")])
    s0 = streams(events)[0]
    assert s0["data"][0] == b"A" * 10 + b"C" * 5
    assert s0["gaps"][0] == [(10, 7)]
    assert s0["close"] == "fin"  # both FINs were seen; the hole kept it open until the end
    assert stream.stats.tcp_gaps == 1 and stream.stats.tcp_gap_bytes == 7
    assert lost  # built but never captured


def test_gap_when_pending_exceeds_bound() -> None:
    c = Conv()
    hs = c.handshake()
    first = c.c(b"x" * 10)
    c.c(b"lost" * 5)  # 20 bytes never captured
    later = [c.c(bytes([65 + i]) * 40) for i in range(4)]
    events, stream = run(hs + [first] + later, max_pending_bytes=100)
    gap = next(e for e in events if isinstance(e, StreamGap))
    assert gap.size == 20 and gap.frame == 7  # third pending segment pushes it over 100 bytes
    assert streams(events)[0]["data"][0] == b"x" * 10 + b"A" * 40 + b"B" * 40 + b"C" * 40 + b"D" * 40
    assert stream.stats.tcp_pending_flushes == 1


def test_total_pending_bound_across_connections() -> None:
    pkts = []
    for i in range(3):
        c = Conv(client=("10.0.0.1", 41000 + i))
        pkts += c.handshake()
        c.c(b"?" * 8)  # lost
        pkts.append(c.c(b"z" * 60))
    events, stream = run(pkts, max_total_pending_bytes=100)
    gaps = [e for e in events if isinstance(e, StreamGap)]
    assert all(g.size == 8 for g in gaps)
    # 60 pending + 60 > 100: the second and third connections give up on their holes at
    # once; the first one's hole is flushed at the end of the capture.
    assert [(g.conn.id, g.frame) for g in gaps] == [(1, 8), (2, 12), (0, 12)]
    assert stream.stats.tcp_pending_flushes == 2


def test_capture_starting_mid_stream() -> None:
    c = Conv(client=("10.0.0.1", 40000), server=("10.0.0.2", 25))
    c.handshake()  # not captured
    pkts = [c.s(b"220 mail ready\r\n"), c.c(b"EHLO x\r\n"), c.s(b"250 ok\r\n")]
    events, _ = run(pkts)
    s0 = streams(events)[0]
    assert s0["key"].client == "10.0.0.1:40000"  # port 25 is the server although it spoke first
    assert s0["data"] == [b"EHLO x\r\n", b"220 mail ready\r\n250 ok\r\n"]
    assert s0["close"] == "end"


def test_mid_stream_high_ports_first_payload_sender_is_client() -> None:
    c = Conv(client=("10.0.0.1", 50000), server=("10.0.0.2", 8443))
    c.handshake()
    events, _ = run([c.s(b"from-8443"), c.c(b"from-50000")])
    key = streams(events)[0]["key"]
    assert key.client == "10.0.0.2:8443" and key.server == "10.0.0.1:50000"


def test_only_synack_captured_names_the_receiver_client() -> None:
    c = Conv(client=("10.0.0.1", 50000), server=("10.0.0.2", 50001))
    c.syn()
    events, _ = run([c.synack(), c.c(b"hi"), c.s(b"yo")])
    s0 = streams(events)[0]
    assert s0["key"].client == "10.0.0.1:50000"
    assert s0["data"] == [b"hi", b"yo"]


@pytest.mark.parametrize("isn", [0xFFFFFFF0, 0xFFFFFFFF, 0x7FFFFFFF])
def test_sequence_wraparound(isn: int) -> None:
    c = Conv(cisn=isn)
    hs = c.handshake()
    segs = [c.c(bytes([48 + i]) * 7) for i in range(4)]
    events, stream = run(hs + [segs[0], segs[2], segs[1], segs[3]])
    assert streams(events)[0]["data"][0] == b"0000000111111122222223333333"
    assert stream.stats.tcp_gaps == 0 and stream.stats.tcp_retransmissions == 0


def test_rst_lingers_for_the_peers_in_flight_data_then_closes() -> None:
    """Data the peer sent before it saw a RST is captured after it (tshark reads it): the
    connection stays open RST_LINGER seconds of capture time for it, then closes as "rst"
    at the RST's frame; later data is ignored."""
    from tlsprobe.capture.tcp import RST_LINGER
    c = Conv()
    hs = c.handshake()
    a = c.c(b"aaaa")
    c.c(b"bbbb")  # lost
    d = c.c(b"cccc")
    rst = c.s(b"", "R")
    late = c.c(b"dddd")  # in flight when the server reset
    other = Conv(client=("10.0.0.9", 41000))
    too_late = c.c(b"eeee")
    frames = [(1000.0 + i, ether(p)) for i, p in enumerate(hs + [a, d, rst, late])]
    frames += [(1006.0 + RST_LINGER + 1, ether(other.syn())),
               (1006.0 + RST_LINGER + 2, ether(too_late))]
    events, stream = collect(io.BytesIO(pcap_bytes(frames)))
    s0 = streams(events)[0]
    assert s0["close"] == "rst"
    assert s0["data"][0] == b"aaaaccccdddd" and s0["gaps"][0] == [(4, 4)]
    closes = [e for e in events if isinstance(e, StreamClose) and e.conn.id == 0]
    assert len(closes) == 1 and (closes[0].frame, closes[0].ts) == (6, 1005.0)
    assert events.index(closes[0]) < events.index(
        next(e for e in events if isinstance(e, StreamOpen) and e.conn.id == 1))
    assert stream.stats.tcp_after_close == 1


def test_rst_without_data_or_after_the_peers_fin_closes_at_once() -> None:
    c = Conv()
    events, _ = run(c.handshake() + [c.s(b"", "R"), c.c(b"late")])
    assert streams(events)[0]["close"] == "rst" and streams(events)[0]["data"] == [b"", b""]
    c = Conv()
    pkts = c.handshake() + [c.c(b"hello"), c.s(b"bye"), c.s(b"", "FA"), c.c(b"", "R"),
                            c.s(b"late")]
    events, stream = run(pkts)
    assert streams(events)[0]["data"] == [b"hello", b"bye"]
    assert stream.stats.tcp_after_close == 1


def test_rst_then_the_peers_fin_closes() -> None:
    c = Conv()
    pkts = c.handshake() + [c.c(b"hello"), c.c(b"", "R"), c.s(b"in-flight"), c.s(b"", "FA")]
    events, _ = run(pkts)
    closes = [e for e in events if isinstance(e, StreamClose)]
    assert streams(events)[0]["data"] == [b"hello", b"in-flight"]
    assert [(e.reason, e.frame) for e in closes] == [("rst", 5)]


def test_rsts_repeated_by_the_resetting_side_do_not_cut_the_peers_data() -> None:
    """A client that has closed its socket answers each segment the server still sends
    with a RST (ndpi's reddit.pcap): the server's key exchange comes after the second RST
    and is still read; the peer's own RST then closes, as "rst" at the first RST."""
    c = Conv()
    pkts = c.handshake() + [c.c(b"hello"), c.c(b"", "FA"), c.s(b"one"), c.c(b"", "R"),
                            c.s(b"two"), c.c(b"", "R"), c.c(b"", "R"), c.s(b"three"),
                            c.s(b"", "R"), c.s(b"late")]
    frames = [(1000.0 + i / 100, ether(p)) for i, p in enumerate(pkts)]  # within the linger
    events, stream = collect(io.BytesIO(pcap_bytes(frames)))
    closes = [e for e in events if isinstance(e, StreamClose)]
    assert streams(events)[0]["data"] == [b"hello", b"onetwothree"]
    assert [(e.reason, e.frame) for e in closes] == [("rst", 7)]
    assert stream.stats.tcp_after_close == 1


def test_lingering_resets_close_exactly_when_their_time_is_up() -> None:
    """Several reset connections at once: one its peer ends early (FIN), the other reads
    its in-flight data up to RST_LINGER seconds after its RST - a segment exactly then
    still counts - and closes at the first segment after that, before what it opens."""
    from tlsprobe.capture.tcp import RST_LINGER
    t0 = 1000.0
    a = Conv(client=("10.0.0.1", 40001))
    b = Conv(client=("10.0.0.1", 40002))
    c_, d_ = Conv(client=("10.0.0.1", 40003)), Conv(client=("10.0.0.1", 40004))
    frames = [(t0 - 1, ether(p)) for p in a.handshake() + [a.c(b"a1")] + b.handshake()
              + [b.c(b"b1")]]
    frames += [(t0, ether(a.s(b"", "R"))), (t0 + 0.5, ether(b.s(b"", "R"))),
               (t0 + 0.6, ether(b.c(b"", "FA"))),  # b's peer ends: b closes at once
               (t0 + RST_LINGER, ether(c_.syn())),  # exactly a's time: a stays open
               (t0 + RST_LINGER, ether(a.c(b"a2"))),  # its in-flight data still read
               (t0 + RST_LINGER + 0.01, ether(d_.syn()))]  # past it: a closes first
    events, _ = collect(io.BytesIO(pcap_bytes(frames)))
    s = streams(events)
    assert s[0]["data"][0] == b"a1a2" and s[0]["close"] == "rst"
    assert s[1]["data"][0] == b"b1" and s[1]["close"] == "rst"
    order = [(type(e).__name__, e.conn.id) for e in events
             if isinstance(e, (StreamOpen, StreamClose))]
    assert order.index(("StreamClose", 1)) < order.index(("StreamOpen", 2))
    assert order.index(("StreamOpen", 2)) < order.index(("StreamClose", 0)) \
        < order.index(("StreamOpen", 3))
    close_a = next(e for e in events if isinstance(e, StreamClose) and e.conn.id == 0)
    assert close_a.ts == t0  # at its RST


def test_reading_a_capture_leaves_nothing_for_the_collector() -> None:
    """The capture layer's connections point at their halves and back: once a capture is
    read (or closed early), those cycles are cut, so its memory goes at once and no
    collection has to find it (at exit one took 0.1 s)."""
    import gc
    pkts = []
    for i in range(300):
        c = Conv(client=("10.0.%d.%d" % (i // 250, i % 250 + 1), 40000 + i))
        pkts += c.handshake() + [c.c(b"hi"), c.s(b"yo"), c.c(b"", "FA"), c.s(b"", "FA")]
    gc.collect()
    gc.disable()
    try:
        events, stream = run(pkts)
        assert len(streams(events)) == 300
        del events, stream
        assert gc.collect() == 0
        from tlsprobe.capture import iter_stream_events
        stream = iter_stream_events(io.BytesIO(pcap_bytes([ether(p) for p in pkts])))
        for _ in range(400):  # stopped early: what is open goes with close()
            next(stream)
        stream.close()
        del stream
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_tuple_reuse_after_close_is_a_new_connection() -> None:
    c1 = Conv(cisn=1000)
    first = c1.handshake() + [c1.c(b"one"), c1.c(b"", "FA"), c1.s(b"", "FA"), c1.ack()]
    c2 = Conv(cisn=900000)
    second = c2.handshake() + [c2.c(b"two")]
    events, stream = run(first + second)
    st_ = streams(events)
    assert sorted(st_) == [0, 1] and stream.stats.tcp_connections == 2
    assert st_[0]["data"][0] == b"one" and st_[0]["close"] == "fin"
    assert st_[1]["data"][0] == b"two" and st_[1]["close"] == "end"
    assert st_[0]["key"][1:] == st_[1]["key"][1:]


def test_new_isn_on_open_tuple_closes_old_as_reused() -> None:
    c1 = Conv(cisn=1000)
    c2 = Conv(cisn=777777)
    events, _ = run(c1.handshake() + [c1.c(b"old")] + c2.handshake() + [c2.c(b"new")])
    st_ = streams(events)
    assert st_[0]["close"] == "reused" and st_[0]["data"][0] == b"old"
    assert st_[1]["data"][0] == b"new"


def test_retransmitted_syn_is_not_a_new_connection() -> None:
    c = Conv()
    syn = c.syn()
    events, stream = run([syn, syn, c.synack(), c.ack(), c.c(b"x")])
    assert len([e for e in events if isinstance(e, StreamOpen)]) == 1
    assert stream.stats.tcp_retransmissions == 1


def test_tcp_fast_open_data_in_syn() -> None:
    c = Conv(cisn=500)
    syn = c.c(b"early", flags="S", seq=500)
    c.cseq = 506
    events, _ = run([syn, c.synack(), c.c(b"-late")])
    assert streams(events)[0]["data"][0] == b"early-late"


def test_snaplen_cut_segment_gives_data_then_gap() -> None:
    c = Conv()
    hs = c.handshake()
    full = ether(c.c(b"0123456789" * 10))
    frames = [ether(p) for p in hs] + [(2000.0, full[:-60], len(full)), ether(c.c(b"next"))]
    events, stream = collect(io.BytesIO(pcap_bytes(frames)))
    s0 = streams(events)[0]
    assert s0["data"][0] == (b"0123456789" * 10)[:40] + b"next"
    assert s0["gaps"][0] == [(40, 60)]
    assert stream.stats.snaplen_cut == 1


def test_swap_direction_rewrites_queued_and_later_events() -> None:
    c = Conv(client=("10.0.0.1", 50000), server=("10.0.0.2", 50001))
    c.handshake()
    stream_events = []
    from tlsprobe.capture import iter_stream_events
    stream = iter_stream_events(io.BytesIO(pcap_bytes([ether(p) for p in
                                                        [c.c(b"hello"), c.s(b"reply")]])))
    for ev in stream:
        if isinstance(ev, StreamOpen):
            new = stream.swap_direction(ev.conn)
            assert new is not None and new.client == "10.0.0.2:50001"
        stream_events.append(ev)
    data = [e for e in stream_events if isinstance(e, StreamData)]
    assert [(d.direction, d.data) for d in data] == [(1, b"hello"), (0, b"reply")]
    assert all(d.conn.client == "10.0.0.2:50001" for d in data)


def test_connection_cap_evicts_least_recently_used() -> None:
    a, b, c = (Conv(client=("10.0.0.1", p)) for p in (41000, 42000, 43000))
    pkts = a.handshake() + b.handshake() + [a.c(b"a1")] + c.handshake() + [a.c(b"a2"),
                                                                           b.c(b"b-late")]
    events, stream = run(pkts, max_connections=2)
    closes = [e for e in events if isinstance(e, StreamClose)]
    # c opens: b (idle since frame 6) goes; b's late data then opens a fourth connection
    # (b's state was dropped) and c, idle since frame 10 while a sent at 11, goes too.
    assert [(e.conn.client, e.reason, e.frame) for e in closes] == [
        ("10.0.0.1:42000", "evicted", 8), ("10.0.0.1:43000", "evicted", 12),
        ("10.0.0.1:41000", "end", 12), ("10.0.0.1:42000", "end", 12)]
    assert stream.stats.tcp_evicted == 2
    st_ = streams(events)
    assert st_[0]["data"][0] == b"a1a2"
    assert st_[3]["data"][0] == b"b-late"


@settings(max_examples=60, deadline=None)
@given(data=st.binary(min_size=1, max_size=600), cuts=st.lists(st.integers(0, 600), max_size=12),
       order=st.randoms(use_true_random=False), dups=st.lists(st.integers(0, 30), max_size=5),
       isn=st.integers(0, 0xFFFFFFFF))
def test_property_any_order_with_duplicates_gives_the_original(data: bytes, cuts: list[int],
                                                               order, dups: list[int],
                                                               isn: int) -> None:
    c = Conv(cisn=isn)
    hs = c.handshake()
    bounds = sorted({0, len(data), *(x % len(data) for x in cuts)})
    base = (isn + 1) & 0xFFFFFFFF
    segs = [c.c(data[x:y], seq=(base + x) & 0xFFFFFFFF) for x, y in pairwise(bounds)]
    # retransmissions with other boundaries, carrying the same bytes
    segs += [c.c(data[d % len(data):d % len(data) + 9], seq=(base + d % len(data)) & 0xFFFFFFFF)
             for d in dups]
    order.shuffle(segs)
    events, stream = run(hs + segs)
    s0 = streams(events)[0]
    assert s0["data"][0] == data
    assert s0["gaps"] == [[], []]
    assert stream.stats.tcp_overlap_conflicts == 0


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 50), min_size=3, max_size=10), lost=st.integers(0, 100),
       order=st.randoms(use_true_random=False))
def test_property_lost_segment_gives_one_gap_of_its_size(sizes: list[int], lost: int,
                                                         order) -> None:
    c = Conv()
    hs = c.handshake()
    payloads = [bytes([65 + i]) * n for i, n in enumerate(sizes)]
    segs = [c.c(p) for p in payloads]
    k = lost % (len(segs) - 1)  # never the last one: the gap would be invisible
    kept = segs[:k] + segs[k + 1:]
    order.shuffle(kept)
    events, _ = run(hs + kept)
    s0 = streams(events)[0]
    assert s0["data"][0] == b"".join(payloads[:k] + payloads[k + 1:])
    assert s0["gaps"][0] == [(sum(sizes[:k]), sizes[k])]


def test_data_at_the_syns_own_sequence_number_keeps_its_first_byte() -> None:
    """Synthetic captures (Mixed1.cap) may start each direction's data at the SYN's own
    number instead of ISN+1: the stream follows the data instead of taking the first
    byte for one already delivered."""
    c = Conv(cisn=0, sisn=0)
    hs = c.handshake()  # SYN at 0 and SYN+ACK at 0: data would be expected at 1
    hello = b"\x16\x03\x01\x00\x05HELLO"
    reply = b"\x16\x03\x03\x00\x03BYE"
    events, stream = run(hs + [c.c(hello, seq=0), c.s(reply, seq=0),
                               c.c(b"more", seq=len(hello))])
    s0 = streams(events)[0]
    assert s0["data"] == [hello + b"more", reply]
    assert s0["gaps"] == [[], []]
    assert stream.stats.tcp_resyncs == 2 and stream.stats.tcp_overlaps == 0


def test_one_byte_keepalive_at_the_isn_is_not_data() -> None:
    """A keep-alive probe of a side that has sent nothing repeats the byte before ISN+1
    (one garbage byte at the SYN's number): it is not the start of the stream."""
    c = Conv(cisn=7000)
    hs = c.handshake()
    events, stream = run(hs + [c.c(b"\x00", seq=7000), c.c(b"real data")])
    assert streams(events)[0]["data"][0] == b"real data"
    assert stream.stats.tcp_resyncs == 0


def test_holes_of_the_same_size_flushed_together_are_distinct_gaps() -> None:
    """Two lost segments of the same size are both given up when the capture ends: two
    StreamGap events (the same size and frame) that name where each hole starts."""
    c = Conv(cisn=999)
    hs = c.handshake()
    a = c.c(b"a" * 10)
    c.c(b"?" * 5)  # lost
    b = c.c(b"b" * 10)
    c.c(b"!" * 5)  # lost
    d = c.c(b"d" * 10)
    events, stream = run(hs + [a, b, d])
    gaps = [e for e in events if isinstance(e, StreamGap)]
    assert [(g.size, g.frame, g.seq) for g in gaps] == [(5, 6, 1010), (5, 6, 1025)]
    assert streams(events)[0]["gaps"][0] == [(10, 5), (20, 5)]
    assert stream.stats.tcp_gaps == 2 and stream.stats.tcp_gap_bytes == 10


def test_gap_sequence_numbers_for_a_snaplen_cut_and_a_hole_before_fin() -> None:
    c = Conv(cisn=99)
    hs = c.handshake()
    full = ether(c.c(b"0123456789" * 10))  # data 100..199, the last 60 bytes not kept
    c.c(b"lost")                           # 200..203
    fin = c.c(b"", "FA")                   # FIN at 204
    frames = [ether(p) for p in hs] + [(2000.0, full[:-60], len(full)), ether(fin)]
    events, _ = collect(io.BytesIO(pcap_bytes(frames)))
    gaps = [(g.seq, g.size) for g in events if isinstance(g, StreamGap)]
    assert gaps == [(140, 60), (200, 4)]


def _ignoring(packets: list[bytes], after: int) -> tuple[list, object]:
    """Events of a capture whose first connection is ignored once `after` data events
    were handed out."""
    from tlsprobe.capture import iter_stream_events
    stream = iter_stream_events(io.BytesIO(pcap_bytes([ether(p) for p in packets])))
    events, seen = [], 0
    for ev in stream:
        events.append(ev)
        if isinstance(ev, StreamData):
            seen += 1
            if seen == after:
                assert stream.ignore(ev.conn)
    return events, stream


def test_ignored_connection_is_only_counted_then_totalled_before_close() -> None:
    from tlsprobe.capture import StreamSkipped
    c = Conv()
    pkts = c.handshake() + [c.c(b"hello"), c.s(b"world!"), c.c(b"12345678"),
                            c.s(b"abc"), c.s(b"defg"), c.c(b"", "FA"), c.s(b"", "FA"), c.ack()]
    events, stream = _ignoring(pkts, after=2)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["StreamOpen", "StreamData", "StreamData", "StreamSkipped",
                     "StreamSkipped", "StreamClose"]
    c2s, s2c = events[3], events[4]
    assert isinstance(c2s, StreamSkipped) and (c2s.direction, c2s.size, c2s.gaps) == (0, 8, 0)
    assert (s2c.direction, s2c.size, s2c.gaps) == (1, 7, 0)
    assert (c2s.frame, s2c.frame) == (6, 8)  # last segment each side carried
    assert events[-1].reason == "fin" and events[-1].frame == 10
    assert stream.stats.tcp_segments == 5


def test_ignored_connection_counts_retransmissions_reordering_and_holes_right() -> None:
    from tlsprobe.capture import StreamSkipped
    c = Conv()
    hs = c.handshake()
    first = c.c(b"first")
    a, b, _lost, d = c.c(b"AAAA"), c.c(b"BBBBBB"), c.c(b"??"), c.c(b"DDD")
    events, stream = _ignoring(hs + [first, b, a, a, d], after=1)
    skipped = [e for e in events if isinstance(e, StreamSkipped)]
    assert [(e.direction, e.size, e.gaps) for e in skipped] == [(0, 13, 2)]
    assert not any(isinstance(e, (StreamData, StreamGap)) for e in events[2:])
    assert stream.stats.tcp_retransmissions == 1 and stream.stats.tcp_gap_bytes == 2
    assert events[-1].reason == "end"


def test_ignore_unknown_or_closed_connection_is_refused() -> None:
    from tlsprobe.capture import iter_stream_events
    c = Conv()
    pkts = c.handshake() + [c.c(b"x"), c.c(b"", "FA"), c.s(b"", "FA")]
    stream = iter_stream_events(io.BytesIO(pcap_bytes([ether(p) for p in pkts])))
    events = list(stream)
    assert not stream.ignore(events[0].conn) and not stream.ignore(99)


@pytest.mark.parametrize("v6", [False, True])
@pytest.mark.parametrize("acker", ["pure", "data", "fin"])
def test_an_ack_past_a_hole_lets_the_bytes_behind_it_out(acker: str, v6: bool) -> None:
    """The peer acknowledged bytes the capture never saw (a segment delivered but not
    captured): the hole is a gap at the connection's next segment after that
    acknowledgement (a pure ack, one carried by data, by a FIN), and the bytes behind it
    come out then, not at the connection's close (IPv4's fast path, IPv6's other one)."""
    c = Conv(client=("fd00::1", 40000), server=("fd00::2", 443)) if v6 else Conv()
    pkts = c.handshake() + [c.c(b"A" * 10)]
    c.c(b"B" * 6)  # lost: the server received it, the capture did not
    pkts.append(c.c(b"C" * 5))
    pkts.append({"pure": c.ack(False), "data": c.s(b"ok"), "fin": c.s(b"", "FA")}[acker])
    pkts += [c.ack(), c.ack(), c.c(b"", "FA")] + ([] if acker == "fin" else [c.s(b"", "FA")])
    events, _ = run(pkts)
    gap = next(e for e in events if isinstance(e, StreamGap))
    assert (gap.size, gap.frame) == (6, 7)
    behind = next(e for e in events if isinstance(e, StreamData) and e.data == b"C" * 5)
    assert behind.frame == 7 and events.index(behind) == events.index(gap) + 1
    assert streams(events)[0]["data"][0] == b"A" * 10 + b"C" * 5


def test_an_ack_inside_a_hole_gives_up_only_its_acknowledged_part() -> None:
    """An acknowledgement that ends inside a hole: the part before it is lost, the rest may
    still come (it does); one not past the hole changes nothing; the data an
    acknowledgement passes, captured just after it, is no gap."""
    c = Conv()
    pkts = c.handshake() + [c.c(b"A" * 10)]
    lost, late = c.c(b"B" * 4), c.c(b"L" * 3)
    pkts.append(c.c(b"C" * 5))
    pkts.append(c._pkt(False, c.sseq, c.cseq - 8, "A", b""))  # up to the end of B
    pkts.append(c._pkt(False, c.sseq, c.cseq - 12, "A", b""))  # not past A
    pkts += [late, c.c(b"", "FA"), c.s(b"", "FA")]
    events, _ = run(pkts)
    assert [(e.size, e.frame) for e in events if isinstance(e, StreamGap)] == [(4, 7)]
    assert streams(events)[0]["data"][0] == b"A" * 10 + b"L" * 3 + b"C" * 5
    assert lost
    c = Conv()
    pkts = c.handshake()
    first, second = c.c(b"1" * 8), c.c(b"2" * 8)
    events, _ = run(pkts + [second, c.ack(False), first, c.c(b"", "FA"), c.s(b"", "FA")])
    assert not [e for e in events if isinstance(e, StreamGap)]
    assert streams(events)[0]["data"][0] == b"1" * 8 + b"2" * 8
