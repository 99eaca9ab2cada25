#!/usr/bin/env python3
"""Survey cost: `tlsprobe survey` of loopback targets against `tlsprobe scan -f` of the same
targets (the same checks and concurrency, --json to a file), and sslyze's mass scan
(`sslyze --targets_in FILE --elliptic_curves`), in alternating rounds.

Issue 35's targets: the survey within 20 % of `scan -f`'s time (wall and CPU) and within
50 MB of its memory. Each round runs every command once, in turn (scan -f, survey with 1
worker, survey with the default workers (one per core), sslyze); the table gives each
command's median over the rounds and the ratios of the medians, with the load average at
the start and the end.

The targets are tests/survey/farm.py's servers: addresses across 127.0.0.0/8 with four
ports each, all served by one asyncio thread of this process with Python's ssl module, one
group per server (TLS 1.2 + 1.3 with secp256r1, TLS 1.3 with secp384r1, TLS 1.2 with
secp384r1). Per run: wall time; the tool's CPU time (every process it started, the ones it
left to finish on their own included: this process is their child subreaper and reaps them
all before the next run); peak memory (the largest sum, over the command's process tree, of
each process's proportional set size, PSS: a page shared by forked workers is counted once
in all, sampled every 20 ms); connections (counted by the servers); targets with the right
groups. Then the survey's output size per row and per target (for docs/CAPACITY.md).

    python benchmarks/survey.py [--targets 200] [--rounds 5] [--skip sslyze] [--sslyze PATH]

On a 2-core machine the servers share the cores with the tool: the figures are lower bounds
of what the workers do against remote servers (where the network's round trips, not the CPU,
set the pace per target and more targets run at once).
sslyze is looked up as --sslyze, $TLSPROBE_SSLYZE, `sslyze` on PATH, then
/tmp/sslyze-venv/bin/sslyze (python -m venv /tmp/sslyze-venv &&
/tmp/sslyze-venv/bin/pip install sslyze).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]   # tlsprobe and the test suite's helpers (tests is a package)

from tests.lab_servers.certs import make_certs  # noqa: E402
from tests.survey.farm import EXPECTED, Farm, FarmTarget  # noqa: E402

NAMES = {"prime256v1": "secp256r1", "secp256r1": "secp256r1", "secp384r1": "secp384r1",
         "x25519": "x25519"}
#: prctl(PR_SET_CHILD_SUBREAPER): orphaned descendants (a fork server the tool does not
#: wait for, its workers) become this process's children, so their CPU is counted
PR_SET_CHILD_SUBREAPER = 36
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Run:
    name: str
    wall: float
    cpu_tool: float
    memory_mb: float
    connections: int
    right: int = 0
    note: str = ""
    alone_mb: float = 0.0


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def reap_all(timeout: float = 60) -> None:
    """Wait for every child left (orphans reparented here): their CPU then counts."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.02)
    raise SystemExit("a process of the tool was still running 60 s after the command ended")


def _tree(root: int) -> list[int]:
    """`root` and its descendants (and the orphans reparented to this process)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    mine, found = {root}, True
    me = os.getpid()
    while found:
        found = False
        for pid, ppid in parents.items():
            if pid not in mine and (ppid in mine or ppid == me):
                mine.add(pid)
                found = True
    return sorted(mine)


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _alone(pids: list[int]) -> int:
    """The tree's memory as on a machine where no other process maps its libraries: the
    summed anonymous PSS, plus for each file the most of its pages resident in any one of
    the processes (forked processes share them). PSS divides a library's pages among every
    process on the machine that maps it (other programs using pyarrow lower the tool's
    PSS); this does not, and counts the shared C library and libpython in full."""
    anon, files = 0, dict[str, int]()
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps").read_text()
        except OSError:
            continue
        name, rss, mine = None, 0, dict[str, int]()
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if " " in key:              # a mapping's first line: address range ... path
                parts = line.split()
                name = parts[5] if len(parts) > 5 and parts[5].startswith("/") else None
            elif key == "Rss":
                rss = int(value.split()[0])
            elif key == "Anonymous" and name is not None:
                mine[name] = mine.get(name, 0) + rss - int(value.split()[0])
        try:
            anon += next(int(line.split()[1]) for line in
                         Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
                         if line.startswith("Pss_Anon:"))
        except (OSError, StopIteration):
            continue
        for path, kb in mine.items():
            files[path] = max(files.get(path, 0), kb)
    return (anon + sum(files.values())) * 1024


class Sampler:
    """The peak of the process tree's summed PSS while a command runs (every 20 ms), and of
    `_alone` (every 100 ms: smaps is long to read)."""

    def __init__(self, root: int) -> None:
        self.root, self.peak, self.peak_alone, self.stop = root, 0, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        tick = 0
        while not self.stop.wait(0.02):
            tree = _tree(self.root)
            self.peak = max(self.peak, sum(_pss(p) for p in tree))
            tick += 1
            if tick % 5 == 0:
                self.peak_alone = max(self.peak_alone, _alone(tree))

    def done(self) -> tuple[float, float]:
        self.stop.set()
        self.thread.join()
        return self.peak / 1e6, self.peak_alone / 1e6


def measure(name: str, farm: Farm, argv: list[str], env: dict[str, str] | None = None,
            stdout: Path | None = None, timeout: float = 3600) -> tuple[Run, str, int]:
    reap_all()
    start_conn, start_cpu = farm.accepted, children_cpu()
    t0 = time.monotonic()
    with open(stdout or os.devnull, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True, env=env,
                                stdin=subprocess.DEVNULL)
        sampler = Sampler(proc.pid)
        _, err = proc.communicate(timeout=timeout)
    wall = time.monotonic() - t0
    memory, alone = sampler.done()
    reap_all()
    return Run(name, wall, children_cpu() - start_cpu, memory,
               farm.accepted - start_conn, alone_mb=alone), err, proc.returncode


def expected_sets(target: FarmTarget) -> set[str]:
    assert target.config is not None
    return {g for groups in EXPECTED[target.config].values() for g in groups}


def count_right(farm: Farm, reports: list[dict[str, object]]) -> int:
    by_target = {(d["host"], d["port"]): d for d in reports}
    right = 0
    for t in farm.targets:
        report = by_target.get((t.host, t.port))
        if report and not report["error"] and {
                g["name"] for a in report["groups"]  # type: ignore[attr-defined]
                for g in a["supported"]} == expected_sets(t):
            right += 1
    return right


def tool_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)    # as installed: byte-compiled modules
    return env


def scan(farm: Farm, targets_file: Path, checks: str, concurrency: int, work: Path) -> Run:
    out = work / "scan.jsonl"
    run, err, code = measure("tlsprobe scan -f", farm,
                             [sys.executable, "-m", "tlsprobe", "scan", "-f", str(targets_file),
                              "--checks", checks, "--concurrency", str(concurrency), "--json",
                              "--no-progress"], env=tool_env(), stdout=out)
    if code not in (0, 1):
        raise SystemExit(f"scan -f failed ({code}): {err[-2000:]}")
    run.right = count_right(farm, [json.loads(line) for line in out.read_text().splitlines()])
    return run


def survey(farm: Farm, targets_file: Path, workers: int | None, checks: str,
           concurrency: int, work: Path) -> tuple[Run, Path]:
    out = work / f"survey-{workers}"
    shutil.rmtree(out, ignore_errors=True)
    name = ("tlsprobe survey, default" if workers is None else
            f"tlsprobe survey, {workers} worker{'s' * (workers > 1)}")
    argv = [sys.executable, "-m", "tlsprobe", "survey", str(targets_file), "--out", str(out),
            "--checks", checks, "--concurrency", str(concurrency), "--no-progress"]
    run, err, code = measure(name, farm, argv + ["--workers", str(workers)] * (workers is not None),
                             env=tool_env())
    if code != 0:
        raise SystemExit(f"survey failed ({code}): {err[-2000:]}")
    run.right = count_right(farm, [json.loads(line) for p in (out / "_jsonl").glob("*.jsonl")
                                   for line in p.read_text().splitlines()])
    return run, out


def sslyze(farm: Farm, targets_file: Path, binary: str, work: Path) -> Run:
    out = work / "sslyze.json"
    out.unlink(missing_ok=True)
    run, err, code = measure("sslyze --elliptic_curves", farm,
                             [binary, "--targets_in", str(targets_file), "--elliptic_curves",
                              "--quiet", "--json_out", str(out)])
    if not out.exists():
        raise SystemExit(f"sslyze wrote no result ({code}): {err[-2000:]}")
    data = json.loads(out.read_text())
    wanted = {(t.host, t.port): expected_sets(t) for t in farm.targets}
    configs = {(t.host, t.port): str(t.config) for t in farm.targets}
    wanted_of = {str(t.config): expected_sets(t) for t in farm.targets}
    wrong: dict[str, int] = {}
    example: dict[str, list[str]] = {}
    for result in data.get("server_scan_results", []):
        location = result.get("server_location") or {}
        key = (location.get("ip_address") or location.get("hostname"), location.get("port"))
        curves = ((((result.get("scan_result") or {}).get("elliptic_curves") or {})
                   .get("result")) or {}).get("supported_curves") or []
        got = {NAMES.get(c["name"].lower(), c["name"].lower()) for c in curves}
        if key in wanted and got == wanted[key]:
            run.right += 1
        elif key in wanted:
            wrong[configs[key]] = wrong.get(configs[key], 0) + 1
            example[configs[key]] = sorted(got)
    if wrong:
        run.note = "; ".join(f"wrong for {n} {c} servers (e.g. found {example[c]}, "
                             f"serving {sorted(wanted_of[c])})" for c, n in wrong.items())
    return run


def find_sslyze(given: str | None) -> str | None:
    for cand in (given, os.environ.get("TLSPROBE_SSLYZE"), shutil.which("sslyze"),
                 "/tmp/sslyze-venv/bin/sslyze"):
        if cand and Path(cand).exists():
            return cand
    return None


def sizes(out: Path, targets: int) -> str:
    import pyarrow.parquet as pq
    parquet = sorted(out.glob("shard-*.parquet"))
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in parquet)
    pbytes = sum(p.stat().st_size for p in parquet)
    jbytes = sum(p.stat().st_size for p in (out / "_jsonl").glob("shard-*.jsonl"))
    return (f"output: {len(parquet)} shards; Parquet {pbytes} bytes for {rows} rows "
            f"({pbytes / rows:.0f} bytes/row, {pbytes / targets:.0f} bytes/target); "
            f"JSON lines {jbytes} bytes ({jbytes / targets:.0f} bytes/target)")


def median_run(runs: list[Run]) -> Run:
    """The medians of a command's rounds (each column on its own); the worst `right`."""
    return Run(runs[0].name, statistics.median(r.wall for r in runs),
               statistics.median(r.cpu_tool for r in runs),
               statistics.median(r.memory_mb for r in runs),
               int(statistics.median(r.connections for r in runs)),
               min(r.right for r in runs), runs[-1].note,
               statistics.median(r.alone_mb for r in runs))


def table(medians: list[Run], n: int, rounds: int) -> None:
    print(f"medians of {rounds} alternating rounds:")
    print(f"{'run':28} {'wall s':>7} {'tgt/s':>7} {'CPU s':>6} {'peak MB':>8} {'conns':>7} "
          f"{'tgt/CPU-h':>10} {'right':>9} {'alone MB':>9}")
    for r in medians:
        print(f"{r.name:28} {r.wall:7.2f} {n / r.wall:7.1f} {r.cpu_tool:6.2f} "
              f"{r.memory_mb:8.1f} {r.connections:7d} {n / r.cpu_tool * 3600:10.0f} "
              f"{r.right:>4}/{n} {r.alone_mb:9.1f}")
        if r.note:
            print(f"  {r.note}")
    by_name = {r.name: r for r in medians}
    base = by_name.get("tlsprobe scan -f")
    for r in medians:
        if base is not None and r is not base:
            print(f"{r.name} / scan -f: wall {r.wall / base.wall:.2f}x, CPU "
                  f"{r.cpu_tool / base.cpu_tool:.2f}x, memory {r.memory_mb - base.memory_mb:+.1f} MB"
                  f" ({r.alone_mb - base.alone_mb:+.1f} MB alone)"
                  + ("  (target: <= 1.20x, <= +50 MB)" if r.name.startswith("tlsprobe survey")
                     else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", type=int, default=200, help="a multiple of 4")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--checks", default="groups,pq")
    ap.add_argument("--concurrency", type=int, default=16,
                    help="targets audited at once (scan) and per worker (survey)")
    ap.add_argument("--skip", action="append", default=[],
                    choices=["sslyze", "scan", "1", "default"])
    ap.add_argument("--sslyze", help="path of the sslyze program")
    args = ap.parse_args()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "tlsprobe")],
                   check=True)
    binary = None if "sslyze" in args.skip else find_sslyze(args.sslyze)
    with tempfile.TemporaryDirectory(prefix="bench-survey-") as tmp:
        work = Path(tmp)
        certs = make_certs(work / "certs")
        farm = Farm(certs["ecdsa"].cert, certs["ecdsa"].key, hosts=args.targets // 4,
                    ports_per_host=4)
        commands: list[Callable[[], Run]] = []
        out: list[Path] = []

        def add_survey(workers: int | None) -> None:
            def run() -> Run:
                r, path = survey(farm, targets_file, workers, args.checks, args.concurrency,
                                 work)
                out[:] = [path]
                return r
            commands.append(run)

        targets_file = work / "targets.txt"
        targets_file.write_text("".join(t.display + "\n" for t in farm.targets))
        if "scan" not in args.skip:
            commands.append(lambda: scan(farm, targets_file, args.checks, args.concurrency,
                                         work))
        if "1" not in args.skip:
            add_survey(1)
        if "default" not in args.skip:
            add_survey(None)
        if binary is not None:
            commands.append(lambda: sslyze(farm, targets_file, binary, work))
        try:
            print(f"{len(farm.targets)} targets: {args.targets // 4} addresses across "
                  f"127.0.0.0/8, 4 ports each; servers in-process (one asyncio thread); "
                  f"--checks {args.checks} --concurrency {args.concurrency}; "
                  f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at start",
                  flush=True)
            rounds: list[list[Run]] = [[] for _ in commands]
            for i in range(args.rounds):
                for runs, command in zip(rounds, commands):
                    runs.append(command())
                print(f"round {i + 1}: " + ", ".join(
                    f"{r[-1].name} {r[-1].wall:.2f} s wall {r[-1].cpu_tool:.2f} s CPU "
                    f"{r[-1].memory_mb:.0f} MB" for r in rounds), flush=True)
        finally:
            farm.stop()
        n = len(farm.targets)
        table([median_run(r) for r in rounds], n, args.rounds)
        print(f"load average {os.getloadavg()[0]:.2f} at the end; sslyze: "
              f"{binary or 'skipped or not installed (see this file docstring)'}")
        if out:
            print(sizes(out[0], n))
        print("CPU s: every process of the tool (for the survey: the command, its workers and "
              "what it started), start-up included; peak MB: the largest summed PSS of the "
              "tool's processes; alone MB: the same as if no other process mapped its "
              "libraries (_alone); tgt/CPU-h: targets per hour per core of the tool's CPU")


if __name__ == "__main__":
    main()
