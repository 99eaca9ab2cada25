"""Start and stop real TLS servers on loopback for the test suite.

`start_server(impl, ...)` launches one implementation (openssl s_server, gnutls-serv, nginx,
pyOpenSSL (run by the lab environment's Python, tests/helpers/lab_env.py), tlslite-ng, Python ssl)
with a chosen set of groups, suites and protocol versions on 127.0.0.1 or ::1 and returns a
`Server` once its port LISTENs. Readiness is read from /proc/net/tcp{,6} (no probe
connection, so a probe under test sees the first handshake).
Every server runs in its own session and is stopped by PID / process group, never by name.

Group names are the canonical lab spelling (X25519, P-256, ffdhe2048, brainpoolP256r1tls13,
X25519MLKEM768, ...; see `GROUP_CODES`), translated to each implementation's own spelling.
gnutls-serv cannot bind one address: it listens on all interfaces, so only ever connect to it
over loopback.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab_servers.builders import (GROUP_CODES, SUPPORTED_GROUPS, SYSTEM_PYTHON, VERSIONS,
                                  ServerConfig, binary_path, build_command, version_range)
from tests.lab_servers.certs import CERT_KINDS, DH_NAMES, CertFiles, CertSet, make_certs

__all__ = ["CERT_KINDS", "DH_NAMES", "GROUP_CODES", "IMPLS", "SUPPORTED_GROUPS", "VERSIONS",
           "CertFiles", "CertSet", "Server", "ServerConfig", "ServerStartError",
           "ServerUnavailable", "default_certs", "is_listening", "listening_inodes",
           "make_certs", "missing_reason", "start_server", "version_range"]
IMPLS = ("openssl", "gnutls", "nginx", "pyopenssl", "tlslite", "pyssl")
_MISSING_HINT = {
    "openssl": "openssl not installed (apt-get install openssl)",
    "gnutls": "gnutls-serv not installed (apt-get install gnutls-bin)",
    "nginx": "nginx not installed (apt-get install nginx-light)",
    "tlslite": "tlslite-ng not installed (pip install tlslite-ng kyber-py)",
    "pyssl": f"{SYSTEM_PYTHON} not present (apt-get install python3)",
}


def peer_unavailable(reason: str) -> None:
    """Skip a test whose server implementation cannot run here, naming it; under CI (which
    installs every peer, see .ci/run) the same is a failure: a peer that does not start there
    is a broken set-up, not a reason to test less."""
    import pytest
    if os.environ.get("CI"):
        pytest.fail(f"test peer unavailable under CI: {reason}", pytrace=False)
    pytest.skip(reason)


class ServerUnavailable(RuntimeError):
    """The implementation's program or library is not installed (tests skip on this)."""


class ServerStartError(RuntimeError):
    """The server exited or never listened; the message carries the tail of its log."""


def missing_reason(impl: str) -> str | None:
    """None when `impl` can run here, else a one-line reason with the install hint."""
    if impl not in IMPLS:
        raise ValueError(f"unknown server implementation {impl!r} (known: {', '.join(IMPLS)})")
    if impl == "pyopenssl":
        from tests.helpers import lab_env
        return lab_env.missing_reason()
    if not binary_path(impl):
        return _MISSING_HINT[impl]
    if impl == "tlslite" and importlib.util.find_spec("kyber_py") is None:
        return "kyber-py not installed (pip install kyber-py); tlslite needs it for ML-KEM"
    return None


@dataclass(eq=False)
class Server:
    """A running server: where it listens, how to stop it, and where it logged."""

    config: ServerConfig
    port: int
    process: subprocess.Popen[bytes]
    workdir: Path
    log_path: Path
    conn_log_path: Path | None = None
    _stopped: bool = field(default=False, repr=False)

    @property
    def impl(self) -> str:
        return self.config.impl

    @property
    def host(self) -> str:
        return self.config.host

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def address(self) -> tuple[str, int]:
        return self.config.host, self.port

    def alive(self) -> bool:
        return not self._stopped and self.process.poll() is None

    def log_text(self) -> str:
        """Everything the server wrote to stdout/stderr (its command line first)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_text()[-chars:]

    def connections(self, wait_for: int = 0, timeout: float = 3.0) -> list[str]:
        """Per-connection lines of the Python servers ('<ip> ok <impl> <version> <cipher>
        group=<name>' or '<ip> handshake-fail <error>'); always empty for the others.

        The server logs after its side of the handshake, possibly after the client returned:
        `wait_for` polls up to `timeout` seconds until at least that many lines exist."""
        deadline = time.monotonic() + timeout
        while True:
            lines: list[str] = []
            if self.conn_log_path is not None and self.conn_log_path.exists():
                text = self.conn_log_path.read_text(errors="replace")
                lines = [ln.partition(" ")[2] for ln in text.splitlines()]
                lines = [ln for ln in lines if not ln.startswith("start ")]
            if len(lines) >= wait_for or time.monotonic() >= deadline:
                return lines
            time.sleep(0.02)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the server's process group, SIGKILL it after `timeout`; idempotent."""
        if not self._stopped:
            _stop_group(self.process, timeout)
            self._stopped = True
            _LIVE.discard(self)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_LIVE: set[Server] = set()


@atexit.register
def _stop_live() -> None:
    """Last resort for servers started outside a fixture: never leave one running."""
    for server in list(_LIVE):
        server.stop()


_DEFAULT_CERTS: CertSet | None = None


def default_certs() -> CertSet:
    """A process-wide CertSet in a temp dir, for use outside pytest fixtures."""
    global _DEFAULT_CERTS
    if _DEFAULT_CERTS is None:
        directory = tempfile.mkdtemp(prefix="tlsprobe-certs-")
        atexit.register(shutil.rmtree, directory, True)
        _DEFAULT_CERTS = make_certs(Path(directory))
    return _DEFAULT_CERTS


def start_server(impl: str, *, groups: list[str] | tuple[str, ...] | str | None = None,
                 ciphers: str | None = None, ciphersuites: str | None = None,
                 proto: str = "both", serverpref: bool = False, cert: str = "rsa",
                 dhparam: str | os.PathLike[str] | None = None, host: str = "127.0.0.1",
                 extra: list[str] | tuple[str, ...] | None = None, certs: CertSet | None = None,
                 workdir: str | os.PathLike[str] | None = None, timeout: float = 20.0) -> Server:
    """Start `impl` on a free loopback port and return once it LISTENs.

    Raises ServerUnavailable (not installed), ValueError (bad or unsupported configuration)
    or ServerStartError (the server died or never listened; carries its log tail)."""
    if isinstance(groups, str):
        groups = [g for g in groups.replace(",", ":").split(":") if g]
    config = ServerConfig(impl, tuple(groups) if groups is not None else None, ciphers,
                          ciphersuites, proto, serverpref, cert,
                          str(dhparam) if dhparam is not None else None, host, tuple(extra or ()))
    _validate(config)
    reason = missing_reason(impl)
    if reason:
        raise ServerUnavailable(reason)
    certs = certs or default_certs()
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="tlsprobe-srv-"))
    last_error = ""
    for attempt in range(3):  # a free port can be taken between probing and binding it
        wd = base / f"{impl}-{attempt}" if workdir is not None else base
        wd.mkdir(parents=True, exist_ok=True)
        got = launch_once(config, _free_port(host), certs, wd, timeout)
        if isinstance(got, Server):
            return got
        last_error = got
        if "in use" not in last_error.lower():
            break
    raise ServerStartError(f"{impl} did not listen on {host} (config {config}); log tail:\n"
                           f"{last_error}")


def launch_once(config: ServerConfig, port: int, certs: CertSet, wd: Path,
                timeout: float = 20.0) -> Server | str:
    """One start of `config` on `port`, working in `wd`: the Server once it LISTENs, or
    (the process stopped) its log tail, which says "in use" when the port was taken. The
    one launch of start_server and of the fixtures that choose their own port."""
    argv, env, conn_log = build_command(config, port, certs, wd)
    log_path = wd / "server.log"
    with open(log_path, "w") as log:
        log.write("# " + " ".join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=wd,
                                start_new_session=True)
    server = Server(config, port, proc, wd, log_path, conn_log)
    _LIVE.add(server)
    if _wait_listen(port, proc, timeout, config.host, log_path):
        return server
    server.stop()
    return server.log_tail()


def _validate(config: ServerConfig) -> None:
    if config.impl not in IMPLS:
        raise ValueError(f"unknown server implementation {config.impl!r} "
                         f"(known: {', '.join(IMPLS)})")
    version_range(config.proto)
    if config.host not in ("127.0.0.1", "::1"):
        raise ValueError(f"host must be 127.0.0.1 or ::1, not {config.host!r}")
    for g in config.groups or ():
        if g not in GROUP_CODES:
            raise ValueError(f"unknown group {g!r} (canonical names: {', '.join(GROUP_CODES)})")
        if g not in SUPPORTED_GROUPS[config.impl]:
            raise ValueError(f"{config.impl} cannot be configured with group {g}")
    if config.dhparam is not None and config.dhparam not in DH_NAMES \
            and not Path(config.dhparam).is_file():
        raise ValueError(f"dhparam {config.dhparam!r} is neither a file nor one of {DH_NAMES}")


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def listening_inodes(port: int, host: str | None = None) -> set[int]:
    """Socket inodes in LISTEN state on `port`, from /proc/net/tcp{,6}: on any address, or,
    with `host`, only those that accept connections to it (bound to it or to the wildcard
    address of its family)."""
    tables = ("/proc/net/tcp", "/proc/net/tcp6")
    wanted: tuple[str, ...] = ()
    if host is not None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        tables = (tables[family == socket.AF_INET6],)
        packed = socket.inet_pton(family, host)
        wanted = (_proc_address(packed), _proc_address(bytes(len(packed))))
    inodes: set[int] = set()
    for table in tables:
        try:
            with open(table) as fh:
                next(fh)
                for line in fh:
                    parts = line.split()
                    address, _, port_hex = parts[1].rpartition(":")
                    if int(port_hex, 16) == port and parts[3] == "0A" and \
                            (not wanted or address in wanted):
                        inodes.add(int(parts[9]))
        except FileNotFoundError:
            continue
    return inodes


def _proc_address(packed: bytes) -> str:
    """An address as /proc/net/tcp{,6} writes it: each 32-bit word in host (little-endian)
    order, in upper-case hex."""
    return b"".join(packed[i:i + 4][::-1] for i in range(0, len(packed), 4)).hex().upper()


def is_listening(port: int) -> bool:
    return bool(listening_inodes(port))


def holds_socket(pid: int, inodes: set[int]) -> bool | None:
    """Whether process `pid` holds one of the socket inodes; None when /proc cannot tell
    (the process is gone, or its descriptors cannot be read)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and int(target[8:-1]) in inodes:
            return True
    return False


def _owned_by(pid: int, inodes: set[int]) -> bool:
    """True if process `pid` holds one of the socket inodes (guards against a port thief);
    True as well when /proc cannot tell (the port match is accepted)."""
    return holds_socket(pid, inodes) is not False


def _wait_listen(port: int, proc: subprocess.Popen[bytes], timeout: float,
                 host: str = "127.0.0.1", log_path: Path | None = None) -> bool:
    """True once `proc` listens where clients will connect: on `host` (or its family's
    wildcard address). A listener on the port elsewhere is not enough: gnutls-serv binds
    0.0.0.0 and :: in turn and, when the first is taken, goes on with the second alone.
    False when the process exits, its log says the port is in use (the caller retries on
    another port), or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        inodes = listening_inodes(port, host)
        if inodes and _owned_by(proc.pid, inodes):
            return True
        if proc.poll() is not None:
            return False
        if log_path is not None and _says_in_use(log_path):
            return False
        time.sleep(0.02)
    return False


def _says_in_use(log_path: Path) -> bool:
    try:
        return "in use" in log_path.read_text(errors="replace").lower()
    except OSError:
        return False


def group_members(pgid: int) -> Iterator[tuple[int, str]]:
    """(pid, state letter) of each process in process group `pgid` (scans /proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid):
            yield int(entry), fields[0]


def _group_alive(pgid: int) -> bool:
    """True while a non-zombie process is left in process group `pgid`."""
    return any(state != "Z" for _, state in group_members(pgid))


def accepting(port: int, timeout: float = 30) -> int:
    """`port` once a TCP connection to 127.0.0.1 there is accepted (`timeout` s at most): on
    a loaded machine a first connection right after a server started listening was now and
    then refused."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return port
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _stop_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Stop the session started for `proc` (its PID is the process group id)."""
    pgid = proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc.poll()  # reaps the leader so it does not linger as a zombie
            if proc.returncode is not None and not _group_alive(pgid):
                return
            time.sleep(0.02)
    proc.wait(timeout=timeout)
