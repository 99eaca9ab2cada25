"""The equality checks of `benchmarks/pcap.py --equal REV` (issue 35, "nothing lost").

A change made for speed must not change what `tlsprobe pcap` says. For every capture of
the project (captures/), of the third-party corpus (../shared/captures, as listed in its
files.tsv) and the benchmark's own large captures, the tree being measured and the tree
of git revision REV (extracted with `git archive` into a temporary folder) each compute,
in a child process of their own:

* the capture layer's events (`iter_stream_events`, every event and the final stats, read
  through the fused classic-pcap and pcapng loops and through the generic one), with the connections
  ignored where the analyzer ignores them (after their handshake is read);
* the output of `tlsprobe pcap --jobs 1` as a table, with `--jsonl` and with `--stats`
  (stdout and exit code; the run's `started_at` and `duration_s` left out);

each reduced to a SHA-256 digest per capture. Every capture whose digests differ is named
with the part that differs; the check passes when there is none. Usage, alone:
``python3 benchmarks/pcap_equal.py REV [CAPTURE ...]``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from contextlib import redirect_stderr
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TLSPROBE_SHARED", ROOT.parent / "shared"))
PARTS = ("events", "events-generic", "table", "jsonl", "stats")
# what differs from one run to the next: when the run started and how long it took
_RUN_DEPENDENT = re.compile(rb'"(started_at|duration_s)": ("[^"]*"|[-+.0-9eE]+)')


def corpus() -> list[Path]:
    """The project's captures and the third-party corpus's (those files.tsv lists)."""
    files = sorted(p for p in (ROOT / "captures").iterdir()
                   if p.suffix in (".pcap", ".pcapng", ".gz", ".cap"))
    listing = SHARED / "captures" / "files.tsv"
    if listing.exists():
        for line in listing.read_text().splitlines()[1:]:
            fields = line.split("\t")
            path = SHARED / "captures" / fields[0]
            if len(fields) > 2 and fields[2] == "capture" and path.is_file():
                files.append(path)
    return files


def _events_digest(path: Path, fused: bool) -> str:
    """SHA-256 of every event of the capture layer and its stats; each connection is
    ignored once it has delivered data both ways twice (as the analyzer does once a
    handshake is read), so the counting path is compared too."""
    from tlsprobe.capture import stream as stream_module
    from tlsprobe.capture.events import StreamData

    cls = stream_module.CaptureStream
    cls.fused_pcap = fused
    if hasattr(cls, "fused_pcapng"):  # a revision with the fused pcapng loop: off too
        cls.fused_pcapng = fused
    h = hashlib.sha256()
    seen: dict[tuple[int, int], int] = {}
    try:
        with stream_module.iter_stream_events(str(path)) as events:
            for ev in events:
                h.update(repr(ev).encode())
                if type(ev) is StreamData:
                    key = (ev.conn.id, ev.direction)
                    seen[key] = seen.get(key, 0) + 1
                    if seen[key] == 2 and seen.get((ev.conn.id, 1 - ev.direction), 0) >= 2:
                        events.ignore(ev.conn.id)
            h.update(repr(_fields(events.stats)).encode())
    except Exception as exc:  # noqa: BLE001 - the same failure on both sides is equal
        h.update(f"error {type(exc).__name__}: {exc}".encode())
    finally:
        cls.fused_pcap = True
        if hasattr(cls, "fused_pcapng"):
            cls.fused_pcapng = True
    return h.hexdigest()


def _fields(obj: object) -> list[tuple[str, object]]:
    """An object's public data attributes by name: its `vars` for a Python class, read by
    name too for a class compiled with mypyc (which has no __dict__)."""
    names = sorted(n for n in dir(obj) if not n.startswith("_"))
    return [(n, v) for n in names if not callable(v := getattr(obj, n))]


def _command_digest(args: list[str]) -> str:
    """SHA-256 of the stdout and exit code of `tlsprobe` with `args`, run in this process."""
    from tlsprobe.cli import main

    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace")
    saved = sys.stdout
    sys.stdout = out
    try:
        with redirect_stderr(io.StringIO()):
            code = main(args)
    finally:
        sys.stdout = saved
        out.flush()
    text = _RUN_DEPENDENT.sub(rb'"\1": -', raw.getvalue())
    return hashlib.sha256(text + f"\nexit {code}".encode()).hexdigest()


def digests(paths: list[str]) -> dict[str, dict[str, str]]:
    """Each capture's digest per part (run with the tree to check first on sys.path)."""
    result: dict[str, dict[str, str]] = {}
    for path in paths:
        base = ["pcap", "--no-progress", "--jobs", "1", path]
        result[path] = {
            "events": _events_digest(Path(path), True),
            "events-generic": _events_digest(Path(path), False),
            "table": _command_digest(base),
            "jsonl": _command_digest(base + ["--jsonl"]),
            "stats": _command_digest(base + ["--stats"]),
        }
    return result


def extract(rev: str, into: Path) -> Path:
    """The tlsprobe package of git revision `rev`, extracted under `into`."""
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "tlsprobe"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into


def _run_digests(tree: Path, paths: list[Path]) -> dict[str, dict[str, str]]:
    """`digests` in a child process with `tree`'s tlsprobe first on the path."""
    env = dict(os.environ, PYTHONPATH=str(tree), TLSPROBE_SHARED=str(SHARED))
    env.pop("PYTHONPYCACHEPREFIX", None)
    proc = subprocess.run([sys.executable, __file__, "--digests", *map(str, paths)], env=env,
                          check=True, capture_output=True, text=True)
    answer: dict[str, dict[str, str]] = json.loads(proc.stdout)
    return answer


def compare(rev: str, extra: list[Path]) -> int:
    """Print the captures whose events or outputs differ from revision `rev`'s; the count."""
    paths = corpus() + extra
    with tempfile.TemporaryDirectory(prefix="tlsprobe-equal-") as tmp:
        theirs = _run_digests(extract(rev, Path(tmp)), paths)
    ours = _run_digests(ROOT, paths)
    differ = count_differences(ours, theirs, [str(p) for p in paths], PARTS, f" from {rev}")
    print(f"equality against {rev}: {len(paths)} captures, {differ} differ "
          f"({'met' if not differ else 'NOT met'}: events, table, --jsonl, --stats)")
    return differ


def count_differences(ours: dict[str, dict[str, str]], theirs: dict[str, dict[str, str]],
                      paths: list[str], parts: tuple[str, ...], against: str) -> int:
    """Print each capture whose digests differ, with the parts that do; their count."""
    differ = 0
    for path in paths:
        differing = [p for p in parts if ours[path][p] != theirs[path][p]]
        if differing:
            differ += 1
            print(f"  DIFFERS{against}: {path} ({', '.join(differing)})")
    return differ


def serve_digests(compute: Callable[[list[str]], dict[str, dict[str, str]]]) -> None:
    """`SCRIPT --digests CAPTURE...` (the child of a comparison): print `compute`'s
    digests as JSON and exit."""
    if sys.argv[1:2] == ["--digests"]:
        sys.setrecursionlimit(10_000)
        print(json.dumps(compute(sys.argv[2:])))
        sys.exit(0)


if __name__ == "__main__":
    serve_digests(digests)
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(1 if compare(sys.argv[1], [Path(p) for p in sys.argv[2:]]) else 0)
