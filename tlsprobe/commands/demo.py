"""Start a throwaway local TLS server (openssl s_server on 127.0.0.1) and probe it.

For a first look without a network: the server offers TLS 1.2 only with X25519 and
ECDHE-RSA-AES128-GCM-SHA256 (the case the --msg trace is documented with), or TLS 1.3
with --tls1_3. The server and its self-signed certificate live in a temporary folder and
are removed afterwards.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tlsprobe.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls1_3", action="store_true", help="serve TLS 1.3 (default: TLS 1.2)")
    p.add_argument("--groups", default="X25519", help="groups the demo server allows "
                   "(OpenSSL spelling, default X25519)")
    p.add_argument("--no-msg", action="store_true", help="print only the summary")
    p.add_argument("--openssl", default="openssl", help="openssl binary to serve with")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    needle = f":{port:04X} "
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as fh:
                    if any(needle in line and line.split()[3] == "0A" for line in fh):
                        return True
            except OSError:
                pass
        time.sleep(0.05)
    return False


def run(args: argparse.Namespace) -> int:
    from tlsprobe.cli import main as cli_main
    openssl = shutil.which(args.openssl)
    if openssl is None:
        raise UsageError(f"'{args.openssl}' not found: the demo serves with openssl s_server "
                         "(apt-get install openssl)")
    with tempfile.TemporaryDirectory(prefix="tlsprobe-demo-") as tmp:
        cert, key = _self_signed(Path(tmp))
        port = _free_port()
        argv = [openssl, "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(cert),
                "-key", str(key), "-www", "-groups", args.groups]
        argv += ["-tls1_3"] if args.tls1_3 else ["-tls1_2", "-cipher",
                                                  "ECDHE-RSA-AES128-GCM-SHA256"]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            if not _wait_listening(port, proc):
                err = proc.stderr.read().decode(errors="replace").strip().splitlines() \
                    if proc.stderr and proc.poll() is not None else []
                raise UsageError("the demo server did not start: " +
                                 (err[-1] if err else "no listening socket"))
            print(f"# demo server: {' '.join(os.path.basename(a) if a == openssl else a for a in argv)}")
            probe = [f"127.0.0.1:{port}", "--tls1_3" if args.tls1_3 else "--tls1_2"]
            if not args.no_msg:
                probe.append("--msg")
            print(f"# tlsprobe {' '.join(probe)}", flush=True)
            return cli_main(probe)
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
