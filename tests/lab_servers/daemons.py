"""Real STARTTLS daemons on loopback for the tests: each started on free ports with its
configuration in a temporary folder and its own certificate, stopped by process group.

`start_daemon(name, workdir, certs, options) -> Daemon` starts one of `DAEMONS`; the
`Daemon` maps each protocol it serves to its port. Readiness is "every port LISTENs" (read
from /proc, no probe connection). Daemons that refuse to run as root (PostgreSQL, Prosody)
run under their own Debian user through `runuser`; the folder they use is handed to that
user. The per-daemon recipes live in daemons_db.py, daemons_mail.py and daemons_misc.py.
"""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab_servers.certs import CertSet

from tests.helpers.servers import (_free_port, _stop_group, group_members, holds_socket,
                                   listening_inodes)


class DaemonUnavailable(RuntimeError):
    """The daemon is not installed here (the message names the Debian package)."""


class DaemonStartError(RuntimeError):
    """The daemon exited or never listened; the message carries the tail of its log."""


@dataclass(eq=False)
class Daemon:
    """A running daemon: its protocol -> port map, process, folder and logs."""

    name: str
    ports: dict[str, int]
    process: subprocess.Popen[bytes]
    workdir: Path
    logs: list[Path]
    _stopped: bool = field(default=False, repr=False)

    def log_tail(self, chars: int = 3000) -> str:
        text = ""
        for path in self.logs:
            if path.exists():
                text += f"--- {path.name}\n" + path.read_text(errors="replace")[-chars:]
        return text

    def alive(self) -> bool:
        return not self._stopped and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the daemon's process group (its PID), SIGKILL after `timeout`."""
        if not self._stopped:
            _stop_group(self.process, timeout)
            self._stopped = True


@dataclass(frozen=True)
class Launch:
    """What a recipe hands back: the command, the ports it will listen on, its logs, and
    an optional check run once the ports listen (e.g. a database that must finish start)."""

    argv: list[str]
    ports: dict[str, int]
    logs: list[Path]
    env: dict[str, str] | None = None
    ready: Callable[[], bool] | None = None


Recipe = Callable[..., Launch]
DaemonFactory = Callable[..., Daemon]   # the tests' `daemon(name, **options)` fixture


def require(path: str, package: str) -> str:
    """`path` if it is an executable file, else DaemonUnavailable naming the package."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise DaemonUnavailable(f"{path} not installed (apt-get install {package})")
    return path


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (a port may still be taken before bind)."""
    ports: list[int] = []
    while len(ports) < count:
        port = _free_port("127.0.0.1")
        if port not in ports:
            ports.append(port)
    return ports


def hand_to(user: str, *paths: Path) -> None:
    """Give `paths` (recursively) to `user`, and let it traverse their parents."""
    for path in paths:
        shutil.chown(path, user, user)
        for sub in path.rglob("*") if path.is_dir() else ():
            shutil.chown(sub, user, user)
        traversable(path)


def traversable(path: Path) -> None:
    """Let every user traverse (not list) the parents of `path`."""
    for parent in path.parents:
        if parent == Path("/"):
            break
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o001)


def copy_identity(certs: CertSet, kind: str, folder: Path) -> tuple[Path, Path, Path]:
    """The leaf certificate, key and chain of `kind`, copied into `folder` (mode 600 key),
    so a daemon running as its own user can own them."""
    folder.mkdir(parents=True, exist_ok=True)
    files = certs[kind]
    cert, key, chain = folder / "server.crt", folder / "server.key", folder / "chain.crt"
    shutil.copyfile(files.cert, cert)
    shutil.copyfile(files.key, key)
    shutil.copyfile(files.chain, chain)
    os.chmod(key, 0o600)
    return cert, key, chain


def openssl_groups_env(workdir: Path, groups: str) -> dict[str, str]:
    """The environment of a daemon linked with OpenSSL 3 that has no group option of its own
    (MariaDB): OPENSSL_CONF names a file (readable by any user) whose system_default
    section allows only `groups` (OpenSSL's `Groups`, e.g. "P-384"); libssl reads it when it
    starts."""
    conf = workdir / "openssl-groups.cnf"
    conf.write_text("openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n"
                    "[ssl_sect]\nsystem_default = system_default_sect\n"
                    f"[system_default_sect]\nGroups = {groups}\n")
    os.chmod(conf, 0o644)
    traversable(conf)
    return dict(os.environ, OPENSSL_CONF=str(conf))


def start_daemon(name: str, workdir: Path, certs: CertSet,
                 options: Mapping[str, object] | None = None, timeout: float = 60.0) -> Daemon:
    """Start daemon `name` (see DAEMONS) in `workdir` with its recipe's keyword `options`;
    return once all its ports listen, held by the daemon's own process group. A port taken
    between probing and binding it (other test processes, e.g. pytest-xdist workers, pick
    free ports too) is retried on new ports, in a fresh subfolder."""
    if name not in DAEMONS:
        raise ValueError(f"unknown daemon {name!r} (known: {', '.join(DAEMONS)})")
    module = importlib.import_module(f"tests.lab_servers.{DAEMONS[name]}")
    recipe: Recipe = module.RECIPES[name]
    taken = ""
    for attempt in range(3):
        folder = workdir if attempt == 0 else workdir / f"retry-{attempt}"
        daemon, taken = _launch(name, recipe, folder, certs, options or {}, timeout)
        if daemon is not None:
            return daemon
    raise DaemonStartError(f"{name} did not start in 3 tries: {taken}")


def _launch(name: str, recipe: Recipe, workdir: Path, certs: CertSet,
            options: Mapping[str, object], timeout: float) -> tuple[Daemon | None, str]:
    """(the running daemon, "") or (None, why) when a port was taken (worth another try);
    DaemonStartError for any other failure."""
    workdir.mkdir(parents=True, exist_ok=True)
    launch = recipe(workdir, certs, **options)
    console = workdir / "console.log"
    with open(console, "w") as log:
        log.write("# " + " ".join(launch.argv) + "\n")
        log.flush()
        proc = subprocess.Popen(launch.argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True,
                                env=launch.env)
    daemon = Daemon(name, launch.ports, proc, workdir, [console, *launch.logs])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = {port: listening_inodes(port, "127.0.0.1") for port in launch.ports.values()}
        if all(held.values()):
            thief = [port for port, inodes in held.items() if not group_holds(proc.pid, inodes)]
            if thief:       # another process listens there; ours cannot (or will not)
                daemon.stop()
                return None, f"port {thief[0]} is held by another process"
            if launch.ready is None or launch.ready():
                return daemon, ""
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    daemon.stop()
    tail = daemon.log_tail()
    if "in use" in tail.lower():
        return None, f"a port of {launch.ports} was in use:\n{tail}"
    raise DaemonStartError(f"{name} did not listen on {launch.ports} (exit "
                           f"{proc.returncode}); logs:\n{tail}")


def group_holds(pgid: int, inodes: set[int]) -> bool:
    """True if a process of group `pgid` (the daemon's session, see _stop_group) holds one of
    the socket `inodes`; True as well when /proc cannot tell."""
    seen_any = False
    for pid, _ in group_members(pgid):
        holds = holds_socket(pid, inodes)
        if holds is None:
            continue
        if holds:
            return True
        seen_any = True
    return not seen_any


# daemon -> the module of its recipe
DAEMONS = {"postfix": "daemons_mail", "dovecot": "daemons_mail", "vsftpd": "daemons_misc",
           "prosody": "daemons_misc", "slapd": "daemons_misc", "postgres": "daemons_db",
           "mariadb": "daemons_db"}
