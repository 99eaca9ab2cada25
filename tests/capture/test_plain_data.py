"""`CaptureStream.plain_data`: data events as plain tuples, ``(id, direction, data, ts,
frame)``, as the analyzer reads them (a StreamData costs four times as much to make): the
same events as StreamData's in every loop, turned round by a swap like them, and the key of
each one's connection to be had from `key_of` even when the tracker has forgotten it."""

from __future__ import annotations

import io

import pytest
from tests.helpers.capbuild import Conv, Pcapng, ether, pcap_bytes

from tlsprobe.capture import StreamData
from tlsprobe.capture.stream import CaptureStream, iter_stream_events


def _packets() -> list[bytes]:
    """Two connections: one with a hole, reordering, a retransmission and both FINs (its
    last data waits behind the hole until the close flushes it), one taken mid-stream."""
    c = Conv()
    hs = c.handshake()
    a, b, lost, d = c.c(b"A" * 30), c.c(b"B" * 30), c.c(b"?" * 5), c.c(b"D" * 30)
    e = c.s(b"reply")
    fin_c, fin_s = c.c(b"", "FA"), c.s(b"", "FA")
    m = Conv(client=("10.0.0.3", 40001), server=("10.0.0.4", 8443))
    assert lost
    return [ether(p) for p in hs + [a, e, m.s(b"server first"), d, b, a,
                                                  m.c(b"client"), fin_c, fin_s, c.ack()]]


def _capture(kind: str) -> bytes:
    pkts = _packets()
    if kind == "pcap" or kind == "generic":
        return pcap_bytes(pkts)
    ng = Pcapng().shb().idb(1)
    for i, p in enumerate(pkts):
        ng.epb(0, 1_000_000 * (1000 + i), p)
    return ng.bytes()


def _events(kind: str, plain: bool, swap_at: int | None = None, **kw: object) -> list:
    """Every event (a plain one with its `key_of` beside it); the connection of the
    `swap_at`-th data event is turned round when it comes."""
    out: list = []
    CaptureStream.fused_pcap = CaptureStream.fused_pcapng = kind != "generic"
    try:
        with iter_stream_events(io.BytesIO(_capture(kind)), **kw) as events:
            events.plain_data = plain
            n = 0
            for ev in events:
                if type(ev) is tuple:
                    out.append((ev, events.key_of(ev[0])))
                else:
                    out.append(ev)
                if type(ev) in (tuple, StreamData):
                    n += 1
                    if n == swap_at:
                        events.swap_direction(ev[0] if type(ev) is tuple else ev.conn)
    finally:
        CaptureStream.fused_pcap = CaptureStream.fused_pcapng = True
    return out


def _as_plain(ev: object) -> object:
    if type(ev) is StreamData:
        return (ev.conn.id, ev.direction, ev.data, ev.ts, ev.frame), ev.conn
    return ev


@pytest.mark.parametrize("kind", ["pcap", "pcapng", "generic"])
@pytest.mark.parametrize("swap_at", [None, 1, 2])
def test_plain_data_events_are_the_stream_data_events_by_position(kind: str,
                                                                   swap_at: int | None) -> None:
    normal = _events(kind, False, swap_at)
    plain = _events(kind, True, swap_at)
    assert any(type(ev) is StreamData for ev in normal)
    assert not any(type(ev) is StreamData for ev in plain)
    assert plain == [_as_plain(ev) for ev in normal]


@pytest.mark.parametrize("kind", ["pcap", "pcapng", "generic"])
def test_key_of_a_connection_forgotten_while_its_last_data_is_queued(kind: str) -> None:
    """With no closed connection remembered, the data a close flushes from behind a hole
    is handed out after the tracker forgot its connection: the key is its queued close's."""
    normal = _events(kind, False, max_closed=0)
    plain = _events(kind, True, max_closed=0)
    assert plain == [_as_plain(ev) for ev in normal]
    flushed = [i for i, ev in enumerate(plain) if type(ev) is tuple and ev[0][2][:1] == b"D"]
    assert flushed and type(plain[flushed[0] + 1]).__name__ == "StreamClose"  # flushed by it
