"""Real TLS peers for the engine's interop tests, with every byte on the wire recorded.

Three ways to get a session: Python's ssl module on both ends through memory BIOs (system
OpenSSL), pyOpenSSL on both ends (the OpenSSL inside `cryptography`, which can pick TLS 1.3
suites; run in the lab environment, tests/helpers/lab_env.py), and Python's ssl client against an
`openssl s_server` process on 127.0.0.1. In all of them the client writes a key log, and the
test decrypts the recorded bytes with tlsprobe's engine alone.
"""

from __future__ import annotations

import datetime
import json
import select
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from tlsprobe.engine.keylog import KeyLog, load_keylog, parse_keylog

CLIENT_PAYLOAD = b"GET / HTTP/1.0\r\nHost: tlsprobe.test\r\n\r\n" + bytes(range(256)) * 3
SERVER_PAYLOAD = b"HTTP/1.0 200 OK\r\n\r\n" + bytes(range(255, -1, -1)) * 70  # > one record

# (label, context, length) for SSL_export_keying_material on pyOpenSSL sessions.
EXPORTER_ARGS = (b"EXPORTER-tlsprobe-test", b"engine context", 40)

# OpenSSL option bits (SSL_OP_*) that Python's ssl module does not name.
OP_NO_EXTENDED_MASTER_SECRET = 1 << 0
OP_NO_ENCRYPT_THEN_MAC = 1 << 19


@dataclass
class Credentials:
    cert_path: Path
    key_path: Path
    private_key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass
class Capture:
    """Both directions of one connection as raw bytes, plus the client's key log."""

    c2s: bytes
    s2c: bytes
    keylog: KeyLog
    client_received: bytes
    server_received: bytes
    exported: bytes | None = None  # OpenSSL's exporter output for EXPORTER_ARGS


def make_credentials(directory: Path, kind: str) -> Credentials:
    """A self-signed certificate with an RSA-2048 or P-256 key, written as PEM files."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if kind == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tlsprobe.test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / f"{kind}.crt", directory / f"{kind}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return Credentials(cert_path, key_path, key)


def client_context(keylog_path: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.keylog_filename = str(keylog_path)
    return ctx


def _pump(step: Callable[[], bool], transfer: Callable[[], bool], what: str) -> None:
    """Call `step` until it reports done, moving bytes between the peers in between."""
    for _ in range(200):
        if step():
            return
        if not transfer():
            raise RuntimeError(f"{what}: stalled with nothing to transfer")
    raise RuntimeError(f"{what}: did not finish")


def pyssl_pair(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext,
               keylog_path: Path) -> Capture:
    """Handshake and exchange one payload each way between two in-memory ssl objects."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_side=False)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    c2s, s2c = bytearray(), bytearray()

    def transfer() -> bool:
        a, b = c_out.read(), s_out.read()
        c2s.extend(a)
        s_in.write(a)
        s2c.extend(b)
        c_in.write(b)
        return bool(a or b)

    def attempt(fn: Callable[[], object]) -> bool:
        try:
            fn()
            return True
        except ssl.SSLWantReadError:
            return False

    done = {"client": False, "server": False}

    def handshake() -> bool:
        for name, obj in (("client", client), ("server", server)):
            if not done[name]:
                done[name] = attempt(obj.do_handshake)
        return all(done.values())

    _pump(handshake, transfer, "handshake")
    client.write(CLIENT_PAYLOAD)
    server_received = _read_all(server, len(CLIENT_PAYLOAD), transfer)
    server.write(SERVER_PAYLOAD)
    client_received = _read_all(client, len(SERVER_PAYLOAD), transfer)
    transfer()
    return Capture(bytes(c2s), bytes(s2c), load_keylog(keylog_path), client_received,
                   server_received)


def _read_all(obj: ssl.SSLObject, size: int, transfer: Callable[[], bool]) -> bytes:
    got = bytearray()

    def step() -> bool:
        while len(got) < size:
            try:
                got.extend(obj.read(size - len(got)))
            except ssl.SSLWantReadError:
                return False
        return True

    _pump(step, transfer, "read")
    return bytes(got)


def pyopenssl_pair(creds: Credentials, suite_name: str, tls12: bool = False) -> Capture:
    """One chosen suite between two pyOpenSSL memory-BIO connections: a TLS 1.3 suite
    name, or with `tls12` an OpenSSL TLS 1.2 cipher name. Runs in the lab environment
    (tests/lab_servers/pyopenssl_pair.py; pyOpenSSL is not in the test environment)."""
    from tests.helpers import lab_env

    spec = {"client_payload": CLIENT_PAYLOAD.hex(), "server_payload": SERVER_PAYLOAD.hex(),
            "exporter": [EXPORTER_ARGS[0].hex(), EXPORTER_ARGS[1].hex(), EXPORTER_ARGS[2]]}
    out = lab_env.run_script("pyopenssl_pair.py",
                             [str(creds.cert_path), str(creds.key_path), suite_name,
                              *(["--tls12"] if tls12 else [])], input=json.dumps(spec))
    got = json.loads(out)
    return Capture(bytes.fromhex(got["c2s"]), bytes.fromhex(got["s2c"]),
                   parse_keylog(got["keylog"]), bytes.fromhex(got["client_received"]),
                   bytes.fromhex(got["server_received"]), bytes.fromhex(got["exported"]))


OPENSSL = shutil.which("openssl")


def s_server_session(creds: Credentials, server_args: list[str], client_ctx: ssl.SSLContext,
                     keylog_path: Path, timeout: float = 10.0) -> Capture:
    """Python's ssl client over a real loopback socket to `openssl s_server -rev`, which
    echoes each line reversed. Records everything sent and received on the socket."""
    assert OPENSSL is not None
    proc = subprocess.Popen(
        [OPENSSL, "s_server", "-accept", "127.0.0.1:0", "-naccept", "1", "-rev",
         "-cert", str(creds.cert_path), "-key", str(creds.key_path), *server_args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        bufsize=0)  # unbuffered: select() below must see every line still unread
    try:
        port = _accept_port(proc, timeout)
        return _socket_client(port, client_ctx, keylog_path, timeout)
    finally:
        proc.kill()
        proc.wait(timeout=5)
        if proc.stdout:
            proc.stdout.close()


def _accept_port(proc: subprocess.Popen[bytes], timeout: float) -> int:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline().decode(errors="replace")
            if not line:
                break
            if line.startswith("ACCEPT"):
                return int(line.rsplit(":", 1)[1])
    raise RuntimeError("openssl s_server did not start listening")


def _socket_client(port: int, ctx: ssl.SSLContext, keylog_path: Path,
                   timeout: float) -> Capture:
    line = b"tlsprobe engine interop " + b"x" * 3000 + b"\n"
    expected = line[:-1][::-1] + b"\n"
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(c_in, c_out, server_side=False)
    c2s, s2c = bytearray(), bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        def transfer() -> bool:
            out = c_out.read()
            if out:
                c2s.extend(out)
                sock.sendall(out)
                return True
            data = sock.recv(65536)
            s2c.extend(data)
            c_in.write(data)
            return bool(data)

        def handshake() -> bool:
            try:
                obj.do_handshake()
                return True
            except ssl.SSLWantReadError:
                return False

        _pump(handshake, transfer, "handshake")
        obj.write(line)
        while c_out.pending:
            transfer()
        received = _read_all(obj, len(expected), transfer)
    return Capture(bytes(c2s), bytes(s2c), load_keylog(keylog_path), received, line)
