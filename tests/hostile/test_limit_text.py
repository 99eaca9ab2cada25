"""A time limit under a second is said as given in the one error line: "no data for 0.25
s", "total time limit of 0.004 s" (they read "0.2 s" and "0.0 s": one decimal)."""
from __future__ import annotations

from collections.abc import Callable

from tests.conftest import CliResult
from tests.helpers.servers import Server

from .catalog import HOLD
from .runner import run_tlsprobe
from .server import Conn, HostileServer


async def silent_after_hello(conn: Conn) -> None:
    await conn.client_hello()
    await conn.hold(HOLD)


def test_a_read_timeout_under_a_second_is_said_as_given(hostile_server: HostileServer) -> None:
    listener = hostile_server.serve(silent_after_hello)
    out = run_tlsprobe(f"127.0.0.1:{listener.port}", "--timeout", "0.25",
                       "--total-timeout", "60", hard_timeout=60.0)
    assert out.returncode == 3, out.stderr
    want = f"tlsprobe: 127.0.0.1:{listener.port}: timed out waiting for the server (no data " \
        "for 0.25 s)"
    assert out.stderr_lines == [want], out.stderr


def test_a_total_limit_under_a_second_is_said_as_given(
        server_cache: Callable[..., Server], run_cli: Callable[..., CliResult]) -> None:
    srv = server_cache("openssl", groups=["X25519"], proto="both")
    code, _, err = run_cli(f"127.0.0.1:{srv.port}", "--total-timeout", "0.004",
                           isolated=True)   # a process's start-up alone takes longer
    assert code == 3, err
    assert "total time limit of 0.004 s" in err, err
