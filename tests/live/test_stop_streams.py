"""The stop conditions of the other captures still being written, stdin and `--follow
FILE`, as of a live one: `-c N` connections, `--duration S`, Ctrl-C (exit 0 after the
summary). The writer is this test: the project's own captures written to a pipe or a file
that stays open (no end of file comes), so only the stop condition can end the run."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cpu import reaped_cpu
from tests.live.conftest import full_pipe, terminated_while_writing
from tlsprobe.capture import read_packets

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO / "captures"
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
DEADLINE = 30.0


def records(*names: str) -> bytes:
    """The pcap records of these captures, one after another (one connection each)."""
    out = []
    for name in names:
        for _frame, ts, _lt, data, orig in read_packets(CAPTURES / f"{name}.pcap"):
            sec = int(ts)
            out.append(struct.pack("<IIII", sec, round((ts - sec) * 1e6), len(data), orig)
                       + data)
    return b"".join(out)


def _background() -> None:
    """What a shell without job control does to a job it starts in the background (and
    what CI runners may do): SIGINT ignored, which Python then leaves ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def tlsprobe(*args: str, stdin: int = subprocess.DEVNULL,
             background: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120", "NO_COLOR": "1"}
    return subprocess.Popen([sys.executable, "-m", "tlsprobe", "pcap", *args, "--jsonl"],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=REPO,
                            preexec_fn=_background if background else None)


def first_line(proc: subprocess.Popen[str]) -> str:
    """The first line of the output, read from the pipe byte by byte: the text wrapper's
    `readline` reads ahead, and what it holds is lost to `communicate` (which reads the pipe's
    descriptor), so a summary written before the test got to read would go missing."""
    assert proc.stdout is not None
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(proc.stdout.fileno(), 1)
        if not byte:
            break
        line += byte
    return line.decode()


def finish(proc: subprocess.Popen[str]) -> tuple[int, list[dict[str, object]], str]:
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"the run did not end within {DEADLINE} s: its stop condition failed")
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


def test_count_ends_stdin_while_the_writer_still_writes() -> None:
    proc = tlsprobe("-", "-c", "2", stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.buffer.write(PCAP_HEADER + records("tls13_x25519", "tls12_rsa",
                                                  "tls13_hrr"))
    proc.stdin.flush()   # and the pipe stays open: no end of file
    try:
        code, lines, err = finish(proc)
    finally:
        proc.stdin.close()
    assert code == 0, err
    assert [line["kind"] for line in lines] == ["connection", "connection", "capture"]
    assert lines[-1]["reported"] == 2


def test_duration_ends_stdin_without_spinning() -> None:
    before = reaped_cpu()
    proc = tlsprobe("-", "--duration", "2", stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.buffer.write(PCAP_HEADER + records("tls13_x25519"))
    proc.stdin.flush()
    try:
        code, lines, err = finish(proc)
    finally:
        proc.stdin.close()
    assert code == 0, err
    assert [line["kind"] for line in lines] == ["connection", "capture"]
    assert reaped_cpu() - before < 1.5   # start-up and 2 s of waiting, not a busy loop


@pytest.mark.parametrize("how", ["ctrl_c", "ctrl_c_in_background", "sigterm", "duration"])
def test_follow_ends_by_ctrl_c_or_duration_with_the_summary(how: str,
                                                           tmp_path: Path) -> None:
    """Ctrl-C, also where the process started with SIGINT ignored (a background job), and
    SIGTERM end a followed capture with its summary, exit 0, as --duration does."""
    growing = tmp_path / "growing.pcap"
    growing.write_bytes(PCAP_HEADER + records("tls13_x25519"))   # and more may come
    proc = tlsprobe("--follow", str(growing), *(["--duration", "2"] if how == "duration"
                                                  else []),
                    background=how == "ctrl_c_in_background")
    first = json.loads(first_line(proc))   # the row, while the file may grow
    assert first["kind"] == "connection"
    if how != "duration":
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    code, lines, err = finish(proc)
    assert code == 0, err
    assert [line["kind"] for line in lines] == ["capture"]
    assert lines[0]["reported"] == 1 and "Traceback" not in err


def _waits_for_input(pid: int) -> bool:
    """Whether the process waits for its capture's first bytes: in `select` on stdin, or
    between two looks at the followed file (a sleep). (A signal before, while it still
    imports, is a plain interruption: exit 130. Its SIGTERM handler is no sign: cli.main
    sets one at once.)"""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False
    return any(word in wchan for word in ("select", "poll", "sleep"))


@pytest.mark.parametrize("source, sig", [("stdin", signal.SIGINT),
                                         ("follow", signal.SIGTERM)])
def test_a_stop_before_the_header_came_is_summarised(source: str, sig: int,
                                                     tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM while stdin or a followed file has not given the capture's header
    yet (tcpdump -w FILE without -U leaves it empty a while): one line saying nothing was
    read and the capture record, as a stop by --duration there gives (it was 'tlsprobe:
    interrupted', exit 130, no record)."""
    read_end, write_end = os.pipe()
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    try:
        proc = tlsprobe(*(["-"] if source == "stdin" else ["--follow", str(empty)]),
                        stdin=read_end)
        waited = 0.0
        while not _waits_for_input(proc.pid) and proc.poll() is None and waited < DEADLINE:
            time.sleep(0.05)
            waited += 0.05
        proc.send_signal(sig)
        code, lines, err = finish(proc)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert code == 2, err
    assert err.count("\n") == 1 and "stopped before the capture's header came" in err, err
    assert [(line["kind"], bool(line["error"])) for line in lines] == [("capture", True)]


def test_a_signal_during_the_summary_lets_it_finish() -> None:
    """`pcap - --stats`: the reading is over (stdin ended) and the statistics are being
    written to a pipe this test filled, so the write waits. A SIGTERM then has nothing to
    stop: the statistics come whole, exit 0 (the default SIGTERM, set back as the reading
    ended, killed the process in the middle of its summary)."""
    read_end, write_end, filled = full_pipe()
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    with (CAPTURES / "tls13_x25519.pcap").open("rb") as capture:
        proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", "pcap", "-", "--stats"],
                                stdin=capture, stdout=write_end, stderr=subprocess.PIPE,
                                env=env, cwd=REPO)
    os.close(write_end)
    code, out = terminated_while_writing(proc, read_end, filled, DEADLINE)
    assert code == 0, (code, out)
    assert out.startswith("Versions (1 connection)") and "Groups (1 connection)" in out, out
