"""Fixtures of the check tests: `script_server`, a factory that starts one of the small test
servers of this folder (a Python script taking --port, --chain-file, --key-file and its own
options) on a free loopback port and stops it (by process group) after the test."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.servers import CertSet, _owned_by, listening_inodes

REPO = Path(__file__).resolve().parents[2]


def _child_env() -> dict[str, str]:
    """The environment of a script server: this one, with the repository first on
    PYTHONPATH (the scripts run as `python -m tests.checks.NAME`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return env
ScriptServer = Callable[..., int]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def script_server(certs: CertSet, tmp_path: Path) -> Iterator[ScriptServer]:
    """Factory: `script_server("ssl3_server.py", "--ciphers", "rc4", key="rsa")` starts that
    script of tests/checks with the `key` certificate set, waits until it listens (30 s at
    most: the script's output is shown when it does not) and returns its port."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(script: str, *args: str, key: str = "rsa") -> int:
        for _ in range(3):   # a port taken between free_port() and the bind: another one
            port = free_port()
            if _start_on(port, script, args, key):
                return port
        pytest.fail(f"{script} could not listen on a free port three times")

    def _start_on(port: int, script: str, args: tuple[str, ...], key: str) -> bool:
        files = certs[key]
        log = tmp_path / f"{Path(script).stem}-{port}.log"
        with open(log, "wb") as out:
            # as a module of the tests package (the scripts share tests/lab_servers/_common.py)
            proc = subprocess.Popen([sys.executable, "-m", f"tests.checks.{Path(script).stem}",
                                     "--port", str(port), "--chain-file", str(files.chain),
                                     "--key-file", str(files.key), *args],
                                    stdout=out, stderr=subprocess.STDOUT, env=_child_env(),
                                    start_new_session=True)
        procs.append(proc)
        deadline = time.monotonic() + 30
        while True:
            # listening, and by this process (not another test's server on the same port)
            inodes = listening_inodes(port, "127.0.0.1")
            if inodes and _owned_by(proc.pid, inodes):
                return True
            if proc.poll() is not None:
                return False if "in use" in log.read_text(errors="replace") else \
                    pytest.fail(f"{script} exited: {log.read_text()[-800:]!r}")
            if time.monotonic() > deadline:
                pytest.fail(f"{script} did not listen: {log.read_text()[-800:]!r}")
            time.sleep(0.05)

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
