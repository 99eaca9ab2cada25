"""`mypy --strict tlsprobe` started when the session has collected its tests, in a child
process beside the rest of the suite, so that its half-minute of CPU (a cold cache) runs on
the machine's other core instead of after everything else; tests/test_typing.py waits for
it and judges its report. Started only when that test was collected (conftest.py hooks)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, NamedTuple

import pytest

REPO = Path(__file__).resolve().parent.parent
NODE = "tests/test_typing.py::test_mypy_strict_is_clean"


class Started(NamedTuple):
    proc: subprocess.Popen[bytes]
    out: IO[bytes]


KEY = pytest.StashKey[Started]()


def start(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.nodeid == NODE for item in items):
        return
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "mypy", "--strict", "tlsprobe"], cwd=REPO,
                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    config.stash[KEY] = Started(proc, out)


def result(config: pytest.Config, timeout: float) -> tuple[int, str] | None:
    """(exit code, output) of the early run; None when none was started. Raises
    subprocess.TimeoutExpired when it does not end within `timeout` seconds."""
    started = config.stash.get(KEY, None)
    if started is None:
        return None
    code = started.proc.wait(timeout=timeout)
    started.out.seek(0)
    return code, started.out.read().decode("utf-8", "replace")


def stop(config: pytest.Config) -> None:
    started = config.stash.get(KEY, None)
    if started is not None and started.proc.poll() is None:
        started.proc.kill()
        started.proc.wait()
