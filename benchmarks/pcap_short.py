"""The short-connections capture of `benchmarks/pcap.py` (issue 11, item 4).

A few hundred real loopback handshakes are recorded once: `openssl s_server -www` on
127.0.0.1 (a fresh port), tcpdump on `lo` for that port, and Python's ssl module as the
OpenSSL client (TLS 1.2 and 1.3 alternately; every second connection then sends a small
HTTP GET and reads the page `-www` answers, the others close right after the handshake).
`pcap.py` replicates these connections (own client address and port per copy, as it does
with the project's captures) to about 1M packets: some 70,000 short connections, the load
on which per-connection costs show rather than per-packet ones.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _key_and_cert(tmp: Path) -> tuple[Path, Path]:
    """A throwaway self-signed P-256 certificate for the server."""
    key, cert = tmp / "short_key.pem", tmp / "short_cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=localhost"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return key, cert


def _wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"openssl s_server did not listen on 127.0.0.1:{port}")


def _warm_up(out: Path, closed: int, deadline: float) -> None:
    """Knock on a closed port until tcpdump has written a packet: it captures from then on
    (its "listening" line comes before its filter is in place). `pcap.py` keeps only the
    server port's connections."""
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", closed), timeout=0.5).close()
        except OSError:
            pass
        if out.exists() and out.stat().st_size > 24:
            return
        time.sleep(0.05)
    raise SystemExit("tcpdump -i lo captured nothing (are we allowed to capture?)")


def _client(port: int, i: int) -> None:
    """One connection: handshake, then (every second one) GET / and read the answer."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if i % 4 >= 2:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            if i % 2:
                tls.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
                while tls.recv(65536):
                    pass


def record_short(tmp: Path, connections: int = 300) -> tuple[Path, int]:
    """Record `connections` real loopback handshakes into tmp/short_seed.pcap; returns it
    and the server's port (the capture also holds the warm-up's refused SYNs)."""
    for tool in ("openssl", "tcpdump"):
        if not shutil.which(tool):
            raise SystemExit(f"recording the short-connections seed needs {tool}")
    key, cert = _key_and_cert(tmp)
    port = _free_port()
    out = tmp / "short_seed.pcap"
    server = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}",
                               "-key", str(key), "-cert", str(cert), "-www", "-quiet"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    dump = None
    try:
        _wait_port(port, time.monotonic() + 10)
        closed = _free_port()  # nothing listens there: the warm-up's SYNs get a RST
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0",
                                 "-w", str(out),
                                 f"tcp port {port} or tcp port {closed}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _warm_up(out, closed, time.monotonic() + 10)
        for i in range(connections):
            _client(port, i)
        time.sleep(0.5)
    finally:
        if dump is not None:
            dump.terminate()
            dump.wait(10)
        server.terminate()
        server.wait(10)
    return out, port
