"""Ctrl-C (SIGINT) or SIGTERM sent by PID to `tlsprobe pcap -` or `--follow FILE` while
the writer keeps its input open: the reading ends as --duration ends it, so every
connection read so far is reported, also one whose handshake was not decided yet (a
ClientHello without its answer), in every output format; the capture record says it
was not read whole, a note says why, exit 0. (The handler raised KeyboardInterrupt inside
the reader: the analysis was cut off and only the decided connections were reported.)

The signal is sent once the process has read everything written and waits for more (the
pipe empty and the process in its wait, or the followed file read to its size): what is
checked is a stop of a waiting read, not a race with the data."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.live.test_stop_streams import CAPTURES, PCAP_HEADER, records
from tlsprobe.capture import read_packets

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 30.0
STOPPED_NOTE = "the reading was stopped by"


def hello_only() -> bytes:
    """The first four packets of a TLS 1.3 connection: the handshake and the ClientHello,
    no answer yet (undecided)."""
    out = []
    for index, (_frame, ts, _lt, data, orig) in enumerate(
            read_packets(CAPTURES / "tls13_x25519.pcap")):
        if index == 4:
            break
        sec = int(ts)
        out.append(struct.pack("<IIII", sec, round((ts - sec) * 1e6), len(data), orig)
                   + data)
    return b"".join(out)


#: the undecided connection first: once its bytes are read, the other's are next
CAPTURE = PCAP_HEADER + hello_only() + records("tls12_rsa")


def start(args: list[str], stdin: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.Popen([sys.executable, "-m", "tlsprobe", "pcap", *args],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=REPO)


def waits(proc: subprocess.Popen[str]) -> bool:
    """Whether the process sleeps in a wait for input (select, poll or a timed sleep)."""
    try:
        wchan = Path(f"/proc/{proc.pid}/wchan").read_text()
    except OSError:
        return False
    return any(word in wchan for word in ("select", "poll", "sleep", "pipe_read"))


def until(condition: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition() and proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("tlsprobe did not read its input")
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()


def pipe_drained(read_end: int) -> bool:
    held = bytearray(4)
    fcntl.ioctl(read_end, termios.FIONREAD, held)
    return int.from_bytes(held, sys.byteorder) == 0


def file_read(proc: subprocess.Popen[str], path: Path) -> bool:
    """Whether the process has read the followed file to its current size."""
    size = path.stat().st_size
    for fd in os.listdir(f"/proc/{proc.pid}/fd"):
        try:
            if os.readlink(f"/proc/{proc.pid}/fd/{fd}") != str(path):
                continue
            info = Path(f"/proc/{proc.pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        pos = int(info.split()[1])
        return pos == size
    return False


def stopped_run(args: list[str], sig: int, follow: Path | None
                ) -> tuple[int, str, str]:
    """Run `tlsprobe pcap ARGS` on CAPTURE, from stdin (a pipe this test keeps open) or
    followed in `follow`; send `sig` once it has read it all; (exit code, stdout, stderr)."""
    read_end, write_end = os.pipe()
    try:
        if follow is not None:
            follow.write_bytes(CAPTURE)
            proc = start(["--follow", str(follow), *args], subprocess.DEVNULL)
            until(lambda: file_read(proc, follow) and waits(proc), proc)
        else:
            proc = start(["-", *args], read_end)
            os.write(write_end, CAPTURE)
            until(lambda: pipe_drained(read_end) and waits(proc), proc)
        proc.send_signal(sig)
        out, err = ended(proc)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert "Traceback" not in err, err
    return proc.returncode, out, err


@pytest.mark.parametrize("source", ["stdin", "follow"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_reports_the_undecided_connection(source: str, sig: int,
                                                 tmp_path: Path) -> None:
    code, out, err = stopped_run(["--jsonl"], sig, tmp_path / "growing.pcap"
                                 if source == "follow" else None)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["kind"] for line in lines] == ["connection", "connection", "capture"]
    versions = sorted(str((line["version"] or {}).get("name")) for line in lines[:2])
    assert versions == ["None", "TLS 1.2"], versions   # the ClientHello without answer
    record = lines[-1]
    assert record["reported"] == 2 and record["tls_connections"] == 2
    assert record["complete"] is False
    assert any(STOPPED_NOTE in note for note in record["notes"]), record["notes"]
    assert err.count(f"tlsprobe: note: {record['file']}: {STOPPED_NOTE}") == 1, err


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "stats"])
def test_a_stop_reports_every_connection_in_every_format(fmt: str, tmp_path: Path) -> None:
    csv = tmp_path / "rows.csv"
    args = {"table": [], "json": ["--json"], "csv": ["--csv", str(csv)],
            "stats": ["--stats"]}[fmt]
    code, out, err = stopped_run(args, signal.SIGTERM, None)
    assert code == 0, err
    if fmt == "json":
        doc = json.loads(out)
        assert len(doc["connections"]) == 2, doc
        assert [(c["reported"], c["complete"]) for c in doc["captures"]] == [(2, False)]
    elif fmt == "stats":
        assert out.startswith("Versions (2 connections)"), out
    else:
        text = csv.read_text() if fmt == "csv" else out
        assert "(no ServerHello)" in text and "TLS 1.2" in text, text
    assert f"tlsprobe: note: <stdin>: {STOPPED_NOTE} SIGTERM" in err, err


def ended(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Its stdout and stderr once the signal sent has ended it (a failure if not within
    DEADLINE)."""
    try:
        return proc.communicate(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the signal did not end the reading")


def many_connections(path: Path, count: int) -> int:
    """A capture FILE of `count` TLS 1.3 connections (one recorded connection, its client
    port changed for each); its number of connections."""
    packets = list(read_packets(CAPTURES / "tls13_x25519.pcap"))
    client = struct.unpack(">H", packets[0][3][34:36])[0]
    out = [PCAP_HEADER]
    for index in range(count):
        port = struct.pack(">H", 1024 + index)
        for _frame, ts, _lt, data, orig in packets:
            frame = bytearray(data)
            for offset in (34, 36):   # the TCP ports after Ethernet and IPv4 headers
                if struct.unpack(">H", frame[offset:offset + 2])[0] == client:
                    frame[offset:offset + 2] = port
            when = ts + index * 0.01
            sec = int(when)
            out.append(struct.pack("<IIII", sec, round((when - sec) * 1e6), len(frame), orig)
                       + frame)
    path.write_bytes(b"".join(out))
    return count


@pytest.mark.parametrize("jobs, sig", [("2", signal.SIGTERM), ("2", signal.SIGINT),
                                       ("1", signal.SIGTERM)])
def test_a_stop_while_a_file_is_read_reports_what_was_read(jobs: str, sig: int,
                                                           tmp_path: Path) -> None:
    """A capture FILE read by two processes (--jobs 2: the reader in the second, pipe.py)
    or one: the output waits on a pipe this test does not read yet, so the reading is
    under way when the signal comes. The connections read so far are reported, the
    record says the file was not read whole and a note names the signal, exit 130 (it
    was: SIGTERM killed the process with no record, and SIGINT gave 'interrupted' with no
    record; the second process ran on)."""
    total = many_connections(tmp_path / "many.pcap", 2000)
    proc = start([str(tmp_path / "many.pcap"), "--jsonl", "--jobs", jobs], subprocess.DEVNULL)
    assert proc.stdout is not None
    until(lambda: "pipe_write" in Path(f"/proc/{proc.pid}/wchan").read_text(), proc)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert len(children) == (1 if jobs == "2" else 0), children
    proc.send_signal(sig)
    # the signal is handled while the write waits: it is cut short (the pipe took 64 KiB
    # of it), and the rest of it must still come (CPython's buffer dropped it)
    time.sleep(0.5)
    out, err = ended(proc)
    assert "Traceback" not in err, err
    lines = [json.loads(line) for line in out.splitlines()]
    record = lines[-1]
    assert record["kind"] == "capture", record
    rows = [line for line in lines if line["kind"] == "connection"]
    if record["complete"]:
        # on a loaded machine the second process can have read the whole file into the
        # pipe before the signal, and what waits in the pipe is still read: then the file
        # was read whole, every connection is reported and nothing was stopped
        assert jobs == "2" and (proc.returncode, record["reported"], len(rows)) == \
            (0, total, total), (proc.returncode, record, err)
        assert STOPPED_NOTE not in err, err
    else:
        assert proc.returncode == 130, (proc.returncode, err)
        assert 0 < record["reported"] == len(rows) < total
        assert any(STOPPED_NOTE in note for note in record["notes"]), record["notes"]
    time.sleep(0.2)
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()], children


def test_sigterm_ends_a_scan_as_ctrl_c_does_with_what_was_printed(tmp_path: Path) -> None:
    """`scan -f FILE --json`, stopped by SIGTERM (a CI job's timeout) while a target is
    still being audited (a loopback listener that never answers): the targets reported
    stay, "tlsprobe: interrupted" says the run did not finish, exit 130, as on Ctrl-C.
    The default SIGTERM killed it with nothing said (exit -15)."""
    import socket
    refused = []
    for _ in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            refused.append(probe.getsockname()[1])
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    targets = tmp_path / "targets.txt"
    targets.write_text("".join(f"127.0.0.1:{port}\n" for port in
                               [*refused, silent.getsockname()[1]]))
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", "scan", "-f", str(targets),
                             "--json", "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdout is not None
    try:
        got = b""
        deadline = time.monotonic() + DEADLINE
        while got.count(b"\n") < 3 and time.monotonic() < deadline:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            got += chunk
        assert got.count(b"\n") == 3, got
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=DEADLINE)
    finally:
        silent.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.decode().endswith("tlsprobe: interrupted\n"), err
    lines = [json.loads(line) for line in (got + rest).splitlines()]
    assert sorted(line["port"] for line in lines) == sorted(refused), lines
