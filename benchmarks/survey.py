#!/usr/bin/env python3
"""Survey throughput: `tlsprobe survey --checks groups` of 1,000 loopback targets on a Dask
LocalCluster of 1 and of 2 worker processes, beside sslyze's mass scan of the same targets
(`sslyze --targets_in FILE --elliptic_curves`).

The targets are tests/survey/farm.py's servers: 250 addresses across 127.0.0.0/8 with four
ports each, all served by one asyncio thread of this process with Python's ssl module, one
group per server (TLS 1.2 + 1.3 with secp256r1, TLS 1.3 with secp384r1, TLS 1.2 with
secp384r1). For each run: wall time, targets/s, the tool's CPU time (its process and every
process it started: Dask scheduler, nannies, workers), the servers' CPU time (this
process), connections (counted by the servers), and how many targets got the right groups.
Then the survey's output size per row and per target (for docs/CAPACITY.md).

    python benchmarks/survey.py [--targets 1000] [--skip sslyze] [--sslyze PATH]

On a 2-core machine the servers share the cores with the workers: the figures are lower
bounds of what the workers do against remote servers (where the network's round trips,
not the CPU, set the pace per target and more targets run at once).
sslyze is looked up as --sslyze, $TLSPROBE_SSLYZE, `sslyze` on PATH, then
/tmp/sslyze-venv/bin/sslyze (python -m venv /tmp/sslyze-venv &&
/tmp/sslyze-venv/bin/pip install sslyze).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]   # tlsprobe and the test suite's helpers (tests is a package)

from tests.lab_servers.certs import make_certs  # noqa: E402
from tests.survey.farm import EXPECTED, Farm, FarmTarget  # noqa: E402

NAMES = {"prime256v1": "secp256r1", "secp256r1": "secp256r1", "secp384r1": "secp384r1",
         "x25519": "x25519"}


@dataclass
class Run:
    name: str
    wall: float
    cpu_tool: float
    cpu_servers: float
    connections: int
    right: int
    note: str = ""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(name: str, farm: Farm, argv: list[str], env: dict[str, str] | None = None,
            timeout: float = 3600) -> tuple[Run, subprocess.CompletedProcess[str]]:
    start_conn, start_cpu, start_own = farm.accepted, children_cpu(), time.process_time()
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    return Run(name, wall, children_cpu() - start_cpu, time.process_time() - start_own,
               farm.accepted - start_conn, 0), proc


def expected_sets(target: FarmTarget) -> set[str]:
    assert target.config is not None
    return {g for groups in EXPECTED[target.config].values() for g in groups}


def survey(farm: Farm, targets_file: Path, workers: int, checks: str, work: Path
           ) -> tuple[Run, Path]:
    out = work / f"survey-{workers}"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("PYTHONDONTWRITEBYTECODE", None)    # as installed: byte-compiled modules
    run, proc = measure(f"tlsprobe survey, {workers} worker{'s' * (workers > 1)}", farm,
                        [sys.executable, "-m", "tlsprobe", "survey", str(targets_file),
                         "--out", str(out), "--workers", str(workers), "--checks", checks,
                         "--no-progress"], env=env)
    if proc.returncode != 0:
        raise SystemExit(f"survey failed ({proc.returncode}): {proc.stderr[-2000:]}")
    by_target = {(d["host"], d["port"]): d for p in (out / "_jsonl").glob("shard-*.jsonl")
                 for d in map(json.loads, p.read_text().splitlines())}
    for t in farm.targets:
        report = by_target.get((t.host, t.port))
        if report and not report["error"] and {g["name"] for a in report["groups"]
                                                for g in a["supported"]} == expected_sets(t):
            run.right += 1
    return run, out


def sslyze(farm: Farm, targets_file: Path, binary: str, work: Path) -> Run:
    out = work / "sslyze.json"
    run, proc = measure("sslyze --elliptic_curves", farm,
                        [binary, "--targets_in", str(targets_file), "--elliptic_curves",
                         "--quiet", "--json_out", str(out)])
    if not out.exists():
        raise SystemExit(f"sslyze wrote no result ({proc.returncode}): {proc.stderr[-2000:]}")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", type=int, default=1000, help="a multiple of 4")
    ap.add_argument("--checks", default="groups")
    ap.add_argument("--skip", action="append", default=[], choices=["sslyze", "1", "2"])
    ap.add_argument("--sslyze", help="path of the sslyze program")
    args = ap.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "tlsprobe")],
                   check=True)
    with tempfile.TemporaryDirectory(prefix="bench-survey-") as tmp:
        work = Path(tmp)
        certs = make_certs(work / "certs")
        farm = Farm(certs["ecdsa"].cert, certs["ecdsa"].key, hosts=args.targets // 4,
                    ports_per_host=4)
        try:
            targets_file = work / "targets.txt"
            targets_file.write_text("".join(t.display + "\n" for t in farm.targets))
            print(f"{len(farm.targets)} targets: {args.targets // 4} addresses across "
                  f"127.0.0.0/8, 4 ports each; servers in-process (one asyncio thread); "
                  f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at start")
            runs: list[Run] = []
            out = None
            for workers in (1, 2):
                if str(workers) not in args.skip:
                    run, out = survey(farm, targets_file, workers, args.checks, work)
                    runs.append(run)
            binary = find_sslyze(args.sslyze)
            if "sslyze" in args.skip:
                sslyze_note = "sslyze: skipped (--skip sslyze)"
            elif binary is None:
                sslyze_note = "sslyze: not installed (see this file's docstring)"
            else:
                runs.append(sslyze(farm, targets_file, binary, work))
                sslyze_note = f"sslyze: {binary}"
        finally:
            farm.stop()
        n = len(farm.targets)
        print(f"{'run':28} {'wall s':>8} {'targets/s':>10} {'CPU s':>8} {'servers':>8} "
              f"{'conns':>7} {'conn/s':>7} {'tgt/CPU-h':>10} {'right':>6}")
        for r in runs:
            print(f"{r.name:28} {r.wall:8.1f} {n / r.wall:10.1f} {r.cpu_tool:8.1f} "
                  f"{r.cpu_servers:8.1f} {r.connections:7d} {r.connections / r.wall:7.0f} "
                  f"{n / r.cpu_tool * 3600:10.0f} {r.right:>4}/{n}")
            if r.note:
                print(f"  {r.note}")
        survey_runs = [r for r in runs if r.name.startswith("tlsprobe")]
        if len(survey_runs) == 2:
            print(f"2 workers / 1 worker: {survey_runs[0].wall / survey_runs[1].wall:.2f}x "
                  "targets/s")
        if runs and runs[-1].name.startswith("sslyze") and survey_runs:
            best = min(r.wall for r in survey_runs)
            print(f"targets/s of tlsprobe's best run relative to sslyze: "
                  f"{runs[-1].wall / best:.2f}x; "
                  f"{(runs[-1].connections / n) / (survey_runs[-1].connections / n):.1f}x "
                  "the connections per target for sslyze")
        print(sslyze_note)
        if out is not None:
            print(sizes(out, n))
        print("CPU s: the tool's processes (for tlsprobe: the command, the Dask scheduler, "
              "nannies and workers, start-up included); servers: this process; tgt/CPU-h: "
              "targets per hour per core of the tool's CPU")


if __name__ == "__main__":
    main()
