"""Captures still being written (issue 34): `tlsprobe pcap -` and `--follow FILE` report
each connection as it ends while the writer is still writing (not in batches, not when the
writer stops), parse packets that come in many short reads, honour a deadline (`stop_at`)
without burning CPU while they wait, and end with one line when a followed file shrinks or
is replaced.

The writer is this test: real handshakes (the project's own captures) are written to a
pipe or a file a few bytes at a time, and the next connection is written only once the
row of the previous one has been read back (each wait has a deadline, generous for a busy
machine, that fails the test rather than hangs it)."""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tlsprobe.capture import read_packets
from tlsprobe.capture.streaming import FdStream, FollowedFile
from tlsprobe.offline.analyzer import AnalyzerOptions, CaptureAnalysis

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "captures"
CASES = ["tls13_x25519", "tls12_rsa", "tls13_ipv6"]
#: the longest a row may take to come on a busy 2-core machine (it takes milliseconds)
DEADLINE = 15.0
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)


def _records(name: str) -> bytes:
    """The pcap records (header and frame) of one capture: one whole connection."""
    out = []
    for _frame, ts, _lt, data, orig in read_packets(CAPTURES / f"{name}.pcap"):
        sec = int(ts)
        out.append(struct.pack("<IIII", sec, round((ts - sec) * 1e6), len(data), orig) + data)
    return b"".join(out)


def _pieces(data: bytes) -> Iterator[bytes]:
    """`data` in short pieces of varying length (1 to 61 bytes), so that headers and
    packets are split across reads."""
    pos, step = 0, 1
    while pos < len(data):
        yield data[pos:pos + step]
        pos += step
        step = step * 7 % 61 + 1


def _cli(*args: str, stdin: int | IO[bytes] = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120", "NO_COLOR": "1"}
    return subprocess.Popen([sys.executable, "-m", "tlsprobe", "pcap", *args, "--jsonl",
                             "--no-progress"], stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO)


def _next_record(proc: subprocess.Popen[bytes]) -> dict[str, object]:
    """The next JSON line the command writes, within DEADLINE seconds (else the test
    fails: the row did not come while the writer was waiting for it)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], DEADLINE)
    if not ready:
        proc.kill()
        pytest.fail(f"no row within {DEADLINE}s of its connection's last packet: the "
                    "capture is not read as it comes")
    line = proc.stdout.readline()
    assert line, f"the command ended early: {_stderr(proc)}"
    return json.loads(line)


def _stderr(proc: subprocess.Popen[bytes]) -> list[str]:
    assert proc.stderr is not None
    return proc.stderr.read().decode().splitlines()


#: where a record says it was in its capture: not the same in a merged stream
PLACE = ("file", "id", "first_frame", "last_frame")


def _facts(record: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in record.items() if key not in PLACE}


def _expected(name: str, decided: bool = True) -> dict[str, object]:
    """The JSON record of the capture's one connection read from its file; `decided`: as
    a capture still being written reports it, once its handshake is decided (not at its
    close)."""
    options = AnalyzerOptions(report_when_decided=decided)
    with CaptureAnalysis(str(CAPTURES / f"{name}.pcap"), options) as analysis:
        reports = [a.report for a in analysis]
    assert len(reports) == 1
    return _facts(json.loads(reports[0].to_json()))


def test_stdin_rows_come_as_connections_end(tmp_path: Path) -> None:
    proc = _cli("-", stdin=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        proc.stdin.write(PCAP_HEADER)
        for name in CASES:
            for piece in _pieces(_records(name)):
                proc.stdin.write(piece)
                proc.stdin.flush()
            row = _next_record(proc)      # before anything more is written
            assert _facts(row) == _expected(name)
        proc.stdin.close()
        tail = _next_record(proc)
        assert tail["kind"] == "capture" and tail["tls_connections"] == len(CASES)
        assert tail["warnings"] == []
        assert proc.wait(DEADLINE) == 0
    finally:
        proc.kill()
        proc.wait()


def test_follow_reads_a_file_as_it_grows_and_stops_when_it_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "growing.pcap"
    path.write_bytes(b"")
    proc = _cli("--follow", str(path))
    try:
        with open(path, "ab", buffering=0) as out:
            out.write(PCAP_HEADER)
            for name in CASES:
                out.writelines(_pieces(_records(name)))
                assert _facts(_next_record(proc)) == _expected(name)
        os.truncate(path, 100)
        tail = _next_record(proc)
        assert tail["kind"] == "capture" and tail["tls_connections"] == len(CASES)
        assert proc.wait(DEADLINE) == 7
        err = _stderr(proc)
        assert len(err) == 1 and "shrank from" in err[0] and "growing.pcap" in err[0], err
    finally:
        proc.kill()
        proc.wait()


def test_follow_ends_with_one_line_when_the_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "rotated.pcapng"
    first = _records(CASES[0])
    path.write_bytes(PCAP_HEADER + first[:len(first) // 2])
    proc = _cli("--follow", str(path))
    try:
        with open(path, "ab") as out:
            out.write(first[len(first) // 2:])
        assert _next_record(proc)["kind"] == "connection"
        (tmp_path / "new").write_bytes(PCAP_HEADER)
        os.replace(tmp_path / "new", path)
        assert _next_record(proc)["kind"] == "capture"
        assert proc.wait(DEADLINE) == 7
        err = _stderr(proc)
        assert len(err) == 1 and "replaced" in err[0], err
    finally:
        proc.kill()
        proc.wait()


def test_a_followed_capture_ends_at_its_deadline_without_spinning(tmp_path: Path) -> None:
    """stop_at: the analysis ends at the deadline with what was read; a packet the stop
    cut short is no damage; waiting costs (almost) no CPU."""
    path = tmp_path / "half.pcap"
    second = _records(CASES[1])
    path.write_bytes(PCAP_HEADER + _records(CASES[0]) + second[:40])
    wall, cpu = time.monotonic(), time.process_time()
    options = AnalyzerOptions(follow=True, stop_at=wall + 1.0)
    with CaptureAnalysis(str(path), options) as analysis:
        reports = [a.report for a in analysis]
    waited, spent = time.monotonic() - wall, time.process_time() - cpu
    assert [_facts(json.loads(r.to_json())) for r in reports] == [_expected(CASES[0], False)]
    assert analysis.summary is not None and analysis.summary.warnings == ()
    assert waited >= 1.0
    assert spent < 0.5, f"{spent:.2f} s of CPU to wait 1 s: the follower spins"


def test_a_pipe_with_a_deadline_gives_what_is_there_then_ends() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"abc")
        stream = FdStream(read_end, "<pipe>", time.monotonic() + 0.3)
        assert stream.read1(100) == b"abc"      # what is there, without waiting for 100
        cpu = time.process_time()
        assert stream.read1(100) == b""         # nothing more by the deadline
        assert stream.stopped and time.process_time() - cpu < 0.2
    finally:
        os.close(read_end)
        os.close(write_end)


def test_follow_needs_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR)    # a writer, so that opening it does not block
    try:
        with pytest.raises(Exception, match="--follow reads a regular file"):
            FollowedFile(str(fifo))
    finally:
        os.close(fd)


@pytest.mark.parametrize(("args", "message"), [
    (["--follow", "a.pcap", "b.pcap"], "--follow reads one capture file"),
    (["--follow", "-"], "--follow reads one capture file"),
    (["--follow", "a.pcap", "--jobs", "2"], "--follow reads in this process"),
    (["a.pcap", "-w", "out.pcapng"], "-w is for a live capture"),
    (["a.pcap", "--ring-size", "1"], "-w's ring, for a live capture"),
])
def test_streaming_options_misused_are_usage_errors(run_cli, tmp_path: Path,
                                                    args: list[str], message: str) -> None:
    for name in ("a.pcap", "b.pcap"):
        (tmp_path / name).write_bytes((CAPTURES / "tls12_rsa.pcap").read_bytes())
    code, out, err = run_cli("pcap", *args)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err, err


def _frames(name: str) -> list[bytes]:
    """The pcap records of a capture, one per frame."""
    out = []
    for _frame, ts, _lt, data, orig in read_packets(CAPTURES / f"{name}.pcap"):
        sec = int(ts)
        out.append(struct.pack("<IIII", sec, round((ts - sec) * 1e6), len(data), orig) + data)
    return out


def _decrypted_record(name: str) -> dict[str, object]:
    """The capture's record read from its file with its whole key log."""
    from tlsprobe.engine.keylog import load_keylog
    options = AnalyzerOptions(keylog=load_keylog(CAPTURES / f"{name}.keys"),
                              report_when_decided=True)
    with CaptureAnalysis(str(CAPTURES / f"{name}.pcap"), options) as analysis:
        reports = [a.report for a in analysis]
    return _facts(json.loads(reports[0].to_json()))


@pytest.mark.parametrize("logged", [True, False])
def test_a_key_log_written_after_the_server_hello_still_decrypts(tmp_path: Path,
                                                                 logged: bool) -> None:
    """As live: the client logs its secrets once it has the ServerHello, which the capture
    sees first; its next flight comes after. The row is the one the finished file and key
    log give (decrypted); a connection the log never gets keys for is still reported."""
    keys = tmp_path / "sslkeylog.txt"
    keys.write_text("# keys come as the client has them\n")
    frames = _frames("tls13_x25519")   # 6: the server's ServerHello flight; 8: client's next
    proc = _cli("-", "--keylog", str(keys), stdin=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        # a first connection's row: the command runs, its key log read as it was
        proc.stdin.write(PCAP_HEADER + _records("tls12_rsa"))
        proc.stdin.flush()
        assert _next_record(proc)["decrypted"] is False
        proc.stdin.write(b"".join(frames[:7]))
        proc.stdin.flush()
        time.sleep(0.3)     # the reader has the ServerHello flight before the keys exist
        if logged:
            with open(keys, "a") as log:
                log.write((CAPTURES / "tls13_x25519.keys").read_text())
        for frame in frames[7:]:
            proc.stdin.write(frame)
            proc.stdin.flush()
        row = _next_record(proc)
        if logged:
            assert _facts(row) == _decrypted_record("tls13_x25519")
            assert row["decrypted"] is True
        else:   # read without keys once the client went on: a few segments later
            volatile = ("client_bytes", "server_bytes", "timings")
            assert {k: v for k, v in _facts(row).items() if k not in volatile} == {
                k: v for k, v in _expected("tls13_x25519").items() if k not in volatile}
            assert row["decrypted"] is False
        proc.stdin.close()
        assert _next_record(proc)["kind"] == "capture"
        assert proc.wait(DEADLINE) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_growing_key_log_is_read_by_its_new_lines_only(tmp_path: Path) -> None:
    from tlsprobe.engine.keylog import load_keylog
    lines = (CAPTURES / "tls13_x25519.keys").read_text().splitlines(keepends=True)
    path = tmp_path / "keys"
    path.write_text(lines[1])
    log = load_keylog(path, grows=True)
    assert log.follower is not None and log.usable == 1
    random = bytes.fromhex(lines[1].split()[1])
    missing = bytes(32)
    reads = log.follower.reads
    for _ in range(1000):     # misses on an unchanged file: a stat each, no read
        assert log.secrets(missing) is None
    assert log.follower.reads == reads
    with open(path, "a") as out:
        out.write(lines[2] + lines[3][:20])       # a whole line and half of one
    assert log.secrets(missing) is None and log.follower.reads == reads + 1
    entry = log.secrets(random)
    assert entry is not None and len(entry) == 2
    with open(path, "a") as out:
        out.write(lines[3][20:])
    assert log.secrets(missing) is None          # the completed line is read now
    assert len(log.secrets(random) or {}) == 3 and log.bad_lines == 0


def test_follow_ends_at_its_duration_with_the_summary(tmp_path: Path) -> None:
    """`--follow FILE --duration S`: what the file held is reported, then the command waits
    for more without spinning and ends at the deadline, exit 0, with its capture record."""
    from tests.helpers.cpu import reaped_cpu
    path = tmp_path / "still.pcap"
    path.write_bytes(PCAP_HEADER + _records(CASES[1]))
    before = reaped_cpu()
    proc = _cli("--follow", str(path), "--duration", "2")
    row = _next_record(proc)
    assert _facts(row) == _expected(CASES[1])
    tail = _next_record(proc)
    assert tail["kind"] == "capture" and tail["warnings"] == []
    assert proc.wait(DEADLINE) == 0, _stderr(proc)
    spent = reaped_cpu() - before
    # start-up and the one connection: well under a second; a follower that polled
    # without sleeping would burn the two seconds it waited
    assert spent < 1.5, f"{spent:.2f} s of CPU for a 2 s --follow"


def test_gzip_through_a_pipe_is_read_as_it_comes(tmp_path: Path) -> None:
    """A compressed capture written to the pipe connection by connection (each flushed
    through zlib): each row comes before the next connection is written."""
    import zlib
    proc = _cli("-", stdin=subprocess.PIPE)
    assert proc.stdin is not None
    packer = zlib.compressobj(wbits=31)
    try:
        proc.stdin.write(packer.compress(PCAP_HEADER))
        for name in CASES:
            data = packer.compress(_records(name)) + packer.flush(zlib.Z_SYNC_FLUSH)
            for piece in _pieces(data):
                proc.stdin.write(piece)
                proc.stdin.flush()
            assert _facts(_next_record(proc)) == _expected(name)
        proc.stdin.write(packer.flush())
        proc.stdin.close()
        tail = _next_record(proc)
        assert tail["kind"] == "capture" and tail["file_format"] == "pcap (gzip)"
        assert tail["warnings"] == [] and proc.wait(DEADLINE) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_key_log_from_a_pipe_is_read_whole_with_stdin(tmp_path: Path) -> None:
    """`tlsprobe pcap - --keylog <(...)`: a key log that is a pipe is read once, whole (it
    cannot be looked at again for new lines), and decrypts."""
    import threading
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    keys = (CAPTURES / "tls13_x25519.keys").read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as out:
            out.write(keys)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    with open(CAPTURES / "tls13_x25519.pcap", "rb") as capture:
        proc = _cli("-", "--keylog", str(fifo), stdin=capture)
        try:
            row = _next_record(proc)
            assert row["decrypted"] is True, row["problems"]
            assert _next_record(proc)["kind"] == "capture" and proc.wait(DEADLINE) == 0
        finally:
            proc.kill()
            proc.wait()
    writer.join(DEADLINE)
