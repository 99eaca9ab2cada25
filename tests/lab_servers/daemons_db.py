"""Database recipes for daemons.py: PostgreSQL 15 (SSLRequest) and MariaDB (SSL packet).

PostgreSQL refuses to run as root: initdb and the postmaster run as the `postgres` user
(runuser), in a folder handed to it. MariaDB is initialised with mariadb-install-db and runs
as `mysql`. Both take their own copy of the test certificate.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from tests.lab_servers.certs import CertSet
from tests.lab_servers.daemons import (Launch, Recipe, copy_identity, free_ports, hand_to,
                                 openssl_groups_env, require)

PG_BIN = "/usr/lib/postgresql/15/bin"


def _run(argv: list[str], what: str, timeout: float = 120.0) -> None:
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"{what} failed ({done.returncode}): "
                           f"{(done.stdout + done.stderr).decode(errors='replace')[-1500:]}")


def postgres(workdir: Path, certs: CertSet, *, ssl: bool = True, curve: str | None = None,
             kind: str = "rsa", extra: tuple[str, ...] = ()) -> Launch:
    """A fresh cluster on a free port; `ssl` False gives a server that answers 'N'. `extra`:
    more postgresql.conf lines, e.g. ("ssl_min_protocol_version = 'TLSv1.3'",)."""
    initdb = require(f"{PG_BIN}/initdb", "postgresql-15")
    postgres_bin = require(f"{PG_BIN}/postgres", "postgresql-15")
    data = workdir / "pgdata"
    cert, key, _ = copy_identity(certs, kind, workdir / "tls")
    hand_to("postgres", workdir)
    _run(["runuser", "-u", "postgres", "--", initdb, "-D", str(data), "-A", "trust",
          "-U", "postgres", "--no-sync"], "initdb")
    (port,) = free_ports(1)
    lines = ["listen_addresses = '127.0.0.1'", f"port = {port}",
             f"unix_socket_directories = '{workdir}'", f"ssl = {'on' if ssl else 'off'}",
             f"ssl_cert_file = '{cert}'", f"ssl_key_file = '{key}'", "fsync = off"]
    if curve:
        lines.append(f"ssl_ecdh_curve = '{curve}'")
    lines += extra
    with open(data / "postgresql.conf", "a") as conf:
        conf.write("\n".join(lines) + "\n")
    log = workdir / "postgres.log"
    return Launch(["runuser", "-u", "postgres", "--", postgres_bin, "-D", str(data)],
                  {"postgres": port}, [log])


def mariadb(workdir: Path, certs: CertSet, *, ssl: bool = True,
            require_secure_transport: bool = False, kind: str = "rsa",
            curves: str | None = None, extra: tuple[str, ...] = ()) -> Launch:
    """A fresh MariaDB data folder on a free port (`ssl` False: no CLIENT_SSL). `curves`:
    the only groups OpenSSL allows (MariaDB has no option: OPENSSL_CONF). `extra`: more
    mariadbd arguments, e.g. ("--tls-version=TLSv1.3",)."""
    install = require("/usr/bin/mariadb-install-db", "mariadb-server")
    daemon = require("/usr/sbin/mariadbd", "mariadb-server")
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    cert, key, _ = copy_identity(certs, kind, workdir / "tls")
    hand_to("mysql", workdir)
    _run([install, "--no-defaults", f"--datadir={data}", "--user=mysql", "--skip-test-db",
          "--auth-root-authentication-method=normal"], "mariadb-install-db")
    (port,) = free_ports(1)
    log = workdir / "mariadb.err"
    argv = [daemon, "--no-defaults", f"--datadir={data}", "--user=mysql", f"--port={port}",
            "--bind-address=127.0.0.1", f"--socket={workdir / 'mysqld.sock'}",
            f"--pid-file={workdir / 'mysqld.pid'}", f"--log-error={log}",
            "--skip-name-resolve", "--innodb-buffer-pool-size=8M", "--skip-log-bin"]
    if ssl:
        argv += [f"--ssl-cert={cert}", f"--ssl-key={key}"]
    else:
        argv += ["--skip-ssl"]
    if require_secure_transport:
        argv.append("--require-secure-transport=ON")
    argv += extra
    return Launch(argv, {"mysql": port}, [log],
                  env=openssl_groups_env(workdir, curves) if curves else None)


RECIPES: dict[str, Recipe] = {"postgres": postgres, "mariadb": mariadb}
