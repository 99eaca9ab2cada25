"""pcap / pcapng / gzip / stdin input, damaged files and the one CaptureError."""

from __future__ import annotations

import gzip
import io
import os
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest
from tests.helpers.capbuild import Conv, Pcapng, collect, ether, pcap_bytes, sll, streams
from hypothesis import given, settings
from hypothesis import strategies as st

from tlsprobe.capture import (
    SECRETS_TLS_KEYLOG,
    CaptureError,
    Secrets,
    StreamData,
    iter_stream_events,
    read_packets,
)

KEYLOG = (b"CLIENT_HANDSHAKE_TRAFFIC_SECRET " + b"11" * 32 + b" " + b"22" * 32 + b"\n"
          b"SERVER_HANDSHAKE_TRAFFIC_SECRET " + b"11" * 32 + b" " + b"33" * 32 + b"\n")


def conversation(client_port: int = 40000) -> tuple[list[bytes], bytes, bytes]:
    c = Conv(client=("10.0.0.1", client_port))
    pkts = c.handshake() + [c.c(b"client-hello"), c.s(b"server-hello"), c.c(b"fin-data")]
    return pkts, b"client-hellofin-data", b"server-hello"


def data_of(source: object, **kw: object) -> list[bytes]:
    events, _ = collect(source, **kw)
    return streams(events)[0]["data"]


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nanos", [False, True])
def test_pcap_byte_orders_and_time_resolution(big_endian: bool, nanos: bool) -> None:
    pkts, c2s, s2c = conversation()
    frames = [(1700000000.123456 + i, ether(p)) for i, p in enumerate(pkts)]
    raw = pcap_bytes(frames, big_endian=big_endian, nanos=nanos)
    events, stream = collect(io.BytesIO(raw))
    assert streams(events)[0]["data"] == [c2s, s2c]
    first = next(e for e in events if isinstance(e, StreamData))
    assert first.frame == 4 and abs(first.ts - 1700000003.123456) < 1e-6
    assert stream.stats.file_format == "pcap" and stream.stats.link_types == {1: 6}


def test_modified_pcap_record_header() -> None:
    pkts, c2s, s2c = conversation()
    raw = pcap_bytes([ether(p) for p in pkts], modified=True)
    assert data_of(io.BytesIO(raw)) == [c2s, s2c]


def test_pcapng_two_interfaces_link_types_resolutions_and_dsb() -> None:
    pkts, c2s, s2c = conversation()
    ng = Pcapng().shb().idb(1).idb(113, tsresol=9, tsoffset=100).dsb(SECRETS_TLS_KEYLOG, KEYLOG)
    ng.raw_block(0x0BAD, b"custom-block-to-skip")  # unknown type: skipped by length
    for i, p in enumerate(pkts):
        if i % 2:
            ng.epb(1, (1_700_000_000 + i) * 10**9 + 500, sll(p))
        else:
            ng.epb(0, (1_700_000_000 + i) * 10**6 + 250, ether(p))
    events, stream = collect(io.BytesIO(ng.bytes()))
    assert isinstance(events[0], Secrets) and events[0].data == KEYLOG
    assert stream.secrets[0].secrets_type == SECRETS_TLS_KEYLOG
    assert stream.tls_keylog() == KEYLOG
    assert stream.stats.secrets_blocks == 1
    assert streams(events)[0]["data"] == [c2s, s2c]
    data = [e for e in events if isinstance(e, StreamData)]
    assert abs(data[0].ts - (1_700_000_003.0000005 + 100)) < 1e-5  # nanosecond interface + offset
    assert abs(data[1].ts - 1_700_000_004.00025) < 1e-5
    assert stream.stats.link_types == {1: 3, 113: 3}
    assert stream.stats.file_format == "pcapng" and not stream.stats.warnings


def test_pcapng_sections_of_both_byte_orders_spb_and_obsolete_pb() -> None:
    pkts, c2s, s2c = conversation()
    ng = Pcapng().shb().idb(1, tsresol=0x80 | 20)  # 2^-20 s units
    ng.epb(0, 3 << 20, ether(pkts[0])).spb(ether(pkts[1]))
    ng.shb(big_endian=True).idb(101, tsresol=0x80 | 20).idb(1)  # new section: interface ids start again
    ng.pb(1, 7 << 20, ether(pkts[2])).epb(0, 8 << 20, pkts[3]).epb(0, 9 << 20, pkts[4])
    ng.epb(1, 10 << 20, ether(pkts[5]))
    events, stream = collect(io.BytesIO(ng.bytes()))
    assert streams(events)[0]["data"] == [c2s, s2c]
    assert [e.frame for e in events if isinstance(e, StreamData)] == [4, 5, 6]
    assert next(e for e in events if isinstance(e, StreamData)).ts == 8.0
    assert stream.stats.link_types == {1: 4, 101: 2}


def test_pcapng_unknown_interface_id_is_skipped_and_counted() -> None:
    pkts, _, _ = conversation()
    ng = Pcapng().shb().idb(1).epb(3, 0, ether(pkts[0]))
    events, stream = collect(io.BytesIO(ng.bytes()))
    assert events == [] and stream.stats.skipped == {"bad_interface_id": 1}
    assert stream.stats.packets == 1


def test_gzip_detected_by_magic_including_multiple_members(tmp_path: Path) -> None:
    pkts, c2s, s2c = conversation()
    raw = pcap_bytes([ether(p) for p in pkts])
    path = tmp_path / "capture.bin"  # no .gz suffix on purpose
    path.write_bytes(gzip.compress(raw[:100]) + gzip.compress(raw[100:]))
    events, stream = collect(str(path))
    assert streams(events)[0]["data"] == [c2s, s2c]
    assert stream.stats.file_format == "pcap (gzip)" and not stream.stats.warnings


def test_truncated_gzip_reads_what_is_there_and_warns(tmp_path: Path) -> None:
    pkts, c2s, _ = conversation()
    raw = pcap_bytes([ether(p) for p in pkts])
    z = gzip.compress(raw)
    events, stream = collect(io.BytesIO(z[: len(z) - 40]))
    assert stream.stats.warnings
    assert any("gzip" in w.message for w in stream.stats.warnings)
    got = streams(events)[0]["data"][0] if events else b""
    assert c2s.startswith(got)


@pytest.mark.parametrize("name", ["tls13_x25519.pcap", "tls13_x25519_dsb.pcapng"])
@pytest.mark.parametrize("reader", ["events", "packets"])
def test_a_gzip_stream_cut_short_names_where_the_reading_ended(name: str, reader: str) -> None:
    """A gzip-compressed capture cut in the middle of a record: the gzip warning names the
    offset where the reading ended, the start of the record it cut (as the truncated-record
    warning does). It named twice that offset, past the end of the data (the reader's
    position in the buffer before the refill that moved it)."""
    from tlsprobe.capture.events import CaptureStats
    raw = (Path(__file__).resolve().parents[2] / "captures" / name).read_bytes()
    z = gzip.compress(raw, mtime=0)
    for cut in (len(z) // 5, len(z) // 2):
        available = len(zlib.decompressobj(31).decompress(z[:cut]))
        stats = CaptureStats()
        if reader == "events":
            stats = collect(io.BytesIO(z[:cut]))[1].stats   # type: ignore[attr-defined]
        else:
            list(read_packets(io.BytesIO(z[:cut]), stats))
        offsets = {w.message.split(":")[0]: w.offset for w in stats.warnings}
        record = next(off for msg, off in offsets.items() if msg.startswith("truncated"))
        assert offsets["gzip stream truncated"] == record <= available, stats.warnings


def test_damaged_gzip_keeps_everything_decompressed_before_the_damage(tmp_path: Path) -> None:
    """zlib raises at the damage and the output of that call is lost: up to a whole
    decompression chunk (256 KiB) of intact packets before it, all of a small file. A file
    whose data are whole but whose CRC is wrong gives every packet, and a byte changed in
    the middle of the deflate data gives every packet before it, said as gzip damage (not
    as a pcap record cut short)."""
    c = Conv(client=("10.0.0.1", 40000))
    payloads = [os.urandom(200) for _ in range(300)]   # incompressible: damage lands mid-way
    pkts = c.handshake() + [c.c(data) for data in payloads]
    z = gzip.compress(pcap_bytes([ether(p) for p in pkts]))
    bad_crc = z[:-8] + bytes(b ^ 0xFF for b in z[-8:-4]) + z[-4:]
    events, stream = collect(io.BytesIO(bad_crc))
    assert streams(events)[0]["data"][0] == b"".join(payloads)
    assert [w.message for w in stream.stats.warnings] == [
        "gzip data damaged (Error -3 while decompressing data: incorrect data check)"]
    stored = bytearray(gzip.compress(pcap_bytes([ether(p) for p in pkts]), compresslevel=0))
    second = 15 + int.from_bytes(stored[11:13], "little")   # stored blocks: a LEN, NLEN header
    stored[second + 3] ^= 0xFF       # the second block's NLEN no longer matches its LEN
    events, stream = collect(io.BytesIO(bytes(stored)))
    got = streams(events)[0]["data"][0] if events else b""
    assert b"".join(payloads).startswith(got) and len(got) > (second - 15) // 2   # 1st block
    assert stream.stats.warnings[-1].message == \
        "gzip data damaged (Error -3 while decompressing data: invalid stored block lengths)"
    path = tmp_path / "bad_crc.pcap.gz"
    path.write_bytes(bad_crc)
    run = subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", str(path), "--no-progress",
                          "--stats"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 7 and "truncated" not in run.stderr, run.stderr
    assert len(run.stderr.splitlines()) == 1 and "gzip data damaged" in run.stderr


def test_interface_options_running_past_their_block_are_damage(tmp_path: Path) -> None:
    """An Interface Description Block option (if_tsresol here) whose length runs past the
    block: tshark calls the file damaged; its timestamp resolution is lost, so the times
    read may be wrong, which is said (a warning, exit 7) while every packet is still read."""
    pkts, c2s, s2c = conversation()
    ng = Pcapng().shb().raw_block(1, struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 9, 60000)
                                  + b"\x09\x00\x00\x00")
    for i, p in enumerate(pkts):
        ng.epb(0, 1_700_000_000_000_000_000 + i, ether(p))
    events, stream = collect(io.BytesIO(ng.bytes()))
    assert streams(events)[0]["data"] == [c2s, s2c]
    assert [w.message for w in stream.stats.warnings] == [
        "Interface Description Block: option 9 of length 60000 runs past the block (the "
        "interface's timestamp resolution and offset may be lost: times may be wrong)"]


class PipeLike(io.RawIOBase):
    """Non-seekable stream that returns at most 7 bytes per read (like a slow pipe)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        n = min(len(b), 7, len(self._data))
        b[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


@pytest.mark.parametrize("compress", [False, True])
def test_non_seekable_stream_with_short_reads(compress: bool) -> None:
    pkts, c2s, s2c = conversation()
    raw = pcap_bytes([ether(p) for p in pkts])
    src = PipeLike(gzip.compress(raw) if compress else raw)
    assert data_of(src) == [c2s, s2c]


def test_real_os_pipe() -> None:
    pkts, c2s, s2c = conversation()
    raw = Pcapng().shb().idb(1)
    for i, p in enumerate(pkts):
        raw.epb(0, i, ether(p))
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, raw.bytes()), os.close(w)))
    writer.start()
    with os.fdopen(r, "rb", buffering=0) as f:
        assert data_of(f) == [c2s, s2c]
    writer.join()


def test_dash_reads_stdin(tmp_path: Path) -> None:
    pkts, c2s, _ = conversation()
    path = tmp_path / "in.pcap"
    path.write_bytes(pcap_bytes([ether(p) for p in pkts]))
    code = ("from tlsprobe.capture import iter_stream_events, StreamData\n"
            "print(b''.join(e.data for e in iter_stream_events('-') "
            "if isinstance(e, StreamData) and e.direction == 0).decode())")
    with open(path, "rb") as f:
        out = subprocess.run([sys.executable, "-c", code], stdin=f, capture_output=True,
                             cwd=Path(__file__).resolve().parents[2], timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().strip() == c2s.decode()


@pytest.mark.parametrize("content,expected", [
    (b"", "empty file"), (b"RTSS\x00\x02", "Network Monitor 1.x"),
    (b"hello world, not a capture", "starts with 68656c6c"),
    (gzip.compress(b"plain text", mtime=0), "gzip-compressed data, not a pcap"),
    (b"GMBU\x00\x01" + b"\x00" * 70, "Network Monitor 1.0 captures are not supported"),
])
def test_unreadable_input_raises_one_line_capture_error(content: bytes, expected: str) -> None:
    with pytest.raises(CaptureError) as exc:
        iter_stream_events(io.BytesIO(content))
    msg = str(exc.value)
    assert expected in msg and "\n" not in msg
    assert exc.value.exit_code == 2


def test_missing_file_raises_capture_error(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match="cannot open .*nope.pcap"):
        iter_stream_events(str(tmp_path / "nope.pcap"))


def _reference(raw: bytes) -> list:
    events, stream = collect(io.BytesIO(raw))
    assert not stream.stats.warnings
    return events


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_truncated_at_every_offset_never_raises(kind: str) -> None:
    pkts, _, _ = conversation()
    if kind == "pcap":
        raw = pcap_bytes([ether(p) for p in pkts])
    else:
        ng = Pcapng().shb().idb(1).dsb(SECRETS_TLS_KEYLOG, KEYLOG)
        for i, p in enumerate(pkts):
            ng.epb(0, i, ether(p))
        raw = ng.bytes()
    full = streams(_reference(raw))[0]["data"]
    boundaries = {len(raw)}
    for cut in range(4, len(raw)):
        events, stream = collect(io.BytesIO(raw[:cut]))
        st_ = streams(events)
        got = st_[0]["data"] if st_ else [b"", b""]
        assert full[0].startswith(got[0]) and full[1].startswith(got[1])
        if not stream.stats.warnings:
            boundaries.add(cut)
        else:
            assert "truncated" in stream.stats.warnings[0].message
            assert 0 <= stream.stats.warnings[0].offset <= cut
    # only cuts that fall exactly between records (or blocks) read without a warning
    assert len(boundaries) == len(pkts) + (1 if kind == "pcap" else 3)


def test_garbage_lengths_stop_with_warning_and_keep_earlier_events() -> None:
    pkts, _, _ = conversation()
    good = pcap_bytes([ether(p) for p in pkts[:4]])
    bad = good + b"\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\x7f\xff\xff\xff\x7f" + b"junk"
    events, stream = collect(io.BytesIO(bad))
    assert streams(events)[0]["data"][0] == b"client-hello"
    w = stream.stats.warnings
    assert len(w) == 1 and "impossible pcap record length" in w[0].message
    assert w[0].offset == len(good)

    ng = Pcapng().shb().idb(1).epb(0, 1, ether(pkts[0]))
    raw = ng.bytes() + b"\x06\x00\x00\x00\x0d\x00\x00\x00" + b"\x00" * 20
    _, stream = collect(io.BytesIO(raw))
    assert "impossible length 13" in stream.stats.warnings[0].message
    # a block whose trailing length disagrees
    blk = bytearray(Pcapng().shb().idb(1).epb(0, 1, ether(pkts[0])).bytes())
    blk[-1] ^= 0x01
    _, stream = collect(io.BytesIO(bytes(blk)))
    assert "trailing length" in stream.stats.warnings[0].message


def test_read_packets_gives_raw_frames() -> None:
    pkts, _, _ = conversation()
    raw = pcap_bytes([ether(p) for p in pkts])
    got = list(read_packets(io.BytesIO(raw)))
    assert [g[0] for g in got] == list(range(1, 7))
    assert got[3][3] == ether(pkts[3]) and got[3][2] == 1


def test_files_written_by_scapy_are_read(tmp_path: Path) -> None:
    pytest.importorskip("scapy")
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.utils import PcapNgWriter, wrpcap
    mac = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}  # no ARP lookups
    p = (Ether(**mac) / IP(src="192.0.2.1", dst="192.0.2.2")
         / TCP(sport=1234, dport=443, flags="PA", seq=10) / b"payload-bytes")
    q = (Ether(**mac) / IPv6(src="2001:db8::1", dst="2001:db8::2")
         / TCP(sport=443, dport=1234, flags="PA", seq=99) / b"answer")
    wrpcap(str(tmp_path / "s.pcap"), [p, q])
    with PcapNgWriter(str(tmp_path / "s.pcapng")) as w:
        w.write(p)
        w.write(q)
    for name in ("s.pcap", "s.pcapng"):
        events, _ = collect(str(tmp_path / name))
        keys = {e.conn.client: e for e in events if isinstance(e, StreamData)}
        assert keys["192.0.2.1:1234"].data == b"payload-bytes"
        assert keys["2001:db8::2:1234"].data == b"answer"


@pytest.mark.parametrize("minor", [0, 1, 3])
def test_network_monitor_files(minor: int) -> None:
    from tests.helpers.capbuild import netmon_bytes
    pkts, c2s, s2c = conversation()
    frames: list = [ether(p) for p in pkts]
    if minor:
        frames[4] = (0xE000 + 113, sll(pkts[4]))  # per-frame network type: pcap link type 113
    events, stream = collect(io.BytesIO(netmon_bytes(frames, minor=minor)))
    assert streams(events)[0]["data"] == [c2s, s2c]
    data = [e for e in events if isinstance(e, StreamData)]
    # capture start 2024-01-02 03:04:05.250 UTC, frames 1.5 s apart
    assert data[0].frame == 4 and data[0].ts == pytest.approx(1704164645.25 + 4.5)
    assert stream.stats.file_format == "netmon" and not stream.stats.warnings
    assert stream.stats.link_types == ({1: 5, 113: 1} if minor else {1: 6})


def test_network_monitor_needs_a_seekable_file_and_survives_truncation() -> None:
    from tests.helpers.capbuild import netmon_bytes
    pkts, c2s, _ = conversation()
    raw = netmon_bytes([ether(p) for p in pkts])
    with pytest.raises(CaptureError, match="seekable"):
        iter_stream_events(PipeLike(raw))
    for cut in range(6, len(raw), 7):
        events, stream = collect(io.BytesIO(raw[:cut]))
        got = streams(events)[0]["data"][0] if streams(events) else b""
        assert c2s.startswith(got)
        assert stream.stats.warnings  # the frame table at the end is gone or cut


def _sample_files() -> dict[str, bytes]:
    from tests.helpers.capbuild import netmon_bytes
    pkts, _, _ = conversation()
    ng = Pcapng().shb().idb(1).idb(113).dsb(SECRETS_TLS_KEYLOG, KEYLOG)
    for i, p in enumerate(pkts):
        ng.epb(i % 2, i, ether(p) if i % 2 == 0 else sll(p))
    ng.shb(big_endian=True).idb(101).spb(pkts[0]).pb(0, 1, pkts[1])
    return {"pcap": pcap_bytes([ether(p) for p in pkts]), "pcapng": ng.bytes(),
            "netmon": netmon_bytes([ether(p) for p in pkts])}


SAMPLES = _sample_files()


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(sorted(SAMPLES)), compress=st.booleans(),
       edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1,
                      max_size=8),
       cut=st.integers(0, 2000))
def test_mutated_files_never_raise_anything_but_capture_error(kind: str, compress: bool,
                                                              edits: list, cut: int) -> None:
    raw = bytearray(SAMPLES[kind])
    for pos, val in edits:
        raw[pos % len(raw)] = val
    data = bytes(raw[: max(cut, 1)]) if cut < len(raw) else bytes(raw)
    if compress:
        data = gzip.compress(data)
    try:
        stream = iter_stream_events(io.BytesIO(data))
    except CaptureError as exc:
        assert "\n" not in str(exc)
        return
    for _ in stream:
        pass
    # every packet costs at least a 12-byte record/block header of the (uncompressed) file
    assert stream.stats.packets <= len(raw) // 12


def test_a_pcapng_time_is_the_float_a_pcap_and_a_live_capture_give() -> None:
    """Microsecond times whose `units * 1e-6` is not the float nearest the time (about a
    third of them): a pcapng packet read as `units / 1e6` has the time a classic pcap's
    `sec + usec * 1e-6` and a live capture's (libpcap's tv_sec, tv_usec) give, so a
    connection's `timings.start` live and from its -w file are the same number."""
    pkts, _, _ = conversation()
    times = [(1_765_140_000 + 37 * i, 123_457 + 99_991 * i) for i in range(len(pkts))]
    assert any((s * 10**6 + u) * 1e-6 != s + u * 1e-6 for s, u in times)  # (the cases)
    ng = Pcapng().shb().idb(1)
    for (s, u), p in zip(times, pkts):
        ng.epb(0, s * 10**6 + u, ether(p))
    classic = pcap_bytes([(s + u / 1e6, ether(p)) for (s, u), p in zip(times, pkts)])
    for raw in (ng.bytes(), classic):
        ts = [r[1] for r in read_packets(io.BytesIO(raw))]
        assert ts == [s + u * 1e-6 for s, u in times]
        events, _ = collect(io.BytesIO(raw))   # (the fused loops' times too)
        assert [e.ts for e in events if isinstance(e, StreamData)] == \
            [s + u * 1e-6 for s, u in times[3:]]
