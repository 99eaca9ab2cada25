"""Capture-reading throughput: tlsprobe's event iterator next to tshark on a large pcap.

Builds a pcap of >= 1M packets by replicating real loopback TLS handshakes (recorded with
tcpdump against `openssl s_server` on 127.0.0.1; synthesized TLS-like flows when tcpdump or
openssl cannot be used), each copy with its own client address and port.  Then it times,
each in its own child process (peak RSS from os.wait4 per child):

* tlsprobe read only   - container parsing (read_packets)
* tlsprobe events      - reader + link/IP decode + TCP reassembly (iter_stream_events)
* scapy RawPcapReader  - with --scapy: scapy's record reader, for reference
* tshark               - tshark -r FILE -Y 'tls.handshake.type==2' -T fields
                         -e tls.handshake.ciphersuite

Usage: python3 benchmarks/pcap_read.py [--packets N] [--pcap PATH] [--keep] [--no-tshark]
                                       [--scapy]
       (--pcap with an existing file skips generation; with a new path writes it there)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tlsprobe.capture import read_packets


# -- recording real handshakes ---------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-keyout", str(tmp / "key.pem"),
                    "-out", str(tmp / "cert.pem")], check=True, capture_output=True)
    return tmp / "cert.pem", tmp / "key.pem"


def record_handshakes(tmp: Path) -> list[list[bytes]] | None:
    """A few real handshakes as lists of Ethernet frames, or None when recording fails."""
    if not shutil.which("tcpdump") or not shutil.which("openssl"):
        return None
    cert, key = _self_signed(tmp)
    port = _free_port()
    pcap = tmp / "rec.pcap"
    server = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert",
                               str(cert), "-key", str(key), "-quiet", "-naccept", "4"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-w", str(pcap),
                             f"tcp port {port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        for args in (["-tls1_3", "-groups", "X25519"], ["-tls1_3", "-groups", "P-256"],
                     ["-tls1_2"], ["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"]):
            subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *args],
                           input=b"", capture_output=True, timeout=10, check=False)
        time.sleep(0.5)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
        server.kill()
        server.wait()
    if not pcap.exists():
        return None
    flows: dict[tuple[int, int], list[bytes]] = {}
    for _, _, lt, data, _ in read_packets(str(pcap)):
        if lt != 1 or len(data) < 54 or data[12:14] != b"\x08\x00":
            continue
        sport, dport = struct.unpack_from("!HH", data, 34)
        flows.setdefault((min(sport, dport), max(sport, dport)), []).append(data)
    handshakes = [f for f in flows.values() if len(f) >= 6]
    return handshakes or None


def synthesize_handshake() -> list[bytes]:
    """A TLS-like exchange (SYN, hellos, data, FIN) when no real one can be recorded."""
    def frame(src: int, dst: int, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
        tcp = struct.pack("!HHIIBBHHH", src, dst, seq, ack, 0x50, flags, 65535, 0, 0)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64,
                         6, 0, b"\x7f\x00\x00\x01", b"\x7f\x00\x00\x01")
        return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload
    c, s = 40000, 443
    ch = b"\x16\x03\x01\x01\x00" + b"\x01" + b"\x00" * 255
    sh = b"\x16\x03\x03\x00\x7a" + b"\x02" + b"\x00" * 121 + b"\x17\x03\x03\x04\x00" + b"\x00" * 1024
    return [frame(c, s, 1000, 0, 0x02, b""), frame(s, c, 5000, 1001, 0x12, b""),
            frame(c, s, 1001, 5001, 0x10, b""), frame(c, s, 1001, 5001, 0x18, ch),
            frame(s, c, 5001, 1001 + len(ch), 0x10, b""),
            frame(s, c, 5001, 1001 + len(ch), 0x18, sh),
            frame(c, s, 1001 + len(ch), 5001 + len(sh), 0x10, b""),
            frame(c, s, 1001 + len(ch), 5001 + len(sh), 0x18, b"\x17\x03\x03\x00\x40" + b"\x00" * 64),
            frame(c, s, 1070 + len(ch), 5001 + len(sh), 0x11, b""),
            frame(s, c, 5001 + len(sh), 1071 + len(ch), 0x11, b""),
            frame(c, s, 1071 + len(ch), 5002 + len(sh), 0x10, b"")]


def write_big_pcap(path: Path, handshakes: list[list[bytes]], packets: int) -> int:
    """Replicate the handshakes with distinct client addresses/ports until `packets`."""
    rec = struct.Struct("<IIII")
    written = 0
    copy = 0
    ts = 1_700_000_000.0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        while written < packets:
            frames = handshakes[copy % len(handshakes)]
            client_port = struct.unpack_from("!H", frames[0], 34)[0]
            new_ip = bytes((127, 1 + (copy >> 16) % 250, (copy >> 8) & 255, copy & 255))
            new_port = struct.pack("!H", 1024 + copy % 60000)
            for data in frames:
                b = bytearray(data)
                if struct.unpack_from("!H", b, 34)[0] == client_port:
                    b[26:30] = new_ip
                    b[34:36] = new_port
                else:
                    b[30:34] = new_ip
                    b[36:38] = new_port
                ts += 0.00001
                sec = int(ts)
                f.write(rec.pack(sec, int((ts - sec) * 1e6), len(b), len(b)))
                f.write(b)
                written += 1
            copy += 1
    return written


# -- measuring -------------------------------------------------------------------------
OURS = """
import sys, time
sys.path.insert(0, {root!r})
from tlsprobe.capture import iter_stream_events, read_packets, StreamData
t = time.perf_counter()
if {mode!r} == "read":
    n = sum(1 for _ in read_packets({path!r}))
    events = n
elif {mode!r} == "scapy":
    from scapy.utils import RawPcapReader
    n = sum(1 for _ in RawPcapReader({path!r}))
    events = n
else:
    stream = iter_stream_events({path!r})
    events = 0
    for ev in stream:
        events += 1
    n = stream.stats.packets
print(n, events, time.perf_counter() - t)
"""


def run_child(cmd: list[str]) -> tuple[float, int, str]:
    """Wall time, peak RSS (KiB) and stdout of one child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--pcap", help="existing pcap to measure, or where to write the new one")
    ap.add_argument("--keep", action="store_true", help="keep the generated pcap")
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--scapy", action="store_true",
                    help="also time scapy's RawPcapReader (records only: the floor to beat)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tlsprobe-bench-"))
    try:
        path = Path(args.pcap) if args.pcap else tmp / "big.pcap"
        if not path.exists():
            handshakes = record_handshakes(tmp)
            source = "recorded loopback handshakes"
            if handshakes is None:
                handshakes, source = [synthesize_handshake()], "synthesized flows"
            n = write_big_pcap(path, handshakes, args.packets)
            print(f"wrote {path} ({n} packets, {path.stat().st_size >> 20} MiB) "
                  f"from {len(handshakes)} {source}")
        rows = []
        modes = [("tlsprobe read only", "read"), ("tlsprobe events", "events")]
        if args.scapy:
            modes.append(("scapy RawPcapReader", "scapy"))
        for label, mode in modes:
            wall, rss, out = run_child([sys.executable, "-c",
                                        OURS.format(root=str(ROOT), path=str(path), mode=mode)])
            n, events, inner = out.split()
            rows.append((label, int(n), float(inner), rss, f"{events} events"))
        if not args.no_tshark and shutil.which("tshark"):
            wall, rss, out = run_child(["tshark", "-r", str(path), "-Y", "tls.handshake.type==2",
                                        "-T", "fields", "-e", "tls.handshake.ciphersuite"])
            rows.append(("tshark", rows[0][1], wall, rss, f"{len(out.splitlines())} ServerHellos"))
        events_row = next(r for r in rows if r[0] == "tlsprobe events")
        print(f"\n{'reader':<20} {'packets':>9} {'seconds':>8} {'pkt/s':>10} {'peak RSS':>10}  note")
        for label, n, secs, rss, note in rows:
            print(f"{label:<20} {n:>9} {secs:>8.2f} {n / secs:>10,.0f} {rss / 1024:>8.1f}M  {note}")
        if rows[-1][0] == "tshark":
            print(f"\nevents vs tshark: {rows[-1][2] / events_row[2]:.1f}x faster")
    finally:
        if args.keep and not args.pcap:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
