"""Live capture on the loopback interface: `live_pcap(filter, *args)` starts
`python -m tlsprobe pcap -i lo -f FILTER ARGS` and returns once it says it is capturing
(its "capturing on" line on stderr), reading its stdout lines as they come (each with the
time it was read) while the test makes real connections.

Other tests run in parallel on lo: every capture here has a BPF filter on the ports of its
own servers. The captures need root or CAP_NET_RAW + CAP_NET_ADMIN, which CI has; without
them the tests fail with that message (not skip)."""

from __future__ import annotations

import json
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
START_WAIT = 20.0


@dataclass
class LiveRun:
    """A running `tlsprobe pcap -i lo`: its stdout lines as (time read, line) in `lines`."""

    proc: subprocess.Popen[str]
    lines: queue.Queue[tuple[float, str | None]] = field(default_factory=queue.Queue)
    stderr: list[str] = field(default_factory=list)
    out: list[tuple[float, str]] = field(default_factory=list)

    def next_line(self, timeout: float) -> tuple[float, str] | None:
        """The next stdout line and when it was read; None when none came in `timeout`
        seconds or the output ended."""
        try:
            got = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        when, line = got
        if line is None:
            self.lines.put(got)   # the end stays the end
            return None
        self.out.append((when, line))
        return when, line

    def next_record(self, timeout: float) -> tuple[float, dict[str, Any]] | None:
        """The next --jsonl record (skipping nothing: every line is one)."""
        got = self.next_line(timeout)
        return None if got is None else (got[0], json.loads(got[1]))

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def finish(self, timeout: float = 30.0) -> tuple[int, list[str], str]:
        """Wait for the end: exit code, every stdout line, the whole stderr."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            pytest.fail(f"tlsprobe pcap -i lo did not end within {timeout} s")
        while self.next_line(5.0) is not None:
            pass
        return code, [line for _t, line in self.out], "".join(self.stderr)


def _pump(stream: Any, sink: Callable[[str | None], None]) -> None:
    for line in iter(stream.readline, ""):
        sink(line)
    sink(None)


@pytest.fixture
def live_pcap(tmp_path: Path) -> Iterator[Callable[..., LiveRun]]:
    """Start `tlsprobe pcap -i lo -f FILTER *args`; stopped (by PID) at the end."""
    runs: list[LiveRun] = []

    def start(bpf: str, *args: str, iface: str = "lo", file_limit: int | None = None
              ) -> LiveRun:
        """`file_limit`: the largest file the capture may write (RLIMIT_FSIZE, bytes, set
        as it starts, long before its first write): a write past it fails with EFBIG, as
        one on a full disk with ENOSPC."""
        env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200", NO_COLOR="1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tlsprobe", "pcap", "-i", iface, "-f", bpf, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
        if file_limit is not None:
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (file_limit, file_limit))
        run = LiveRun(proc)
        runs.append(run)
        ready = threading.Event()

        def err_line(line: str | None) -> None:
            run.stderr.append(line or "")
            if line is None or "capturing on" in line:
                ready.set()

        def out_line(line: str | None) -> None:
            run.lines.put((time.time(), None if line is None else line.rstrip("\n")))

        threading.Thread(target=_pump, args=(proc.stdout, out_line), daemon=True).start()
        threading.Thread(target=_pump, args=(proc.stderr, err_line), daemon=True).start()
        if not ready.wait(START_WAIT) or proc.poll() is not None and \
                "capturing on" not in "".join(run.stderr):
            proc.kill()
            proc.wait(5)
            pytest.fail("tlsprobe pcap -i lo did not start capturing (live capture needs "
                        "root or CAP_NET_RAW and CAP_NET_ADMIN): " + "".join(run.stderr))
        return run

    yield start
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(5)


def run_client(argv: list[str], timeout: float = 20.0, stdin: str = "") -> float:
    """Run a TLS client to its end; the time (epoch) it ended."""
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return time.time()


def full_pipe() -> tuple[int, int, int]:
    """A pipe whose buffer this test filled: (read end, write end, bytes written), so that
    a child's next write to it waits (its output or stderr given the write end)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    filled = 0
    try:
        while True:
            filled += os.write(write_end, b"\0" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    return read_end, write_end, filled


def terminated_while_writing(proc: subprocess.Popen[Any], read_end: int, filled: int,
                             deadline: float) -> tuple[int, str]:
    """SIGTERM to `proc` once it waits in a write to the full pipe (`full_pipe`, whose write
    end the caller closed), the pipe then read to its end: (its exit code, what it wrote);
    killed if it outlives `deadline` seconds."""
    try:
        end = time.monotonic() + deadline
        while "pipe_write" not in Path(f"/proc/{proc.pid}/wchan").read_text() and \
                proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        with os.fdopen(read_end, "rb") as pipe:
            written = pipe.read()[filled:].decode()
        return proc.wait(deadline), written
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def logged_client_rows(run: Any, port: int, keys: Path) -> tuple[list[dict[str, Any]], int, str]:
    """openssl s_client to 127.0.0.1:`port` over TLS 1.3, then TLS 1.2, logging its secrets
    to `keys` as it goes; the live capture `run`'s JSON rows of the two connections (each
    within 15 s), then its exit code and stderr once it ended."""
    for version in ("-tls1_3", "-tls1_2"):
        run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", version,
                    "-keylogfile", str(keys)])
    records = []
    for _ in range(2):
        got = run.next_record(timeout=15.0)
        assert got is not None, "no row: " + "".join(run.stderr)
        records.append(got[1])
    code, _lines, err = run.finish()
    return records, code, err


#: what a connection's report says of its handshake: the same live and from the -w file
FACTS = ("client", "server", "sni", "offer", "client_random", "client_extensions",
         "server_extensions", "version", "cipher", "key_exchange", "hello_retry_request",
         "alpn", "fingerprints", "certificates", "signature_scheme", "first_frame")


def facts(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record.get(key) for key in FACTS}
