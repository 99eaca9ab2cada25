"""`tlsprobe clients` against scripted servers that never answer as TLS: the simulation
gives up on a target once the first clients got no TLS answer, rather than sending every
profile's hello (48) and retrying each timeout (--retries, default 2), which kept a run
against a server that accepts and never answers going for more than a quarter of an hour
at the default --timeout 5."""
from __future__ import annotations

import json

import pytest

from . import scenarios_transport as st
from .catalog import all_scenarios
from .runner import run_tlsprobe
from .server import Conn, HostileServer

TIMEOUT = 1.0
UNREACHED_LIMIT = 3   # probes/clients/simulate.py: clients without a TLS answer, then none


def test_clients_give_up_on_a_server_that_never_answers(
        hostile_server: HostileServer) -> None:
    listener = hostile_server.serve(st.no_answer)
    out = run_tlsprobe("clients", f"127.0.0.1:{listener.port}", "--timeout", str(TIMEOUT),
                       "--json", hard_timeout=60.0)
    context = (f"\n$ {out.command}\nexit {out.returncode} after {out.elapsed:.1f} s, "
               f"{listener.connections} connections\nstderr: {out.stderr}")
    assert out.returncode == 3, context   # None: killed at 60 s
    assert out.stderr_lines and "timed out" in out.stderr_lines[0], context
    # the first clients (UNREACHED_LIMIT, and those started beside them under the per-host
    # cap of 3), each asked again alone once after silence in company, and no more
    assert listener.connections <= 2 * (UNREACHED_LIMIT + 3 - 1), context
    assert '"not sent: ' in out.stdout, context


async def _reset_at_once(conn: Conn) -> None:
    """Reads whatever came first (a ClientHello, or nothing for a STARTTLS client that waits
    for a greeting), then aborts with a TCP RST."""
    await conn.hold(0.3)
    conn.reset()


@pytest.mark.parametrize("args", [
    ("clients",), ("clients", "--json"), ("--starttls", "smtp"), ("scan", "--starttls", "smtp"),
], ids=["clients", "clients-json", "probe-starttls", "scan-starttls"])
def test_a_reset_is_said_in_tlsprobe_s_own_words(hostile_server: HostileServer,
                                                  args: tuple[str, ...]) -> None:
    """A TCP RST is "connection reset by peer", as the probe and the scan say it, never
    Python's "Connection reset by peer" (the asyncio transport gave its strerror, in the
    clients' error line and every JSON row's detail); the target is named once (the STARTTLS
    probe said '127.0.0.1:P: smtp: 127.0.0.1:P: connection reset ...')."""
    listener = hostile_server.serve(st.rst_after_client_hello if args[0] == "clients"
                                    else _reset_at_once)
    where = f"127.0.0.1:{listener.port}"
    command = (args[0], where, *args[1:]) if args[0] in ("clients", "scan") else (where, *args)
    out = run_tlsprobe(*command, "--timeout", "3", hard_timeout=60.0)
    context = f"\n$ {out.command}\nexit {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr}"
    assert out.returncode == 3, context
    assert out.stderr_lines and "connection reset by peer" in out.stderr_lines[0], context
    assert out.stderr_lines[0].count(where) == 1, context
    assert "Connection reset" not in out.stdout + out.stderr, context


@pytest.mark.parametrize("name, said", [
    ("close_after_serverhello_12", "server closed the connection before sending the rest of "
                                   "its flight"),
    ("close_after_certificate_12", "server closed the connection before sending the rest of "
                                   "its flight"),
    ("tls13_close_after_ee", "server closed the connection before sending its Finished"),
    ("rst_mid_flight", "connection reset by peer"),
])
def test_a_flight_the_server_cuts_off_is_not_connected(hostile_server: HostileServer,
                                                       name: str, said: str) -> None:
    """A server that closes or resets the connection inside its first flight (after its
    ServerHello): no client connects to that, yet the simulation said "connected" with the
    close as a note. What the ServerHello chose is stated; the verdict is inconclusive."""
    script = next(s.script for s in all_scenarios() if s.name == name)
    listener = hostile_server.serve(script)
    out = run_tlsprobe("clients", f"127.0.0.1:{listener.port}", "--profiles", "chromium-156",
                       "--no-verify", "--timeout", "3", "--json", hard_timeout=60.0)
    assert out.returncode == 0, out.stderr
    (sim,) = json.loads(out.stdout)["clients"]
    assert sim["status"] == "inconclusive", sim
    assert sim["version_name"] == ("TLS 1.3" if name.startswith("tls13") else "TLS 1.2"), sim
    assert sim["detail"] == (f"after its ServerHello: {said}: whether this client connects "
                             "is not established"), sim
