"""Which capture backend `tlsprobe pcap -i` uses: libpcap (through scapy's ctypes
bindings, what capture/live.py does) or scapy's own Linux sockets (`conf.L2listen`, an
AF_PACKET socket with the same BPF filter), by packets read and dropped and the reader's
CPU time on the same burst.

A sender process sends `--packets` UDP datagrams of `--size` bytes to a port on 127.0.0.1
as fast as it can; the reader (another process, one backend per run, alternating) reads
what passes `udp dst port PORT` until the burst has been idle for half a second, and says
how many packets it read, how many the kernel says it dropped, and its CPU seconds.
Usage: python benchmarks/live_backends.py [--packets 200000] [--size 200] [--rounds 3]
(needs root or CAP_NET_RAW + CAP_NET_ADMIN). docs/INTERNALS.md "Live capture" has the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDLE = 0.5


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def read_libpcap(port: int) -> dict[str, float]:
    """capture/live.py's loop: the packet records CaptureStream would read."""
    sys.path.insert(0, str(ROOT))
    from tlsprobe.capture.events import CaptureStats
    from tlsprobe.capture.live import LiveCapture
    capture = LiveCapture(["lo"], f"udp dst port {port}")
    capture.open(CaptureStats())
    print("READY", flush=True)
    got, cpu0 = 0, 0.0
    for _record in capture.packets():
        if got == 0:
            cpu0 = _cpu()
        got += 1
        capture.stop_at = time.monotonic() + IDLE   # the end: half a second idle
    cpu = _cpu() - cpu0
    counts = capture.counts()
    capture.close()
    return {"read": got, "dropped": counts.dropped + counts.interface_dropped, "cpu_s": cpu}


def read_scapy(port: int, dissect: bool) -> dict[str, float]:
    """scapy's AF_PACKET socket: raw frames (recv_raw) or dissected packets (recv)."""
    from scapy.arch.linux import L2ListenSocket
    sock = L2ListenSocket(iface="lo", filter=f"udp dst port {port}")
    print("READY", flush=True)
    got, cpu0 = 0, 0.0
    sock.ins.settimeout(IDLE)
    while True:
        try:
            if dissect:
                packet = sock.recv()
            else:
                packet = sock.recv_raw()[1]
        except (TimeoutError, socket.timeout):
            break
        if packet is None:
            continue
        if got == 0:
            cpu0 = _cpu()
        got += 1
    cpu = _cpu() - cpu0
    # struct tpacket_stats (tp_packets, tp_drops): SOL_PACKET 263, PACKET_STATISTICS 6
    _packets, drops = struct.unpack("II", sock.ins.getsockopt(263, 6, 8))
    sock.close()
    return {"read": got, "dropped": drops, "cpu_s": cpu}


def send(port: int, packets: int, size: int) -> None:
    payload = b"\x00" * size
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        address = ("127.0.0.1", port)
        for _ in range(packets):
            s.sendto(payload, address)


def one_round(backend: str, packets: int, size: int) -> dict[str, float]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        port = sink.getsockname()[1]
        reader = subprocess.Popen([sys.executable, __file__, "--reader", backend,
                                   "--port", str(port)], stdout=subprocess.PIPE, text=True)
        assert reader.stdout is not None
        assert reader.stdout.readline().strip() == "READY"
        start = time.monotonic()
        send(port, packets, size)
        sent_in = time.monotonic() - start
        result = json.loads(reader.stdout.readline())
        reader.wait(30)
    return {"backend": backend, "sent": packets, "send_s": round(sent_in, 2), **result}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--packets", type=int, default=200_000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reader")
    p.add_argument("--port", type=int)
    args = p.parse_args()
    if args.reader:
        if args.reader == "libpcap":
            out = read_libpcap(args.port)
        else:
            out = read_scapy(args.port, dissect=args.reader == "scapy-dissect")
        print(json.dumps(out), flush=True)
        return
    print(f"load average {os.getloadavg()[0]:.1f}; {args.packets} datagrams of "
          f"{args.size} bytes per round")
    for _ in range(args.rounds):
        for backend in ("libpcap", "scapy-raw", "scapy-dissect"):
            r = one_round(backend, args.packets, args.size)
            rate = r["read"] / r["cpu_s"] if r["cpu_s"] else 0
            print(f"{backend:14} sent {r['sent']} in {r['send_s']} s: read {r['read']}, "
                  f"dropped {r['dropped']}, reader CPU {r['cpu_s']:.2f} s "
                  f"({rate:,.0f} packets per CPU second)")


if __name__ == "__main__":
    main()
