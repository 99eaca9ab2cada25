"""Fixtures of the diff tests: lab servers that can be reconfigured on the SAME port (a
target before and after a configuration change), and the CLI runner.

`same_port(config, port=None)` starts the lab server of `config` (tests/lab_servers) on
`port` (a free one when None), waiting for it to listen; a server stopped and started again
with another configuration on its port is the same target, reconfigured."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import (
    CertSet,
    Server,
    _free_port,
    launch_once,
    missing_reason,
    peer_unavailable,
)
from tests.lab_servers.builders import ServerConfig

REPO = Path(__file__).resolve().parents[2]
#: the audit's phases and two cheap checks: what the tests compare, in a few connections
CHECKS = "versions,groups,pq,suites,sigalgs,cert,ems,heartbleed"

SamePort = Callable[..., Server]


def cli(*args: Any, timeout: float = 120,
        path: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`python -m tlsprobe ARGS` from this checkout (stdin closed); `path`: folders put
    first on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [*path, str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                              else [])))
    return subprocess.run([sys.executable, "-m", "tlsprobe", *map(str, args)], check=False,
                          env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def start_on(config: ServerConfig, port: int, certs: CertSet, workdir: Path) -> Server:
    """The lab server of `config` listening on `port` (retried for a few seconds while the
    port is still held by the server stopped before)."""
    reason = missing_reason(config.impl)
    if reason:
        peer_unavailable(reason)
    tail = ""
    for _attempt in range(10):
        wd = Path(tempfile.mkdtemp(prefix=f"{config.impl}-", dir=workdir))
        got = launch_once(config, port, certs, wd)
        if isinstance(got, Server):
            return got
        tail = got
        if "in use" not in tail.lower():
            break
        time.sleep(0.5)
    raise RuntimeError(f"{config} did not listen on port {port}: {tail}")


@pytest.fixture
def same_port(certs: CertSet, tmp_path: Path) -> Iterator[SamePort]:
    """Factory: start(config, port=None, certs=None) -> Server; all stopped at teardown."""
    started: list[Server] = []

    def start(config: ServerConfig, port: int | None = None,
              cert_set: CertSet | None = None) -> Server:
        for s in started:
            if s.port == port:
                s.stop()
        server = start_on(config, port or _free_port(config.host), cert_set or certs, tmp_path)
        started.append(server)
        return server
    yield start
    for s in started:
        s.stop()
