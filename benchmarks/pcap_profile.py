"""The profile of `benchmarks/pcap.py --profile` (issue 35's closing note).

`tlsprobe pcap --jobs 1 --stats CAPTURE` runs once under cProfile in a child process; the
parent prints the calls per packet and per connection (Python functions and C functions
apart: cProfile names a C function's file ``~``) and the functions with the most time of
their own, with the share of each part of the pipeline (tlsprobe/capture, offline, wire,
...). cProfile's own cost inflates the times (about 2.5x), not the counts: compare counts
across versions, times only within one profile. Usage, alone:
``python3 benchmarks/pcap_profile.py CAPTURE [TOP]``, or for a profile written before
(``python -m cProfile -o PROFILE -m tlsprobe pcap --jobs 1 --stats CAPTURE``):
``python3 benchmarks/pcap_profile.py --summary PROFILE CAPTURE [TOP]``.
"""

from __future__ import annotations

import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _area(filename: str) -> str:
    """The part of the project (or "C", "stdlib") a profiled function belongs to."""
    if filename == "~":
        return "C functions"
    marker = f"{os.sep}tlsprobe{os.sep}"
    if marker in filename:
        rest = filename.split(marker, 1)[1]
        return "tlsprobe/" + (rest.split(os.sep, 1)[0] if os.sep in rest else rest)
    return "other Python"


def profile(capture: Path, env: dict[str, str], top: int = 15) -> None:
    """Profile `tlsprobe pcap --jobs 1 --stats` on `capture` and print the summary."""
    with tempfile.TemporaryDirectory(prefix="tlsprobe-profile-") as tmp:
        out = Path(tmp) / "pcap.prof"
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "tlsprobe",
                        "pcap", "--no-progress", "--jobs", "1", "--stats", str(capture)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        summary(out, capture, top)


def summary(prof: Path, capture: Path, top: int = 15) -> None:
    """Print the calls per packet and connection and the top functions of a profile of
    `pcap --jobs 1 --stats` on `capture` (written by `profile` or by hand with
    ``python -m cProfile -o``)."""
    from tlsprobe.capture import read_packets

    packets = sum(1 for _ in read_packets(str(capture)))
    table = vars(pstats.Stats(str(prof)))["stats"]
    connections = max((cc for (f, _, name), (cc, *_rest) in table.items()
                       if name == "_open" and f.endswith("tcp.py")), default=0)
    py_calls = sum(v[1] for (f, *_), v in table.items() if f != "~")
    c_calls = sum(v[1] for (f, *_), v in table.items() if f == "~")
    total = sum(v[2] for v in table.values())
    print(f"\ncProfile of tlsprobe pcap --jobs 1 --stats {capture.name}: {packets} packets, "
          f"{connections} TCP connections opened")
    print(f"  calls per packet: {py_calls / packets:.2f} Python, {c_calls / packets:.2f} C; "
          f"per connection: {py_calls / max(connections, 1):.1f} Python")
    areas: dict[str, float] = {}
    for (f, *_), v in table.items():
        areas[_area(f)] = areas.get(_area(f), 0.0) + v[2]
    print("  own time by part: " + ", ".join(
        f"{name} {t / total:.0%}" for name, t in sorted(areas.items(), key=lambda x: -x[1])
        if t / total >= 0.01))
    print(f"  {'own s':>7} {'share':>6} {'calls':>10}  function")
    rows = sorted(table.items(), key=lambda item: -item[1][2])[:top]
    for (f, line, name), (_cc, nc, tt, _ct, _callers) in rows:
        where = name if f == "~" else f"{Path(f).parent.name}/{Path(f).name}:{line} {name}"
        print(f"  {tt:7.2f} {tt / total:6.1%} {nc:10d}  {where}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.path.insert(0, str(ROOT))
    if sys.argv[1] == "--summary":  # an existing profile: --summary PROFILE CAPTURE [TOP]
        summary(Path(sys.argv[2]), Path(sys.argv[3]),
                int(sys.argv[4]) if len(sys.argv) > 4 else 15)
        sys.exit(0)
    environ = dict(os.environ, PYTHONPATH=str(ROOT))
    profile(Path(sys.argv[1]), environ, int(sys.argv[2]) if len(sys.argv) > 2 else 15)
