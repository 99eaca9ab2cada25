"""The capture loop's shortcuts give exactly the events of the general path.

A classic Ethernet pcap is read by a fused loop (records parsed in place, in-order TCP data
delivered straight from it); any other container goes through the reader's generator and
the same per-packet fast path; packets off the fast path go through the link-layer decoder.
The same packets in a pcap, in a pcapng, and with an 802.1Q tag (never on the fast path)
must give the same events and counters; the fused loop and the general one (the pcap
reader's record loop, `CaptureStream.fused_pcap` off) the same events, counters and
warnings on every classic Ethernet pcap of the recorded captures and the third-party
corpus (damaged ones included)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from tests.helpers.capbuild import Conv, Pcapng, collect, ether, pcap_bytes

from tlsprobe.capture import CaptureError, CaptureStats, read_packets
from tlsprobe.capture.pcap import PcapReader
from tlsprobe.capture.readers import open_reader
from tlsprobe.capture.stream import CaptureStream

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
RECORDED = sorted(p for p in CAPTURES.glob("*.pcap"))


def _as_pcapng(frames: list[tuple[float, bytes, int]]) -> bytes:
    ng = Pcapng().shb().idb(1, tsresol=6)
    for ts, data, orig in frames:
        ng.epb(0, round(ts * 1e6), data, orig)
    return ng.bytes()


def _vlan(frame: bytes) -> bytes:
    return frame[:12] + b"\x81\x00\x00\x07" + frame[12:]


def _normal(events: list, stream: object) -> tuple[list, dict]:
    stats = stream.stats.to_dict()  # type: ignore[attr-defined]
    stats.pop("file_format")
    stats.pop("link_types")
    # timestamps: pcap's seconds + microseconds and pcapng's microsecond count may differ
    # in the last bit of the float
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in e) for e in events], \
        stats


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_pcap_pcapng_and_tagged_frames_give_the_same_events(path: Path) -> None:
    frames = [(ts, data, orig) for _, ts, lt, data, orig in read_packets(str(path))
              if lt == 1]
    fused = _normal(*collect(str(path)))
    generic = _normal(*collect(io.BytesIO(_as_pcapng(frames))))
    decoded = _normal(*collect(io.BytesIO(pcap_bytes([(ts, _vlan(d), o + 4)
                                                      for ts, d, o in frames]))))
    assert fused[0] and fused == generic
    assert fused[0] == decoded[0]  # same events off the fast path (the stats differ only
    assert fused[1]["tcp"] == decoded[1]["tcp"]  # in what the decoder skipped: nothing)


def test_fast_path_with_holes_reordering_retransmissions_and_fins() -> None:
    c = Conv()
    hs = c.handshake()
    a, b, lost, d = c.c(b"A" * 30), c.c(b"B" * 30), c.c(b"?" * 5), c.c(b"D" * 30)
    e = c.s(b"reply")
    fin_c, fin_s = c.c(b"", "FA"), c.s(b"", "FA")
    pkts = [ether(p) for p in hs + [a, e, d, b, a, fin_c, fin_s, c.ack()]]
    tagged = [_vlan(p) for p in pkts]
    fused = _normal(*collect(io.BytesIO(pcap_bytes(pkts))))
    generic = _normal(*collect(io.BytesIO(_as_pcapng([(1000.0 + i, p, len(p))
                                                       for i, p in enumerate(pkts)]))))
    decoded = _normal(*collect(io.BytesIO(pcap_bytes(tagged))))
    assert fused == generic
    assert fused[0] == decoded[0] and fused[1]["tcp"] == decoded[1]["tcp"]
    events, _ = collect(io.BytesIO(pcap_bytes(pkts)))
    assert [type(e).__name__ for e in events] == [
        "StreamOpen", "StreamData", "StreamData", "StreamData", "StreamGap", "StreamData",
        "StreamClose"]  # D waits behind the lost bytes until both FINs close the connection
    assert [e.data[:1] for e in events if hasattr(e, "data")] == [b"A", b"r", b"B", b"D"]
    assert lost and fused[1]["tcp"]["retransmissions"] == 1 and fused[1]["tcp"]["gaps"] == 1


def _classic_ethernet_pcaps(root: Path) -> list[Path]:
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        try:
            reader, opened = open_reader(str(path), CaptureStats())
        except CaptureError:
            continue
        opened.close()
        if isinstance(reader, PcapReader) and reader.link_type == 1:
            found.append(path)
    return found


def test_fused_pcap_loop_gives_the_general_loops_events_on_the_corpus(
        captures_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _classic_ethernet_pcaps(captures_dir) + RECORDED
    assert len(paths) > 100, paths  # the corpus is there and read as such
    warned = 0
    for path in paths:
        fused_events, fused = collect(str(path))
        with monkeypatch.context() as m:
            m.setattr(CaptureStream, "fused_pcap", False)
            general_events, general = collect(str(path))
        assert fused_events == general_events, path
        assert fused.stats == general.stats, path  # counters, warnings and their offsets
        warned += bool(fused.stats.warnings)
    assert warned  # damaged files (zeros, truncated records) are among them
