"""A compiled tree (mypyc, build_backend/compiled_modules.txt) against a pure one, capture
for capture: the capture layer's events (fused and generic loop), `tlsprobe pcap
--jobs 1` as a table, --jsonl, --stats and --details, and --jsonl read by two processes
(--jobs 2), on every capture of the project and
of ../shared/captures (benchmarks/pcap_equal.py's corpus and digests, each tree in a child
process of its own). Usage: ``python3 benchmarks/compiled_equal.py PURE_ROOT COMPILED_ROOT``
(a compiled copy: `git archive HEAD | tar -x -C X && cd X && mypyc $(grep -v '^#'
build_backend/compiled_modules.txt)`). Exit 1 when any capture differs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pcap_equal

PARTS = ("events", "events-generic", "table", "jsonl", "stats", "details", "piped")


def digests(paths: list[str]) -> dict[str, dict[str, str]]:
    """Each capture's digest per part, with the tree first on sys.path."""
    out: dict[str, dict[str, str]] = {}
    for path in paths:
        base = ["pcap", "--no-progress", "--jobs", "1", path]
        out[path] = {
            "events": pcap_equal._events_digest(Path(path), True),
            "events-generic": pcap_equal._events_digest(Path(path), False),
            **{part: pcap_equal._command_digest(base + flags) for part, flags in
               (("table", []), ("jsonl", ["--jsonl"]), ("stats", ["--stats"]),
                ("details", ["--details"]))},
            # --jobs 2 on one file: the packets read by a second process (capture/pipe.py)
            "piped": pcap_equal._command_digest(["pcap", "--no-progress", "--jobs", "2",
                                                 "--jsonl", path]),
        }
    return out


def _run(tree: str, paths: list[str]) -> dict[str, dict[str, str]]:
    env = dict(os.environ, PYTHONPATH=tree, TLSPROBE_SHARED=str(pcap_equal.SHARED))
    env.pop("PYTHONPYCACHEPREFIX", None)
    proc = subprocess.run([sys.executable, __file__, "--digests", *paths], env=env, cwd=tree,
                          check=True, capture_output=True, text=True)
    answer: dict[str, dict[str, str]] = json.loads(proc.stdout)
    return answer


def main(pure: str, compiled: str) -> int:
    paths = [str(p) for p in pcap_equal.corpus()]
    ours, theirs = _run(pure, paths), _run(compiled, paths)
    differ = pcap_equal.count_differences(ours, theirs, paths, PARTS, "")
    print(f"compiled against pure: {len(paths)} captures, {differ} differ")
    return differ


if __name__ == "__main__":
    pcap_equal.serve_digests(digests)
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(1 if main(sys.argv[1], sys.argv[2]) else 0)
