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
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.helpers.capbuild import Conv, Pcapng, collect, ether, pcap_bytes

from tlsprobe.capture import CaptureError, CaptureStats, StreamData, read_packets
from tlsprobe.capture.pcap import PcapReader
from tlsprobe.capture.pcapng import PcapngReader
from tlsprobe.capture.readers import open_reader
from tlsprobe.capture.stream import CaptureStream, iter_stream_events

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


def _captures_read_by(root: Path, accept: Callable[[object], bool]) -> list[Path]:
    """The capture files under `root` whose reader `accept` takes."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        try:
            reader, opened = open_reader(str(path), CaptureStats())
        except CaptureError:
            continue
        opened.close()
        if accept(reader):
            found.append(path)
    return found


def _classic_ethernet_pcaps(root: Path) -> list[Path]:
    return _captures_read_by(
        root, lambda reader: isinstance(reader, PcapReader) and reader.link_type == 1)


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


# -- the fused pcapng loop (ngloop.py) against the general one ----------------------------
class _Trickle(io.RawIOBase):
    """A source that gives at most `step` bytes a read (a pipe's short reads): every block
    boundary falls somewhere inside a refill."""

    def __init__(self, data: bytes, step: int = 97) -> None:
        self._data, self._pos, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1, /) -> bytes:
        n = self._step if n < 0 else min(n, self._step)
        chunk = self._data[self._pos:self._pos + n]
        self._pos += len(chunk)
        return chunk

    read = read1  # type: ignore[assignment]


def _ng_run(source: object, fused: bool, *, ignore: bool = False,
            stop: int | None = None) -> tuple[list, object, list]:
    """Events, stats and secrets of a capture read by the fused pcapng loop or the general
    one; `ignore`: each connection ignored after its first data (the counting path);
    `stop`: closed after that many events."""
    saved = CaptureStream.fused_pcapng
    CaptureStream.fused_pcapng = fused
    try:
        stream = iter_stream_events(source)  # type: ignore[arg-type]
    finally:
        CaptureStream.fused_pcapng = saved
    events: list = []
    with stream:
        for ev in stream:
            events.append((ev, stream.stats.packets))  # (when the count is made, too)
            if ignore and type(ev) is StreamData:
                stream.ignore(ev.conn)
            if stop is not None and len(events) >= stop:
                break
    return events, stream.stats, list(stream.secrets)


def _same_both_ways(data: bytes, **kw: object) -> tuple[list, object, list]:
    """The fused and general loops agree on these bytes, read whole and in short reads."""
    fused = _ng_run(io.BytesIO(data), True, **kw)  # type: ignore[arg-type]
    assert fused == _ng_run(io.BytesIO(data), False, **kw)  # type: ignore[arg-type]
    assert _ng_run(_Trickle(data), True, **kw) == fused  # type: ignore[arg-type]
    assert _ng_run(_Trickle(data), False, **kw) == fused  # type: ignore[arg-type]
    return fused


def _conversation(port: int) -> list[bytes]:
    """A TCP connection's IPv4 packets: handshake, in-order and out-of-order data, a
    retransmission, pure acks, both FINs."""
    c = Conv(client=("10.0.0.1", port))
    hs = c.handshake()
    a, b, d = c.c(b"A" * 40), c.c(b"B" * 30), c.c(b"D" * 20)
    return hs + [a, c.ack(False), c.s(b"reply" * 9), d, b, a, c.ack(), c.c(b"", "FA"),
                 c.s(b"", "FA"), c.ack()]


def _epbs(ng: Pcapng, ifid: int, packets: list[bytes], t0: int, step: int,
          frame: object = ether) -> Pcapng:
    for i, p in enumerate(packets):
        ng.epb(ifid, t0 + i * step, frame(p))  # type: ignore[operator]
    return ng


def _cases() -> dict[str, bytes]:
    one, two = _conversation(40001), _conversation(40002)
    trail = bytearray(_epbs(Pcapng().shb().idb(1), 0, one, 10**15, 999).bytes())
    later = trail.index(b"\x06\x00\x00\x00", 900)  # an EPB after some data
    blen = int.from_bytes(trail[later + 4:later + 8], "little")
    trail[later + blen - 4] ^= 4  # its trailing length disagrees
    whole = _epbs(Pcapng().shb().idb(1, tsresol=9), 0, one, 1_700_000_000 * 10**9, 12345).bytes()
    return {
        # (the first section has two interfaces, the second one: an EPB of interface 1
        # there is of no interface)
        "two byte orders": _epbs(_epbs(Pcapng().shb().idb(1).idb(1), 1, one, 10**15, 7)
                                 .shb(big_endian=True).idb(1, tsresol=9), 0, two,
                                 17 * 10**17, 1_000_003).epb(1, 0, ether(two[3])).bytes(),
        "tsresol and tsoffset": _epbs(_epbs(
            Pcapng().shb().idb(1).idb(1, tsresol=0x80 | 20, tsoffset=1_600_000_000), 1, one,
            3 << 40, 77), 0, two, 10**15 + 3, 5).bytes(),
        "secrets between packets": _epbs(_epbs(Pcapng().shb().idb(1), 0, one[:6], 10**15, 9)
                                         .dsb(0x544C534B, b"CLIENT_RANDOM 00 11\n"), 0,
                                         one[6:], 10**15 + 100, 9).bytes(),
        "truncated last block": whole[:-10],
        "truncated block header": whole + b"\x06\x00\x00\x00\x20",
        "bad trailing length": bytes(trail),
        "mixed link types": _epbs(_epbs(Pcapng().shb().idb(101).idb(1), 1, one, 10**15, 3),
                                  0, two, 10**15 + 1, 3, frame=lambda p: p).bytes(),
        # simple and obsolete packet blocks (data in both: their timestamps in events),
        # statistics with a drop count, an unknown block, a bad interface id, a runt;
        # the capture ends on an obsolete block with a connection still open
        "other blocks": _epbs(Pcapng().shb().idb(1).raw_block(0x99, b"?" * 8)
                              .spb(ether(one[0])).epb(0, 10**15, ether(one[1]))
                              .epb(0, 10**15 + 1, ether(one[2])).spb(ether(one[3]))
                              .pb(0, 10**15 + 2, ether(one[4]))
                              .raw_block(5, b"\x00" * 12 + b"\x05\x00\x08\x00" + b"\x03"
                                         + b"\x00" * 7 + b"\x00" * 4)
                              .epb(3, 10**15, ether(one[2])).epb(0, 10**15, b"\x00" * 40),
                              0, one[5:] + two[:5], 10**15 + 9, 2)
                              .pb(0, 10**15 + 99, ether(two[5])).bytes(),
        "packet longer than its block": whole + _bad_caplen(),
        "impossible block length": whole + b"\x06\x00\x00\x00\x21\x00\x00\x00" + b"\x00" * 29,
        "bad enhanced packet block": whole + b"\x06\x00\x00\x00\x1c\x00\x00\x00" + b"\x00" * 16
        + b"\x1c\x00\x00\x00",
        "bad section header": whole + Pcapng().shb().bytes()[:8] + b"\x00" * 4
        + Pcapng().shb().bytes()[12:],
    }


def _bad_caplen() -> bytes:
    """An EPB (little-endian section) whose captured length exceeds the block."""
    body = (0).to_bytes(4, "little") * 3 + (200).to_bytes(4, "little") * 2 + b"\x00" * 40
    n = len(body) + 12
    return (6).to_bytes(4, "little") + n.to_bytes(4, "little") + body + n.to_bytes(4, "little")


@pytest.mark.parametrize("name", list(_cases()))
def test_fused_pcapng_loop_gives_the_general_loops_events_on_built_files(name: str) -> None:
    data = _cases()[name]
    events, stats, secrets = _same_both_ways(data)
    assert events and stats.packets  # type: ignore[attr-defined]
    _same_both_ways(data, ignore=True)
    for stop in (1, 3, len(events) // 2):  # closed early: the same counts so far
        _same_both_ways(data, stop=stop)
    damaged = name.startswith(("truncated", "bad ", "packet", "impossible"))
    assert bool(stats.warnings) == damaged, stats.warnings  # type: ignore[attr-defined]
    if name == "secrets between packets":
        assert secrets and any(type(e).__name__ == "Secrets" for e, _ in events)
    if name in ("tsresol and tsoffset", "two byte orders"):
        assert len({e.ts for e, _ in events}) > 4  # both interfaces' or sections' times


def _pcapng_copy(path: Path) -> bytes:
    """A pcapng of a capture's packets: one interface per link type, nanosecond stamps."""
    ng, ifids = Pcapng().shb(), {}
    for _, ts, lt, data, orig in read_packets(str(path)):
        if lt not in ifids:
            ifids[lt] = len(ifids)
            ng.idb(lt, tsresol=9)
        ng.epb(ifids[lt], round(ts * 1e9), data, orig)
    return ng.bytes()


def test_fused_pcapng_loop_gives_the_general_loops_events_on_the_corpus(
        captures_dir: Path) -> None:
    files: list[tuple[str, bytes]] = [(p.name, _pcapng_copy(p)) for p in RECORDED]
    files += [(str(path), path.read_bytes()) for path in _captures_read_by(
        captures_dir, lambda reader: isinstance(reader, PcapngReader))]
    assert len(files) > 40 + len(RECORDED), len(files)
    events = 0
    for name, data in files:
        fused = _ng_run(io.BytesIO(data), True)
        assert fused == _ng_run(io.BytesIO(data), False), name  # events, stats, secrets
        ignoring = _ng_run(io.BytesIO(data), True, ignore=True)
        assert ignoring == _ng_run(io.BytesIO(data), False, ignore=True), name
        cut = data[:len(data) * 3 // 5]  # damaged: the file ends inside a block
        assert _ng_run(io.BytesIO(cut), True) == _ng_run(io.BytesIO(cut), False), name
        events += len(fused[0])
    assert events > 10000
