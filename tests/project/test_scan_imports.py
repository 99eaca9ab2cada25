"""What `tlsprobe scan` imports: only what the checks asked for need (issue 35).

A scan's start-up was mostly imports (0.2 s of its 0.25 s before the first connection on
loopback): every check module, the checks' details types, the client simulation, the
STARTTLS machines and cryptography's X.509 module came with `tlsprobe.probes.audit.run`
whatever was asked. These tests run real scans against a loopback server in a child
interpreter and read `sys.modules` after `cli.main(...)`: judged by the list of modules,
never by time, so that a busy machine cannot fail (or pass) them.

- `scan --groups-only`: no check module, no details type, no client simulation, no STARTTLS
  or QUIC module, nothing of the capture, survey, speed or rendering layers (JSON output),
  nothing of `cryptography` (the audit computes no key: probes/audit/groups.py), and at most
  GROUPS_ONLY_MAX tlsprobe modules in all (the bound: a new module on this path must be
  needed by the group audit, then the bound is raised with the reason);
- `scan --checks heartbleed`: the one check module it asked for, not the others;
- the default scan (every check): no client simulation, STARTTLS, QUIC or the renderers of
  other outputs;
- the imports run without the cyclic garbage collector (a count of its runs);
- the dataclasses' generated methods are compiled when first called (a count of them), the
  IDNA codec is not loaded to look up an address, cryptography.x509 is loaded beside the
  first connection of a scan that reads certificates (not with the first certificate), and
  what is left at the interpreter's exit is not collected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHECKS_DIR = REPO / "tlsprobe" / "probes" / "checks"

#: every check module (and the checks' shared helpers): all but the package, the catalog
CHECK_MODULES = sorted(f"tlsprobe.probes.checks.{p.stem}" for p in CHECKS_DIR.glob("*.py")
                       if p.stem not in ("__init__", "catalog"))
#: what no scan imports unless asked for (--clients, --starttls, --quic, --html ...)
NOT_ASKED = ("tlsprobe.probes.clients", "tlsprobe.model.clients", "tlsprobe.net.starttls",
             "tlsprobe.net.quic", "tlsprobe.commands.probe_quic", "tlsprobe.offline", "tlsprobe.capture",
             "tlsprobe.survey", "tlsprobe.speed", "tlsprobe.api", "tlsprobe.report.html",
             "tlsprobe.report.csv_out", "tlsprobe.report.sarif", "tlsprobe.report.junit",
             "tlsprobe.report.plots", "aioquic", "dask", "pyarrow", "scapy")
#: standard library modules a group audit has no use for, which argparse's help formatter
#: (shutil, with bz2 and lzma), importlib.resources (tempfile, zipfile) and getaddrinfo of
#: an IP address given as a str (the IDNA codec, with stringprep and unicodedata) brought
UNUSED_STDLIB = ("shutil", "bz2", "lzma", "importlib.resources", "tempfile", "zipfile",
                 "encodings.idna", "stringprep")
#: with --json: no table is drawn
TABLES = ("rich", "tlsprobe.report.audit_tables", "tlsprobe.report.tables")
#: the tlsprobe modules `scan --groups-only` may load (123 when this was written, 196 on
#: 4012bd5: the command, request, audit, scheduler, engine, codec, key exchange, registry,
#: model and policy modules a group audit uses; model.clients left since; 116 once the
#: audit computed no key: the key exchanges, signature checks and their model helper left;
#: 117 with model.json_scalars, where model.encode's number() is defined once for it and
#: the compiled model.capture_json; 118 with model.units, where host_port writes an endpoint
#: ([::1]:443) once for net.target and every report that names a target; 120 with
#: engine.applying and engine.hellos, the parts engine.client was split into at 455 lines;
#: 121 with escaping, the one escaping style moved out of wire._util so that policy and
#: model share its one definition; 122 with wire.ber, the element reader wire.spki was
#: split into at 414 lines: the group audit reads an ECDSA leaf's curve with it; 124 with
#: engine.protection_base and engine.protection_cbc, the parts engine.protection was split
#: into at 454 lines, which the engine package loaded whole before; 125 with
#: model.audit_parts, the answers model.audit was split into at 450 lines)
GROUPS_ONLY_MAX = 125

#: the end the counting scripts share: run the command line, its exit code in `code`
_RUN_MAIN = """\
from tlsprobe.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
"""

_MODULES = """\
import gc
import sys
""" + _RUN_MAIN + """collections = sum(s["collections"] for s in gc.get_stats())
print("\\0MODULES", code, collections, *sorted(sys.modules), file=sys.stderr)
"""


_COMPILED = """\
import dataclasses
import sys
made = []
original = dataclasses._create_fn


def counted(*args, **kwargs):
    made.append(args[0])
    return original(*args, **kwargs)


dataclasses._create_fn = counted
""" + _RUN_MAIN + """print("\\0COMPILED", code, len(made), file=sys.stderr)
"""


def scan_run(*argv: str) -> tuple[int, str, set[str], int]:
    """(exit code, stdout, sys.modules, garbage collections) of `tlsprobe scan ARGV` run by
    cli.main in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _MODULES, "scan", *argv], capture_output=True,
                          check=False,
                          text=True, cwd=REPO, env=env, timeout=120)
    assert "\0MODULES" in done.stderr, done.stderr[-2000:]
    words = done.stderr.rsplit("\0MODULES", 1)[1].split()
    return int(words[0]), done.stdout, set(words[2:]), int(words[1])


def scan_modules(*argv: str) -> tuple[int, str, set[str]]:
    """(exit code, stdout, sys.modules) of `tlsprobe scan ARGV` (scan_run)."""
    return scan_run(*argv)[:3]


def under(modules: set[str], prefixes: tuple[str, ...] | list[str]) -> list[str]:
    return sorted(m for m in modules
                  if any(m == p or m.startswith(p + ".") for p in prefixes))


def audit_of(stdout: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(stdout.splitlines()[0])
    assert report["error"] is None, report["error"]
    return report


def test_groups_only_imports_no_check(server_cache: Callable[..., Any]) -> None:
    server = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    code, out, modules = scan_modules(f"127.0.0.1:{server.port}", "--groups-only", "--json",
                                      "--no-progress")
    assert code == 0, out
    report = audit_of(out)
    tls13 = next(g for g in report["groups"] if g["version"]["name"] == "TLS 1.3")
    assert [g["name"] for g in tls13["supported"]] == ["x25519", "secp384r1", "ffdhe2048"]
    assert under(modules, CHECK_MODULES + ["tlsprobe.model.check_details"]) == [], \
        "scan --groups-only imported check modules"
    assert under(modules, NOT_ASKED + TABLES) == []
    assert under(modules, UNUSED_STDLIB) == []
    assert under(modules, ("cryptography",)) == [], \
        "scan --groups-only imported cryptography: the group audit computes no key"
    own = under(modules, ("tlsprobe",))
    assert len(own) <= GROUPS_ONLY_MAX, \
        f"scan --groups-only imported {len(own)} tlsprobe modules: {own}"


def test_scan_imports_without_collecting(server_cache: Callable[..., Any]) -> None:
    """The audit's modules are imported with the cyclic collector off and their objects
    frozen after (commands/common.py start_up): it ran about 80 times during a group
    audit's imports (6 % of its CPU), about 20 times now in the whole run (parsing the
    command line, the audit's connections). A count, not a time."""
    server = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    code, out, _, collections = scan_run(f"127.0.0.1:{server.port}", "--groups-only",
                                         "--json", "--no-progress")
    assert code == 0 and audit_of(out)["groups"], out
    assert collections <= 40, f"{collections} garbage collections in scan --groups-only"


def _counted_groups_audit(script: str, tag: str, port: int) -> int:
    """`scan --groups-only --json` of 127.0.0.1:PORT run by a counting script: the count it
    printed after its tag, once the audit is checked to have worked."""
    done = subprocess.run([sys.executable, "-c", script, "scan", f"127.0.0.1:{port}",
                           "--groups-only", "--json", "--no-progress"], capture_output=True,
                          check=False, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert f"\0{tag}" in done.stderr, done.stderr[-2000:]
    code, count = (int(w) for w in done.stderr.rsplit(f"\0{tag}", 1)[1].split())
    assert code == 0 and audit_of(done.stdout)["groups"], done.stdout
    return count


def test_scan_compiles_dataclass_methods_on_use(server_cache: Callable[..., Any]) -> None:
    """The dataclasses' generated methods of the audit's types are compiled when first
    called (commands/lazy_methods.py), not all at import: a group audit compiled 764 of them
    (138 classes: 36 % of its instructions), 76 to 79 after, about 61 once the audit
    computed no key. A count of the methods `dataclasses` writes and compiles in the whole
    run, not a time."""
    server = server_cache("openssl", groups="X25519:P-384:ffdhe2048", serverpref=True)
    made = _counted_groups_audit(_COMPILED, "COMPILED", server.port)
    assert made <= 80, f"scan --groups-only compiled {made} dataclass methods"


def test_one_check_imports_its_module_alone(server_cache: Callable[..., Any]) -> None:
    server = server_cache("nginx")
    code, out, modules = scan_modules(f"127.0.0.1:{server.port}", "--checks", "heartbleed",
                                      "--json", "--no-progress")
    assert code == 0, out
    report = audit_of(out)
    assert [c["name"] for c in report["check_results"]] == ["heartbleed"]
    assert report["check_results"][0]["verdict"] == "not vulnerable"
    checks = under(modules, CHECK_MODULES)
    assert "tlsprobe.probes.checks.heartbleed" in checks
    others = [m for m in checks if m.rsplit(".", 1)[1] in _other_checks("heartbleed")]
    assert others == [], "scan --checks heartbleed imported other checks' modules"
    assert under(modules, NOT_ASKED + TABLES) == []


def test_default_scan_imports_nothing_not_asked_for(server_cache: Callable[..., Any]) -> None:
    server = server_cache("nginx")
    code, out, modules = scan_modules(f"127.0.0.1:{server.port}", "--json", "--no-progress")
    report = audit_of(out)
    assert code == 0 and len(report["check_results"]) > 30, out[:2000]
    assert under(modules, NOT_ASKED + TABLES) == []


def _other_checks(name: str) -> set[str]:
    """The module names of the active checks but `name` (active.py MODULES: a check's
    module, when it is not named like the check)."""
    from tlsprobe.model.check_catalog import ACTIVE
    from tlsprobe.probes.checks.active import MODULES
    return {MODULES.get(n, n) for n in ACTIVE if n != name}


_EXIT = """\
import sys
from tlsprobe.cli import main


class Cycle:
    def __del__(self) -> None:
        print("finalized", file=sys.stderr)


try:
    main(["--version"])
except SystemExit:
    pass
cycle = Cycle()
cycle.self = cycle
del cycle
"""


def test_exit_skips_the_last_collection() -> None:
    """cli.main has what is left frozen at the interpreter's exit (atexit: gc.freeze), so
    that its last collection does not walk every object the command and its imports made
    (7 % of a group audit's instructions, in the teardown). Seen from outside: garbage in a
    reference cycle at exit is left to the process's end, not collected."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _EXIT], capture_output=True, check=False,
                          text=True, cwd=REPO, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "finalized" not in done.stderr


def test_x509_loads_beside_the_first_connection() -> None:
    """cryptography.x509 (a fifth of a group audit's instructions, when it read
    certificates) is imported in a thread of its own once the first connection is up
    (probes/audit/scheduler.py preload_x509) by a scan that reads certificates (here the
    version phase, whose handshakes parse them), while the connections wait for their
    answers, not when the first certificate arrives: against a server that closes every
    connection at once, which sends no certificate, it is loaded all the same. A group
    audit alone reads none and loads none (test_groups_only_imports_no_check)."""
    from tests.helpers.faultproxy import serve_loopback

    listener, port = serve_loopback(lambda conn: conn.close())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run([sys.executable, "-c", _MODULES, "scan", f"127.0.0.1:{port}",
                               "--checks", "versions", "--json", "--no-progress"],
                              capture_output=True, check=False, text=True, cwd=REPO, env=env,
                              timeout=120)
    finally:
        listener.close()
    assert "\0MODULES" in done.stderr, done.stderr[-2000:]
    modules = set(done.stderr.rsplit("\0MODULES", 1)[1].split()[2:])
    assert "cryptography.x509" in modules


_REPRS = """\
import sys
from tlsprobe.model.audit import AuditReport
calls = []
original = AuditReport.__repr__


def counted(self):
    calls.append(1)
    return original(self)


AuditReport.__repr__ = counted
""" + _RUN_MAIN + """print("\\0REPRS", code, len(calls), file=sys.stderr)
"""


def test_scan_does_not_format_its_reports(server_cache: Callable[..., Any]) -> None:
    """run_audit hands the reports over in a list, not as asyncio.run's task result: at the
    end asyncio.run restores the SIGINT handler, and the signal module formats the old one
    (which names the task, its result included) into an error it discards: every report's
    repr, twice, and the compiling of every model type's __repr__ on the way."""
    server = server_cache("nginx")
    reprs = _counted_groups_audit(_REPRS, "REPRS", server.port)
    assert reprs == 0, f"the scan formatted its report {reprs} times"
