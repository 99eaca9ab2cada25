"""Scripted servers on ::1: every line that names the target writes an IPv6 address in
brackets ([::1]:PORT, as the target is given), never "::1:PORT", whose last colon cannot be
told from the address's own: the `clients` error line and HTML page, the changes since a
`--baseline`, and the scan summary's list of targets rated below `--fail-under`."""
from __future__ import annotations

from pathlib import Path

from . import scenarios_tls13 as s13
from . import scenarios_transport as st
from .runner import run_tlsprobe
from .server import HostileServer

ARGS = ("--timeout", "2", "--retries", "0")


def test_clients_names_an_ipv6_target_in_brackets(hostile_server: HostileServer,
                                                   tmp_path: Path) -> None:
    listener = hostile_server.serve(st.garbage_answer, host="::1")
    target = f"[::1]:{listener.port}"
    page = tmp_path / "clients.html"
    out = run_tlsprobe("clients", target, *ARGS, "--profiles", "curl,openssl", "--html",
                       str(page), hard_timeout=120.0)
    context = f"\n$ {out.command}\nexit {out.returncode}\nstderr: {out.stderr}\n{out.stdout}"
    assert out.returncode == 4, context
    assert out.stderr_lines and all(line.startswith(f"tlsprobe: {target}: ")
                                    for line in out.stderr_lines), context
    assert f"<h2>{target}</h2>" in page.read_text(), context


def test_scan_names_an_ipv6_target_in_brackets(hostile_server: HostileServer,
                                               tmp_path: Path) -> None:
    target, other = (f"[::1]:{hostile_server.serve(s13.control_tls13, host='::1').port}"
                     for _ in range(2))
    base = tmp_path / "base.json"
    first = run_tlsprobe("scan", target, *ARGS, "--checks", "versions,suites,cert",
                         "--no-progress", "--json-out", str(base), hard_timeout=120.0)
    assert first.returncode in (0, 1), first.stderr
    out = run_tlsprobe("scan", target, other, *ARGS, "--checks", "versions,suites,cert",
                       "--no-progress", "--baseline", str(base), "--fail-under", "A+",
                       hard_timeout=120.0)
    context = f"\n$ {out.command}\nexit {out.returncode}\nstderr: {out.stderr}\n{out.stdout}"
    assert out.returncode == 1, context
    assert f"for {target}" in out.stdout and "for ::1:" not in out.stdout, context
    assert f"({target} " in out.stdout and "(::1:" not in out.stdout, context
