"""Long fuzz runs over the codec's parser families (not part of CI).

    python benchmarks/fuzz/run.py                       # all families, atheris, 1M inputs each
    python benchmarks/fuzz/run.py --family pcap --runs 200000 --max-time 300
    python benchmarks/fuzz/run.py --engine mutate       # no atheris: random mutations of seeds

Each family runs in its own child process (atheris can fuzz once per process), `--jobs` at a
time. The engine is atheris (libFuzzer, coverage-guided, tlsprobe instrumented) when it is
installed, else `mutate`: seeded random mutations (flip, cut, insert, splice, lengths). A
target rejects bad input with DecodeError (CaptureError for captures); any other exception
is an UNEXPECTED finding: it is counted, its input saved under --artifacts, and the run goes
on. The summary gives per family: inputs run, seconds, inputs/s, unexpected exceptions.
Exit status 1 when any family had an unexpected exception.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
#: the families of targets.FAMILIES, named here so the atheris worker can import `targets`
#: (and through it tlsprobe) for the first time inside atheris' instrumentation
FAMILY_NAMES = ("analysis", "extension", "flow", "handshake", "pcap", "record", "ske")


class Budget:
    """Counts inputs and unexpected exceptions; says when the run is over."""

    def __init__(self, family: str, runs: int, max_time: float, artifacts: Path) -> None:
        self.family, self.runs, self.max_time, self.artifacts = family, runs, max_time, artifacts
        self.count = 0
        self.unexpected: dict[str, int] = {}
        self.start = time.monotonic()

    def run_one(self, target, data: bytes) -> None:  # type: ignore[no-untyped-def]
        self.count += 1
        try:
            target(data)
        except Exception as exc:  # noqa: BLE001 -- every escape is a finding to record
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            key = f"{type(exc).__name__} at {Path(tb.filename).name}:{tb.lineno}: {exc}"[:300]
            if key not in self.unexpected:
                self.artifacts.mkdir(parents=True, exist_ok=True)
                name = f"{self.family}-{len(self.unexpected)}.bin"
                (self.artifacts / name).write_bytes(data)
                print(f"UNEXPECTED {key} (input saved as {self.artifacts / name})",
                      file=sys.stderr, flush=True)
            self.unexpected[key] = self.unexpected.get(key, 0) + 1

    def over(self) -> bool:
        return self.count >= self.runs or (self.count % 256 == 0 and
                                           time.monotonic() - self.start >= self.max_time)

    def summary(self, engine: str) -> dict:
        seconds = time.monotonic() - self.start
        return {"family": self.family, "engine": engine, "inputs": self.count,
                "seconds": round(seconds, 1), "inputs_per_s": round(self.count / seconds)
                if seconds else 0, "unexpected": sum(self.unexpected.values()),
                "unexpected_kinds": list(self.unexpected)}


def mutate(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(7)
        at = rng.randint(0, len(out))
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[min(at, len(out) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2:
            del out[at:]
        elif op == 3:
            out[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == 4:
            del out[at:at + rng.randint(1, 32)]
        elif op == 5 and at + 2 <= len(out):
            out[at:at + 2] = rng.choice((b"\x00\x00", b"\xff\xff", b"\x40\x01", b"\x00\x01"))
        elif op == 6:
            other = rng.choice(pool)
            cut = rng.randint(0, len(other))
            out[at:] = other[cut:cut + rng.randint(0, 512)]
    return bytes(out)


def worker_mutate(family: str, budget: Budget, corpus: Path | None, seed: int) -> dict:
    import targets
    target, pool = targets.FAMILIES[family], targets.seeds(family, corpus)
    rng = random.Random(seed)
    for data in pool:
        budget.run_one(target, data)
    while not budget.over():
        base = rng.choice(pool)
        data = mutate(rng, base, pool) if rng.random() < 0.97 else rng.randbytes(
            rng.randint(0, 300))
        budget.run_one(target, data)
    return budget.summary("mutate")


def worker_atheris(family: str, budget: Budget, corpus: Path | None, max_len: int) -> None:
    import atheris
    with atheris.instrument_imports(include=["tlsprobe"]):
        import targets
    target = targets.FAMILIES[family]
    seed_dir = Path(tempfile.mkdtemp(prefix=f"tlsprobe-fuzz-{family}-"))
    for i, data in enumerate(targets.seeds(family, corpus)):
        (seed_dir / f"seed-{i}").write_bytes(data)

    budget.artifacts.mkdir(parents=True, exist_ok=True)  # libFuzzer needs it to exist

    def one(data: bytes) -> None:
        budget.run_one(target, data)
        if budget.over():
            print(json.dumps(budget.summary("atheris")), flush=True)
            shutil.rmtree(seed_dir, ignore_errors=True)  # seeds plus what libFuzzer added
            os._exit(0)

    atheris.Setup([sys.argv[0], str(seed_dir), f"-max_len={max_len}", "-print_final_stats=0",
                   f"-artifact_prefix={budget.artifacts}/", "-close_fd_mask=0",
                   "-rss_limit_mb=2048", "-timeout=10"], one)
    atheris.Fuzz()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--family", action="append", choices=FAMILY_NAMES,
                   help="parser family (repeatable; default all)")
    p.add_argument("--engine", choices=("atheris", "mutate"), default=None,
                   help="default atheris when installed")
    p.add_argument("--runs", type=int, default=1_000_000, help="inputs per family")
    p.add_argument("--max-time", type=float, default=1800.0, help="seconds per family")
    p.add_argument("--jobs", type=int, default=2, help="families fuzzed at once")
    p.add_argument("--captures", type=Path, default=None, help="add small captures from this "
                   "folder to the pcap seeds (e.g. ../shared/captures)")
    p.add_argument("--artifacts", type=Path, default=Path(tempfile.gettempdir()) /
                   "tlsprobe-fuzz-artifacts", help="where inputs that raised are saved")
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    engine = args.engine or ("atheris" if _has_atheris() else "mutate")
    if args.worker:
        budget = Budget(args.worker, args.runs, args.max_time, args.artifacts)
        if engine == "atheris":
            worker_atheris(args.worker, budget, args.captures, args.max_len)
            return 0
        print(json.dumps(worker_mutate(args.worker, budget, args.captures, args.seed)),
              flush=True)
        return 0
    families = args.family or list(FAMILY_NAMES)
    results = _run_children(families, engine, args)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'family':10} {'engine':8} {'inputs':>10} {'seconds':>8} {'inputs/s':>9} "
              "unexpected")
        for r in results:
            print(f"{r['family']:10} {r['engine']:8} {r['inputs']:>10} {r['seconds']:>8} "
                  f"{r['inputs_per_s']:>9} {r['unexpected']}")
            for kind in r.get("unexpected_kinds", []):
                print(f"    {kind}")
    return 1 if any(r["unexpected"] or r.get("failed") for r in results) else 0


def _has_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _run_children(families: list[str], engine: str, args: argparse.Namespace) -> list[dict]:
    pending = list(families)
    running: dict[str, subprocess.Popen] = {}
    results: list[dict] = []
    base = [sys.executable, str(Path(__file__).resolve()), "--engine", engine, "--runs",
            str(args.runs), "--max-time", str(args.max_time), "--artifacts",
            str(args.artifacts), "--max-len", str(args.max_len), "--seed", str(args.seed)]
    if args.captures:
        base += ["--captures", str(args.captures)]
    while pending or running:
        while pending and len(running) < args.jobs:
            family = pending.pop(0)
            running[family] = subprocess.Popen(base + ["--worker", family],
                                               stdout=subprocess.PIPE, text=True)
        for family, proc in list(running.items()):
            if proc.poll() is None:
                continue
            del running[family]
            out = (proc.stdout.read() if proc.stdout else "").strip().splitlines()
            try:
                results.append(json.loads(out[-1]))
            except (IndexError, json.JSONDecodeError):
                results.append({"family": family, "engine": engine, "inputs": 0, "seconds": 0,
                                "inputs_per_s": 0, "unexpected": 0, "failed":
                                f"worker exited {proc.returncode} without a summary"})
        time.sleep(0.2)
    return sorted(results, key=lambda r: families.index(r["family"]))


if __name__ == "__main__":
    sys.exit(main())
