"""Fixtures for the STARTTLS tests: `daemon(name, **options)` starts a real daemon from
tests/lab_servers/daemons.py once per session and configuration (treat it as read-only); all
are stopped, by process group, when the session ends. A daemon that is not installed skips
the test, except under CI where it fails (servers.peer_unavailable)."""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.lab_servers.daemons import (Daemon, DaemonFactory, DaemonStartError, DaemonUnavailable,
                                 start_daemon)
from tests.helpers.servers import CertSet, peer_unavailable


@pytest.fixture(scope="session")
def daemon(certs: CertSet) -> Iterator[DaemonFactory]:
    running: dict[tuple[object, ...], Daemon] = {}
    folders: list[Path] = []
    failed: dict[tuple[object, ...], str] = {}

    def start(name: str, **options: object) -> Daemon:
        key = (name, *sorted(options.items()))
        if key in failed:
            pytest.fail(failed[key], pytrace=False)
        found = running.get(key)
        if found is not None and found.alive():
            return found
        # Not under pytest's basetemp: every pytest session (on this machine, any) resets
        # /tmp/pytest-of-<user> to mode 700, cutting off daemons that run as their own user.
        folder = Path(tempfile.mkdtemp(prefix=f"tlsprobe-{name}-"))
        os.chmod(folder, 0o711)
        folders.append(folder)
        try:
            running[key] = start_daemon(name, folder, certs, options)
        except DaemonUnavailable as exc:
            peer_unavailable(str(exc))
        except (DaemonStartError, RuntimeError, OSError) as exc:
            failed[key] = f"{name} {options} did not start: {exc}"
            pytest.fail(failed[key], pytrace=False)
        return running[key]

    yield start
    for one in running.values():
        one.stop()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
