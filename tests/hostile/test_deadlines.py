"""Deadlines that hold against servers that try to make the probe spend CPU or time past its
limit (issue 10 items 4 and 7): the probe's own CPU time (rusage of the child) and the
connection's duration as the scripted server saw it stay within the total limit plus one
second; never the raw wall time of the child (interpreter start-up varies with load).

Each test starts its own scripted server (tests/hostile/server.py) and child processes.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from tlsprobe.errors import NetworkError
from tlsprobe.net import tcp

from . import scenarios_deadline as sd
from .runner import ProbeOutcome, run_tlsprobe
from .server import HostileServer, Listener, Script

TIMEOUT = 2.0
TOTAL = 3 * TIMEOUT          # the probe's documented total limit at --timeout 2 (it counts
                             # from the command's start: leave start-up on a busy machine room)
CPU_LIMIT = 2.5              # seconds of the child's own CPU (a plain probe: well under 1)
HARD_TIMEOUT = 90.0


@pytest.fixture
def server(hostile_server: HostileServer) -> HostileServer:
    """The session's scripted server (conftest), which closes every listener at the end."""
    return hostile_server


def _trickled(listener: Listener, count: int) -> list[int]:
    """Bytes the server's script sent on each of `count` connections, once they ended (it
    notes a close within a moment). A trickle sends at most one byte per interval, so the
    count bounds how long the client kept the connection, however busy the machine (load
    only lowers it; a duration on the clock would grow with it)."""
    end = time.monotonic() + 10
    while len(listener.sent) < count and time.monotonic() < end:
        time.sleep(0.05)
    assert len(listener.sent) >= count, f"{len(listener.sent)} of {count} connections ended"
    return list(listener.sent)


def _probe(server: HostileServer, script: Script, *args: str,
           cwd: Path | None = None) -> tuple[ProbeOutcome, Listener]:
    listener = server.serve(script)
    out = run_tlsprobe(f"127.0.0.1:{listener.port}", "--timeout", str(TIMEOUT), *args,
                       hard_timeout=HARD_TIMEOUT, cwd=str(cwd) if cwd else None)
    return out, listener


def _context(out: ProbeOutcome, listener: Listener) -> str:
    return (f"\n$ {out.command}\nexit {out.returncode}, CPU {out.cpu_seconds:.2f} s, "
            f"spans {[round(b - a, 2) for a, b in listener.spans]}, sent {listener.sent}\n"
            f"stderr: {out.stderr[-1500:]}\nstdout: {out.stdout[-1500:]}\n"
            f"server: {listener.log[-6:]}")


def test_a_huge_unknown_prime_is_refused_without_the_check(server: HostileServer) -> None:
    """9941-bit prime, not safe: OpenSSL's DH_check spent most of a minute on such a p."""
    out, listener = _probe(server, sd.dhe_huge_unknown_prime)
    context = _context(out, listener)
    assert out.returncode is not None and "Traceback" not in out.stderr, context
    assert out.cpu_seconds < CPU_LIMIT, context
    assert "9941-bit modulus not used" in out.stdout + out.stderr, context


def test_a_new_generator_on_a_known_prime_costs_nothing(server: HostileServer) -> None:
    """ffdhe8192 with g = 5, 7, ...: cryptography's DH_check ran in full for every new g."""
    out, listener = _probe(server, sd.dhe_known_prime_varying_g)
    context = _context(out, listener)
    assert out.returncode == 5 and "handshake_failure" in out.stderr, context  # got past it
    assert out.cpu_seconds < CPU_LIMIT, context


def test_a_composite_modulus_is_not_prime_for_probe_and_scan(server: HostileServer) -> None:
    out, listener = _probe(server, sd.dhe_composite_modulus)
    context = _context(out, listener)
    assert out.returncode == 6, context
    assert out.stderr_lines and "is not prime" in out.stderr_lines[0], context
    scan = run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--timeout", "2",
                        "--no-progress", "--json", "--retries", "1", hard_timeout=HARD_TIMEOUT)
    context = _context(scan, listener)
    assert scan.returncode in (0, 1), context
    report = json.loads(scan.stdout.splitlines()[0])
    findings = {f["code"]: f for f in report["findings"]}
    assert findings["dh.not_prime"]["severity"] == "high", context
    assert "not prime" in findings["dh.not_prime"]["message"], context
    assert not any("-bit prime" in f["message"] for f in report["findings"]), context
    fixed = next(g["dhe"]["fixed"] for g in report["groups"] if g.get("dhe"))
    assert fixed["prime"] == "composite" and "prime" not in fixed["name"].split(), context


def test_a_fast_trickle_with_pcap_out_ends_in_time(server: HostileServer,
                                                   tmp_path: Path) -> None:
    """A thousand one-byte segments before the limit; --pcap-out writes them all."""
    pcap = tmp_path / "trickle.pcap"
    out, listener = _probe(server, sd.trickle_fast, "--pcap-out", str(pcap), cwd=tmp_path)
    context = _context(out, listener)
    assert out.returncode == 3 and "total time limit" in out.stderr, context
    # one byte every 2 ms: ended at the total limit (+1 s), not when the script ran out
    assert all(sent <= (TOTAL + 1) / 0.002 for sent in _trickled(listener, 1)), context
    assert out.cpu_seconds < CPU_LIMIT, context
    assert pcap.stat().st_size > 100 * 60, context     # the segments were written


def test_scan_of_a_stalling_server_is_a_timeout(server: HostileServer) -> None:
    """A server that trickles its answers past each connection's limit: exit 3, as the
    README documents for timeouts (it was 6, a protocol error)."""
    listener = server.serve(sd.trickle_any_hello)
    out = run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--timeout", "1",
                       "--no-progress", "--retries", "0", hard_timeout=HARD_TIMEOUT)
    context = _context(out, listener)
    assert out.returncode == 3, context
    assert out.stderr_lines and "timed out" in out.stderr_lines[0], context
    # one byte every 0.2 s: each connection ended at its limit (3 x --timeout, +1 s)
    assert all(sent <= (3 * 1 + 1) / 0.2 for sent in _trickled(listener, listener.connections)
               ), context


def test_name_resolution_is_inside_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resolver that never answers: open_channel gives up at its timeout (it waited for
    getaddrinfo for as long as that took)."""
    release = threading.Event()

    def stuck(*args: object, **kwargs: object) -> list[tcp.AddrInfo]:
        release.wait(60)
        raise socket.gaierror(socket.EAI_AGAIN, "never answered")

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    box: dict[str, BaseException] = {}

    def attempt() -> None:
        try:
            tcp.open_channel(tcp.Target("resolver.invalid", 443), timeout=0.3)
        except BaseException as exc:  # noqa: BLE001 -- what it raised is the result
            box["error"] = exc

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(15)          # far past the 0.3 s it should take, on any machine
    release.set()
    assert not worker.is_alive(), "open_channel waited for the resolver past its timeout"
    error = box.get("error")
    assert isinstance(error, NetworkError) and "resolving" in str(error), error


def test_scan_does_not_wait_for_a_stuck_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's connections resolved names in asyncio's default executor, which
    asyncio.run joins at exit: a resolver that never answered held the scan after every job
    had given up. Now each job gives up at its timeout and the run ends."""
    import asyncio

    from tlsprobe.engine.config import ClientConfig
    from tlsprobe.probes.audit.scheduler import INCONCLUSIVE, Job, Scheduler

    release = threading.Event()

    def stuck(*args: object, **kwargs: object) -> list[tcp.AddrInfo]:
        release.wait(60)
        raise socket.gaierror(socket.EAI_AGAIN, "never answered")

    monkeypatch.setattr(socket, "getaddrinfo", stuck)
    box: dict[str, object] = {}

    async def audit() -> object:
        scheduler = Scheduler(timeout=0.3, retries=1, backoff=0.01)
        return await scheduler.run(tcp.Target("resolver.invalid", 443),
                                   Job(ClientConfig(), "versions"))

    def attempt() -> None:
        box["outcome"] = asyncio.run(audit())

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(15)          # far past the 2 x 0.3 s the two attempts take
    release.set()
    assert not worker.is_alive(), "the scan waited for the resolver past its timeouts"
    outcome = box["outcome"]
    assert getattr(outcome, "status") == INCONCLUSIVE and "timed out" in getattr(
        outcome, "reason"), outcome


def test_a_limit_used_up_by_start_up_does_not_blame_the_server() -> None:
    """The total limit counts from the command's start; when tlsprobe's own start-up used it
    all (a very busy machine), the one line says so instead of "the server timed out"."""
    from tlsprobe.probes.probe import ProbeOptions, run_probe

    run = run_probe(tcp.Target("127.0.0.1", 9), ProbeOptions(
        timeout=1.0, deadline=time.monotonic() - 0.5))
    assert run.result.error_kind == "network"
    assert "used up by tlsprobe's own start-up (3.5 s" in (run.result.error or "")
