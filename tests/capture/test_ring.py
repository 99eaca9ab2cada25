"""The `-w` writer of live captures (capture/ring.py): real handshake packets written through
it read back, in tlsprobe and in tshark, as the captures they came from; the ring turns at
its size and keeps its newest files; each file ends with the kernel's drop count in an
Interface Statistics Block; a write that cannot be done is one CaptureError line."""

from __future__ import annotations

import dataclasses
import os
import re
import struct
import time
from pathlib import Path

import pytest

import tlsprobe
from tests.helpers.capbuild import TSHARK, tshark_fields
from tests.schemas.validate import assert_valid
from tlsprobe.capture import CaptureError, read_packets
from tlsprobe.capture.ring import InterfaceInfo, RingSpec, RingWriter, ring_name

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
CASES = ["tls13_x25519.pcap", "tls12_rsa.pcap", "tls13_ipv6.pcap", "tls13_hrr.pcap"]


def _packets() -> list[tuple[float, bytes, int]]:
    """The packets of several real handshakes (Ethernet frames on lo), in time order."""
    out = []
    for name in CASES:
        for _frame, ts, link_type, data, orig in read_packets(CAPTURES / name):
            assert link_type == 1
            out.append((ts, data, orig))
    return out


def _facts(path: Path) -> list[dict[str, object]]:
    """What `tlsprobe pcap` reports of each connection, without where it was in the file."""
    with tlsprobe.read_capture(path) as reader:
        reports = [dataclasses.asdict(r) for r in reader]
    for r in reports:
        for key in ("file", "first_frame", "last_frame", "id"):
            r.pop(key, None)
    return reports


def _blocks(path: Path) -> list[tuple[int, bytes]]:
    """(type, body) of every pcapng block of a little-endian file."""
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        kind, length = struct.unpack_from("<II", data, pos)
        assert struct.unpack_from("<I", data, pos + length - 4)[0] == length
        out.append((kind, data[pos + 8:pos + length - 4]))
        pos += length
    assert pos == len(data)
    return out


def _isb_options(body: bytes) -> dict[int, int]:
    """An Interface Statistics Block's 64-bit options by code."""
    pos, out = 12, {}
    while pos + 4 <= len(body):
        code, length = struct.unpack_from("<HH", body, pos)
        if code == 0:
            break
        out[code] = struct.unpack_from("<Q", body, pos + 4)[0]
        pos += 4 + length + (-length & 3)
    return out


def test_one_file_reads_back_as_the_captures_it_came_from(tmp_path: Path) -> None:
    packets = _packets()
    path = tmp_path / "live.pcapng"
    with RingWriter(RingSpec.parse(str(path), None, None), [InterfaceInfo("lo", 1)]) as w:
        for ts, data, orig in packets:
            w.write(0, ts, data, orig)
        w.counts(0, received=len(packets) + 3, dropped=3)
    assert w.files == [str(path)] and w.packets == len(packets)
    expected = [fact for name in CASES for fact in _facts(CAPTURES / name)]
    assert _facts(path) == expected
    assert TSHARK is not None, "tshark is needed (CI installs it)"
    assert len(tshark_fields(path, None, "frame.number")) == len(packets)
    hellos = tshark_fields(path, "tls.handshake.type == 1", "tcp.stream")
    assert len(set(hellos)) == len(expected) == len(CASES)   # a ClientHello in each
    kinds = [kind for kind, _ in _blocks(path)]
    assert kinds[:2] == [0x0A0D0D0A, 1] and kinds[-1] == 5
    isb = _isb_options(_blocks(path)[-1][1])
    assert isb[4] == len(packets) + 3 and isb[5] == 3 and isb[8] == len(packets)


def test_the_ring_turns_at_its_size_and_keeps_the_newest_files(tmp_path: Path) -> None:
    packets = _packets()
    size = 4000
    spec = RingSpec.parse(str(tmp_path / "ring.pcapng"), size / 1e6, 3)
    w = RingWriter(spec, [InterfaceInfo("lo", 1)])
    for ts, data, orig in packets:
        w.write(0, ts, data, orig)
    w.close()
    kept = sorted(os.listdir(tmp_path))
    assert len(kept) == 3 and [str(tmp_path / k) for k in kept] == w.files
    numbers = [int(name.split("_")[1]) for name in kept]
    assert numbers[0] > 1 and numbers == list(range(numbers[0], numbers[0] + 3))
    assert all(re.fullmatch(r"ring_\d{5}_\d{14}\.pcapng", name) for name in kept)
    begun = time.strftime("%Y%m%d%H%M%S", time.localtime(1_800_000_000))
    assert ring_name("/x/ring.pcapng", 7, 1_800_000_000) == f"/x/ring_00007_{begun}.pcapng"
    total = 0
    for name in kept:
        path = tmp_path / name
        frames = len(tshark_fields(path, None, "frame.number"))
        assert frames >= 1
        # a file passes the size only when one packet alone does
        assert path.stat().st_size <= size or frames == 1
        total += frames
    # the newest files hold the last packets, in order
    last = [data for _, data, _ in packets[-total:]]
    assert [p[3] for name in kept for p in read_packets(tmp_path / name)] == last
    assert w.packets == len(packets)


def test_statistics_of_each_interface_at_each_file_end(tmp_path: Path) -> None:
    ts, data, orig = _packets()[0]
    spec = RingSpec.parse(str(tmp_path / "two.pcapng"), len(data) * 2.5 / 1e6 + 0.0005, None)
    w = RingWriter(spec, [InterfaceInfo("lo", 1), InterfaceInfo("any", 113)])
    w.write(0, ts, data, orig)
    w.counts(0, received=10, dropped=7)
    for i in range(6):
        w.write(i % 2, ts + i, data, orig)
    w.counts(1, received=4, dropped=0)
    w.close()
    assert len(w.files) >= 2
    for path in map(Path, w.files):
        blocks = _blocks(path)
        idbs = [body for kind, body in blocks if kind == 1]
        assert [struct.unpack_from("<H", b)[0] for b in idbs] == [1, 113]
        stats = [body for kind, body in blocks if kind == 5]
        assert [struct.unpack_from("<I", b)[0] for b in stats] == [0, 1]
        assert _isb_options(stats[0])[5] == 7     # the drops known when the file closed
    last = [_isb_options(b) for k, b in _blocks(Path(w.files[-1])) if k == 5]
    assert last[0][8] == 4 and last[1] == {2: last[1][2], 3: last[1][3], 4: 4, 5: 0, 8: 3}


@pytest.mark.parametrize(("size", "files", "message"), [
    (0.0, None, "--ring-size must be a number of MB above 0 and at most 1000000"),
    (-1.0, None, "--ring-size must be a number of MB above 0 and at most 1000000"),
    (float("inf"), None, "--ring-size must be a number of MB above 0 and at most 1000000"),
    (float("nan"), None, "--ring-size must be a number of MB above 0 and at most 1000000"),
    (None, 3, "--ring-files needs --ring-size"),
    (1.0, 0, "--ring-files must be between 1"),
])
def test_bad_ring_options_say_what_is_wrong(tmp_path: Path, size: float | None,
                                            files: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RingSpec.parse(str(tmp_path / "x.pcapng"), size, files)
    with pytest.raises(ValueError, match="is a directory"):
        RingSpec.parse(str(tmp_path), None, None)


def test_a_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    where = tmp_path / "missing" / "x.pcapng"
    with pytest.raises(CaptureError, match=r"^-w .*x\.pcapng: no such file or directory$"):
        RingWriter(RingSpec.parse(str(where), None, None), [InterfaceInfo("lo", 1)])
    full = Path("/dev/full")
    if not full.exists():
        pytest.fail("/dev/full is needed to test a full disk")
    w = RingWriter(RingSpec(str(full)), [InterfaceInfo("lo", 1)])
    ts, data, orig = _packets()[0]
    with pytest.raises(CaptureError, match=r"^-w /dev/full: no space left on device$"):
        for i in range(1000):   # the buffer fills, or the first flush fails
            w.write(0, ts + i, data, orig)
        w.close()
    w.close()    # once failed, closing again says nothing more


@pytest.mark.parametrize("dropped", [0, 3])
def test_reading_a_file_back_says_the_drops_it_records(run_cli, tmp_path: Path,
                                                       dropped: int) -> None:
    """What the kernel dropped while a -w file (or dumpcap's) was written is in its
    statistics blocks: `tlsprobe pcap` of the file says it (a note, exit 7), never
    silently; with no drop, nothing is said."""
    import json
    packets = _packets()
    path = tmp_path / "seen.pcapng"
    with RingWriter(RingSpec(str(path)), [InterfaceInfo("lo", 1)]) as w:
        for ts, data, orig in packets:
            w.write(0, ts, data, orig)
        w.counts(0, received=len(packets) + dropped, dropped=dropped)
    code, out, err = run_cli("pcap", str(path), "--jsonl", "--no-progress")
    capture = json.loads(out.splitlines()[-1])
    assert capture["tls_connections"] == len(CASES)
    assert_valid("pcap-connection", capture)
    if dropped:
        assert code == 7
        assert capture["capture"]["recorded_dropped"] == dropped
        assert err.splitlines() == [
            f"tlsprobe: note: {path}: {dropped} packets dropped while the capture was taken, "
            "as its interface statistics record (not in the file; connections with gaps "
            "may have lost handshake messages there)"]
    else:
        assert code == 0 and err == "" and "recorded_dropped" not in capture["capture"]
