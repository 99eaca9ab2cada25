#!/usr/bin/env python3
"""Group audit over STARTTLS side by side (issue 13 item 6): tlsprobe, `openssl s_client
-starttls`, sslscan `--starttls-*`, testssl `-t` and sslyze `--starttls` against the same
real daemons on loopback.

The daemons are the tests' (tests/lab_servers/daemons*.py), each restricted to a group list
that is not its default, so a tool that reports defaults is caught: Postfix smtp and
submission (tls_eecdh_auto_curves), Dovecot imap, pop3 and sieve (ssl_curve_list), vsftpd
(no option: P-256 alone, set in its code), Prosody (LuaSec curveslist), slapd (GnuTLS
priority), PostgreSQL (ssl_ecdh_curve) and MariaDB (OpenSSL's configuration), MariaDB with
require_secure_transport off and on. Every tool reaches a daemon through the counting relay
of benchmarks/audit.py (connection count = TCP connections the relay accepted).

Per daemon and tool: whether the group set it reports is the configured one ("yes"; "no"
with what it said; "-" when the tool does not speak that STARTTLS protocol), wall time and
connections. `openssl s_client` tells one negotiated group per connection; it is run as a
user would run it to list groups: once per candidate group (`-groups G`, TLS 1.3 and TLS
1.2 each), the groups of the handshakes that completed ("Server Temp Key") being the answer
(a TLS 1.2 handshake with RSA key exchange names none).

    python benchmarks/starttls.py [--skip TOOL] [--only DAEMON-PORT] [--sslyze PATH]

Run as root (the daemons are started as the tests start them). testssl is the Debian
package's `testssl` (or `testssl.sh`); sslyze as in benchmarks/audit.py.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from audit import (Relay, compile_tlsprobe, norm, run_measured,  # noqa: E402
                   sslyze_path, tlsprobe_env)

P384, P256 = {"secp384r1"}, {"secp256r1"}
#: what a tool says of TLS 1.2 DHE with the server's own prime: not a group of the list
FIXED_DHE = "fixed DHE"


@dataclass(frozen=True)
class Case:
    """One daemon port: how to start it, its STARTTLS protocol per tool, the truth."""

    daemon: str
    options: tuple[tuple[str, object], ...]
    port: str
    proto: str                  # tlsprobe's and s_client's name
    truth: set[str]
    sslscan: str | None         # --starttls-X (None: not supported)
    sslyze: str | None
    testssl: str | None         # -t X (None: not supported; testssl 3.0.8 has no sieve)

    @property
    def name(self) -> str:
        extra = "+secure" if dict(self.options).get("require_secure_transport") else ""
        return f"{self.daemon}-{self.port}{extra}"


CASES = [
    Case("postfix", (("curves", "secp384r1"),), "smtp", "smtp", P384, "smtp", "smtp", "smtp"),
    Case("postfix", (("curves", "secp384r1"),), "submission", "smtp", P384, "smtp", "smtp",
         "smtp"),
    Case("dovecot", (("curves", "P-384"),), "imap", "imap", P384, "imap", "imap", "imap"),
    Case("dovecot", (("curves", "P-384"),), "pop3", "pop3", P384, "pop3", "pop3", "pop3"),
    Case("dovecot", (("curves", "P-384"),), "sieve", "sieve", P384, None, None, None),
    Case("vsftpd", (), "ftp", "ftp", P256, "ftp", "ftp", "ftp"),
    Case("prosody", (("curves", "P-384"),), "xmpp", "xmpp", P384, "xmpp", "xmpp", "xmpp"),
    Case("slapd", (("curves", "SECP384R1"),), "ldap", "ldap", P384, "ldap", "ldap", "ldap"),
    Case("postgres", (("curve", "secp384r1"),), "postgres", "postgres", P384, "psql",
         "postgres", "postgres"),
    Case("mariadb", (("curves", "P-384"),), "mysql", "mysql", P384, "mysql", None, "mysql"),
    Case("mariadb", (("curves", "P-384"), ("require_secure_transport", True)), "mysql",
         "mysql", P384, "mysql", None, "mysql"),
]
#: the candidates the s_client loop tries (OpenSSL 3.0's groups)
S_CLIENT_GROUPS = ["x25519", "x448", "prime256v1", "secp384r1", "secp521r1", "ffdhe2048",
                   "ffdhe3072", "ffdhe4096", "ffdhe6144", "ffdhe8192"]


@dataclass
class Row:
    tool: str
    found: set[str] | None      # None: not run (protocol not supported / tool missing)
    wall: float = 0.0
    connections: int = 0
    note: str = ""

    def right(self, truth: set[str]) -> str:
        """"yes" when the named groups found are the configured ones (a fixed DHE prime in
        TLS 1.2 is noted, not counted: it is no group of the list)."""
        if self.found is None:
            return "-"
        found = self.found - {FIXED_DHE}
        return "yes" if found == truth else f"no ({','.join(sorted(found)) or '-'})"


def run_tlsprobe(port: int, case: Case) -> Row:
    xmpp = ["--xmpp-host", "localhost"] if case.proto == "xmpp" else []
    cmd = [sys.executable, "-m", "tlsprobe", "scan", f"127.0.0.1:{port}", "--starttls",
           case.proto, "--groups-only", "--json", "--no-progress", "--no-policy", *xmpp]
    code, out, wall, cpu = run_measured(cmd, 300, cwd=REPO, env=tlsprobe_env())
    if not out.strip():
        return Row("tlsprobe", set(), wall, note=f"exit {code}")
    report = json.loads(out.splitlines()[0])
    found = {norm(g["name"]) for audit in report["groups"] for g in audit["supported"]}
    per = "; ".join(f"{a['version']['name']}: {','.join(g['name'] for g in a['supported'])}"
                    for a in report["groups"])
    return Row("tlsprobe", found, wall, note=f"{per}; CPU {cpu:.2f} s")


def run_s_client(port: int, case: Case) -> Row:
    found: set[str] = set()
    t0 = time.monotonic()
    for version in ("-tls1_3", "-tls1_2"):
        for group in S_CLIENT_GROUPS:
            extra = ["-xmpphost", "localhost"] if case.proto == "xmpp" else []
            proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                                   "-starttls", case.proto, version, "-groups", group, *extra,
                                   "-brief"], input="", capture_output=True, text=True,
                                  timeout=30, check=False)
            key = re.search(r"^Server Temp Key: (.+)$", proc.stderr, re.MULTILINE)
            if key is not None:     # -brief: the handshake completed with a key exchange
                found.add(_temp_key_group(key.group(1), group, version))
    fixed = "; TLS 1.2 fixed DHE too" if FIXED_DHE in found else ""
    return Row("s_client", found, time.monotonic() - t0,
               note=f"{len(S_CLIENT_GROUPS)} groups x 2 versions, one connection each{fixed}")


def _temp_key_group(text: str, asked: str, version: str) -> str:
    """The group of s_client's "Server Temp Key: ECDH, secp384r1, 384 bits" (or "X25519,
    253 bits"; "DH, 2048 bits": the asked FFDHE group in TLS 1.3, fixed DHE in TLS 1.2)."""
    parts = [p.strip() for p in text.split(",")]
    name = parts[1] if len(parts) == 3 else parts[0]
    if name == "DH":   # TLS 1.2: the server's own DH prime, not a negotiated group
        return norm(asked) if version == "-tls1_3" else FIXED_DHE
    return norm("secp256r1" if name == "prime256v1" else name)


def run_sslscan(port: int, case: Case) -> Row:
    if case.sslscan is None:
        return Row("sslscan", None, note="no --starttls-" + case.proto)
    # sslscan's XMPP stream header says to= the target's host name: "localhost", which the
    # relay (IPv4) serves, as Prosody's virtual host
    host = "localhost" if case.sslscan == "xmpp" else "127.0.0.1"
    cmd = ["sslscan", "--no-colour", "--no-ciphersuites", "--no-renegotiation",
           "--no-compression", "--no-heartbleed", "--no-fallback", "--no-check-certificate",
           "--ipv4", f"--starttls-{case.sslscan}", f"{host}:{port}"]
    _code, out, wall, cpu = run_measured(cmd, 600)
    found = {norm(m.group(1)) for m in re.finditer(r"^TLSv1\.[0-3]\s+\d+ bits\s+(\S+)", out,
                                                   re.MULTILINE)}
    error = re.search(r"^ERROR: (.*)$", out, re.MULTILINE)
    return Row("sslscan", found, wall, note=f"CPU {cpu:.2f} s" +
               (f"; {error.group(1)[:60]}" if error else ""))


def run_sslyze(port: int, case: Case, exe: str | None) -> Row:
    if exe is None:
        return Row("sslyze", None, note="not installed")
    if case.sslyze is None:
        return Row("sslyze", None, note=f"no --starttls {case.proto}")
    extra = ["--xmpp_to", "localhost"] if case.sslyze == "xmpp" else []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.json"
        t0 = time.monotonic()
        subprocess.run([exe, "--elliptic_curves", "--starttls", case.sslyze, *extra,
                        "--json_out", str(path), f"127.0.0.1:{port}"], capture_output=True,
                       timeout=600, check=False)
        wall = time.monotonic() - t0
        try:
            data = json.loads(path.read_text())
            result = data["server_scan_results"][0]["scan_result"]["elliptic_curves"]["result"]
            found = {norm(c["name"]) for c in result["supported_curves"]}
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            return Row("sslyze", set(), wall, note=f"no result ({type(exc).__name__})")
    return Row("sslyze", found, wall, note="EC curves only (no FFDHE)")


def testssl_path() -> str | None:
    return shutil.which("testssl") or shutil.which("testssl.sh")


def run_testssl(port: int, case: Case) -> Row:
    """testssl's forward-secrecy section (-f): its ECDHE curves and DH groups. When its own
    STARTTLS code fails and it suggests --ssl-native (vsftpd; LDAP always), it is run again
    with --ssl-native, as its user would (both runs are counted)."""
    exe = testssl_path()
    if exe is None:
        return Row("testssl", None, note="not installed")
    if case.testssl is None:
        return Row("testssl", None, note=f"no -t {case.proto}")
    extra = ["--xmpphost", "localhost"] if case.testssl == "xmpp" else []
    t0 = time.monotonic()
    row = _testssl_once(exe, port, case.testssl, extra)
    if row is None:
        row = _testssl_once(exe, port, case.testssl, [*extra, "--ssl-native"])
        if row is not None:
            row.note = "; ".join(n for n in ("with --ssl-native", row.note) if n)
    if row is None:
        row = Row("testssl", set(), note="no result, with and without --ssl-native")
    row.wall = time.monotonic() - t0
    return row


def _testssl_once(exe: str, port: int, proto: str, extra: list[str]) -> Row | None:
    """One testssl run; None when it failed and suggests --ssl-native."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.json"
        proc = subprocess.run([exe, "--quiet", "--color", "0", "--warnings", "off", "-f",
                               "-t", proto, *extra, "--jsonfile", str(path),
                               f"127.0.0.1:{port}"], capture_output=True, text=True, cwd=tmp,
                              timeout=1800, check=False)
        output = proc.stdout + proc.stderr
        try:
            rows = {row["id"]: row["finding"] for row in json.loads(path.read_text())}
        except (OSError, ValueError, KeyError, TypeError):
            rows = {}
    curves = rows.get("PFS_ECDHE_curves", rows.get("FS_ECDHE_curves", "")).split()
    dh = rows.get("DH_groups", "")
    named = {norm(d) for d in re.findall(r"ffdhe\d+", dh)}     # RFC 7919, negotiated
    if not curves and not named and "--ssl-native" in output and "--ssl-native" not in extra:
        return None
    fatal = re.search(r"^(Fatal error: .*)$", output, re.MULTILINE)
    notes = ([f"DH: {dh}"] if dh else []) + ([fatal.group(1)[:80]] if fatal else [])
    return Row("testssl", {norm(c) for c in curves} | named, note="; ".join(notes))


def measure(relay: Relay, fn: Callable[..., Row], *a: object) -> Row:
    relay.count = 0
    row = fn(relay.port, *a)
    time.sleep(0.2)     # late connections reach the relay
    row.connections = relay.count if row.found is not None else 0
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip", action="append", default=[], help="tool to leave out")
    ap.add_argument("--only", action="append", default=[], help="daemon-port to run "
                    "(e.g. postfix-smtp; repeatable)")
    ap.add_argument("--sslyze", default=None)
    args = ap.parse_args()
    from tests.lab_servers.certs import make_certs
    from tests.lab_servers.daemons import Daemon, DaemonUnavailable, start_daemon
    sslyze = sslyze_path(args.sslyze)
    tools: list[tuple[str, Callable[..., Row], tuple[object, ...]]] = [
        ("tlsprobe", run_tlsprobe, ()), ("s_client", run_s_client, ()),
        ("sslscan", run_sslscan, ()), ("testssl", run_testssl, ()),
        ("sslyze", run_sslyze, (sslyze,))]
    tools = [t for t in tools if t[0] not in args.skip]
    for what, present in (("sslscan", shutil.which("sslscan")), ("testssl", testssl_path()),
                          ("sslyze", sslyze)):
        if not present:
            print(f"{what}: not installed")
    compile_tlsprobe()
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on "
          f"{os.cpu_count()} CPUs")
    root = Path(tempfile.mkdtemp(prefix="tlsprobe-bench-starttls-"))
    os.chmod(root, 0o711)
    certs = make_certs(root / "certs")
    running: dict[tuple[object, ...], Daemon] = {}
    table: list[tuple[Case, list[Row]]] = []
    try:
        for case in CASES:
            if args.only and case.name not in args.only:
                continue
            key = (case.daemon, case.options)
            if key not in running:
                try:
                    running[key] = start_daemon(case.daemon, root / case.name, certs,
                                                dict(case.options))
                except DaemonUnavailable as exc:
                    print(f"{case.name}: {exc}")
                    continue
            daemon = running[key]
            relay = Relay(("127.0.0.1", daemon.ports[case.port]), 0.0)
            rows = [measure(relay, fn, case, *a) for _, fn, a in tools]
            table.append((case, rows))
            print_case(case, rows)
    finally:
        for daemon in running.values():
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_summary(table)
    return 0


def print_case(case: Case, rows: list[Row]) -> None:
    print(f"\n== {case.name} (--starttls {case.proto}); configured: "
          f"{','.join(sorted(case.truth))}")
    for r in rows:
        print(f"  {r.tool:9} {r.right(case.truth):28} {r.wall:7.2f} s {r.connections:5d} conns"
              f"  {r.note}")


def print_summary(table: list[tuple[Case, list[Row]]]) -> None:
    if not table:
        return
    tools = [r.tool for r in table[0][1]]
    print("\nsummary: group set right? / wall s / connections")
    print(f"{'daemon':24}" + "".join(f"{t:>22}" for t in tools))
    for case, rows in table:
        cells = []
        for r in rows:
            ok = r.right(case.truth)
            cells.append("-" if ok == "-" else
                         f"{'yes' if ok == 'yes' else 'NO'} {r.wall:6.1f} {r.connections:4d}")
        print(f"{case.name:24}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    sys.exit(main())
