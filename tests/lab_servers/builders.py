"""Command lines and configuration files for each TLS server implementation used in tests.

Canonical group names (the lab's: X25519, P-256, ffdhe2048, brainpoolP256r1tls13,
X25519MLKEM768, ...) are translated here into each implementation's spelling; what each
implementation accepts follows the lab's server-group matrix (OpenSSL 3.0 for s_server,
nginx and Python ssl; the newer OpenSSL inside `cryptography` for pyOpenSSL).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.lab_servers.certs import DH_NAMES, CertSet, write_dhparam

HERE = Path(__file__).resolve().parent
SYSTEM_PYTHON = "/usr/bin/python3"
VERSIONS = ("tls1_0", "tls1_1", "tls1_2", "tls1_3")
PROTO_ALIASES = {"both": ("tls1_2", "tls1_3"), "all": ("tls1_0", "tls1_3")}

# Canonical group name -> IANA TLS Supported Groups codepoint.
GROUP_CODES: dict[str, int] = {
    "secp192r1": 0x0013, "secp224r1": 0x0015, "secp256k1": 0x0016, "P-256": 0x0017,
    "P-384": 0x0018, "P-521": 0x0019, "brainpoolP256r1": 0x001A, "brainpoolP384r1": 0x001B,
    "brainpoolP512r1": 0x001C, "X25519": 0x001D, "X448": 0x001E,
    "brainpoolP256r1tls13": 0x001F, "brainpoolP384r1tls13": 0x0020,
    "brainpoolP512r1tls13": 0x0021, "ffdhe2048": 0x0100, "ffdhe3072": 0x0101,
    "ffdhe4096": 0x0102, "ffdhe6144": 0x0103, "ffdhe8192": 0x0104, "MLKEM512": 0x0200,
    "MLKEM768": 0x0201, "MLKEM1024": 0x0202, "SecP256r1MLKEM768": 0x11EB,
    "X25519MLKEM768": 0x11EC, "SecP384r1MLKEM1024": 0x11ED, "curveSM2": 0x0029,
}
_FFDHE = ("ffdhe2048", "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192")
_CLASSIC = ("X25519", "X448", "P-256", "P-384", "P-521")
_LEGACY_EC = ("brainpoolP256r1", "brainpoolP384r1", "brainpoolP512r1", "secp256k1",
              "secp224r1", "secp192r1")
_BP_TLS13 = ("brainpoolP256r1tls13", "brainpoolP384r1tls13", "brainpoolP512r1tls13")
_HYBRIDS = ("X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024")
_OPENSSL30 = _CLASSIC + _FFDHE + _LEGACY_EC
# Canonical groups each implementation accepts in its configuration. Not all are negotiable
# in every version: brainpoolP256r1, secp256k1, secp224r1, secp192r1 only in TLS 1.2; ffdhe
# with OpenSSL-based servers only in TLS 1.3 (TLS 1.2 DHE uses whatever `dhparam` holds).
SUPPORTED_GROUPS: dict[str, tuple[str, ...]] = {
    "openssl": _OPENSSL30, "nginx": _OPENSSL30, "pyssl": _OPENSSL30,
    # cryptography's OpenSSL 4.0 no longer offers secp192r1, secp224r1 and secp256k1 in TLS.
    "pyopenssl": _CLASSIC + _FFDHE + _LEGACY_EC[:3] + _BP_TLS13 + _HYBRIDS
    + ("MLKEM512", "MLKEM768", "MLKEM1024", "curveSM2"),
    "gnutls": _CLASSIC + _FFDHE + ("secp224r1", "secp192r1"),
    "tlslite": _CLASSIC + _FFDHE + _LEGACY_EC + _BP_TLS13 + _HYBRIDS,
}
_GNUTLS_NAMES = {"X25519": "GROUP-X25519", "X448": "GROUP-X448", "P-256": "GROUP-SECP256R1",
                 "P-384": "GROUP-SECP384R1", "P-521": "GROUP-SECP521R1",
                 "secp224r1": "GROUP-SECP224R1", "secp192r1": "GROUP-SECP192R1",
                 **{g: "GROUP-" + g.upper() for g in _FFDHE}}
_TLSLITE_NAMES = {"X25519": "x25519", "X448": "x448", "P-256": "secp256r1", "P-384": "secp384r1",
                  "P-521": "secp521r1", **{g: g.lower() for g in _HYBRIDS}}
_OPENSSL_VERSION = {"tls1_0": "TLSv1", "tls1_1": "TLSv1.1", "tls1_2": "TLSv1.2",
                    "tls1_3": "TLSv1.3"}
_GNUTLS_VERSION = {"tls1_0": "VERS-TLS1.0", "tls1_1": "VERS-TLS1.1", "tls1_2": "VERS-TLS1.2",
                   "tls1_3": "VERS-TLS1.3"}


def version_range(proto: str) -> tuple[str, str]:
    """'both' -> (tls1_2, tls1_3); 'all' -> (tls1_0, tls1_3); 'tls1_1'; or 'tls1_0-tls1_2'."""
    if proto in PROTO_ALIASES:
        return PROTO_ALIASES[proto]
    low, _, high = proto.partition("-")
    high = high or low
    if low not in VERSIONS or high not in VERSIONS or VERSIONS.index(low) > VERSIONS.index(high):
        raise ValueError(f"bad proto {proto!r}: use both, all, tls1_0..tls1_3 "
                         "or a range such as tls1_0-tls1_2")
    return low, high


@dataclass(frozen=True)
class ServerConfig:
    """What was asked of a server; hashable, so it doubles as a cache key."""

    impl: str
    groups: tuple[str, ...] | None = None
    ciphers: str | None = None
    ciphersuites: str | None = None
    proto: str = "both"
    serverpref: bool = False
    cert: str = "rsa"
    dhparam: str | None = None
    host: str = "127.0.0.1"
    extra: tuple[str, ...] = ()

    @property
    def versions(self) -> tuple[str, str]:
        return version_range(self.proto)

    @property
    def versions_span(self) -> list[str]:
        low, high = self.versions
        return list(VERSIONS[VERSIONS.index(low):VERSIONS.index(high) + 1])


def binary_path(impl: str) -> str | None:
    """The program that runs `impl`, or None when it is not installed."""
    if impl == "openssl":
        return shutil.which("openssl")
    if impl == "gnutls":
        return shutil.which("gnutls-serv")
    if impl == "nginx":
        return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if impl == "pyssl":
        return SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK) else None
    if impl == "pyopenssl":  # in the lab environment, apart from the tests' (lab_env.py)
        from tests.helpers import lab_env
        return lab_env.lab_python()
    return sys.executable if importlib.util.find_spec("tlslite") is not None else None


def resolve_dhparam(dhparam: str | None, certs: CertSet) -> str | None:
    """A DH parameter file for a name from DH_NAMES (written once next to the certs)."""
    if dhparam is None or dhparam not in DH_NAMES:
        return dhparam
    path = certs.directory / f"{dhparam}.pem"
    return str(path if path.exists() else write_dhparam(dhparam, certs.directory))


def _openssl_ciphers(config: ServerConfig) -> str | None:
    """OpenSSL 3.x refuses TLS 1.0/1.1 above security level 0: lower it when they are asked."""
    if config.versions[0] in ("tls1_0", "tls1_1") and "@SECLEVEL" not in (config.ciphers or ""):
        return (config.ciphers or "DEFAULT") + ":@SECLEVEL=0"
    return config.ciphers


def _listen_options(config: ServerConfig) -> str:
    """nginx: more options of the `listen` directive, given in `extra` as one item
    "listen-options OPTS" (e.g. "listen-options http2": nginx before 1.25 turns HTTP/2, and
    its ALPN h2, on there)."""
    return "".join(" " + line.split(" ", 1)[1] for line in config.extra
                   if line.startswith("listen-options "))


def _sni_servers(config: ServerConfig, listen: str) -> list[str]:
    """nginx: more server blocks on the same address, each given in `extra` as one item
    "sni-server NAME DIRECTIVES" (e.g. "sni-server localhost ssl_certificate ...;"): the
    block of server_name NAME, which a hello with that SNI selects; the first block stays
    the default one (a hello without SNI, or with another name)."""
    out = []
    for line in config.extra:
        if line.startswith("sni-server "):
            _, name, directives = line.split(" ", 2)
            out += ["  server {", f"    listen {listen} ssl{_listen_options(config)};",
                    f"    server_name {name};", f"    {directives}", "  }"]
    return out


def _openssl_groups(groups: tuple[str, ...]) -> str:
    return ":".join("prime192v1" if g == "secp192r1" else g for g in groups)


def _write_openssl_conf(path: Path, groups: str | None, ciphersuites: str | None) -> Path:
    """An OPENSSL_CONF whose system_default section sets Groups / Ciphersuites."""
    lines = ["openssl_conf = openssl_init", "[openssl_init]", "ssl_conf = ssl_sect", "[ssl_sect]",
             "system_default = system_default_sect", "[system_default_sect]"]
    if groups:
        lines.append(f"Groups = {groups}")
    if ciphersuites:
        lines.append(f"Ciphersuites = {ciphersuites}")
    path.write_text("\n".join(lines) + "\n")
    return path


def build_command(config: ServerConfig, port: int, certs: CertSet,
                  workdir: Path) -> tuple[list[str], dict[str, str], Path | None]:
    """(argv, environment, per-connection log path or None) for one server."""
    files = certs[config.cert]
    dhparam = resolve_dhparam(config.dhparam, certs)
    env = dict(os.environ)
    low, high = config.versions
    host = config.host
    if config.impl == "openssl":
        argv = [str(binary_path("openssl")), "s_server", "-www",
                "-accept", f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                "-cert", str(files.cert), "-key", str(files.key), "-cert_chain", str(certs.ca),
                "-min_protocol", _OPENSSL_VERSION[low], "-max_protocol", _OPENSSL_VERSION[high]]
        ciphers = _openssl_ciphers(config)
        argv += ["-groups", _openssl_groups(config.groups)] if config.groups else []
        argv += ["-cipher", ciphers] if ciphers else []
        argv += ["-ciphersuites", config.ciphersuites] if config.ciphersuites else []
        argv += ["-serverpref"] if config.serverpref else []
        argv += ["-dhparam", dhparam] if dhparam else []
        return argv + list(config.extra), env, None
    if config.impl == "gnutls":
        prio = config.ciphers or "NORMAL"
        if config.groups:
            prio += ":-GROUP-ALL:" + ":".join("+" + _GNUTLS_NAMES[g] for g in config.groups)
        prio += ":-VERS-ALL:" + ":".join("+" + _GNUTLS_VERSION[v] for v in config.versions_span)
        prio += ":%SERVER_PRECEDENCE" if config.serverpref else ""
        # gnutls-serv has no bind-address option: it listens on the wildcard address.
        argv = [str(binary_path("gnutls")), "-p", str(port), "--http", "-q", "--noticket",
                "--x509certfile", str(files.chain), "--x509keyfile", str(files.key),
                "--priority", prio]
        argv += ["--dhparams", dhparam] if dhparam else []
        return argv + list(config.extra), env, None
    if config.impl == "nginx":
        conf = _write_nginx_conf(config, port, certs, workdir, dhparam)
        argv = [str(binary_path("nginx")), "-c", str(conf), "-p", str(workdir),
                "-e", str(workdir / "error.log")]
        return argv, env, None
    if config.impl not in ("pyopenssl", "tlslite", "pyssl"):
        raise ValueError(f"unknown server implementation {config.impl!r}")
    conn_log = workdir / "connections.log"
    argv = [str(binary_path(config.impl)), str(HERE / f"{config.impl}_server.py"),
            "--host", host, "--port", str(port), "--cert-file", str(files.cert),
            "--key-file", str(files.key), "--chain-file", str(files.chain),
            "--min-version", low, "--max-version", high, "--log", str(conn_log)]
    ciphers = config.ciphers if config.impl == "tlslite" else _openssl_ciphers(config)
    suites = config.ciphersuites
    if config.impl == "tlslite":
        if config.groups:
            argv += ["--groups", ":".join(_TLSLITE_NAMES.get(g, g) for g in config.groups)]
    elif config.groups or (suites and config.impl == "pyssl"):
        # Groups (and, for Python ssl, TLS 1.3 suites) only through the config file, which
        # must be in the environment before OpenSSL initialises in the child.
        groups = _openssl_groups(config.groups) if config.groups else None
        conf_suites = suites if config.impl == "pyssl" else None
        env["OPENSSL_CONF"] = str(_write_openssl_conf(workdir / "openssl.cnf", groups, conf_suites))
    if config.impl == "pyssl":
        suites = None
    argv += ["--ciphers", ciphers] if ciphers else []
    argv += ["--ciphersuites", suites] if suites else []
    argv += ["--serverpref"] if config.serverpref else []
    argv += ["--dhparam", dhparam] if dhparam else []
    return argv + list(config.extra), env, conn_log


def _write_nginx_conf(config: ServerConfig, port: int, certs: CertSet, wd: Path,
                      dhparam: str | None) -> Path:
    """nginx.conf for one TLS server block: master + 1 worker, everything under `wd`."""
    files = certs[config.cert]
    versions = " ".join(_OPENSSL_VERSION[v] for v in config.versions_span)
    listen = f"[{config.host}]:{port}" if ":" in config.host else f"{config.host}:{port}"
    ciphers = _openssl_ciphers(config)
    lines = [
        "worker_processes 1;", "daemon off;", "master_process on;", f"pid {wd}/nginx.pid;",
        f"error_log {wd}/error.log info;", "events { worker_connections 256; }", "http {",
        f"  access_log {wd}/access.log;",
        f"  client_body_temp_path {wd}/cb; proxy_temp_path {wd}/px; fastcgi_temp_path {wd}/fc;",
        f"  uwsgi_temp_path {wd}/uw; scgi_temp_path {wd}/sc;",
        "  server {",
        f"    listen {listen} ssl{_listen_options(config)};",
        f"    ssl_certificate {files.chain}; ssl_certificate_key {files.key};",
        f"    ssl_protocols {versions};",
        f"    ssl_prefer_server_ciphers {'on' if config.serverpref else 'off'};",
        "    ssl_session_tickets off;",
    ]
    lines += [f"    ssl_ecdh_curve {_openssl_groups(config.groups)};"] if config.groups else []
    lines += [f"    ssl_ciphers {ciphers};"] if ciphers else []
    if config.ciphersuites:
        lines.append(f"    ssl_conf_command Ciphersuites {config.ciphersuites};")
    lines += [f"    ssl_dhparam {dhparam};"] if dhparam else []
    lines += [f"    {line}" for line in config.extra
              if not line.startswith(("listen-options ", "sni-server "))]
    lines += ['    location / { return 200 "nginx $ssl_protocol $ssl_cipher $ssl_curve\\n"; }',
              "  }", *_sni_servers(config, listen), "}"]
    path = wd / "nginx.conf"
    path.write_text("\n".join(lines) + "\n")
    return path
