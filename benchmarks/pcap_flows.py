"""The adversarial captures of `benchmarks/pcap.py`: many flows, shuffled segments.

* ``syn_flows.pcap``: N SYN-only flows (1,000,000 by default), each from its own client
  address and port, 10,000 a second of capture time. Target (issue 11): under 150 MB peak
  RSS for tlsprobe (tshark used 549 MB for 200,000).
* ``shuffled_N.pcap``: one real TLS 1.2 handshake (captures/tls12_x25519.pcap) followed by
  application data records, each direction sent as one-byte segments in a random order
  (N segments in all). Target: time linear in N (before: 16,000 segments took 76 s of CPU,
  32,000 took 456 s). tshark reads it with ``tcp.reassemble_out_of_order`` on, as it
  would otherwise not reassemble it at all.

Each command runs in its own child process; CPU time (user + system) comes from
os.wait4, the peak RSS from the child's own VmHWM (/proc, sampled until it exits), since
ru_maxrss would count the pages this parent had when the child was spawned.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "captures" / "tls12_x25519.pcap"
_RECORD = struct.Struct("<IIII")
_ETH = bytes.fromhex("020000000002020000000001" "0800")


def _header() -> bytes:
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)


def _frame(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int,
           payload: bytes = b"") -> bytes:
    """Ethernet/IPv4/TCP, checksums left zero (neither reader checks them by default)."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0, src,
                     dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 0x50,
                      flags, 65535, 0, 0)
    return _ETH + ip + tcp + payload


def _write(f: object, ts: float, frame: bytes) -> None:
    sec = int(ts)
    f.write(_RECORD.pack(sec, int((ts - sec) * 1e6), len(frame), len(frame)))  # type: ignore[attr-defined]
    f.write(frame)  # type: ignore[attr-defined]


def write_syn_flows(path: Path, flows: int, per_second: int = 10000) -> int:
    """`flows` SYN-only flows, each with its own client address and port."""
    server = bytes((192, 0, 2, 1))
    with open(path, "wb") as f:
        f.write(_header())
        for i in range(flows):
            src = bytes((10, 64 + (i >> 16) % 64, (i >> 8) & 255, i & 255))
            _write(f, 1_700_000_000 + i / per_second,
                   _frame(src, server, 1024 + i % 60000, 443, i * 7919, 0, 0x02))
    return flows


def seed_flights() -> list[tuple[int, bytes]]:
    """The seed handshake's bytes as flights: (direction, bytes) in capture order."""
    from tlsprobe.capture import StreamData, iter_stream_events
    flights: list[tuple[int, bytearray]] = []
    for ev in iter_stream_events(str(SEED)):
        if isinstance(ev, StreamData):
            if flights and flights[-1][0] == ev.direction:
                flights[-1][1].extend(ev.data)
            else:
                flights.append((ev.direction, bytearray(ev.data)))
    return [(d, bytes(b)) for d, b in flights]


def write_shuffled(path: Path, segments: int, seed: int = 1) -> int:
    """A real handshake, then application data records from the server, as `segments`
    one-byte segments; each flight's segments in a random order (flights in the order
    of the recording, so that each side answers what it has seen)."""
    flights = seed_flights()
    rng = random.Random(seed)
    want = max(0, segments - sum(len(b) for _, b in flights))
    extra = bytearray()
    while len(extra) < want:  # application data records of random bytes
        size = min(1024, max(1, want - len(extra) - 5))
        extra += b"\x17\x03\x03" + struct.pack("!H", size) + rng.randbytes(size)
    if want:
        flights.append((1, bytes(extra[:want])))
    ends = {0: (bytes((10, 9, 0, 1)), 50000), 1: (bytes((10, 9, 0, 2)), 443)}
    nxt = {0: 1001, 1: 900001}  # next sequence number of each side (ISN + 1)
    (c_ip, c_port), (s_ip, s_port) = ends[0], ends[1]
    packets = [_frame(c_ip, s_ip, c_port, s_port, 1000, 0, 0x02),
               _frame(s_ip, c_ip, s_port, c_port, 900000, 1001, 0x12),
               _frame(c_ip, s_ip, c_port, s_port, 1001, 900001, 0x10)]
    for direction, data in flights:
        (src, sp), (dst, dp) = ends[direction], ends[1 - direction]
        base, ack = nxt[direction], nxt[1 - direction]
        order = list(range(len(data)))
        rng.shuffle(order)
        packets += [_frame(src, dst, sp, dp, base + i, ack, 0x18, data[i:i + 1])
                    for i in order]
        nxt[direction] = base + len(data)
    end_c, end_s = nxt[0], nxt[1]
    packets += [_frame(c_ip, s_ip, c_port, s_port, end_c, end_s, 0x11),
                _frame(s_ip, c_ip, s_port, c_port, end_s, end_c + 1, 0x11),
                _frame(c_ip, s_ip, c_port, s_port, end_c + 1, end_s + 1, 0x10)]
    with open(path, "wb") as f:
        f.write(_header())
        for k, frame in enumerate(packets):
            _write(f, 1_700_000_000 + k * 1e-5, frame)
    return len(packets)


def _vm_hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    """A process and all its descendants (Linux /proc; the process alone elsewhere)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return out


def run_measured(cmd: list[str], out: Path, env: dict[str, str]) -> tuple[float, float, int, int]:
    """Wall time, CPU time (s), peak RSS (KiB) and output lines of one child process and
    its own children (tlsprobe reads a large capture in two processes): CPU time summed by
    os.wait4, peak RSS the sum of each process's own peak (VmHWM)."""
    with open(out, "wb") as sink:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL, env=env)
        peaks: dict[int, int] = {}
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            for p in _descendants(proc.pid):
                peaks[p] = max(peaks.get(p, 0), _vm_hwm(p))
            time.sleep(0.02)
        peak = sum(peaks.values())
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 7):
        raise SystemExit(f"{' '.join(cmd[:4])}... exited with {code}")
    if not peak:  # no /proc: ru_maxrss (may include this parent's pages)
        peak = usage.ru_maxrss
    with open(out, "rb") as f:
        lines = sum(1 for _ in f)
    out.unlink()
    return wall, usage.ru_utime + usage.ru_stime, peak, lines


def adversarial(tmp: Path, env: dict[str, str], python: str, tshark: str | None,
                flows: int, shuffled: list[int]) -> None:
    """Build the captures, run tlsprobe and tshark on each, print CPU, peak RSS, ratios."""
    cases = []
    syn = tmp / "syn_flows.pcap"
    write_syn_flows(syn, flows)
    cases.append((f"{flows:,} SYN-only flows", syn, []))
    for n in shuffled:
        path = tmp / f"shuffled_{n}.pcap"
        write_shuffled(path, n)
        cases.append((f"{n:,} shuffled 1-byte segments", path,
                      ["-o", "tcp.reassemble_out_of_order:TRUE"]))
    print(f"\n{'capture':<34} {'run':<9} {'CPU s':>8} {'peak RSS':>10} {'lines':>6}"
          f"   tlsprobe/tshark CPU, RSS")
    for label, path, tshark_opts in cases:
        ours = run_measured([python, "-m", "tlsprobe", "pcap", "--no-progress", str(path)],
                            tmp / "out.txt", env)
        print(f"{label:<34} {'tlsprobe':<9} {ours[1]:>8.2f} {ours[2] / 1024:>8.1f}M "
              f"{ours[3]:>6}")
        if tshark:
            theirs = run_measured([tshark, "-r", str(path), *tshark_opts, "-Y",
                                   "tls.handshake.type==2", "-T", "fields", "-e",
                                   "tls.handshake.ciphersuite"], tmp / "out.txt", env)
            print(f"{'':<34} {'tshark':<9} {theirs[1]:>8.2f} {theirs[2] / 1024:>8.1f}M "
                  f"{theirs[3]:>6}   {ours[1] / max(theirs[1], 1e-9):.2f}x, "
                  f"{ours[2] / max(theirs[2], 1):.2f}x")
        if path == syn:
            print(f"{'':<34} target: tlsprobe under 150 MB peak RSS: "
                  f"{'met' if ours[2] < 150 * 1024 else 'NOT met'}")
        path.unlink()
