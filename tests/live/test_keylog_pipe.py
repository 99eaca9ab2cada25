"""`--keylog` naming a pipe: a FIFO whose writer keeps it open, or a process substitution
(`--keylog <(tail -f keys.log)`). With a capture still being written (`pcap -i`) it is read
as it grows, never waited for: it was read to its end first, so while its writer kept it
open the capture never started. A finished capture's key log pipe is read to its end, and
a line says so when that takes a while (not a silent wait)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.helpers.capbuild import pcap_jsonl
from tests.live.conftest import logged_client_rows, run_client

REPO = Path(__file__).resolve().parents[2]


def _fifo_writer(fifo: Path, script: str) -> subprocess.Popen[bytes]:
    """A shell that opens `fifo` for writing (waiting there for its reader) and runs
    `script` into it, keeping it open as long as the script runs."""
    os.mkfifo(fifo)
    return subprocess.Popen(["sh", "-c", f"exec > '{fifo}'; {script}"])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(5)


def test_a_live_capture_follows_a_key_log_fifo_its_writer_keeps_open(
        tls_server: Any, live_pcap: Any, tmp_path: Path) -> None:
    server = tls_server("openssl")
    keys = tmp_path / "sslkeylog.txt"
    keys.write_text("")
    fifo = tmp_path / "keys.fifo"
    # tail -f never ends: the pipe stays open for the capture's whole life
    writer = _fifo_writer(fifo, f"exec tail -n +1 -f '{keys}'")
    try:
        run = live_pcap(f"tcp port {server.port}", "--jsonl", "--keylog", str(fifo),
                        "-c", "2")
        records, code, err = logged_client_rows(run, server.port, keys)
    finally:
        _stop(writer)
    assert code == 0, err
    assert [r["version"]["name"] for r in records] == ["TLS 1.3", "TLS 1.2"]
    assert [r["decrypted"] for r in records] == [True, True], [r["problems"] for r in records]


def test_a_process_substitution_key_log_lets_the_live_capture_start(
        tls_server: Any, tmp_path: Path) -> None:
    """`pcap -i lo --keylog <(tail -f keys.log)`, as bash runs it (the pipe is /dev/fd/N):
    the capture starts, decrypts, and -c 1 ends it with the writer still running."""
    server = tls_server("openssl")
    keys = tmp_path / "sslkeylog.txt"
    keys.write_text("")
    cmd = (f"exec '{sys.executable}' -m tlsprobe pcap -i lo -f 'tcp port {server.port}' "
           f"--jsonl -c 1 --keylog <(exec tail -n +1 -f '{keys}')")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()      # the "capturing on" line, or nothing ever
        assert "capturing on" in line, line
        run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}",
                    "-tls1_3", "-keylogfile", str(keys)])
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    record = json.loads(out.splitlines()[0])
    assert record["decrypted"] is True, record["problems"]


def test_a_finished_captures_key_log_pipe_is_read_to_its_end_and_says_so(
        run_cli: Any, tmp_path: Path) -> None:
    """The pipe's writer keeps it open 3 s after its keys: the capture waits for the end
    (the keys may still come) and says it waits, then reads with every key."""
    capture = REPO / "captures" / "tls13_x25519.pcap"
    fifo = tmp_path / "keys.fifo"
    writer = _fifo_writer(fifo, f"cat '{capture.with_suffix('.keys')}'; sleep 3")
    try:
        started = time.monotonic()
        code, conns, _summary, err = pcap_jsonl(run_cli, capture, "--keylog", str(fifo))
        waited = time.monotonic() - started
    finally:
        _stop(writer)
    assert code == 0, err
    assert waited >= 2.5 and all(c["decrypted"] for c in conns), (waited, conns)
    assert "is a pipe: read to its end" in err and "Ctrl-C stops" in err, err


def test_a_key_log_pipe_is_read_in_whole_lines_without_waiting(tmp_path: Path) -> None:
    """A line split over two writes is read once whole; a line over MAX_LINE is one bad
    line and the next is read; an empty pipe or one with no writer answers at once."""
    from tlsprobe.engine.keylog import MAX_LINE
    from tlsprobe.engine.keylog_pipe import load_growing_keylog
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    log = load_growing_keylog(str(fifo))          # no writer yet: no wait
    assert log.grows and log.secrets(b"\x01" * 32) is None
    writer = os.open(fifo, os.O_WRONLY)
    try:
        line = f"CLIENT_RANDOM {'01' * 32} {'ab' * 48}\n".encode()
        os.write(writer, line[:40])
        assert log.secrets(b"\x01" * 32) is None  # half a line: kept, not parsed
        os.write(writer, line[40:] + b"x" * (MAX_LINE + 10))
        assert log.secrets(b"\x01" * 32) == {"CLIENT_RANDOM": bytes.fromhex("ab" * 48)}
        os.write(writer, b"y" * 50 + b"\n" + line.replace(b"01" * 32, b"02" * 32))
        assert log.secrets(b"\x02" * 32) is not None and log.bad_lines == 1
    finally:
        os.close(writer)
    assert log.secrets(b"\x03" * 32) is None      # the writer gone: nothing, at once
    assert time.monotonic() - started < 5


def test_a_key_log_pipe_is_read_as_it_grows_not_only_at_a_miss(tmp_path: Path) -> None:
    """`pcap - --keylog FIFO`: the key log's writer logs 400 KiB of keys of connections the
    capture does not hold before the one it does. It was read only when a key was
    missing, so its writer waited once the pipe held 64 KiB; now it is read as it grows,
    and the connection that comes after is still decrypted with its key."""
    from tests.live.test_stop_streams import PCAP_HEADER, records
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", "pcap", "-", "--jsonl",
                             "--keylog", str(fifo)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdin is not None
    try:
        proc.stdin.write(PCAP_HEADER)
        proc.stdin.flush()
        writer = os.open(fifo, os.O_WRONLY)   # once tlsprobe holds it open for reading
        os.set_blocking(writer, False)
        other = "".join(f"CLIENT_RANDOM {index:064x} {'ab' * 48}\n" for index in range(2600))
        pending = other.encode()
        deadline = time.monotonic() + 20
        while pending and time.monotonic() < deadline:
            try:
                pending = pending[os.write(writer, pending):]
            except BlockingIOError:
                time.sleep(0.02)
        assert not pending, f"the key log's writer waited: {len(pending)} bytes not taken"
        os.set_blocking(writer, True)
        os.write(writer, (REPO / "captures" / "tls13_x25519.keys").read_bytes())
        time.sleep(0.5)
        out, err = proc.communicate(records("tls13_x25519"), timeout=30)
        os.close(writer)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["kind"] for line in lines] == ["connection", "capture"], lines
    assert lines[0]["decrypted"] is True, lines[0]
