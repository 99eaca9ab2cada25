"""Flat memory in the number of flows, linear time in the number of segments.

A flood of SYN-only flows keeps the table of open connections bounded (evicted by capture
time when idle, and past a quarter of the limit when they carried no payload), a real
handshake spread over such a flood is still reported exactly as without it, and shuffled
one-byte segments reassemble to the in-order bytes in time that grows about linearly."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from random import Random
from typing import Any

import pytest

from tests.helpers.capbuild import Conv, ether, pcap_bytes, streams
from hypothesis import given, settings
from hypothesis import strategies as st

from tlsprobe.capture import StreamData, iter_stream_events, read_packets
from tlsprobe.offline.analyzer import CaptureAnalysis

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "captures" / "tls12_x25519.pcap"
_SYN_HEAD = bytes.fromhex("020000000002020000000001" "0800")


def syn_frame(i: int) -> bytes:
    """An Ethernet/IPv4 SYN of flow `i` (its own client address and port), no checksums
    (the reader does not check them): cheap enough for tens of thousands per test."""
    src = bytes((10, 64 + (i >> 16) % 64, (i >> 8) & 255, i & 255))
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, src, b"\xc0\x00\x02\x01")
    tcp = struct.pack("!HHIIBBHHH", 1024 + i % 60000, 443, i * 7919 & 0xFFFFFFFF, 0, 0x50,
                      0x02, 65535, 0, 0)
    return _SYN_HEAD + ip + tcp


def _handshake_fields(report: dict[str, Any]) -> dict[str, Any]:
    keep = ("client", "server", "sni", "offer", "client_hellos", "client_random",
            "client_extensions", "server_extensions", "version", "cipher", "key_exchange",
            "signature_scheme", "alpn", "certificates", "alerts", "messages", "fingerprints",
            "client_bytes", "server_bytes", "encrypted", "handshake_complete", "problems",
            "midstream", "gap_bytes")
    return {k: report[k] for k in keep}


def _tls_reports(path: str) -> tuple[list[dict[str, Any]], Any]:
    analysis = CaptureAnalysis(path)
    reports = [r.to_dict() for r, _ in analysis]
    return reports, analysis


# -- many flows ----------------------------------------------------------------------------
def test_syn_flood_keeps_the_connection_table_bounded() -> None:
    """20,000 SYN-only flows in one second of capture time, limit 1024: never more than
    the limit open, every one evicted or closed at the end, and counted by reason."""
    frames = [(1000.0 + i / 20000, syn_frame(i)) for i in range(20000)]
    stream = iter_stream_events(io.BytesIO(pcap_bytes(frames)), max_connections=1024)
    most = 0
    opened = closed = 0
    for ev in stream:
        most = max(most, len(stream._tcp.open))
        kind = type(ev).__name__
        opened += kind == "StreamOpen"
        closed += kind == "StreamClose"
    assert opened == closed == 20000
    assert 1024 - 128 <= most <= 1024
    tcp = stream.stats.to_dict()["tcp"]
    assert tcp["evicted"] == tcp["evicted_by"]["limit"] > 18000
    assert tcp["evicted_by"]["limit_in_progress"] == 0
    assert len(stream._tcp.flows) == 0  # released on close


def test_idle_flows_are_evicted_by_capture_time() -> None:
    """SYN-only flows one per second of capture time: those idle for 60 s go, whatever the
    limit, so about 60 stay open."""
    frames = [(1000.0 + i, syn_frame(i)) for i in range(1000)]
    stream = iter_stream_events(io.BytesIO(pcap_bytes(frames)))
    most = 0
    for _ in stream:
        most = max(most, len(stream._tcp.open))
    assert 60 <= most <= 60 + 60 // 4 + 2
    assert stream.stats.tcp_evicted_idle > 900
    assert stream.stats.tcp_evicted_limit == 0


_PEAK_RSS = """
def peak_rss_kib():
    # VmHWM: the peak of this program; ru_maxrss would also count the parent's pages
    # that the child had before exec
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""


def test_syn_flood_memory_is_flat_in_a_child_process(tmp_path: Path) -> None:
    """The whole analyzer over 20,000 and 100,000 SYN-only flows (default limits), each
    in a child process: the peak RSS of the larger is close to that of the smaller
    (keeping every flow would add some 100 MB)."""
    peaks = []
    for n in (20000, 100000):
        path = tmp_path / f"syn{n}.pcap"
        path.write_bytes(pcap_bytes((1000.0 + i / 10000, syn_frame(i)) for i in range(n)))
        code = _PEAK_RSS + textwrap.dedent(f"""
            import json
            from tlsprobe.offline.analyzer import CaptureAnalysis
            analysis = CaptureAnalysis({str(path)!r})
            rows = sum(1 for _ in analysis)
            print(json.dumps([rows, peak_rss_kib(), analysis.summary.connections,
                              analysis.summary.notes]))
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             check=True).stdout
        rows, peak, connections, notes = json.loads(out)
        assert rows == 0 and connections == n
        peaks.append(peak)
    assert peaks[1] < peaks[0] + 20 * 1024, peaks  # KiB
    assert "over the connection limit with no payload" in notes[0]


def _interleaved(tmp_path: Path, per_packet: int, step: float, first: int = 0) -> str:
    """The seed handshake with `per_packet` SYN-only flows after each of its packets
    (`first` after its first), `step` seconds of capture time apart."""
    frames: list[tuple[float, bytes]] = []
    t, flow = 1000.0, 0
    for k, (_, _, _, data, _) in enumerate(read_packets(str(SEED))):
        frames.append((t, data))
        for _ in range(first if k == 0 and first else per_packet):
            t += step
            frames.append((t, syn_frame(flow)))
            flow += 1
    path = tmp_path / "interleaved.pcap"
    path.write_bytes(pcap_bytes(frames))
    return str(path)


def test_handshake_among_idle_flows_is_reported_fully(tmp_path: Path) -> None:
    """1,500 SYN flows (30 s of capture time) after each packet of a real handshake: the
    flood is evicted as idle, the handshake (idle 30 s at a time) is not."""
    want, _ = _tls_reports(str(SEED))
    got, analysis = _tls_reports(_interleaved(tmp_path, 1500, 0.02))
    assert [_handshake_fields(r) for r in got] == [_handshake_fields(r) for r in want]
    assert got[0]["close"] == want[0]["close"]
    stats = analysis.stream.stats
    assert stats.tcp_evicted_idle > 20000 and stats.tcp_evicted_in_progress == 0
    assert any("evicted before their end" in n for n in analysis.summary.notes)


def test_handshake_among_a_dense_flood_is_reported_fully(tmp_path: Path) -> None:
    """20,000 SYN flows within two seconds after the handshake's SYN, 500 after each of
    its other packets: the limit evicts flows without payload (the handshake's own SYN
    among them, before its data) and never one with it; the handshake is read whole."""
    want, _ = _tls_reports(str(SEED))
    got, analysis = _tls_reports(_interleaved(tmp_path, 500, 0.0001, first=20000))
    assert [_handshake_fields(r) for r in got] == [_handshake_fields(r) for r in want]
    stats = analysis.stream.stats
    assert stats.tcp_evicted_limit > 8000 and stats.tcp_evicted_in_progress == 0


# -- shuffled segments ---------------------------------------------------------------------
def _shuffled_capture(n: int, seed: int) -> bytes:
    c = Conv()
    hs = c.handshake()
    payload = bytes(Random(seed).randrange(256) for _ in range(n))
    segs = [c.c(payload[i:i + 1]) for i in range(n)]
    Random(seed + 1).shuffle(segs)
    return pcap_bytes([ether(p) for p in hs + segs])


def _cpu_to_reassemble(n: int) -> float:
    data = _shuffled_capture(n, n)
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        got = b"".join(e.data for e in iter_stream_events(io.BytesIO(data))
                       if isinstance(e, StreamData))
        best = min(best, time.process_time() - t0)
        assert len(got) == n
    return best


def test_shuffled_one_byte_segments_cost_about_linear_time() -> None:
    """Four times the shuffled segments take well under the sixteen times a quadratic
    insertion takes (n log n: about 4.7)."""
    small, large = _cpu_to_reassemble(2000), _cpu_to_reassemble(8000)
    assert large < 8 * small + 0.05


@settings(max_examples=40, deadline=None)
@given(data=st.binary(min_size=1, max_size=400), order=st.randoms(use_true_random=False),
       sizes=st.lists(st.integers(1, 3), min_size=1, max_size=400),
       dups=st.lists(st.tuples(st.integers(0, 399), st.integers(1, 6)), max_size=40))
def test_shuffled_small_segments_reassemble_exactly(data: bytes, order, sizes: list[int],
                                                    dups: list[tuple[int, int]]) -> None:
    """Segments of one to three bytes (and overlapping retransmissions of other sizes) in
    any order give the events' bytes of the same segments in order."""
    c = Conv(cisn=0xFFFFFF00)  # the stream wraps around 2**32
    hs = c.handshake()
    base = c.cseq
    cuts, pos = [], 0
    for size in sizes:
        if pos >= len(data):
            break
        cuts.append((pos, min(len(data), pos + size)))
        pos += size
    if pos < len(data):
        cuts.append((pos, len(data)))
    segs = [c.c(data[a:b], seq=(base + a) & 0xFFFFFFFF) for a, b in cuts]
    extra = [c.c(data[a % len(data):a % len(data) + k], seq=(base + a % len(data)) & 0xFFFFFFFF)
             for a, k in dups]
    in_order = streams(_events(hs + segs))[0]
    shuffled = segs + extra
    order.shuffle(shuffled)
    got = streams(_events(hs + shuffled))[0]
    assert in_order["data"][0] == data
    assert got["data"] == in_order["data"]
    assert got["gaps"] == in_order["gaps"] == [[], []]


def _events(packets: list[bytes]) -> list[Any]:
    return list(iter_stream_events(io.BytesIO(pcap_bytes([ether(p) for p in packets]))))


# -- state released ------------------------------------------------------------------------
def test_state_is_released_when_iteration_stops_early(tmp_path: Path) -> None:
    """A caller that stops after the first report: the connection table and the other
    connection's partial handshake message (counted against the analysis's budget)
    are released, not left for the rest of the process."""
    analysis = CaptureAnalysis(_two_connections(tmp_path))
    for report, _ in analysis:
        assert report.client_port == 42000
        assert analysis.caches.held == 64  # a's partial message is held
        break
    assert analysis.caches.held == 0
    assert not analysis.stream._tcp.flows and not analysis.stream._tcp.open


def _two_connections(tmp_path: Path) -> str:
    """Connection a (port 41000) stays open holding 64 bytes of a partial handshake
    message; connection b (port 42000) ends first, so it is the first report."""
    hello = b"".join(e.data for e in iter_stream_events(str(SEED))
                     if isinstance(e, StreamData) and e.direction == 0)[:5 + 0x200]
    record_len = int.from_bytes(hello[3:5], "big")
    hello = hello[:5 + record_len]
    a, b = Conv(client=("10.0.0.1", 41000)), Conv(client=("10.0.0.1", 42000))
    partial = b"\x16\x03\x03\x00\x40" + b"\x0b\x00\x20\x00" + b"\x00" * 60  # 8 KiB message
    packets = (a.handshake() + [a.c(hello), a.c(partial)] + b.handshake()
               + [b.c(hello), b.c(b"", "FA"), b.s(b"", "FA"), b.ack()])
    path = tmp_path / "two.pcap"
    path.write_bytes(pcap_bytes([ether(p) for p in packets]))
    return str(path)


def test_state_is_released_when_a_context_manager_ends(tmp_path: Path) -> None:
    """An iterator still alive (a consumer holding it, a --limit that stopped reading, an
    exception): leaving the `with` block releases the connections, their partial
    messages and the capture, and completes the summary."""
    path = _two_connections(tmp_path)
    with CaptureAnalysis(path) as analysis:
        it = iter(analysis)
        report, _ = next(it)
        assert report.client_port == 42000 and analysis.caches.held == 64
    assert analysis.caches.held == 0
    assert not analysis.stream._tcp.flows and not analysis.stream._tcp.open
    assert analysis.summary is not None and analysis.summary.packets > 0
    with pytest.raises(RuntimeError, match="consumer failed"):
        with CaptureAnalysis(path) as failing:
            for _report in failing:
                raise RuntimeError("consumer failed")
    assert failing.caches.held == 0 and failing.summary is not None
    assert it is not None  # the first iterator was alive all along


def test_analyses_share_no_state(tmp_path: Path) -> None:
    """Two analyses in one process, one stopped half-way and never closed: the other's
    memory budget and memo start empty and count only its own connections."""
    path = _two_connections(tmp_path)
    first = CaptureAnalysis(path)
    it = iter(first)
    next(it)
    assert first.caches.held == 64
    second = CaptureAnalysis(path)
    assert second.caches.held == 0 and second.caches.hellos.count() == 0
    for report, _ in second:
        assert report.client_port == 42000
        assert second.caches.held == 64  # its own partial message only, not first's too
        break
    assert second.caches.held == 0 and first.caches.held == 64
    first.close()
    assert first.caches.held == 0
