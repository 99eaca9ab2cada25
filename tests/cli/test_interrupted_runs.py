"""Ctrl-C (SIGINT) or SIGTERM during `tlsprobe scan` or `tlsprobe clients` over several
targets: the reports of the targets done before it are printed (text and JSON alike, in the
input's order), then "tlsprobe: interrupted", exit 130. Whenever the signal comes (while the
modules load, while a target is audited, a second one during the end), the process exits 130
itself: never killed by the signal (-2), which is what CPython does under `python -m` when a
KeyboardInterrupt once ended an `exec` of a string (a dataclass being made), even one caught
and answered since."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
#: for a connection or the process's end on a busy 2-core machine
DEADLINE = 60.0


class Peers:
    """Two refused ports, then a listener that accepts and never answers (its target is
    audited last, one target at a time: once it has a connection, the others are done)."""

    def __init__(self) -> None:
        self.refused = []
        for _ in range(2):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.refused.append(probe.getsockname()[1])
        self.silent = socket.socket()
        self.silent.bind(("127.0.0.1", 0))
        self.silent.listen(64)
        self.held: list[socket.socket] = []

    @property
    def targets(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in [*self.refused, self.silent.getsockname()[1]]]

    def wait_connection(self, proc: subprocess.Popen[bytes], timeout: float) -> bool:
        """Whether the last target got a connection within `timeout` (the process alive)."""
        self.silent.settimeout(0.1)
        ends = time.monotonic() + timeout
        while time.monotonic() < ends and proc.poll() is None:
            try:
                self.held.append(self.silent.accept()[0])
                return True
            except OSError:
                continue
        return False

    def close(self) -> None:
        for sock in [self.silent, *self.held]:
            sock.close()


@pytest.fixture
def peers() -> Iterator[Peers]:
    made = Peers()
    yield made
    made.close()


def start(command: str, peers: Peers, *more: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "tlsprobe", command, *peers.targets, "--concurrency", "1",
            "--timeout", "20", "--retries", "0", *more]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    # SIGINT at its default, as in a terminal's foreground job
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=REPO, stdin=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def ended(proc: subprocess.Popen[bytes]) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return out.decode(), err.decode()


@pytest.mark.parametrize("command, sig, fmt", [
    ("scan", signal.SIGINT, "text"), ("scan", signal.SIGTERM, "text"),
    ("clients", signal.SIGINT, "text"), ("clients", signal.SIGTERM, "json")])
def test_an_interrupted_run_prints_the_targets_done(command: str, sig: int, fmt: str,
                                                    peers: Peers) -> None:
    """Was: text `scan` and `clients` (and `clients --json`) printed nothing of the
    targets done, only "tlsprobe: interrupted"."""
    more = ["--json"] if fmt == "json" else []
    proc = start(command, peers, *more, *(["--no-progress"] if command == "scan" else []))
    assert peers.wait_connection(proc, DEADLINE), ended(proc)
    proc.send_signal(sig)
    out, err = ended(proc)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.endswith("tlsprobe: interrupted\n"), err
    silent = peers.targets[-1]
    if fmt == "json":
        rows = [json.loads(line) for line in out.splitlines()]
        assert [row["port"] for row in rows] == peers.refused, out
        assert all("connection refused" in row["error"] for row in rows), out
    else:
        at = [out.index(target) for target in peers.targets[:-1]]
        assert at == sorted(at), out     # in the input's order
        assert out.count("connection refused") >= 2, out
    assert silent not in out, out
    for target in peers.targets[:-1]:   # the errors on stderr, before the interrupted line
        assert f"tlsprobe: {target}: connection refused" in err, err


def commanding(proc: subprocess.Popen[bytes]) -> float:
    """When the command's modules began loading: tlsprobe's `main` runs (the socket module,
    an extension module the command imports first, is mapped); before it, Python's own
    start-up and the package's import, where Ctrl-C is Python's traceback and -2."""
    ends = time.monotonic() + DEADLINE
    while time.monotonic() < ends and proc.poll() is None:
        try:
            if "/_socket." in Path(f"/proc/{proc.pid}/maps").read_text():
                return time.monotonic()
        except OSError:
            pass
        time.sleep(0.002)
    raise AssertionError(ended(proc))


def test_a_signal_at_any_moment_ends_with_130(peers: Peers) -> None:
    """SIGINT at moments spread over the command's start-up and the run, and a second one
    after the first was answered: exit 130 every time, "tlsprobe: interrupted" the last
    line. Was: -2 (killed by SIGINT) in about 1 run of 5, with the signal while the
    modules load (CPython's flag of an interrupted string `exec`), or a second signal
    during the interpreter's end."""
    calibration = start("clients", peers)
    began = commanding(calibration)
    assert peers.wait_connection(calibration, DEADLINE), ended(calibration)
    running = time.monotonic() - began     # start-up until the last target is probed
    calibration.send_signal(signal.SIGINT)
    ended(calibration)
    outcomes = []
    for step in range(16):
        proc = start("clients", peers)
        time.sleep(max(0.0, commanding(proc) + running * (step / 16) ** 2 - time.monotonic()))
        proc.send_signal(signal.SIGINT)
        if step % 3 == 2:   # a second one, after the first was answered
            ends = time.monotonic() + DEADLINE
            assert proc.stderr is not None
            line = proc.stderr.readline()
            while line and b"interrupted" not in line and time.monotonic() < ends:
                line = proc.stderr.readline()
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        out, err = ended(proc)
        outcomes.append((step, proc.returncode, err[-300:]))
    wrong = [o for o in outcomes if o[1] != 130 or "tlsprobe: interrupted" not in o[2]
             and o[0] % 3 != 2]
    assert not wrong, wrong


def test_an_interruption_answered_off_the_main_thread_ends() -> None:
    """`cli.main()` run as the program but off the main thread (an embedding that calls it
    from a worker thread): signal handlers cannot be set there, and the answer to an
    interruption looped for ever waiting to hold them."""
    import threading

    from tlsprobe import cli
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(cli.interrupted(True)), daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and codes == [130]
