"""The files around a capture: what `tlsprobe pcap` writes (-w, --csv, --plot) never
replaces what it reads (the captures, the --keylog), live or not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.live.conftest import run_client

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "captures" / "tls13_client_auth.pcap"
KEYS = REPO / "captures" / "tls13_client_auth.keys"


@pytest.mark.parametrize("args, first, second", [
    (["cap.pcap", "--csv", "cap.pcap"], "FILE", "--csv"),
    (["cap.pcap", "--csv", "link.pcap"], "FILE", "--csv"),            # a hard link
    (["cap.pcap", "--keylog", "keys.log", "--csv", "keys.log"], "--csv", "--keylog"),
    (["cap.pcap", "--stats", "--plot", "./cap.pcap"], "FILE", "--plot"),
    (["-i", "lo", "-f", "tcp port 9", "--duration", "1", "-w", "keys.log", "--keylog",
      "keys.log"], "--keylog", "-w"),
    (["-i", "lo", "-f", "tcp port 9", "--duration", "1", "-w", "out.csv", "--csv",
      "out.csv"], "--csv", "-w"),
])
def test_an_output_never_replaces_a_file_that_is_read(run_cli: Any, tmp_path: Path,
                                                      args: list[str], first: str,
                                                      second: str) -> None:
    shutil.copy(CAPTURE, tmp_path / "cap.pcap")
    os.link(tmp_path / "cap.pcap", tmp_path / "link.pcap")
    shutil.copy(KEYS, tmp_path / "keys.log")
    (tmp_path / "out.csv").write_text("kept\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, out, err = run_cli("pcap", *args, "--no-progress")
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and f"{first} and {second} name the same file" in err, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # read with the same files, a capture and its key log still work
    code, out, err = run_cli("pcap", "cap.pcap", "cap.pcap", "--keylog", "keys.log",
                             "--no-progress")
    assert code == 0 and "note" not in err, err


def test_a_full_disk_stops_the_capture_with_its_summary_and_a_whole_file(
        tls_server: Any, live_pcap: Any, run_cli: Any, tmp_path: Path) -> None:
    """-w into a file that cannot grow past 40 KiB (RLIMIT_FSIZE: EFBIG, as ENOSPC on a
    full disk): the capture stops there with the summary, the reason and exit 2, and the
    file ends with its last whole packet (tshark reads it without "cut short"; it was cut
    inside a packet, with no summary)."""
    server = tls_server("openssl")
    written = tmp_path / "live.pcapng"
    run = live_pcap(f"tcp port {server.port}", "--jsonl", "-w", str(written),
                    file_limit=40 << 10)
    for _ in range(40):     # about 9 KiB of packets each: the limit is passed
        if run.proc.poll() is not None:
            break
        run_client(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}"])
    code, lines, err = run.finish(timeout=30)
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert f"-w {written}: file too large: the capture stopped there" in err, err
    assert "TLS connections (" in err and "reported); dropped: 0" in err, err
    capture = json.loads(lines[-1])
    assert capture["kind"] == "capture" and capture["reported"] >= 1, lines[-1]
    assert written.stat().st_size <= 40 << 10
    checked = subprocess.run(["tshark", "-r", str(written)], capture_output=True, text=True,
                             timeout=60, check=False)
    assert checked.returncode == 0 and "cut short" not in checked.stderr, checked.stderr
    code, out, err = run_cli("pcap", str(written), "--jsonl", "--no-progress")
    assert code == 0, err
    assert 1 <= sum('"kind": "connection"' in line for line in out.splitlines()) <= \
        capture["reported"]


def test_keys_past_a_finished_key_logs_limits_are_said(run_cli: Any, tmp_path: Path) -> None:
    """A finished key log holding 100,000 other sessions before the capture's keys: those
    keys are past its limit and not read, and a note says so (the connection was left
    undecrypted with nothing said, as if no key had been logged)."""
    keys = tmp_path / "keys.log"
    with keys.open("w") as log:
        log.writelines(f"CLIENT_RANDOM {i:064x} {'ab' * 48}\n" for i in range(100_000))
        log.write(KEYS.read_text())
    code, out, err = run_cli("pcap", str(CAPTURE), "--keylog", str(keys), "--jsonl",
                             "--no-progress")
    assert code == 0, err
    assert [json.loads(line)["decrypted"] for line in out.splitlines()[:-1]] == [False]
    assert "line(s) past 100000 sessions were not taken (the key log's limits)" in err, err


@pytest.mark.parametrize("args, line", [
    (["pcap", "-"], "tlsprobe: <stdin>: cannot read stdin: it is closed"),
    (["pcap", "-", "--duration", "5", "--jsonl"],
     "tlsprobe: <stdin>: cannot read stdin: it is closed"),
    (["scan", "-f", "-"], "tlsprobe: error: cannot read - (stdin): it is closed"),
    (["survey", "-", "--out", "survey"], "tlsprobe: error: cannot read - (stdin): it is closed"),
])
def test_stdin_closed_is_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    """'-' in a process started with its stdin closed (`<&-`, a daemon's): Python has no
    sys.stdin, and that is the input's one line, exit 2 (it was an internal error, 70)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    done = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", sys.executable, "-m",
                           "tlsprobe", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (2, line + "\n")
