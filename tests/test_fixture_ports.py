"""The fixtures stay correct when several test processes share the machine (pytest-xdist
workers, `.ci/run -n`): a port another process took between probing and binding is never
mistaken for the daemon's own, and the early `mypy --strict` run is started once per run,
not once per worker."""
from __future__ import annotations

import socket
import sys
import types
from pathlib import Path

import pytest

from lab_servers import daemons
from servers import CertSet

# A stand-in daemon: listens on the port given, or, when that is taken, keeps running
# without listening (as a daemon that logs the bind error and goes on would).
_DAEMON = """import socket, sys, time
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(5)
    print("listening", flush=True)
except OSError as exc:
    print("bind failed:", exc.strerror, flush=True)
time.sleep(120)
"""


def test_a_port_held_by_another_process_is_retried_on_new_ports(
        monkeypatch: pytest.MonkeyPatch, certs: CertSet, tmp_path: Path) -> None:
    thief = socket.socket()
    thief.bind(("127.0.0.1", 0))
    thief.listen(1)
    stolen = thief.getsockname()[1]
    ports = [stolen]
    calls: list[Path] = []

    def recipe(workdir: Path, certs: CertSet) -> daemons.Launch:
        calls.append(workdir)
        port = ports.pop(0) if ports else daemons.free_ports(1)[0]
        return daemons.Launch([sys.executable, "-c", _DAEMON, str(port)], {"smtp": port}, [])
    module = types.ModuleType("lab_servers.fake_daemon")
    module.RECIPES = {"fake": recipe}   # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lab_servers.fake_daemon", module)
    monkeypatch.setitem(daemons.DAEMONS, "fake", "fake_daemon")
    try:
        started = daemons.start_daemon("fake", tmp_path / "d", certs, timeout=20)
        try:
            assert started.ports["smtp"] != stolen
            assert len(calls) == 2 and calls[1] == tmp_path / "d" / "retry-1"
            assert "listening" in started.log_tail()
        finally:
            started.stop()
    finally:
        thief.close()

