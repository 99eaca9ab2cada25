"""Live capture: the largest handshake rate on `lo` that `tlsprobe pcap -i lo` follows with
no drops, and its CPU, beside `tshark -i lo -l -Y tls.handshake` on the same traffic.

The traffic is real handshakes replayed with tcpreplay: the project's own capture of an
openssl s_client/s_server TLS 1.3 handshake (captures/tls13_x25519.pcap: 19 packets, SYN to
FIN, a 2 kB server flight with its certificate) copied once per connection, each copy with
its own client port and the server on port `--port`, the copies' start times `1/rate`
apart. Each copy keeps the original TCP checksums, which no longer match the new ports: the
kernel drops the replayed segments (no RST from a port without a listener to disturb the
capture) while packet capture, tshark and tlsprobe see them all (neither checks TCP
checksums).

For each rate, each tool in turn (never both at once: they would share the two CPUs) is
started with a BPF filter on the port, the replay sent, and the tool given `--drain`
seconds to catch up before it is stopped with SIGINT:

* tlsprobe: `python -m tlsprobe pcap -i lo -f "tcp port PORT" --jsonl`: the rows it wrote,
  and its own drop counts (its summary line on stderr: kernel/libpcap and interface);
* tshark: `tshark -i lo -l -f "tcp port PORT" -d tcp.port==PORT,tls -Y
  "tls.handshake.type == 2" -T fields -e tcp.stream`: one line per ServerHello (one per
  connection), and its "packets dropped".

A rate is followed when every connection was reported and nothing was dropped (the drops
are the kernel's count, in which lo counts each replayed packet twice: packet sockets see
it going out and coming in, and libpcap drops the outgoing copy). The CPU time is the
tool's process (tshark's with its dumpcap child), user + system, from the rusage of the
reaped children; "CPU ms/hs" is per handshake, after the CPU of a run with one handshake
(start-up, drain, stop) is taken off. Prints one line per rate and tool, then the largest rate
each followed, with the load average (the machine is shared: the figures are noisy).

Usage: python benchmarks/live.py [--rates 250,500,750,1000,1500,2000,4000] [--seconds 2]
       [--port 45443] [--drain 3] [--no-tshark]
Needs root (or CAP_NET_RAW + CAP_NET_ADMIN) and tcpreplay (apt-get install tcpreplay).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tlsprobe.capture import read_packets

HANDSHAKE = ROOT / "captures" / "tls13_x25519.pcap"
START_WAIT = 30.0
SETTLE = 1.0


def replay_file(path: Path, rate: float, count: int, port: int) -> int:
    """Write `count` copies of the handshake, `1/rate` s apart, client ports 20000 up and
    the server on `port`; the number of packets written."""
    packets = list(read_packets(HANDSHAKE))
    t0 = packets[0][1]
    server_port = None
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    n = 0
    base = time.time()
    for i in range(count):
        client_port = 20000 + i % 40000
        start = base + i / rate
        for _frame, ts, _lt, data, orig in packets:
            ihl = (data[14] & 0x0F) * 4
            tcp = 14 + ihl
            _sport, dport = struct.unpack_from("!HH", data, tcp)
            if server_port is None:
                server_port = dport     # the first packet is the client's SYN
            new = bytearray(data)
            struct.pack_into("!HH", new, tcp, *(
                (client_port, port) if dport == server_port else (port, client_port)))
            when = start + (ts - t0)
            sec = int(when)
            out.append(struct.pack("<IIII", sec, int((when - sec) * 1e6), len(new), orig))
            out.append(bytes(new))
            n += 1
    # the copies overlap in time: the file must be in time order for tcpreplay
    path.write_bytes(_sorted(b"".join(out)))
    return n


def _sorted(pcap: bytes) -> bytes:
    """A pcap's records in time order (stable)."""
    head, pos, records = pcap[:24], 24, []
    while pos < len(pcap):
        sec, usec, incl, _orig = struct.unpack_from("<IIII", pcap, pos)
        records.append(((sec, usec), pcap[pos:pos + 16 + incl]))
        pos += 16 + incl
    records.sort(key=lambda r: r[0])
    return head + b"".join(r for _k, r in records)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _start(argv: list[str], ready: str, out: BinaryIO, err_path: Path
           ) -> tuple[subprocess.Popen[bytes], BinaryIO]:
    """Start a capturing tool (its output to a file: a pipe nobody reads during the run
    would stop it) and wait for its `ready` text on stderr."""
    err = open(err_path, "w+b")  # noqa: SIM115 - closed by the caller
    proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        err.seek(0)
        if ready.encode() in err.read() or proc.poll() is not None:
            break
        time.sleep(0.05)
    err.seek(0)
    if ready.encode() not in err.read():
        proc.kill()
        proc.wait()
        err.seek(0)
        sys.exit(f"{argv[0]} did not start capturing: {err.read().decode()[-500:]}")
    return proc, err


def run_tool(tool: str, pcap: Path, port: int, drain: float, tmp: Path) -> dict[str, float]:
    """One tool's run on one replay: rows, drops, CPU seconds."""
    bpf = f"tcp port {port}"
    if tool == "tlsprobe":
        argv = [sys.executable, "-m", "tlsprobe", "pcap", "-i", "lo", "-f", bpf, "--jsonl",
                "--no-progress"]
        ready = "capturing on"
    else:
        # -d: TLS on the port (tshark tries the lower port's dissector first, and some
        # client ports are registered to other protocols)
        argv = ["tshark", "-i", "lo", "-l", "-f", bpf, "-d", f"tcp.port=={port},tls",
                "-Y", "tls.handshake.type == 2", "-T", "fields", "-e", "tcp.stream"]
        ready = "Capturing on"
    before = _children_cpu()
    out_file = open(tmp / f"{tool}.out", "w+b")  # noqa: SIM115 - closed below
    proc, err = _start(argv, ready, out_file, tmp / f"{tool}.err")
    time.sleep(SETTLE)   # tshark says "Capturing on" as dumpcap starts, a little early
    subprocess.run(["tcpreplay", "-q", "-i", "lo", str(pcap)], check=True,
                   capture_output=True)
    replay_cpu = _children_cpu() - before
    time.sleep(drain)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    out_file.seek(0)
    out = out_file.read()
    out_file.close()
    cpu = _children_cpu() - before - replay_cpu
    err.seek(0)
    text = err.read().decode("utf-8", "replace")
    err.close()
    lines = [line for line in out.decode().splitlines() if line.strip()]
    if tool == "tlsprobe":
        rows = sum(1 for line in lines if '"kind": "connection"' in line)
        m = re.search(r"dropped: (\d+) by the kernel or libpcap, (\d+) by the interface", text)
        dropped = int(m.group(1)) + int(m.group(2)) if m else -1
    else:
        rows = len(lines)
        m = re.search(r"(\d+) packets? dropped", text)
        dropped = int(m.group(1)) if m else 0
    return {"rows": rows, "dropped": dropped, "cpu": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="250,500,750,1000,1500,2000,4000",
                    help="handshakes per second to try, comma-separated")
    ap.add_argument("--seconds", type=float, default=2.0, help="replay length per rate")
    ap.add_argument("--port", type=int, default=45443)
    ap.add_argument("--drain", type=float, default=3.0,
                    help="seconds the tool may take to catch up after the replay")
    ap.add_argument("--rounds", type=int, default=2,
                    help="runs per rate and tool: a rate is followed when every run is")
    ap.add_argument("--no-tshark", action="store_true")
    args = ap.parse_args()
    for tool in ("tcpreplay", *(() if args.no_tshark else ("tshark",))):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is needed (apt-get install {tool})")
    tools = ["tlsprobe"] + ([] if args.no_tshark else ["tshark"])
    best = dict.fromkeys(tools, 0.0)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        # what a run costs besides the handshakes (start-up, the drain, the stop): one
        # handshake's run, subtracted from each run's CPU for the cost per handshake
        pcap = tmp / "replay.pcap"
        replay_file(pcap, 1, 1, args.port)
        fixed = {tool: run_tool(tool, pcap, args.port, args.drain, tmp)["cpu"]
                 for tool in tools}
        print("CPU of a run with one handshake (start-up, drain, stop): " +
              ", ".join(f"{tool} {fixed[tool]:.2f} s" for tool in tools))
        print(f"{'rate/s':>7} {'tool':>8} {'sent':>6} {'rows':>6} {'dropped':>7} "
              f"{'CPU s':>6} {'CPU ms/hs':>9}")
        failed: dict[str, set[float]] = {tool: set() for tool in tools}
        rates = [float(r) for r in args.rates.split(",")]
        for rate in rates:
            count = max(2, int(rate * args.seconds))
            replay_file(pcap, rate, count, args.port)
            for _round in range(args.rounds):
                for tool in tools:
                    got = run_tool(tool, pcap, args.port, args.drain, tmp)
                    followed = got["rows"] == count and got["dropped"] == 0
                    if not followed:
                        failed[tool].add(rate)
                    per = 1000 * max(0.0, got["cpu"] - fixed[tool]) / (count - 1)
                    print(f"{rate:7.0f} {tool:>8} {count:6d} {got['rows']:6.0f} "
                          f"{got['dropped']:7.0f} {got['cpu']:6.2f} {per:9.3f}"
                          f"{'' if followed else '  (not followed)'}", flush=True)
    for tool in tools:
        lowest_failed = min(failed[tool], default=float("inf"))
        best[tool] = max((r for r in rates if r < lowest_failed), default=0.0)
    print("largest rate followed (it and every lower rate, in every run) with no drop and "
          "every connection reported: " +
          ", ".join(f"{tool} {best[tool]:.0f}/s" for tool in tools))
    print(f"load average {' '.join(f'{x:.1f}' for x in load)} -> "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
