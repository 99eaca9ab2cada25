"""One capture read by two processes (tlsprobe/capture/pipe.py) gives what one process gives.

The reader process runs ahead of its caller, which may swap a connection's direction or
ignore it between any two events: every event and every count must still be the ones a
`CaptureStream` in this process hands out, also when the connection table is full and the
eviction has to ask the caller which connections it ignores. Then the analysis and the CLI
on top of it, the reader's failures (killed, an exception) and an early stop."""

from __future__ import annotations

import io
import marshal
import os
import signal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.run_members import without_run_members
from tests.helpers.capbuild import (Conv, Pcapng, dtls_client_hello, ether, ipv4, pcap_bytes, real_chunks,
                      udp)
from tlsprobe.capture import (SECRETS_TLS_KEYLOG, ConnKey, StreamClose, StreamData, iter_stream_events,
                              read_packets)
from tlsprobe.capture import tcp as tcp_module
from tlsprobe.capture.pipe import PipedStream, ReaderProcessError, can_pipe
from tlsprobe.errors import EXIT_INTERNAL
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis, Progress

ROOT = Path(__file__).resolve().parents[2]
OWN = sorted((ROOT / "captures").glob("*.pcap"))



@pytest.fixture(autouse=True)
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis asks `can_pipe` (fork and two CPUs) before it starts a reader: say yes,
    so that these tests run the same on a one-CPU machine (a reader works there too)."""
    monkeypatch.setattr("tlsprobe.offline.analyzer.can_pipe", lambda: True)


def interleaved(tmp_path: Path, copies: int = 4) -> Path:
    """The project's own captures played at once, `copies` times, merged round robin, each
    copy's loopback address made its own (127.1.k.1 for the k-th): many connections open
    together, from every kind of handshake the project recorded."""
    sources = []
    for k, path in enumerate(OWN * copies):
        addr = struct.pack("!BBBB", 127, 1 + k // 250, k % 250, 1)
        frames = []
        for _frame, _ts, lt, data, _orig in read_packets(str(path)):
            if lt == 1 and len(data) >= 34 and data[12:14] == b"\x08\x00":
                ip = data[14:34].replace(b"\x7f\x00\x00\x01", addr)
                frames.append(data[:14] + ip + data[34:])
        sources.append(frames)
    merged: list[tuple[float, bytes]] = []
    i = 0
    while any(sources):
        for frames in sources:
            if frames:
                merged.append((1_700_000_000 + i * 0.001, frames.pop(0)))
                i += 1
    out = tmp_path / "interleaved.pcap"
    out.write_bytes(pcap_bytes(merged))
    return out


def _stream(source: Any, piped: bool, **limits: Any) -> Any:
    """The capture's events in this process, or through a reader process."""
    stream = iter_stream_events(source, **limits)
    return PipedStream(stream) if piped else stream


def _read(path: Path, piped: bool, **limits: Any) -> tuple[list[Any], dict[str, Any]]:
    """Every event and the final stats, the caller ignoring and turning connections round
    at events chosen by their id and frame (the same choices in both modes)."""
    stream = _stream(str(path), piped, **limits)
    events = []
    try:
        for ev in stream:
            events.append(ev)
            if type(ev) in (StreamData, tuple):  # a tuple: PipedStream.plain_data
                plain = type(ev) is tuple  # the connection's id in the key's place
                cid, frame = ev[0] if plain else ev[0][0], ev[4]
                key = stream.key_of(cid) if plain else ev[0]
                if (cid * 7 + frame) % 5 == 0:
                    stream.ignore(cid)
                if (cid * 13 + frame) % 11 == 0:
                    new = stream.swap_direction(cid)
                    assert new == key.swapped()
    finally:
        stream.close()
    return events, stream.stats.to_dict()


def _read_both_ways(path: Path) -> list[list[Any]]:
    """The typed events of `path` read in this process and through the pipe, which must
    be the same."""
    got = []
    for piped in (False, True):
        stream = _stream(str(path), piped)
        got.append(typed(list(stream)))
        stream.close()
    assert got[1] == got[0]
    return got


def typed(events: list[Any]) -> list[Any]:
    """Events with the type of each and of each of its fields (== alone would take a
    plain tuple, or a bytearray, for the event a reader should have rebuilt)."""
    return [(type(ev), ev, tuple(type(v) for v in ev),
             tuple(type(v) for v in ev[0]) if isinstance(ev[0], tuple) else None)
            for ev in events]


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return interleaved(tmp_path_factory.mktemp("pipe"))


@pytest.mark.parametrize("limits", [{}, {"max_connections": 4, "max_closed": 2},
                                    {"max_connections": 16, "max_pending_bytes": 300}],
                         ids=["defaults", "table-full", "pending-limit"])
def test_same_events_and_stats_as_one_process(many: Path, limits: dict[str, int],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = []
    real = PipedStream._apply_deferred

    def counted(self: PipedStream) -> None:
        syncs.append(len(self._skip))
        real(self)

    monkeypatch.setattr(PipedStream, "_apply_deferred", counted)
    one, one_stats = _read(many, piped=False, **limits)
    two, two_stats = _read(many, piped=True, **limits)
    assert len(one) > 500
    assert typed(two) == typed(one)
    assert two_stats == one_stats
    kinds = {type(ev).__name__ for ev in one}
    assert {"StreamSkipped", "StreamClose", "StreamOpen", "StreamData"} <= kinds
    if "max_connections" in limits and limits["max_connections"] == 4:
        # the eviction asked which connections are ignored, and some were
        assert one_stats["tcp"]["evicted_by"]["limit"] > 0
        assert any(syncs)


def test_plain_data_holds_the_same_fields(many: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """`plain_data` (what the analyzer asks for): a data event not turned round comes as
    the plain tuple of its StreamData's fields with the connection's id in the key's place
    (`key_of` gives the key), every other event as before."""
    real = PipedStream.__init__

    def plain(self: PipedStream, inner: Any) -> None:
        real(self, inner)
        self.plain_data = True

    one, one_stats = _read(many, piped=False)
    monkeypatch.setattr(PipedStream, "__init__", plain)
    two, two_stats = _read(many, piped=True)
    assert two_stats == one_stats and len(two) == len(one) > 500
    kinds = set()
    for a, b in zip(one, two, strict=True):
        if type(b) is tuple:
            kinds.add(tuple)
            assert type(a) is StreamData and b == (a.conn.id, *a[1:])
        else:
            kinds.add(type(b))
            assert typed([b]) == typed([a])
    assert {tuple, StreamData, StreamClose} <= kinds  # turned ones stay StreamData


@pytest.mark.parametrize("path", OWN[:12], ids=lambda p: p.name)
def test_own_captures_event_for_event(path: Path) -> None:
    assert _read(path, piped=True) == _read(path, piped=False)


def _conversation(steps: list[tuple[int, bytes, int, int]]) -> bytes:
    """A pcap of one TCP connection 10.0.0.1:40000 -> 10.0.0.2:443 without a handshake:
    (direction, payload, flags, offset past the next expected byte) per segment."""
    seq = {0: 1000, 1: 5000}
    frames = []
    for d, payload, flags, ahead in steps:
        src, dst = (b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02")[::1 if d == 0 else -1]
        sport, dport = (40000, 443)[::1 if d == 0 else -1]
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, src,
                         dst)
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq[d] + ahead, 0, 0x50, flags, 65535,
                          0, 0)
        frames.append(b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload)
        if not ahead:
            seq[d] += len(payload)
    return pcap_bytes([(1_700_000_000 + i * 0.001, f) for i, f in enumerate(frames)])


def _both_ways(data: bytes, turn_at: bytes | None) -> list[Any]:
    """The events of a capture in this process and through the reader process (the same,
    asserted), the caller turning the connection round at the data `turn_at`."""
    return _acting_both_ways(data, turn_at, lambda stream, ev: stream.swap_direction(ev[0][0]))


def _acting_both_ways(data: bytes, at: bytes | None,
                      act: Callable[[Any, StreamData], object]) -> list[Any]:
    """The events of a capture in this process and through the reader process (the same,
    asserted), `act(stream, event)` called at the data event whose bytes are `at`."""
    results = []
    for piped in (False, True):
        stream = _stream(io.BytesIO(data), piped)
        events = []
        for ev in stream:
            events.append(ev)
            if type(ev) is StreamData and ev[2] == at:
                act(stream, ev)
        stream.close()
        results.append(events)
    assert results[0] == results[1]
    return results[0]


@pytest.mark.parametrize("turn", [False, True])
def test_turned_connection_closes_in_the_first_order(turn: bool) -> None:
    """Holes in both directions at the end of the capture: the close reports them in the
    order of the tracker's first guess, whether or not the connection was turned round
    since (the reader process never hears of the turn)."""
    events = _both_ways(_conversation([(0, b"a" * 10, 0x18, 0), (1, b"b" * 10, 0x18, 0),
                                       (0, b"c" * 5, 0x18, 20), (1, b"d" * 5, 0x18, 20)]),
                        b"a" * 10 if turn else None)
    gaps = [ev for ev in events if type(ev).__name__ == "StreamGap"]
    assert [ev.direction for ev in gaps] == ([1, 0] if turn else [0, 1])
    assert {ev.conn.client_ip for ev in gaps} == {"10.0.0.2" if turn else "10.0.0.1"}


@pytest.mark.parametrize("turn", [False, True])
def test_turned_connection_keeps_the_side_of_its_reset(turn: bool) -> None:
    """A RST lets the connection linger for data in flight; turned round after it, the
    same side's second RST is still the same side's (ignored), so the other side's bytes
    after it are still read."""
    events = _both_ways(_conversation([(0, b"a" * 10, 0x18, 0), (1, b"b" * 10, 0x18, 0),
                                       (1, b"", 0x04, 0), (0, b"e" * 3, 0x18, 0),
                                       (1, b"", 0x04, 0), (0, b"f" * 3, 0x18, 0)]),
                        b"e" * 3 if turn else None)
    assert any(type(ev) is StreamData and ev.data == b"fff" for ev in events)
    assert type(events[-1]) is StreamClose and events[-1].reason == "rst"


def test_ignored_at_the_first_of_a_packets_events_still_gets_the_rest() -> None:
    """A FIN segment that fills a hole makes two events of one packet (its own bytes, then
    the bytes that waited behind it). Ignored at the first, the connection still gets the
    second, as the capture layer hands out what it already made for the packet; through
    the reader process too, which marks how many of a packet's events follow."""
    data = _conversation([(0, b"a" * 10, 0x18, 0), (0, b"c" * 5, 0x18, 10),
                          (0, b"b" * 10, 0x19, 0)])
    one = _acting_both_ways(data, b"b" * 10, lambda stream, ev: stream.ignore(ev.conn.id))
    assert [ev.data for ev in one if type(ev) is StreamData] == [b"a" * 10, b"b" * 10, b"c" * 5]


def test_every_kind_of_event_comes_rebuilt(tmp_path: Path) -> None:
    """The batches carry plain tuples and each key once: every kind of event (data, a hole,
    a datagram, an IPv6 connection, a key reused after a close) comes back as the event
    and field types one process hands out."""
    v4, v6, again = Conv(), Conv(("fd00::1", 40001), ("fd00::2", 443)), Conv(cisn=90000)
    frames = [*v4.handshake(), *v6.handshake(), v4.c(b"hello"), v6.c(b"six"),
              v4.s(b"x" * 10, seq=v4.sseq + 7),  # a hole of 7 bytes before it
              ipv4("10.0.0.1", "10.0.0.9", 17, udp(5000, 4433, dtls_client_hello())),
              v4.c(b"", flags="R"), *again.handshake(), again.c(b"same 4-tuple"),
              v6.c(b"", flags="FA"), v6.s(b"", flags="FA")]
    path = tmp_path / "kinds.pcap"
    path.write_bytes(pcap_bytes(ether(f) for f in frames))
    got = _read_both_ways(path)
    kinds = {kind.__name__ for kind, *_ in got[0]}
    assert {"StreamOpen", "StreamData", "StreamGap", "StreamClose", "Datagram"} <= kinds
    assert {ev.conn.client_ip for kind, ev, *_ in got[0] if kind is StreamData} == \
        {"10.0.0.1", "fd00::1"}
    opened = [ev.conn for kind, ev, *_ in got[0] if kind.__name__ == "StreamOpen"]
    assert len(opened) == 3 and opened[0][1:] == opened[2][1:] and opened[0].id != opened[2].id


def test_long_downloads_are_counted_by_the_reader(tmp_path: Path) -> None:
    """Connections ignored after their handshake, then megabytes of records: the reader is
    told and counts them itself (they do not cross the pipe), and the totals are the same
    as one process's."""
    hello = [(d, data) for d, data in real_chunks("tls13_x25519.pcap")]
    record = b"\x17\x03\x03\x03\xe8" + bytes(1000)
    frames = []
    seq: dict[tuple[int, int], int] = {}

    def seg(conn: int, d: int, payload: bytes) -> bytes:
        client, server = bytes((10, 0, 0, conn)), b"\x0a\x01\x00\x01"
        src, dst = (client, server) if d == 0 else (server, client)
        ports = (40000, 443) if d == 0 else (443, 40000)
        at = seq.get((conn, d), 1000)
        seq[conn, d] = at + len(payload)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, src,
                         dst)
        tcp = struct.pack("!HHIIBBHHH", *ports, at, 0, 0x50, 0x18, 65535, 0, 0)
        return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload

    for conn in range(4):
        frames += [seg(conn, d, data) for d, data in hello]
    for _ in range(4000):
        frames += [seg(conn, 1, record) for conn in range(4)]
    path = tmp_path / "downloads.pcap"
    path.write_bytes(pcap_bytes([(1_700_000_000 + i * 1e-4, f) for i, f in enumerate(frames)]))
    results = []
    for piped in (False, True):
        stream = _stream(str(path), piped)
        events = []
        for ev in stream:
            events.append(ev)
            if type(ev) is StreamData and ev.data.startswith(b"\x17"):
                stream.ignore(ev.conn.id)
        stream.close()
        results.append((events, stream.stats.to_dict()))
    assert results[1] == results[0]
    skipped = [ev for ev in results[0][0] if type(ev).__name__ == "StreamSkipped"]
    downloads = [ev for ev in skipped if ev.direction == 1]
    assert len(downloads) == 4 and all(ev.size >= 3_900_000 for ev in downloads)
    assert stream.reader_counted >= 4  # the reader counted (most of) them itself


def test_decryption_secrets_blocks_come_through(tmp_path: Path) -> None:
    """A pcapng's key-log blocks reach the caller as events, and as `secrets` and
    `tls_keylog()` once read, as from one process."""
    ng = Pcapng().shb().idb(1).dsb(SECRETS_TLS_KEYLOG, b"CLIENT_RANDOM aa bb")
    for _frame, _ts, _lt, data, _orig in read_packets(str(OWN[0])):
        ng.epb(0, 1, data)
    ng.dsb(SECRETS_TLS_KEYLOG, b"CLIENT_RANDOM cc dd\n")
    path = tmp_path / "keys.pcapng"
    path.write_bytes(ng.bytes())
    got = []
    for piped in (False, True):
        stream = _stream(str(path), piped)
        events = list(stream)
        got.append((typed(events), typed(stream.secrets), stream.tls_keylog()))
        stream.close()
    assert got[1] == got[0]
    assert got[0][2] == b"CLIENT_RANDOM aa bb\nCLIENT_RANDOM cc dd\n"


def test_analysis_reports_and_progress_match(many: Path) -> None:
    options = AnalyzerOptions(pipe_min_bytes=0)
    seen: list[tuple[int, int | None, int]] = []
    piped = CaptureAnalysis(str(many), options, Progress(lambda *a: seen.append(a)))
    assert isinstance(piped.stream, PipedStream)
    two = [r.to_dict() for r, _ in piped]
    alone = CaptureAnalysis(str(many))
    assert not isinstance(alone.stream, PipedStream)
    one = [r.to_dict() for r, _ in alone]
    assert two == one and len(one) > 50
    assert piped.summary == alone.summary
    size = many.stat().st_size
    assert seen and seen[-1][0] == size and seen[-1][1] == size  # the reader's count, mirrored


def test_small_file_and_jobs_1_stay_in_one_process(many: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    analysis = CaptureAnalysis(str(many), AnalyzerOptions(pipe_min_bytes=many.stat().st_size))
    assert isinstance(analysis.stream, PipedStream)
    analysis.close()
    for min_bytes in (many.stat().st_size + 1, None):
        analysis = CaptureAnalysis(str(many), AnalyzerOptions(pipe_min_bytes=min_bytes))
        assert not isinstance(analysis.stream, PipedStream)
        analysis.close()
    monkeypatch.setattr("tlsprobe.offline.analyzer.can_pipe", lambda: False)  # one CPU
    analysis = CaptureAnalysis(str(many), AnalyzerOptions(pipe_min_bytes=0))
    assert not isinstance(analysis.stream, PipedStream)
    analysis.close()


def test_can_pipe_asks_for_fork_and_two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert can_pipe()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert not can_pipe()
    monkeypatch.delattr(os, "fork")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert not can_pipe()


def test_no_process_to_be_had_reads_in_one(many: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    made: list[int] = []
    real_pipe = os.pipe

    def pipe() -> tuple[int, int]:
        fds = real_pipe()
        made.extend(fds)
        return fds

    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.setattr(os, "pipe", pipe)
    analysis = CaptureAnalysis(str(many), AnalyzerOptions(pipe_min_bytes=0))
    assert not isinstance(analysis.stream, PipedStream)
    # the file's stop pipe (capture/streaming.py FinishedFile), then PipedStream's two
    assert len(made) == 6
    for fd in made[2:]:  # PipedStream's pipes were closed
        with pytest.raises(OSError):
            os.fstat(fd)
    reports = [r.to_dict() for r, _ in analysis]
    assert reports == [r.to_dict() for r, _ in CaptureAnalysis(str(many))]
    for fd in made[:2]:  # and the stop pipe with the analysis
        with pytest.raises(OSError):
            os.fstat(fd)


def test_reader_killed_is_one_error(many: Path) -> None:
    stream = PipedStream(iter_stream_events(str(many)))
    os.kill(stream._pid, signal.SIGKILL)
    with pytest.raises(ReaderProcessError, match="killed by signal 9 before the end of the "
                       r"capture \(rerun with --jobs 1") as info:
        for _ in stream:
            pass
    assert info.value.exit_code == EXIT_INTERNAL
    stream.close()


def test_cli_says_in_one_line_that_the_reader_died(run_cli: Any, many: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader process that ends before the end of the capture (here: at once, status 3)
    is one line and exit 70 from the command, with what to do; no traceback."""
    import tlsprobe.capture.pipe as pipe_module
    monkeypatch.setattr(pipe_module, "_reader_main", lambda *args: os._exit(3))
    code, out, err = run_cli("pcap", "--no-progress", "--jobs", "2", "--jsonl", str(many))
    assert code == EXIT_INTERNAL == 70
    assert err.strip().splitlines() == [
        "tlsprobe: the capture reader process exited with status 3 before the end of "
        "the capture (rerun with --jobs 1 to read it in one process)"]
    assert "Traceback" not in err


def test_reader_exception_is_raised_where_its_events_end(
        many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tcp_module.TcpTracker.close
    calls = [0]

    def failing(self: Any, *args: Any, **kw: Any) -> None:
        calls[0] += 1
        if calls[0] == 40:
            raise ValueError("boom")
        real(self, *args, **kw)

    monkeypatch.setattr(tcp_module.TcpTracker, "close", failing)
    got = []
    for piped in (False, True):
        calls[0] = 0
        stream = _stream(str(many), piped)
        events = []
        with pytest.raises(ValueError, match="boom"):
            for ev in stream:
                events.append(ev)
        stream.close()
        got.append(events)
    assert got[0] == got[1] and sum(type(ev) is StreamClose for ev in got[0]) == 39


def test_early_close_stops_and_reaps_the_reader(many: Path) -> None:
    stream = PipedStream(iter_stream_events(str(many)))
    pid = stream._pid
    next(iter(stream))
    stream.close()
    stream.close()  # twice: nothing more to do
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: not our child any more


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the captures a reader process was started for (PipedStream spied)."""
    made: list[str] = []
    real = PipedStream.__init__

    def spied(self: PipedStream, inner: Any) -> None:
        made.append(inner.name)
        real(self, inner)

    monkeypatch.setattr(PipedStream, "__init__", spied)
    return made


def test_cli_same_output_with_one_or_two_processes(run_cli: Any, many: Path,
                                                   readers: list[str]) -> None:
    for extra in ([], ["--jsonl", "--msg"], ["--stats"]):
        one = run_cli("pcap", "--no-progress", "--jobs", "1", *extra, str(many))
        assert not readers
        two = run_cli("pcap", "--no-progress", "--jobs", "2", *extra, str(many))
        assert readers == [str(many)]  # one small file: --jobs 2 reads it with a reader
        readers.clear()
        assert (two.returncode, without_run_members(two.stdout), two.stderr) == \
            (one.returncode, without_run_members(one.stdout), one.stderr)
        assert one.returncode in (0, 7) and one.stdout


def test_cli_picks_two_processes_for_a_large_file(run_cli: Any, many: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  readers: list[str]) -> None:
    from tlsprobe.commands import pcap as pcap_command
    made = readers
    monkeypatch.setattr(pcap_command, "PIPE_MIN_BYTES", many.stat().st_size)
    assert run_cli("pcap", "--no-progress", str(many)).returncode in (0, 7)
    assert len(made) == 1
    assert run_cli("pcap", "--no-progress", "--jobs", "1", str(many)).returncode in (0, 7)
    assert len(made) == 1  # --jobs 1: one process
    monkeypatch.setattr(pcap_command, "PIPE_MIN_BYTES", many.stat().st_size + 1)
    assert run_cli("pcap", "--no-progress", str(many)).returncode in (0, 7)
    assert len(made) == 1  # smaller than the threshold
    # two files with --jobs 2: worker processes, one file each, no reader process
    assert run_cli("pcap", "--no-progress", "--jobs", "2", str(many), str(OWN[0])
                   ).returncode in (0, 7)
    assert len(made) == 1


def _segments(conn: int, payloads: list[tuple[int, bytes]]) -> list[bytes]:
    """Ethernet frames of one TCP connection's payloads ((direction, bytes), in order),
    sequence numbers running on (no handshake: the capture joins it mid-stream)."""
    frames, seq = [], {0: 1000, 1: 5000}
    for d, payload in payloads:
        client, server = bytes((10, 0, 0, conn)), b"\x0a\x01\x00\x01"
        src, dst = (client, server) if d == 0 else (server, client)
        ports = (40000, 443) if d == 0 else (443, 40000)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, src,
                         dst)
        tcp = struct.pack("!HHIIBBHHH", *ports, seq[d], 0, 0x50, 0x18, 65535, 0, 0)
        seq[d] += len(payload)
        frames.append(b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload)
    return frames


def test_batches_larger_than_the_pipe_come_whole(tmp_path: Path) -> None:
    """A batch of 60 KB segments is several megabytes, more than the pipe and this side's
    first buffer hold: it is read in parts into a larger buffer, and every byte comes."""
    payloads = [(n % 2, bytes([n]) * 60_000) for n in range(60)]
    path = tmp_path / "large.pcap"
    path.write_bytes(pcap_bytes([(1_700_000_000 + i * 1e-3, f)
                                 for i, f in enumerate(_segments(1, payloads))]))
    got = _read_both_ways(path)
    data = [ev.data for kind, ev, *_ in got[1] if kind is StreamData]
    assert data == [payload for _d, payload in payloads]


def test_a_connections_open_carries_its_key(tmp_path: Path) -> None:
    """What crosses the pipe per connection: its StreamOpen comes as one item with the
    key in it (no KEY item before it), and its later events refer to it by id."""
    from tlsprobe.capture.pipe_reader import (
        EVENTS,
        HEADER,
        KEY,
        OPEN,
        OPEN_KEY,
        _Reader,
    )

    frames = [ether(f) for conv in (Conv(), Conv(("10.0.0.3", 40003), ("10.0.0.9", 443)))
              for f in (*conv.handshake(), conv.c(b"hello"), conv.s(b"there"))]
    path = tmp_path / "opens.pcap"
    path.write_bytes(pcap_bytes(frames))
    out = tmp_path / "batches"
    ctl_r, ctl_w = os.pipe()
    with open(out, "wb") as sink:
        _Reader(iter_stream_events(str(path)), sink.fileno(), ctl_r).run()
    os.close(ctl_r)
    os.close(ctl_w)
    blob, items = out.read_bytes(), []
    while blob:
        size, kind = HEADER.unpack_from(blob)
        if kind == EVENTS:
            items += marshal.loads(blob[HEADER.size:HEADER.size + size])[2]
        blob = blob[HEADER.size + size:]
    codes = [item[0] for item in items]
    assert codes.count(OPEN_KEY) == 2 and KEY not in codes and OPEN not in codes
    keys = [item[3:] for item in items if item[0] == OPEN_KEY]
    assert [key[1:3] for key in keys] == [("10.0.0.1", 40000), ("10.0.0.3", 40003)]
