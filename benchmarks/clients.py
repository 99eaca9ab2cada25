#!/usr/bin/env python3
"""`tlsprobe clients` beside `testssl --client-simulation` on the same local servers: for the
clients both tools have, what each says the client negotiates (version, cipher suite, group)
and whether they agree; and per tool the clients simulated, the TCP connections made and
the CPU and wall time spent.

Servers (tests/helpers/servers.py, loopback only):
- modern: openssl s_server, TLS 1.2 and 1.3, its default suites and groups;
- legacy: gnutls-serv, TLS 1.0 to 1.2 only, CBC suites only (AES-128, AES-256, 3DES; SHA-1
  MACs) with RSA and ECDHE-RSA key exchange (Debian's OpenSSL 3.0 has no 3DES; gnutls-serv
  listens on every address, and is only ever connected to over loopback);
- pq: pyOpenSSL on OpenSSL 3.5, TLS 1.2 and 1.3, groups X25519MLKEM768:X25519:P-256.

Tools:
- tlsprobe: `python -m tlsprobe clients 127.0.0.1:PORT --json` (every packaged profile, or
  --profiles-dir); its JSON gives each profile's version, cipher_suite and group and the
  connections it made;
- testssl.sh (Debian package `testssl.sh`, command `testssl`): `testssl --client-simulation
  --jsonfile F --warnings off --quiet --color 0 --ip one --openssl-timeout 5` (its 35
  "current" clients; --all-clients sets ALL_CLIENTS=true for all 162). Its JSON gives
  version and suite (OpenSSL names, mapped to codes with its own etc/cipher-mapping.txt), its
  text output the group ("253 bit ECDH (X25519)").

Clients are matched through `PAIRS` (testssl's short name -> a profile id): "exact" where
client, version and platform are the same as far as both state them, else "nearest" with
what differs. A pair whose profile is not installed is listed as absent. Connections are
the SYNs to the server's port on lo during each tool's run (tcpdump; needs root), for both
tools alike; tlsprobe's own count from its JSON is shown beside. CPU time is the user+system
time of the tool's process tree (getrusage of the waited children).

    python benchmarks/clients.py [--servers modern,legacy,pq] [--all-clients]
        [--profiles-dir DIR] [--tlsprobe-src DIR] [--json FILE] [--timeout 900]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SERVERS: dict[str, tuple[str, dict[str, Any]]] = {
    "modern": ("openssl", {"proto": "both"}),
    "legacy": ("gnutls", {"proto": "tls1_0-tls1_2",
                          "ciphers": "NONE:+AES-128-CBC:+AES-256-CBC:+3DES-CBC:+RSA:+ECDHE-RSA"
                                     ":+SHA1:+COMP-NULL:+SIGN-ALL:+GROUP-ALL:+CTYPE-X509"}),
    "pq": ("pyopenssl", {"proto": "both", "groups": ["X25519MLKEM768", "X25519", "P-256"]}),
}

#: testssl short name -> (profile id, how the two clients compare)
PAIRS: dict[str, tuple[str, str]] = {
    "ie_8_xp": ("cap-ie8-winxp", "exact"),
    "ie_8_win7": ("cap-ie8-win7", "exact"),
    "ie_11_win7": ("cap-ie11-win7", "exact"),
    "chrome_34_osx": ("cap-chrome-34", "exact version (our platform not stated)"),
    "chrome_79_win10": ("cap-chrome-79-android9", "nearest: same version, on Android 9"),
    "chrome_101_win10": ("cap-chrome-116-win10", "nearest: Chrome 116 on Windows 10"),
    "firefox_26_win8": ("cap-firefox-26-linux", "nearest: same version, on Linux"),
    "firefox_100_win10": ("firefox-esr-153-debian12", "nearest: Firefox ESR 153 on Linux"),
    "java1703": ("openjdk-17-debian12", "nearest: OpenJDK 17.0.15"),
    "go_1178": ("go-1.19-debian12", "nearest: Go 1.19.8"),
    "openssl_303": ("openssl-3.0-debian12", "nearest: OpenSSL 3.0.22 s_client"),
}

GROUPS = {"X25519": 0x001D, "X448": 0x001E, "P-256": 0x0017, "P-384": 0x0018,
          "P-521": 0x0019, "ffdhe2048": 0x0100, "ffdhe3072": 0x0101, "ffdhe4096": 0x0102,
          "X25519MLKEM768": 0x11EC, "brainpoolP256r1": 0x001A}
PQ_GROUPS = {0x11EC, 0x11EB, 0x11ED, 0x6399, 0x0200, 0x0201, 0x0202}
VERSIONS = {"SSLv3": 0x0300, "TLSv1": 0x0301, "TLSv1.0": 0x0301, "TLSv1.1": 0x0302,
            "TLSv1.2": 0x0303, "TLSv1.3": 0x0304}


@dataclass
class Outcome:
    """What one tool says one client negotiated (None: no connection)."""

    version: int | None = None
    suite: int | None = None
    group: int | None = None
    dh_bits: int | None = None
    text: str = ""


@dataclass
class ToolRun:
    """One tool's run on one server."""

    clients: dict[str, Outcome] = field(default_factory=dict)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    syns: int | None = None
    own_count: int | None = None     # the tool's own connection count (tlsprobe's JSON)
    error: str = ""
    post_quantum: list[str] = field(default_factory=list)  # clients that got a PQ group


def testssl_names() -> dict[str, str]:
    """testssl's short client name -> its display name (etc/client-simulation.txt)."""
    text = _testssl_etc("client-simulation.txt").read_text(errors="replace")
    names = re.findall(r'names\+=\("([^"]*)"\)\s*\n\s*short\+=\("([^"]*)"\)', text)
    return {short: name for name, short in names}


def _testssl_etc(name: str) -> Path:
    for folder in ("/etc/testssl", "/usr/share/testssl/etc", "/usr/local/share/testssl/etc"):
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    raise SystemExit(f"testssl's {name} not found (Debian package testssl.sh)")


def suite_codes() -> dict[str, int]:
    """OpenSSL (and IANA) suite names -> code, from testssl's own cipher-mapping.txt."""
    codes: dict[str, int] = {}
    for line in _testssl_etc("cipher-mapping.txt").read_text(errors="replace").splitlines():
        m = re.match(r"\s*0x([0-9A-Fa-f]{2}),0x([0-9A-Fa-f]{2})\s+-\s+(\S+)\s+(\S+)", line)
        if m:
            code = int(m.group(1) + m.group(2), 16)
            codes.setdefault(m.group(3), code)
            codes.setdefault(m.group(4), code)
    return codes


def timed(argv: list[str], timeout: float, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> tuple[float, float, subprocess.CompletedProcess[str] | None]:
    """(wall s, CPU s of the process tree, the finished process or None on timeout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        proc: subprocess.CompletedProcess[str] | None = subprocess.run(
            argv, check=False, capture_output=True, text=True, timeout=timeout, env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        proc = None
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


@contextmanager
def syn_counter(port: int, work: Path, label: str) -> Iterator[list[int | None]]:
    """Count the SYNs sent to `port` on lo while the block runs (tcpdump; [None] when it
    cannot run). The count is in the yielded list after the block."""
    box: list[int | None] = [None]
    tcpdump = shutil.which("tcpdump")
    if tcpdump is None or os.geteuid() != 0:
        yield box
        return
    pcap = work / f"syn-{label}-{port}.pcap"
    proc = subprocess.Popen([tcpdump, "-i", "lo", "-n", "-U", "--immediate-mode", "-w",
                             str(pcap), f"tcp dst port {port} and tcp[13] & 0x12 == 0x02"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(proc)
        yield box
    finally:
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if pcap.exists():
        out = subprocess.run([tcpdump, "-n", "-r", str(pcap)], check=False,
                             capture_output=True, text=True)
        box[0] = len([ln for ln in out.stdout.splitlines() if ln.strip()])


def _wait_listening(proc: subprocess.Popen[str]) -> None:
    """Until tcpdump says it listens (its first stderr line), at most 5 s."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "listening on" in line or not line:
            return


def run_testssl(binary: str, port: int, args: argparse.Namespace, work: Path,
                codes: dict[str, int]) -> ToolRun:
    out = work / f"testssl-{port}.json"
    env = dict(os.environ, ALL_CLIENTS="true" if args.all_clients else "false")
    with syn_counter(port, work, "testssl") as syns:
        wall, cpu, proc = timed([binary, "--client-simulation", "--jsonfile", str(out),
                                 "--warnings", "off", "--quiet", "--color", "0", "--ip", "one",
                                 "--openssl-timeout", "5", f"127.0.0.1:{port}"],
                                args.timeout, env)
    run = ToolRun(wall_s=wall, cpu_s=cpu, syns=syns[0])
    if proc is None or not out.exists():
        run.error = "timed out" if proc is None else f"no JSON (exit {proc.returncode})"
        return run
    text_lines = proc.stdout.splitlines()
    names = testssl_names()
    for finding in json.loads(out.read_text()):
        fid = str(finding.get("id", ""))
        if fid.startswith("clientsimulation-"):
            short = fid.removeprefix("clientsimulation-")
            run.clients[short] = _testssl_outcome(str(finding.get("finding", "")),
                                                  _text_line(text_lines, names.get(short)),
                                                  codes)
            if run.clients[short].group in PQ_GROUPS:
                run.post_quantum.append(short)
    return run


def _text_line(lines: list[str], name: str | None) -> str:
    if not name:
        return ""
    for line in lines:
        if line.strip().startswith(name + " ") or line.strip() == name:
            return line.strip()[len(name):].strip()
    return ""


def _testssl_outcome(finding: str, line: str, codes: dict[str, int]) -> Outcome:
    """testssl's finding ("TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256", "No connection") and its
    text line ("..., 253 bit ECDH (X25519)", "..., 2048 bit DH", "No FS")."""
    parts = finding.split()
    if len(parts) < 2 or parts[0] not in VERSIONS:
        return Outcome(text=finding)
    out = Outcome(VERSIONS[parts[0]], codes.get(parts[1]), text=line or finding)
    m = re.search(r"ECDH \(([^)]+)\)", line)
    if m:
        out.group = GROUPS.get(m.group(1))
    m = re.search(r"(\d+) bit DH\b", line)
    if m:
        out.dh_bits = int(m.group(1))
        named = re.search(r"DH \((ffdhe\d+)\)", line)
        out.group = GROUPS.get(named.group(1)) if named else None
    return out


def run_tlsprobe(port: int, args: argparse.Namespace, work: Path) -> ToolRun:
    src = Path(args.tlsprobe_src or REPO)
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONDONTWRITEBYTECODE="1")
    argv = [sys.executable, "-m", "tlsprobe", "clients", f"127.0.0.1:{port}", "--json"]
    if args.profiles_dir:
        argv += ["--profiles-dir", str(args.profiles_dir)]
    with syn_counter(port, work, "tlsprobe") as syns:
        wall, cpu, proc = timed(argv, args.timeout, env, cwd=src)  # python -m: cwd first
    run = ToolRun(wall_s=wall, cpu_s=cpu, syns=syns[0])
    if proc is None or not proc.stdout.strip():
        run.error = "timed out" if proc is None else \
            f"exit {proc.returncode}: {proc.stderr.strip()[-200:]}"
        return run
    report = json.loads(proc.stdout.splitlines()[0])
    run.own_count = report.get("connections")
    for sim in report.get("clients", []):
        # what was negotiated, also where the client would then refuse the chain (testssl
        # does not judge trust: the handshake is what both tools report)
        run.clients[str(sim["profile"])] = Outcome(
            sim.get("version"), sim.get("cipher_suite"), sim.get("group"),
            sim.get("dh_bits"), text=_our_text(sim))
        if sim.get("post_quantum"):
            run.post_quantum.append(str(sim["profile"]))
    return run


def _our_text(sim: dict[str, Any]) -> str:
    status, reason = sim.get("status"), sim.get("reason")
    note = "" if status == "connected" else f" [{status}: {reason or '-'}]"
    if sim.get("version") is None:
        return note.strip(" []") or str(status)
    group = sim.get("group_name") or (f"DH {sim['dh_bits']}" if sim.get("dh_bits") else "-")
    return f"{sim.get('version_name')} {sim.get('cipher_suite_name')} {group}{note}"


@dataclass
class Row:
    """One matched client on one server."""

    testssl: str
    profile: str
    match: str
    theirs: str
    ours: str
    agree_version: bool | None
    agree_suite: bool | None
    agree_group: bool | None


def compare(ts: ToolRun, tp: ToolRun, names: dict[str, str]) -> list[Row]:
    rows = []
    for short, (profile, match) in PAIRS.items():
        a, b = ts.clients.get(short), tp.clients.get(profile)
        if a is None or b is None:
            continue
        rows.append(Row(names.get(short, short), profile, match, _short(a), b.text,
                        a.version == b.version, a.suite == b.suite, _same_group(a, b)))
    return rows


def _same_group(a: Outcome, b: Outcome) -> bool | None:
    if a.version is None and b.version is None:
        return True
    if a.version is None or b.version is None:
        return False
    if a.group is None and b.group is None:
        return a.dh_bits == b.dh_bits
    return a.group == b.group


def _short(o: Outcome) -> str:
    if o.version is None:
        return o.text or "No connection"
    return o.text


def agreement(rows: list[Row]) -> dict[str, int]:
    """Counts: clients compared, and those where both tools say the same version, suite,
    group, and all three."""
    keys = ("agree_version", "agree_suite", "agree_group")
    return {"compared": len(rows),
            **{k.removeprefix("agree_"): sum(1 for r in rows if getattr(r, k)) for k in keys},
            "all": sum(1 for r in rows if all(getattr(r, k) for k in keys))}


def summary(rows: list[Row]) -> str:
    parts = []
    for kind, sub in (("exact", [r for r in rows if r.match.startswith("exact")]),
                      ("nearest", [r for r in rows if not r.match.startswith("exact")])):
        a = agreement(sub)
        n = a["compared"]
        parts.append(f"{kind} pairs: {n}, same version {a['version']}/{n}, suite "
                     f"{a['suite']}/{n}, group {a['group']}/{n}, all three {a['all']}/{n}")
    return "Compared: " + "; ".join(parts) + "."


def markdown(label: str, rows: list[Row], ts: ToolRun, tp: ToolRun) -> str:
    yes = {True: "yes", False: "**no**", None: "-"}
    lines = [f"### {label}", "",
             ("| testssl client | our profile | match | testssl.sh | tlsprobe | version | "
             "suite | group |"), "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.testssl} | {r.profile} | {r.match} | {r.theirs} | {r.ours} | "
                     f"{yes[r.agree_version]} | {yes[r.agree_suite]} | {yes[r.agree_group]} |")
    lines += ["", summary(rows), "",
              "| tool | clients simulated | connections (SYNs) | own count | CPU s | wall s |",
              "|---|---|---|---|---|---|"]
    for name, run in (("testssl.sh", ts), ("tlsprobe", tp)):
        syns = "-" if run.syns is None else str(run.syns)
        own = "-" if run.own_count is None else str(run.own_count)
        err = f" ({run.error})" if run.error else ""
        lines.append(f"| {name}{err} | {len(run.clients)} | {syns} | {own} | "
                     f"{run.cpu_s:.1f} | {run.wall_s:.1f} |")
    for name, run in (("testssl.sh", ts), ("tlsprobe", tp)):
        lines.append(f"\n{name}: a post-quantum group negotiated by {len(run.post_quantum)} "
                     f"of {len(run.clients)} clients" +
                     (f" ({', '.join(sorted(run.post_quantum))})" if run.post_quantum else ""))
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default=",".join(SERVERS), help="comma list of "
                    + ", ".join(SERVERS))
    ap.add_argument("--all-clients", action="store_true",
                    help="all 162 testssl clients (ALL_CLIENTS=true), not its 35 current")
    ap.add_argument("--profiles-dir", type=Path, help="tlsprobe's profiles from DIR")
    ap.add_argument("--tlsprobe-src", type=Path, help="run tlsprobe from this source tree")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures")
    ap.add_argument("--timeout", type=float, default=900.0, help="per tool run (s)")
    args = ap.parse_args()
    testssl = shutil.which("testssl") or shutil.which("testssl.sh")
    if testssl is None:
        print("testssl: not installed (Debian package testssl.sh)", file=sys.stderr)
        return 2
    from tests.helpers.servers import start_server
    codes, names = suite_codes(), testssl_names()
    work = Path(tempfile.mkdtemp(prefix="tlsprobe-bench-clients-"))
    figures: dict[str, Any] = {}
    for label in args.servers.split(","):
        impl, options = SERVERS[label]
        with start_server(impl, **options) as srv:
            tp = run_tlsprobe(srv.port, args, work)
            ts = run_testssl(testssl, srv.port, args, work, codes)
        rows = compare(ts, tp, names)
        print(markdown(f"{label} ({impl}, {_describe(options)})", rows, ts, tp), flush=True)
        figures[label] = {"rows": [asdict(r) for r in rows], "agreement": {
                              "exact": agreement([r for r in rows
                                                  if r.match.startswith("exact")]),
                              "nearest": agreement([r for r in rows
                                                    if not r.match.startswith("exact")])},
                          "testssl": _figures(ts), "tlsprobe": _figures(tp)}
    absent = sorted({p for p, _ in PAIRS.values()} - _present(figures))
    if absent:
        print(f"Pairs not compared (profile not installed or no testssl result): "
              f"{', '.join(absent)}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _describe(options: dict[str, Any]) -> str:
    return ", ".join(f"{k} {':'.join(v) if isinstance(v, list) else v}"
                     for k, v in options.items())


def _figures(run: ToolRun) -> dict[str, Any]:
    return {"clients": len(run.clients), "syns": run.syns, "own_count": run.own_count,
            "cpu_s": round(run.cpu_s, 2), "wall_s": round(run.wall_s, 2),
            "error": run.error, "post_quantum": sorted(run.post_quantum)}


def _present(figures: dict[str, Any]) -> set[str]:
    return {r["profile"] for f in figures.values() for r in f["rows"]}


if __name__ == "__main__":
    sys.exit(main())
