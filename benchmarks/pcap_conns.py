"""The fixed cost of a connection in `tlsprobe pcap` (issue 35): captures of many short
connections, each only what a handshake's first look needs.

* ``short``: N connections (100,000 by default), each SYN, SYN/ACK, the client's
  ClientHello record, the server's ServerHello record, FIN from each side and the last
  ACK (7 packets): open, first hello, close, report, and nothing else. The hello records
  are real (the first record of each direction of the project's captures of TLS 1.2 and
  1.3 handshakes, taken in turn), each connection with its own client address and port,
  client and server randoms and session id, as real traffic has them.
* ``hello``: N connections (100,000) that send SYN and a ClientHello and are never closed
  (ended by the end of the capture): what memory the open connections of a capture take.

Each tool runs in its own child process (pcap_flows.run_measured: CPU time from os.wait4,
peak RSS from /proc VmHWM), in --repeat alternating rounds, with the median. The cost per
connection is (CPU of the run - CPU of the same command on an empty capture) / N: the
interpreter's start-up and imports are not a connection's. tshark (`-Y
tls.handshake.type==2 -T fields -e tls.handshake.ciphersuite`) runs beside on the same
file as a yardstick.

Per packet (--corpus DIR, default ../shared/captures): the third-party captures merged
into one pcapng (mergecap -a, the files it can read) against a dense capture of the
project's handshakes (pcap.py's, --dense packets, 200,000 by default): CPU per packet of
`tlsprobe pcap --stats --jobs 1` (start-up subtracted as above). Target (issue 35): the
corpus within 2x of the dense capture's cost per packet.

In-process (--profile): the analysis loop alone (`tlsprobe.offline.analyzer.analyze`, the
table's brief reports and --jsonl's JSON text, one process), its CPU per connection and,
with cProfile, its calls per connection and top functions.

Usage: python3 benchmarks/pcap_conns.py [--connections N] [--repeat N] [--no-tshark]
                                       [--profile] [--keep DIR] [--corpus DIR]
                                       [--dense N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
if sys.argv[1:2] != ["--in-process"]:   # --compiled's child: PYTHONPATH's package first
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pcap_flows import _frame, _header, _write, run_measured

SEEDS = ("tls13_x25519.pcap", "tls12_x25519.pcap", "tls13_mlkem768.pcap", "tls12_rsa.pcap",
         "tls13_p256.pcap", "tls12_dhe.pcap")
SERVER = bytes((192, 0, 2, 7))
SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08


def first_records(name: str) -> tuple[bytes, bytes]:
    """The first TLS record of each direction of one of the project's captures (its
    ClientHello and its ServerHello record)."""
    from tlsprobe.capture import StreamData, iter_stream_events
    first: dict[int, bytes] = {}
    buf: dict[int, bytearray] = {0: bytearray(), 1: bytearray()}
    for ev in iter_stream_events(str(ROOT / "captures" / name)):
        if isinstance(ev, StreamData) and ev.direction not in first:
            b = buf[ev.direction]
            b += ev.data
            if len(b) >= 5 and len(b) >= 5 + int.from_bytes(b[3:5], "big"):
                first[ev.direction] = bytes(b[:5 + int.from_bytes(b[3:5], "big")])
        if len(first) == 2:
            break
    return first[0], first[1]


def _fresh(record: bytes, i: int, server: bool) -> bytes:
    """A hello record with connection `i`'s own random (the server's another) and session
    id (when it has one of 32 bytes; the server echoes the client's): bytes 11..43 and
    44..76."""
    out = bytearray(record)
    seed = struct.pack("!I", i)
    out[11:43] = (seed * 7 + (b"SRV!" if server else b"CLI!"))[:32]
    if out[43] == 32:
        out[44:76] = (bytes(reversed(seed)) * 8)[:32]
    return bytes(out)


def _client(i: int) -> tuple[bytes, int]:
    return bytes((10, 128 + (i >> 16) % 64, (i >> 8) & 255, i & 255)), 1024 + i % 60000


def write_short(path: Path, n: int, per_second: int = 10000) -> int:
    """`n` short connections (SYN, SYN/ACK, ClientHello, ServerHello, FIN, FIN, ACK)."""
    hellos = [first_records(name) for name in SEEDS]
    packets = 0
    with open(path, "wb") as f:
        f.write(_header())
        for i in range(n):
            ch, sh = hellos[i % len(hellos)]
            ch, sh = _fresh(ch, i, False), _fresh(sh, i, True)
            src, port = _client(i)
            t = 1_700_000_000 + i / per_second
            c, s = 1000 + i, 900000 + i
            frames = [
                _frame(src, SERVER, port, 443, c, 0, SYN),
                _frame(SERVER, src, 443, port, s, c + 1, SYN | ACK),
                _frame(src, SERVER, port, 443, c + 1, s + 1, PSH | ACK, ch),
                _frame(SERVER, src, 443, port, s + 1, c + 1 + len(ch), PSH | ACK, sh),
                _frame(src, SERVER, port, 443, c + 1 + len(ch), s + 1 + len(sh), FIN | ACK),
                _frame(SERVER, src, 443, port, s + 1 + len(sh), c + 2 + len(ch), FIN | ACK),
                _frame(src, SERVER, port, 443, c + 2 + len(ch), s + 2 + len(sh), ACK)]
            for k, frame in enumerate(frames):
                _write(f, t + k * 1e-5, frame)
            packets += len(frames)
    return packets


def write_hello_only(path: Path, n: int, per_second: int = 10000) -> int:
    """`n` connections that send SYN and a ClientHello and stay open."""
    hellos = [first_records(name)[0] for name in SEEDS]
    with open(path, "wb") as f:
        f.write(_header())
        for i in range(n):
            ch = _fresh(hellos[i % len(hellos)], i, False)
            src, port = _client(i)
            t = 1_700_000_000 + i / per_second
            _write(f, t, _frame(src, SERVER, port, 443, 1000 + i, 0, SYN))
            _write(f, t + 1e-5, _frame(src, SERVER, port, 443, 1001 + i, 0, PSH | ACK, ch))
    return 2 * n


def merge_corpus(corpus: Path, out: Path) -> int:
    """The corpus's capture files that mergecap reads, concatenated into `out` (pcapng);
    returns how many files went in."""
    mergecap = shutil.which("mergecap")
    if mergecap is None:
        raise SystemExit("merging the corpus needs mergecap (Debian: wireshark-common)")
    names = sorted(p for p in corpus.rglob("*") if p.is_file() and "truth" not in p.parts
                   and p.name.endswith((".pcap", ".pcapng", ".cap", ".pcap.gz",
                                        ".pcapng.gz")))
    # each file's trial merge goes to a scratch file, never to os.devnull: mergecap deletes
    # its output when it fails on an input, and /dev/null deleted by a root run came back
    # as a regular file at the next write (it broke other tests on this machine twice)
    with tempfile.TemporaryDirectory() as scratch:
        trial = os.path.join(scratch, "trial.pcapng")
        good = [str(p) for p in names
                if subprocess.run([mergecap, "-F", "pcapng", "-w", trial, str(p)],
                                  check=False, capture_output=True).returncode == 0]
    subprocess.run([mergecap, "-a", "-F", "pcapng", "-w", str(out), *good], check=True,
                   capture_output=True)
    return len(good)


def packets_of(path: Path) -> int:
    from tlsprobe.capture import read_packets
    return sum(1 for _ in read_packets(str(path)))


def per_packet(args: argparse.Namespace, tmp: Path, empty: Path) -> None:
    """CPU per packet of `pcap --stats --jobs 1` on the merged corpus and a dense capture."""
    from pcap import build_capture, seed_flows
    merged, dense = tmp / "corpus.pcapng", tmp / "dense.pcap"
    files = merge_corpus(Path(args.corpus), merged)
    if not dense.exists():
        build_capture(dense, seed_flows(1448), args.dense, "handshake flows")
    py = [sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", "--jobs", "1",
          "--stats"]
    res = measured({"empty": py + [str(empty)], "corpus": py + [str(merged)],
                    "dense": py + [str(dense)]}, tmp, args.repeat)
    base = median(r[1] for r in res["empty"])
    cost = {}
    for key, path in (("corpus", merged), ("dense", dense)):
        n = packets_of(path)
        cost[key] = (median(r[1] for r in res[key]) - base) / n * 1e6
        print(f"  {key:<7} {n:>9,} packets{f' ({files} files)' if key == 'corpus' else '':<13}"
              f" {cost[key]:6.2f} us a packet")
    ratio = cost["corpus"] / cost["dense"]
    print(f"  corpus / dense: {ratio:.2f}x (target: within 2x: "
          f"{'met' if ratio <= 2 else 'NOT met'})")


def in_process(path: Path, n: int, profile: bool) -> None:
    """The analysis loop alone on `path`: CPU per connection (best of 3) for the table's
    brief reports and --jsonl's text, and with `profile` cProfile's calls and top
    functions."""
    from tlsprobe.offline.analyzer import AnalyzerOptions, analyze

    def run(**options: bool) -> int:
        analysis = analyze(str(path), AnalyzerOptions(**options))
        return sum(1 for _ in analysis)

    for label, options in (("table (brief)", {"brief": True}),
                           ("--jsonl (json_text)", {"json_text": True}),
                           ("reports", {})):
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            count = run(**options)
            best = min(best, time.process_time() - t0)
        print(f"  in process, {label:<20} {best:6.2f} s CPU, {best / n * 1e6:5.1f} us a "
              f"connection ({count:,} reported)")
        if profile:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.runcall(run, **options)
            stats = pstats.Stats(prof)
            calls = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
            print(f"    {calls / n:.1f} calls a connection; top functions (tottime):")
            stats.sort_stats("tottime").print_stats(12)


#: where the measured tlsprobe package is (--compiled: the compiled build's unpacked wheel)
TREE = [ROOT]


def measured(cmds: dict[str, list[str]], tmp: Path, rounds: int) -> dict[str, list[tuple[
        float, float, int, int]]]:
    """Each command once per round, in turn: (wall, CPU, peak KiB, lines) per round.

    The tlsprobe runs have their bytecode compiled beforehand, as an installed package has it
    (pip compiles on install), whatever PYTHONDONTWRITEBYTECODE says here: without, every
    module the analysis imports lazily (after what the empty capture's run imports) was
    compiled from source in each measured run and charged to the connections or packets."""
    # imported here, not at the top: pcap.py imports tlsprobe from this checkout, which the
    # --compiled child (--in-process) must not have before the compiled build
    from pcap import child_env, compile_project
    env = child_env(tmp / "pycache", TREE[0])
    compile_project(env)
    out: dict[str, list[tuple[float, float, int, int]]] = {k: [] for k in cmds}
    for _ in range(rounds):
        for key, cmd in cmds.items():
            out[key].append(run_measured(cmd, tmp / "out.txt", env))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--keep", help="write the captures into this directory and keep them")
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "captures"),
                    help="third-party captures to merge for the per-packet comparison "
                    "('' to skip it)")
    ap.add_argument("--dense", type=int, default=200_000,
                    help="packets of the dense capture of that comparison")
    ap.add_argument("--compiled", nargs="?", const="", metavar="SITE", help="measure the "
                    "optional compiled fast path (built here by benchmarks/compiled_tree.py, "
                    "or the one unpacked in SITE) instead of the sources; the in-process part "
                    "then runs in a child with it on the path")
    args = ap.parse_args()
    n = args.connections
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="pcap_conns_"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        if args.compiled:
            TREE[0] = Path(args.compiled).resolve()
        elif args.compiled is not None:
            from compiled_tree import build_compiled
            TREE[0] = build_compiled(tmp / "compiled")
        short, hello, empty = tmp / "short.pcap", tmp / "hello_only.pcap", tmp / "empty.pcap"
        if not short.exists():
            write_short(short, n)
        if not hello.exists():
            write_hello_only(hello, n)
        empty.write_bytes(_header())
        py = [sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", "--jobs", "1"]
        cmds = {}
        for label, extra in (("table", []), ("--jsonl", ["--jsonl"]), ("--stats", ["--stats"])):
            cmds[f"{label} empty"] = py + extra + [str(empty)]
            cmds[f"{label} short"] = py + extra + [str(short)]
        cmds["table hello-only"] = py + [str(hello)]
        tshark = None if args.no_tshark else shutil.which("tshark")
        if tshark:
            cmds["tshark short"] = [tshark, "-r", str(short), "-Y", "tls.handshake.type==2",
                                    "-T", "fields", "-e", "tls.handshake.ciphersuite"]
        print(f"{n:,} short connections, {n:,} ClientHello-only connections; "
              f"{args.repeat} alternating rounds; load average "
              f"{os.getloadavg()[0]:.2f}")
        res = measured(cmds, tmp, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(f"{'run':<22} {'CPU s':>7} {'wall s':>7} {'peak MB':>8} {'lines':>8}  "
              f"CPU per connection")
        for key, runs in res.items():
            cpu, wall = median(r[1] for r in runs), median(r[0] for r in runs)
            peak, lines = max(r[2] for r in runs), runs[-1][3]
            per = ""
            if key.endswith(" short") and not key.startswith("tshark"):
                base = median(r[1] for r in res[key.replace(" short", " empty")])
                per = f"{(cpu - base) / n * 1e6:.1f} us"
            elif key == "tshark short":
                per = f"{cpu / n * 1e6:.1f} us (tshark, start-up included)"
            print(f"{key:<22} {cpu:>7.2f} {wall:>7.2f} {peak / 1024:>8.1f} {lines:>8}  {per}")
        print("in-process analysis of the short connections"
              + (" (compiled build)" if args.compiled is not None else "") + ":")
        if args.compiled is not None:
            subprocess.run([sys.executable, "-P", __file__, "--in-process", str(short),
                            str(n)], check=True, env=dict(os.environ, PYTHONPATH=str(TREE[0])))
        else:
            in_process(short, n, args.profile)
        if args.corpus:
            print("cost per packet, third-party corpus against a dense capture:")
            per_packet(args, tmp, empty)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--in-process"]:
        in_process(Path(sys.argv[2]), int(sys.argv[3]), False)
        raise SystemExit(0)
    raise SystemExit(main())
