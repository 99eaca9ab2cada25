"""Fixtures for the hostile-server suite.

- `hostile_server` (session): a running `HostileServer` (asyncio loop in a thread on
  127.0.0.1); `hostile_server.serve(script) -> Listener` (`.port`, `.log`, `.connections`).
  Every listener and connection is closed at the end of the session.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import HostileServer


@pytest.fixture(scope="session")
def hostile_server() -> Iterator[HostileServer]:
    server = HostileServer()
    try:
        yield server
    finally:
        server.stop()
