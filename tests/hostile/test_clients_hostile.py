"""`tlsprobe clients` against scripted servers that never answer as TLS: the simulation
gives up on a target once the first clients got no TLS answer, rather than sending every
profile's hello (48) and retrying each timeout (--retries, default 2), which kept a run
against a server that accepts and never answers going for more than a quarter of an hour
at the default --timeout 5."""
from __future__ import annotations

from . import scenarios_transport as st
from .runner import run_tlsprobe
from .server import HostileServer

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
