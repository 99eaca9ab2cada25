"""`tlsprobe pcap` next to tshark on a large capture of real handshakes.

The capture is built from the project's own captures (captures/*.pcap, recorded on
loopback by tools/record_captures.py: TLS 1.2 and 1.3, every classic and post-quantum group,
HelloRetryRequest, DHE, RSA, alerts, resumption, records split over segments). Each IPv4
connection is replicated with its own client address and port until the file holds at
least --packets packets (1M by default). Loopback carries up to 64 KiB per segment, so
segments longer than an Ethernet MSS (--mss, 1448) are split as a real path would carry
them; the TLS bytes stay the recorded ones. Then, each in its own child process (wall time,
CPU time from os.wait4, peak RSS summed over the process and its children):

* tlsprobe pcap           the table: one line per connection (as tshark's one per hello)
* tlsprobe pcap --stats   connections per version, suite and group
* tlsprobe pcap --jsonl   the whole report of every connection, one JSON line each
* the table and --jsonl again with --jobs 1: in one process (the three runs above read the
  capture in two: the packets in a second process, tlsprobe/capture/pipe.py; their CPU
  time counts both, their peak RSS is the sum of both)
* tshark -Y 'tls.handshake.type==2' -T fields -e tls.handshake.ciphersuite
* tshark -Y 'tls.handshake.type==2 || tls.handshake.type==12' -T fields with the groups
  (tls.handshake.extensions_key_share_group, tls.handshake.server_named_curve)

tlsprobe runs with its bytecode compiled beforehand (into the temporary directory, as an
installed package has it), even where PYTHONDONTWRITEBYTECODE is set. With --repeat N the
commands run in N rounds, each command once per round in turn (a slow spell of a shared
machine then falls on both tools alike), and the median wall and CPU times are shown (of an
even number of rounds: the mean of the middle two; peak RSS: the largest), then each round's
CPU times and each round's own throughput ratio (against the faster tshark run of that round:
on a machine whose speed drifts, a ratio within one round is the steadier figure; both
are shown).

Target (issue 5): tlsprobe at least 4x tshark's throughput and at most 1/5 of its memory.
Targets (issue 35), on the dense capture below: in one process (--jobs 1) the table,
--jsonl and --stats each at least 5x tshark's efficiency in CPU time (the cheaper tshark
run's CPU time over tlsprobe's; stretch 8x), and the default two processes never more than
15 % more CPU time in all than one process for the same output. Both are printed per
capture from the median CPU times of the rounds (--repeat, 5 by default) and from each
round's own ratio, with the load average before and after the rounds.
--profile adds a cProfile of `pcap --jobs 1 --stats` on each capture (calls per packet,
the functions with the most time of their own: pcap_profile.py); --equal REV checks that
the events and outputs are those of git revision REV on every capture of the project,
the third-party corpus and the captures measured here (pcap_equal.py).

Then the same runs on a capture dense in short connections (issue 11): --short real
loopback handshakes (300) recorded by pcap_short.py (openssl s_server -www, tcpdump on lo,
every second connection with a small HTTP exchange), replicated as recorded (no --mss split)
to --packets packets: about 71,000 connections per 1M packets, where the per-connection
cost shows. Recording needs tcpdump and the right to capture on lo; --short 0 skips it;
--short-pcap PATH measures (or writes) that capture there, also beside --pcap.

Then the adversarial captures of benchmarks/pcap_flows.py, generated here (issue 11): a
capture of --flows SYN-only flows (1M; target under 150 MB peak RSS) and captures of
--shuffled N one-byte segments in a random order carrying a real TLS handshake (16,000 and
32,000; target: CPU time linear in N), each beside tshark on the same file: CPU time, peak
RSS and their ratios. --skip-throughput runs only these, --flows 0 --shuffled skips them.

--compiled also builds the optional compiled fast path (benchmarks/compiled_tree.py: the
wheel TLSPROBE_COMPILE=1 pip install . would install) and runs every tlsprobe command of the
rounds a second time with it ("[compiled]"), with its own CPU ratios and two-process figures.

Usage: python3 benchmarks/pcap.py [--packets N] [--pcap PATH] [--keep] [--no-tshark] [--compiled]
                                  [--repeat N] [--flows N] [--shuffled N ...]
                                  [--skip-throughput] [--short N] [--short-pcap PATH]
                                  [--profile] [--equal REV]
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tlsprobe.capture import read_packets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pcap_equal import compare
from pcap_flows import adversarial, run_measured
from pcap_profile import profile
from pcap_short import record_short

SEEDS = ROOT / "captures"


def seed_flows(mss: int = 0, paths: list[Path] | None = None, port: int | None = None
               ) -> list[list[tuple[float, bytes]]]:
    """Every IPv4 TCP connection of the recorded (not derived) captures (or of `paths`;
    only those to `port` if given), as Ethernet frames with their time offsets from the
    connection's first packet (segments over `mss` split)."""
    flows: list[list[tuple[float, bytes]]] = []
    for path in paths if paths is not None else sorted(SEEDS.glob("*.pcap")):
        name = path.stem
        if any(word in name for word in ("midstream", "gap", "reordered", "ipv6")):
            continue
        conns: OrderedDict[tuple[bytes, int, int], list[tuple[float, bytes]]] = OrderedDict()
        for _, ts, lt, data, _ in read_packets(str(path)):
            if lt != 1 or len(data) < 54 or data[12:14] != b"\x08\x00" or data[23] != 6:
                continue
            sport, dport = struct.unpack_from("!HH", data, 34)
            if port is not None and port not in (sport, dport):
                continue
            key = (data[26:34], min(sport, dport), max(sport, dport))
            conns.setdefault(key, []).append((ts, data))
        for packets in conns.values():
            t0 = packets[0][0]
            flows.append([(ts - t0, piece) for ts, data in packets
                          for piece in split_segments(data, mss)])
    return flows


def split_segments(frame: bytes, mss: int) -> list[bytes]:
    """An Ethernet/IPv4/TCP frame whose payload exceeds `mss` as the segments an Ethernet
    path would carry (loopback's MTU is 64 KiB, so tcpdump on lo sees whole flights)."""
    ihl = (frame[14] & 0x0F) * 4
    tcp = 14 + ihl
    start = tcp + (frame[tcp + 12] >> 4) * 4
    payload = frame[start:]
    if not mss or len(payload) <= mss:
        return [frame]
    seq = struct.unpack_from("!I", frame, tcp + 4)[0]
    out = []
    for i in range(0, len(payload), mss):
        piece = payload[i:i + mss]
        head = bytearray(frame[:start])
        struct.pack_into("!H", head, 16, ihl + (start - tcp) + len(piece))
        struct.pack_into("!I", head, tcp + 4, (seq + i) & 0xFFFFFFFF)
        if i + mss < len(payload):
            head[tcp + 13] &= ~0x09 & 0xFF  # PSH and FIN only on the last piece
        out.append(bytes(head) + piece)
    return out


def write_capture(path: Path, flows: list[list[tuple[float, bytes]]], packets: int
                  ) -> tuple[int, int]:
    """Replicate the flows, each copy with its own client address and port, interleaving a
    few connections at a time as a busy network would. Packets and connections written."""
    record = struct.Struct("<IIII")
    written, copy, ts = 0, 0, 1_700_000_000.0
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        while written < packets:
            batch = []
            for _ in range(4):
                frames = flows[copy % len(flows)]
                client_port = struct.unpack_from("!H", frames[0][1], 34)[0]
                ip = bytes((10, 1 + (copy >> 16) % 250, (copy >> 8) & 255, copy & 255))
                port = struct.pack("!H", 1024 + copy % 60000)
                for offset, data in frames:
                    b = bytearray(data)
                    if struct.unpack_from("!H", b, 34)[0] == client_port:
                        b[26:30], b[34:36] = ip, port
                    else:
                        b[30:34], b[36:38] = ip, port
                    batch.append((ts + offset, bytes(b)))
                copy += 1
            batch.sort(key=lambda item: item[0])
            for when, data in batch:
                sec = int(when)
                f.write(record.pack(sec, int((when - sec) * 1e6), len(data), len(data)))
                f.write(data)
                written += 1
            ts = batch[-1][0] + 0.001
    return written, copy


def child_env(pycache: Path, tree: Path = ROOT) -> dict[str, str]:
    """The environment of the tlsprobe runs: the project (or the tlsprobe package in `tree`:
    the compiled build) on the path and its bytecode compiled beforehand into `pycache` (as
    an installed package has it: pip compiles on install), whatever PYTHONDONTWRITEBYTECODE
    says here."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=str(pycache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if tree != ROOT:   # `python -m` would put the working folder, this checkout, first
        env["PYTHONSAFEPATH"] = "1"
    return env


def compile_project(env: dict[str, str]) -> None:
    """Compile the project, then run it once on a small recorded capture so that the
    modules it imports from the standard library and site-packages are cached too."""
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(env["PYTHONPATH"]) / "tlsprobe")],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", "--jsonl",
                    "--stats", str(SEEDS / "tls12_x25519.pcap")], env=env, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_child(cmd: list[str], out: Path, env: dict[str, str]
              ) -> tuple[float, int, int, float]:
    """Wall time, peak RSS (KiB), lines of output and CPU time of one child process and its
    own children (tlsprobe reads a large capture in two processes), as
    pcap_flows.run_measured measures them: CPU time summed by os.wait4, peak RSS the sum of
    each process's own peak. The output goes to a file, counted afterwards, so that reading
    it costs neither side any time."""
    wall, cpu, peak, lines = run_measured(cmd, out, env)
    return wall, peak, lines, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--pcap", help="existing capture to measure, or where to write the new one")
    ap.add_argument("--keep", action="store_true", help="keep the generated capture")
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of runs (every command "
                    "once per round, in turn); the median wall and CPU times are shown "
                    "(default 5)")
    ap.add_argument("--mss", type=int, default=1448, help="split recorded segments larger "
                    "than this, as an Ethernet path would (0: keep loopback's 64 KiB "
                    "segments; default 1448)")
    ap.add_argument("--flows", type=int, default=1_000_000, help="SYN-only flows of the "
                    "many-flows capture (0: none)")
    ap.add_argument("--shuffled", type=int, nargs="*", default=[16000, 32000],
                    help="one-byte segments of each shuffled-segments capture")
    ap.add_argument("--skip-throughput", action="store_true",
                    help="only the many-flows and shuffled-segments captures")
    ap.add_argument("--short", type=int, default=300, help="real loopback handshakes "
                    "recorded for the short-connections capture (0: no such capture)")
    ap.add_argument("--short-pcap", help="existing short-connections capture to measure "
                    "(also with --pcap), or where to write the new one")
    ap.add_argument("--profile", action="store_true", help="also profile `pcap --jobs 1 "
                    "--stats` on each capture (cProfile: calls per packet, top functions)")
    ap.add_argument("--equal", metavar="REV", help="check that the events and outputs are "
                    "those of git revision REV on every capture (exit 1 if not)")
    ap.add_argument("--compiled", nargs="?", const="", metavar="SITE", help="also measure "
                    "the optional compiled fast path (TLSPROBE_COMPILE=1's build, made here by "
                    "benchmarks/compiled_tree.py, or the one unpacked in SITE) in the same "
                    "rounds, with its own ratios")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tlsprobe-bench-pcap-"))
    measured: list[Path] = []
    try:
        if args.compiled:
            args.compiled_site = Path(args.compiled).resolve()
        elif args.compiled is not None:
            from compiled_tree import build_compiled
            args.compiled_site = build_compiled(tmp / "compiled")
        if not args.skip_throughput:
            path = Path(args.pcap) if args.pcap else tmp / "big.pcap"
            if not path.exists():
                build_capture(path, seed_flows(args.mss), args.packets,
                              "recorded loopback connections"
                              + (f", segments split at {args.mss} bytes" if args.mss else ""))
            throughput(args, tmp, path)
            measured.append(path)
            if args.short and (args.short_pcap or not args.pcap):
                path = Path(args.short_pcap) if args.short_pcap else tmp / "short.pcap"
                if not path.exists():
                    seed, port = record_short(tmp, args.short)
                    build_capture(path, seed_flows(0, [seed], port), args.packets,
                                  "real loopback handshakes (openssl s_server -www, Python "
                                  "ssl clients, every second one with an HTTP GET)")
                throughput(args, tmp, path)
                measured.append(path)
        env = child_env(tmp / "pycache")
        if args.skip_throughput:
            compile_project(env)
        tshark = shutil.which("tshark")
        if args.flows or args.shuffled:
            adversarial(tmp, env, sys.executable, None if args.no_tshark else tshark,
                        args.flows, args.shuffled)
        if args.equal and compare(args.equal, measured):
            return 1
    finally:
        if args.keep and not args.pcap:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def build_capture(path: Path, flows: list[list[tuple[float, bytes]]], packets: int,
                  what: str) -> None:
    """Write the replicated capture and say what it holds."""
    if not flows:
        raise SystemExit(f"no recorded connections for {path.name} (tools/record_captures.py)")
    n, copies = write_capture(path, flows, packets)
    print(f"\nwrote {path} ({n} packets, {copies} connections, "
          f"{path.stat().st_size >> 20} MiB) from {len(flows)} {what}")


def throughput(args: argparse.Namespace, tmp: Path, path: Path) -> None:
    """The table, --stats and --jsonl on a big capture of real handshakes, beside tshark."""
    packets = sum(1 for _ in read_packets(str(path)))
    tlsprobe = [sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", str(path)]
    ours = [("tlsprobe pcap (table)", tlsprobe),
            ("tlsprobe pcap --stats", tlsprobe + ["--stats"]),
            ("tlsprobe pcap --jsonl", tlsprobe + ["--jsonl"]),
            ("tlsprobe --jobs 1 (table)", tlsprobe + ["--jobs", "1"]),
            ("tlsprobe --jobs 1 --jsonl", tlsprobe + ["--jobs", "1", "--jsonl"]),
            ("tlsprobe --jobs 1 --stats", tlsprobe + ["--jobs", "1", "--stats"])]
    runs = list(ours)
    envs = {label: child_env(tmp / "pycache") for label, _ in runs}
    site = getattr(args, "compiled_site", None)
    if site is not None:   # the compiled build: same commands, its package on the path
        for label, cmd in ours:
            runs.append((label + COMPILED, cmd))
            envs[label + COMPILED] = child_env(tmp / "pycache-compiled", site)
        compile_project(envs[ours[0][0] + COMPILED])
    tshark = shutil.which("tshark")
    if tshark and not args.no_tshark:
        runs += [("tshark ciphersuite", [tshark, "-r", str(path), "-Y",
                                         "tls.handshake.type==2", "-T", "fields", "-e",
                                         "tls.handshake.ciphersuite"]),
                 ("tshark groups", [tshark, "-r", str(path), "-Y",
                                    "tls.handshake.type==2 || tls.handshake.type==12",
                                    "-T", "fields", "-e", "tls.handshake.ciphersuite",
                                    "-e", "tls.handshake.extensions_key_share_group",
                                    "-e", "tls.handshake.server_named_curve"])]
    env = child_env(tmp / "pycache")
    compile_project(env)
    # rounds: each command once in turn, --repeat times, so that a slow spell of a shared
    # machine falls on both tools alike (not on all runs of one of them)
    by_label: dict[str, list[tuple[float, int, int, float]]] = {label: [] for label, _ in runs}
    load_before = os.getloadavg()
    for _ in range(args.repeat):
        for label, cmd in runs:
            by_label[label].append(run_child(cmd, tmp / "out.txt", envs.get(label, env)))
    load_after = os.getloadavg()
    rows = []
    for label, _cmd in runs:
        results = by_label[label]
        rows.append((label, median(r[0] for r in results), max(r[1] for r in results),
                     results[-1][2], median(r[3] for r in results)))
    print(f"\n{path.name}: {packets} packets, {args.repeat} rounds, load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after ({os.cpu_count()} CPUs)")
    print(f"{'run':<37} {'seconds':>8} {'CPU s':>7} {'packets/s':>11} {'peak RSS':>10} "
          f"{'lines':>8}")
    for label, wall, rss, lines, cpu in rows:
        print(f"{label:<37} {wall:>8.2f} {cpu:>7.2f} {packets / wall:>11,.0f} "
              f"{rss / 1024:>8.1f}M {lines:>8}")
    if args.repeat > 1:
        print("CPU seconds of each round:")
        for label, _cmd in runs:
            print(f"  {label:<37} " + " ".join(f"{r[3]:.2f}" for r in by_label[label]))
    ours = [r for r in rows if r[0].startswith("tlsprobe")]
    theirs = [r for r in rows if r[0].startswith("tshark")]
    if theirs:
        fastest_tshark = min(r[1] for r in theirs)
        least_tshark = min(r[2] for r in theirs)
        least_cpu = min(r[4] for r in theirs)
        print("\nagainst the faster tshark run (target: >= 4x throughput, <= 1/5 memory)")
        for label, wall, rss, _, cpu in ours:
            speed, memory = fastest_tshark / wall, least_tshark / rss
            print(f"  {label:<37} {speed:4.1f}x throughput ({least_cpu / cpu:.1f}x in CPU) "
                  f"({'met' if speed >= 4 else 'NOT met'}), 1/{memory:.1f} of the memory "
                  f"({'met' if memory >= 5 else 'NOT met'})")
        if args.repeat > 1:
            # each round's own ratio (its run against the faster tshark run of the same
            # round): a machine whose speed drifts between rounds moves both sides of it
            print("each round's throughput ratio (against that round's faster tshark run):")
            for label, *_ in ours:
                ratios = [min(by_label[t[0]][i][0] for t in theirs) / by_label[label][i][0]
                          for i in range(args.repeat)]
                print(f"  {label:<37} " + " ".join(f"{r:.1f}x" for r in ratios)
                      + f"  (median {median(ratios):.1f}x)")
        cpu_ratios(by_label, [t[0] for t in theirs])
    two_processes(by_label)
    if args.profile:
        profile(path, env)


# the label suffix of the compiled build's runs (--compiled)
COMPILED = " [compiled]"


def cpu_ratios(by_label: dict[str, list[tuple[float, int, int, float]]],
               theirs: list[str]) -> None:
    """Issue 35: tshark's CPU time over tlsprobe's in one process (--jobs 1), from the
    medians and from each round's own runs (against that round's cheaper tshark run)."""
    rounds = len(by_label[theirs[0]])
    least = median(min(by_label[t][i][3] for t in theirs) for i in range(rounds))
    least_wall = median(min(by_label[t][i][0] for t in theirs) for i in range(rounds))
    print("\nCPU against the cheaper tshark run, one process (issue 35 target: >= 5x, "
          "stretch 8x)")
    for label, results in by_label.items():
        if not label.startswith("tlsprobe --jobs 1"):
            continue
        cpu, wall = median(r[3] for r in results), median(r[0] for r in results)
        per_round = [min(by_label[t][i][3] for t in theirs) / results[i][3]
                     for i in range(rounds)]
        ratio = least / cpu
        verdict = "stretch met" if ratio >= 8 else "met" if ratio >= 5 else "NOT met"
        print(f"  {label:<37} {ratio:4.1f}x in CPU ({cpu:.2f} s against {least:.2f} s), "
              f"{least_wall / wall:4.1f}x in wall time; rounds "
              + " ".join(f"{r:.1f}x" for r in per_round)
              + f" (median {median(per_round):.1f}x) ({verdict})")


def two_processes(by_label: dict[str, list[tuple[float, int, int, float]]]) -> None:
    """Issue 35: the CPU time of the default two processes over that of one (--jobs 1)
    for the same output, from the medians and round by round."""
    pairs = [(name + build, two + build, one + build)
             for build in ("", COMPILED) if "tlsprobe pcap (table)" + build in by_label
             for name, two, one in (
                 ("table", "tlsprobe pcap (table)", "tlsprobe --jobs 1 (table)"),
                 ("--jsonl", "tlsprobe pcap --jsonl", "tlsprobe --jobs 1 --jsonl"),
                 ("--stats", "tlsprobe pcap --stats", "tlsprobe --jobs 1 --stats"))]
    print("two processes (the default) against one, CPU time in all (issue 35 target: at "
          "most 15 % more)")
    for name, two, one in pairs:
        a, b = by_label[two], by_label[one]
        extra = median(r[3] for r in a) / median(r[3] for r in b) - 1
        rounds = [x[3] / y[3] - 1 for x, y in zip(a, b, strict=True)]
        print(f"  {name:<19} {extra:+6.1%} CPU, wall {median(r[0] for r in a):.2f} s against "
              f"{median(r[0] for r in b):.2f} s; rounds "
              + " ".join(f"{r:+.0%}" for r in rounds)
              + f" ({'met' if extra <= 0.15 else 'NOT met'})")


if __name__ == "__main__":
    sys.exit(main())
