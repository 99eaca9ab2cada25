#!/usr/bin/env python3
"""Group audit side by side: tlsprobe, sslscan, sslyze and testssl.sh against one server.

The server is the issue's reference: openssl s_server -groups X25519:P-384:ffdhe2048
-serverpref (TLS 1.3: x25519, secp384r1, ffdhe2048 in that order; TLS 1.2: x25519,
secp384r1 for ECDHE plus fixed DHE parameters). Every tool reaches it through a relay written
here that counts TCP connections; the run is done twice: plain loopback (delay 0) and with
every chunk held 25 ms in each direction (a server on another continent: there the number
of round trips, not the CPU, decides). For each tool: wall time, connections, and whether
its group answer is right (per version where the tool separates versions; order where it
reports one).

    python benchmarks/audit.py [--delay-ms 25] [--rounds 5] [--skip testssl] [--sslyze PATH]

Each setting (server, delay) runs every tool --rounds times, alternating (round k runs the
tools in the reverse order of round k-1, so that no tool always follows the same one), and
prints the median wall and CPU time of each tool, then tlsprobe's ratios to sslscan (wall
and CPU) against issue 35's targets: at 0 ms the whole tlsprobe process within 1.3x
sslscan's wall time, through the relay at most 0.20 of it (the lead kept). The load
average is printed before and after.

tlsprobe runs from byte-compiled modules, as `pip install` leaves them: tlsprobe/ is
compiled once (`compileall`, into its __pycache__ folders, which git ignores) and
PYTHONDONTWRITEBYTECODE is dropped for tlsprobe's runs. A machine that sets it (this
project's build machine does) would otherwise make every run compile its ~75 modules again,
about 0.15 s of CPU per scan that no installed copy spends. Each tool's own CPU time (wait4)
is shown beside its wall time: on a busy machine the wall time of tlsprobe's CPU-bound
start-up stretches, while sslscan's time is mostly the relay's waits.

sslyze is looked up as --sslyze, $TLSPROBE_SSLYZE, `sslyze` on PATH, then
/tmp/sslyze-venv/bin/sslyze (sslyze pins an older `cryptography`, so it lives in its own
virtualenv: python -m venv /tmp/sslyze-venv && /tmp/sslyze-venv/bin/pip install sslyze).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TRUTH13 = ["x25519", "secp384r1", "ffdhe2048"]
TRUTH12 = ["x25519", "secp384r1"]
# (impl, what the TLS 1.2 DHE answer should be). s_server is the reference but
# handles one connection at a time; nginx (same groups, ssl_prefer_server_ciphers on)
# serves connections concurrently, as a production server would.
SERVERS = {"openssl": "fixed modp_2048", "nginx": "none"}
ALIASES = {"x25519": "x25519", "secp384r1": "secp384r1", "p-384": "secp384r1",
           "ffdhe2048": "ffdhe2048", "secp256r1": "secp256r1", "prime256v1": "secp256r1"}


def norm(name: str) -> str:
    return ALIASES.get(name.strip().lower(), name.strip().lower())


# -- counting relay with a per-chunk delay ------------------------------------------------
class Relay:
    """127.0.0.1 relay to the server; counts connections, holds each chunk `delay` s. An
    end of data one way (a FIN) is passed on after the chunks before it, and the other way
    stays open until it ends too, as on a network path (a half-close passes)."""

    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream, self.delay, self.count = upstream, delay, 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        self.ready.wait(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.count += 1
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        for w in (writer, up_w):   # the relay itself must not add Nagle delays
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ways = [self.loop.create_task(self._pipe(reader, up_w)),
                self.loop.create_task(self._pipe(up_r, writer))]
        # a half-close passes: the other way goes on until it ends too (or, stuck, for
        # at most a few seconds: a peer that vanished), then both sockets close
        _, stuck = await asyncio.wait(ways, return_when=asyncio.FIRST_COMPLETED)
        if stuck:
            await asyncio.wait(stuck, timeout=3.0)
        for w in (writer, up_w):
            w.close()
        for way in ways:   # what went wrong one way is that connection's end, no more
            if way.done() and not way.cancelled():
                way.exception()
            way.cancel()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def pump() -> None:
            while True:
                due, data = await queue.get()
                wait = due - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
            try:
                writer.write_eof()
            except OSError:
                writer.close()

        task = self.loop.create_task(pump())
        try:
            while True:
                data = await reader.read(65536)
                await queue.put((self.loop.time() + self.delay, data))
                if not data:
                    break
        except OSError:
            await queue.put((self.loop.time(), b""))
        try:
            await task
        except OSError:
            writer.close()


# -- the tools ------------------------------------------------------------------------------
@dataclass
class Result:
    tool: str
    wall: float
    connections: int
    tls13: list[str] | None      # None: the tool does not separate versions
    tls12: list[str] | None
    union: set[str]
    order: str                   # "server", "client", "-" (not reported)
    note: str = ""
    dhe_expected: str = ""
    audit_s: float | None = None    # tlsprobe: the audit's own duration, without start-up
    cpu: float | None = None        # the tool's own CPU seconds (user + sys, from wait4)

    @property
    def right(self) -> str:
        if self.dhe_expected and self.tool == "tlsprobe" and self.dhe_expected not in self.note:
            return "no (DHE)"
        if self.tls13 is not None:
            ok = sorted(self.tls13) == sorted(TRUTH13) and sorted(self.tls12 or []) == \
                sorted(TRUTH12)
            exact = ok and self.tls13 == TRUTH13 and self.order == "server"
            return "yes, with order" if exact else "sets right, no order" if ok else "no"
        return "union right, versions mixed" if self.union == set(TRUTH13) else "no"


def tlsprobe_env() -> dict[str, str]:
    """This tree first on the path, its bytecode used (see the module docstring)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_tlsprobe() -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "tlsprobe")],
                   env=tlsprobe_env(), check=True, timeout=300)


def run_measured(cmd: list[str], timeout: float, **kw: object) -> tuple[int, str, float, float]:
    """Run `cmd`: (exit code, stdout, wall seconds, its own CPU seconds from wait4)."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, text=True,
                                **kw)  # type: ignore[call-overload]
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return proc.returncode, out.read(), wall, usage.ru_utime + usage.ru_stime


def run_tlsprobe(port: int) -> tuple[Result, float]:
    cmd = [sys.executable, "-m", "tlsprobe", "scan", f"127.0.0.1:{port}", "--groups-only",
           "--json", "--no-progress"]
    code, stdout, wall, cpu = run_measured(cmd, 300, cwd=REPO, env=tlsprobe_env())
    if code != 0:
        raise RuntimeError(f"tlsprobe scan exited {code}")
    r = json.loads(stdout.splitlines()[0])
    g13 = next(g for g in r["groups"] if g["version"]["name"] == "TLS 1.3")
    g12 = next(g for g in r["groups"] if g["version"]["name"] == "TLS 1.2")
    t13 = [g["name"] for g in g13["supported"]]
    t12 = [g["name"] for g in g12["supported"]]
    dhe = g12["dhe"]
    dh = (dhe["fixed"] or {}).get("name") if dhe["status"] == "fixed" else \
        ",".join(g["name"] for g in dhe["negotiated"])
    order = g13["order"] if g13["order"] == g12["order"] else f"{g13['order']}/{g12['order']}"
    res = Result("tlsprobe", wall, 0, t13, t12, set(t13) | set(t12), order,
                 f"TLS 1.2 DHE: {dhe['status']} {dh or ''}".rstrip() +
                 f"; own count {r['total_connections']}", cpu=cpu)
    return res, float(r["duration_s"])


def run_sslscan(port: int) -> Result:
    cmd = ["sslscan", "--no-colour", "--no-ciphersuites", "--no-renegotiation",
           "--no-compression", "--no-heartbleed", "--no-fallback", "--no-check-certificate",
           f"127.0.0.1:{port}"]
    _code, out, wall, cpu = run_measured(cmd, 600)
    per: dict[str, list[str]] = {"TLSv1.3": [], "TLSv1.2": []}
    for m in re.finditer(r"^(TLSv1\.[23])\s+\d+ bits\s+(\S+)", out, re.MULTILINE):
        per[m.group(1)].append(norm(m.group(2)))
    return Result("sslscan", wall, 0, per["TLSv1.3"], per["TLSv1.2"],
                  set(per["TLSv1.3"]) | set(per["TLSv1.2"]), "-", "protocols + groups", cpu=cpu)


def run_sslyze(port: int, exe: str) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.json"
        _code, _out, wall, cpu = run_measured([exe, "--elliptic_curves", "--json_out",
                                               str(path), f"127.0.0.1:{port}"], 600)
        data = json.loads(path.read_text())
    curves = data["server_scan_results"][0]["scan_result"]["elliptic_curves"]["result"]
    names = [norm(c["name"]) for c in curves["supported_curves"]]
    return Result("sslyze", wall, 0, None, None, set(names), "-",
                  "EC curves only: " + ",".join(names), cpu=cpu)


def run_testssl(port: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.json"
        _code, _out, wall, cpu = run_measured(
            ["testssl", "--quiet", "--color", "0", "--warnings", "off", "-f", "--jsonfile",
             str(path), f"127.0.0.1:{port}"], 1800, cwd=tmp)
        rows = {row["id"]: row["finding"] for row in json.loads(path.read_text())}
    curves = [norm(c) for c in rows.get("PFS_ECDHE_curves", rows.get("FS_ECDHE_curves",
                                                                       "")).split()]
    dh = [norm(c) for c in rows.get("DH_groups", "").split()]
    return Result("testssl", wall, 0, None, None, set(curves) | set(dh), "-",
                  f"curves {' '.join(curves)}; DH {' '.join(dh)}", cpu=cpu)


def sslyze_path(given: str | None) -> str | None:
    for cand in (given, os.environ.get("TLSPROBE_SSLYZE"), shutil.which("sslyze"),
                 "/tmp/sslyze-venv/bin/sslyze"):
        if cand and Path(cand).exists():
            return cand
    return None


def bench(relay: Relay, dhe: str, fn, *a) -> Result:
    relay.count = 0
    res = fn(relay.port, *a)
    extra = None
    if isinstance(res, tuple):
        res, extra = res
    time.sleep(0.2)  # let the relay see late connections
    res.connections, res.dhe_expected = relay.count, dhe
    if extra is not None:
        res.audit_s = extra
    return res


def median_of(runs: list[Result]) -> Result:
    """One tool's rounds as one row: the median wall, CPU and audit times; the answer of
    the last round, marked when the rounds did not all give the same one."""
    last = runs[-1]
    cpus = [r.cpu for r in runs if r.cpu is not None]
    audits = [r.audit_s for r in runs if r.audit_s is not None]
    answers = {(r.right, r.connections) for r in runs}
    note = last.note
    if len(answers) > 1:
        note += f"; rounds differ: {sorted(answers)}"
    return replace(last, wall=statistics.median(r.wall for r in runs),
                   cpu=statistics.median(cpus) if cpus else None,
                   audit_s=statistics.median(audits) if audits else None, note=note)


def table(title: str, results: list[Result], rounds: int) -> None:
    print(f"\n{title}: median of {rounds} alternating rounds")
    print(f"{'tool':9} {'wall s':>7} {'CPU s':>6} {'conns':>6}  {'TLS 1.3 groups':28} "
          f"{'TLS 1.2 groups':20} {'order':7} right?")
    for r in results:
        t13 = ",".join(r.tls13) if r.tls13 is not None else "(versions mixed)"
        t12 = ",".join(r.tls12) if r.tls12 is not None else ",".join(sorted(r.union))
        cpu = f"{r.cpu:6.2f}" if r.cpu is not None else f"{'-':>6}"
        print(f"{r.tool:9} {r.wall:7.2f} {cpu} {r.connections:6d}  {t13:28} {t12:20} "
              f"{r.order:7} {r.right}")
        note = r.note + (f"; audit itself {r.audit_s:.3f} s" if r.audit_s is not None else "")
        if note:
            print(f"{'':9} {note}")


def ratios(by: dict[str, Result], delay: float) -> None:
    """tlsprobe against sslscan: the whole process (wall and CPU), the audit alone, and the
    issue's target for this delay (0 ms: within 1.3x; through the relay: at most 0.20)."""
    if "tlsprobe" not in by or "sslscan" not in by:
        return
    t, s = by["tlsprobe"], by["sslscan"]
    ratio, alone = t.wall / s.wall, (t.audit_s or t.wall) / s.wall
    cpu = f", CPU {t.cpu / s.cpu:.2f}" if t.cpu and s.cpu else ""
    target = 0.20 if delay else 1.30
    verdict = "met" if ratio <= target else "NOT met"
    print(f"tlsprobe / sslscan: process wall {ratio:.2f}{cpu} (Python start included), audit "
          f"alone {alone:.2f}; connections {t.connections} vs {s.connections}; target "
          f"process <= {target:.2f}: {verdict}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delay-ms", type=float, default=25.0)
    ap.add_argument("--skip", action="append", default=[], help="tool to leave out")
    ap.add_argument("--sslyze", default=None)
    ap.add_argument("--server", choices=("openssl", "nginx", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per setting "
                    "(the medians are printed; at least 5 for the issue's figures)")
    args = ap.parse_args()
    sslyze = sslyze_path(args.sslyze)
    tools = [("tlsprobe", run_tlsprobe, ()), ("sslscan", run_sslscan, ())]
    if shutil.which("sslscan") is None:
        tools.pop()
        print("sslscan not installed: skipped")
    if sslyze:
        tools.append(("sslyze", run_sslyze, (sslyze,)))
    else:
        print("sslyze not found (see the docstring): skipped")
    if shutil.which("testssl"):
        tools.append(("testssl", run_testssl, ()))
    tools = [t for t in tools if t[0] not in args.skip]
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} "
          "CPUs (a busy machine stretches the CPU-bound start-up, not the relay's waits)")
    impls = ("openssl", "nginx") if args.server == "both" else (args.server,)
    compile_tlsprobe()
    print("tlsprobe runs from byte-compiled modules (see the docstring)")
    for impl in impls:
        run_server(impl, tools, args.delay_ms / 1000, max(1, args.rounds))
    print(f"\nload average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def run_server(impl: str, tools: list, delay_s: float, rounds: int) -> None:
    from tests.helpers.servers import start_server
    server = start_server(impl, groups="X25519:P-384:ffdhe2048", serverpref=True)
    name = "openssl s_server -groups X25519:P-384:ffdhe2048 -serverpref" if impl == "openssl" \
        else "nginx ssl_ecdh_curve X25519:P-384:ffdhe2048; ssl_prefer_server_ciphers on"
    print(f"\n##### server: {name} on 127.0.0.1:{server.port}")
    print(f"truth: TLS 1.3 {','.join(TRUTH13)} (server order); TLS 1.2 ECDHE "
          f"{','.join(TRUTH12)}; TLS 1.2 DHE {SERVERS[impl]}")
    try:
        for delay in (0.0, delay_s):
            relay = Relay(("127.0.0.1", server.port), delay)
            runs: dict[str, list[Result]] = {tool: [] for tool, _, _ in tools}
            for k in range(rounds):
                for tool, fn, a in (tools if k % 2 == 0 else tools[::-1]):
                    runs[tool].append(bench(relay, SERVERS[impl], fn, *a))
            results = [median_of(runs[tool]) for tool, _, _ in tools]
            what = "plain loopback" if not delay else f"{delay * 1000:.0f} ms per chunk each way"
            table(f"== {what} (via the counting relay)", results, rounds)
            ratios({r.tool: r for r in results}, delay)
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
