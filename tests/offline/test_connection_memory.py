"""Memory of open connections (issue 35): a capture of many connections that each sent
only a ClientHello keeps them all open to its end, so what one such connection holds is
what the capture costs (100,000 of them peaked at 409 MB before). Measured with
tracemalloc as the growth of the peak from fewer to more connections, so that fixed costs
(imports, memo tables, the file's buffer) do not count."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from tests.helpers.capbuild import Conv, ether, pcap_bytes
from tests.helpers.own_captures import chunks
from tlsprobe.model.capture import BriefReport
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis

#: bytes a ClientHello-only connection may hold while open, the capture layer's state
#: included, at the peak of tracemalloc (about 3,550 before issue 35, 2,750 after)
MAX_BYTES_PER_CONNECTION = 3100


def _client_hello() -> bytes:
    first = chunks("tls13_x25519.pcap")[0][1]
    return first[:5 + int.from_bytes(first[3:5], "big")]


def _hello_only(path: Path, n: int) -> Path:
    """`n` connections, each a SYN and a ClientHello (its own random), never closed."""
    hello = _client_hello()
    frames: list[tuple[float, bytes]] = []
    for i in range(n):
        conv = Conv((f"10.{64 + (i >> 16)}.{(i >> 8) & 255}.{i & 255}", 1024 + i % 60000),
                    ("192.0.2.7", 443))
        record = bytearray(hello)
        record[11:15] = i.to_bytes(4, "big")
        ts = 1000.0 + i * 1e-4  # (within the idle timeout: all open at the end)
        frames += [(ts, ether(conv.syn())), (ts + 1e-5, ether(conv.c(bytes(record))))]
    path.write_bytes(pcap_bytes(frames))
    return path


def _peak(path: Path, n: int) -> int:
    tracemalloc.start()
    try:
        analysis = CaptureAnalysis(str(path), AnalyzerOptions(brief=True))
        reports = [r for r, _ in analysis]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(reports) == n
    assert all(isinstance(r, BriefReport) and r.offer is not None for r in reports)
    return peak


def test_an_open_client_hello_only_connection_holds_little(tmp_path: Path) -> None:
    small, large = 500, 2500
    few = _peak(_hello_only(tmp_path / "few.pcap", small), small)
    many = _peak(_hello_only(tmp_path / "many.pcap", large), large)
    per = (many - few) / (large - small)
    assert per < MAX_BYTES_PER_CONNECTION, f"{per:.0f} bytes per open connection"
