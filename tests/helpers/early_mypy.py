"""`mypy --strict tlsprobe` started when the session has collected its tests, in a child
process beside the rest of the suite, so that its half-minute of CPU (a cold cache) runs on
the machine's other core instead of after everything else; tests/project/test_typing.py waits for
it and judges its report. Started only when that test was collected (conftest.py hooks).

Under pytest-xdist (`-n N`) it runs once, started by the controller when the first worker
reports its collection (the workers collect the same tests): its report and exit code go
to a folder every worker was told (`workerinput`), and the worker that runs the test waits
for the exit code file there. Without that folder (a plain session) the session that
collected the test starts it itself."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE = "tests/project/test_typing.py::test_mypy_strict_is_clean"
ARGV = [sys.executable, "-m", "mypy", "--strict", "tlsprobe"]
WORKER_KEY = "tlsprobe_early_mypy"   # workerinput: the folder shared with the controller


class Started(NamedTuple):
    proc: subprocess.Popen[bytes]
    out: IO[bytes] | None


KEY = pytest.StashKey[Started]()
FOLDER = pytest.StashKey[Path]()    # controller: the folder handed to the workers

# Run by the controller's child: mypy's report to OUT, then its exit code to CODE (written
# to a temporary name and renamed, so a reader never sees half of it).
_WRAPPER = """import os, subprocess, sys
folder = sys.argv[1]
with open(os.path.join(folder, "out"), "wb") as out:
    code = subprocess.call(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
with open(os.path.join(folder, "code.tmp"), "w") as f:
    f.write(str(code))
os.replace(os.path.join(folder, "code.tmp"), os.path.join(folder, "code"))
"""


def start(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A plain session: start mypy if the test was collected. An xdist worker: nothing (the
    controller starts it once, see `xdist_collected`)."""
    if hasattr(config, "workerinput") or not any(item.nodeid == NODE for item in items):
        return
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen(ARGV, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    config.stash[KEY] = Started(proc, out)


def xdist_configure_node(config: pytest.Config, node: Any) -> None:
    """Controller: tell each worker the shared folder (created on the first call)."""
    folder = config.stash.get(FOLDER, None)
    if folder is None:
        folder = config.stash[FOLDER] = Path(tempfile.mkdtemp(prefix="tlsprobe-mypy-"))
    node.workerinput[WORKER_KEY] = str(folder)


def xdist_collected(config: pytest.Config, ids: list[str]) -> None:
    """Controller, once per worker's collection: start mypy on the first that has the test."""
    folder = config.stash.get(FOLDER, None)
    if folder is None or KEY in config.stash or NODE not in ids:
        return
    proc = subprocess.Popen([sys.executable, "-c", _WRAPPER, str(folder), *ARGV], cwd=REPO,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    config.stash[KEY] = Started(proc, None)
    (folder / "started").touch()


def result(config: pytest.Config, timeout: float) -> tuple[int, str] | None:
    """(exit code, output) of the early run; None when none was started. Raises
    subprocess.TimeoutExpired when it does not end within `timeout` seconds."""
    shared = getattr(config, "workerinput", {}).get(WORKER_KEY)
    if shared is not None:
        return _shared_result(Path(shared), timeout)
    started = config.stash.get(KEY, None)
    if started is None or started.out is None:
        return None
    code = started.proc.wait(timeout=timeout)
    started.out.seek(0)
    return code, started.out.read().decode("utf-8", "replace")


def _shared_result(folder: Path, timeout: float) -> tuple[int, str] | None:
    """A worker: wait for the controller's run to write its exit code."""
    if not (folder / "started").exists():
        return None
    deadline = time.monotonic() + timeout
    code_file = folder / "code"
    while not code_file.exists():
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(ARGV, timeout)
        time.sleep(0.2)
    report = (folder / "out").read_bytes().decode("utf-8", "replace")
    return int(code_file.read_text()), report


def stop(config: pytest.Config) -> None:
    started = config.stash.get(KEY, None)
    if started is not None and started.proc.poll() is None:
        if started.out is None:     # the controller's wrapper leads its own process group
            try:
                os.killpg(started.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            started.proc.kill()
        started.proc.wait()
    folder = config.stash.get(FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
