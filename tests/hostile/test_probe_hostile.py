"""`tlsprobe HOST:PORT` against the hostile server: every misbehaviour ends in time, with the
documented exit code, one stderr line naming what the server did wrong, no traceback, and a
peak memory bounded by the probe's own limits rather than by lengths the server declares.

All probes run as real child processes, concurrently (a module fixture starts them all at
once, so the slow timeout scenarios overlap); each test then checks one outcome.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tlsprobe.cli import build_parser

from .catalog import Scenario, all_scenarios
from .offline import analyse
from .runner import ProbeOutcome, run_tlsprobe
from .server import Listener

TIMEOUT = 2.0                      # --timeout given to every probe
TOTAL_LIMIT = 3 * TIMEOUT          # the probe's documented whole-probe limit
STARTUP_SLACK = 4.0                # interpreter start and imports, on a busy 2-core machine
CPU_LIMIT = 4.0                    # seconds of the child's own CPU time
HARD_TIMEOUT = TOTAL_LIMIT + 14.0  # past this the child is killed and the test fails as a hang
#: peak RSS allowed above the well-behaved control probe: far below the 16 MiB a hostile
#: server declares, far above the per-connection limits (record 18 KiB, message 256 KiB)
RSS_MARGIN_KIB = 12 * 1024

SCENARIOS = all_scenarios()
#: Scenarios whose current outcome is a bug in code this suite does not own: kept here, with
#: the failing command and the fix location, until the fix lands; then delete the entry.
KNOWN_BUGS_ALL: dict[str, str] = {
}
#: TLSPROBE_HOSTILE_RUN_KNOWN=1 runs the known-bug scenarios too (to check a fix)
KNOWN_BUGS = {} if os.environ.get("TLSPROBE_HOSTILE_RUN_KNOWN") == "1" else KNOWN_BUGS_ALL


PROBE_OPTIONS = {o for a in build_parser("probe")._actions for o in a.option_strings}
#: first-flight mode when the probe has the flag (full handshakes are the default then)
FLAGS = ("--first-flight-only",) if "--first-flight-only" in PROBE_OPTIONS else ()
#: the probe also writes the traffic as a pcap, read back offline by test_probe_pcap_hostile
PCAP_OUT = "--pcap-out" in PROBE_OPTIONS


def pcap_path(tmp_dir: Path, sc: Scenario) -> Path:
    return tmp_dir / f"{sc.name}.pcap"


def _pcap_command_usable() -> bool:
    try:
        build_parser("pcap")
    except Exception:  # noqa: BLE001 -- absent or half-written: the offline check still runs
        return False
    return True


#: scenarios whose --pcap-out also goes through `tlsprobe pcap` (one per kind of break)
PCAP_CLI_SAMPLE = ("control_tls12", "control_tls13", "handshake_length_16mb",
                   "unknown_content_type", "tls13_bad_finished", "fatal_alert_after_certificate",
                   "http_answer", "tls12_bad_finished")
PCAP_CLI: dict[str, ProbeOutcome] = {}  # scenario -> `tlsprobe pcap` run on its capture


def _run(listener: Listener, sc: Scenario, tmp_dir: Path) -> ProbeOutcome:
    pcap = ("--pcap-out", str(pcap_path(tmp_dir, sc))) if PCAP_OUT else ()
    flags = () if sc.full else FLAGS
    out = run_tlsprobe(f"127.0.0.1:{listener.port}", "--timeout", str(TIMEOUT), *flags,
                       *pcap, *sc.args, hard_timeout=HARD_TIMEOUT, cwd=str(tmp_dir))
    path = pcap_path(tmp_dir, sc)
    if sc.name in PCAP_CLI_SAMPLE and path.exists() and _pcap_command_usable():
        PCAP_CLI[sc.name] = run_tlsprobe("pcap", "--no-progress", str(path),
                                         hard_timeout=HARD_TIMEOUT, cwd=str(tmp_dir))
    return out


def hostile_plan(tmp_dir: Path) -> list[tuple]:
    """The probe runs this module needs (see conftest `hostile_jobs`)."""
    return [(f"probe:{sc.name}", sc, lambda listener, sc=sc: _run(listener, sc, tmp_dir),
             sc.slow) for sc in SCENARIOS if sc.name not in KNOWN_BUGS and (FLAGS or not sc.full)]


@pytest.fixture(scope="module")
def outcomes(hostile_jobs) -> dict[str, tuple[ProbeOutcome, Listener]]:  # type: ignore[no-untyped-def]
    return {sc.name: hostile_jobs.result(f"probe:{sc.name}") for sc in SCENARIOS
            if sc.name not in KNOWN_BUGS and (FLAGS or not sc.full)}


def test_no_python_warnings_on_stderr(outcomes: dict[str, tuple[ProbeOutcome, Listener]]
                                      ) -> None:
    noisy = {name: out.python_warnings for name, (out, _) in outcomes.items()
             if out.python_warnings}
    assert not noisy


def test_at_least_30_misbehaviours() -> None:
    broken = [sc for sc in SCENARIOS if not sc.name.startswith("control")]
    assert len(broken) >= 30
    assert len({sc.what for sc in broken}) == len(broken)


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_hostile_server(sc: Scenario, outcomes: dict[str, tuple[ProbeOutcome, Listener]]
                        ) -> None:
    if sc.name in KNOWN_BUGS:
        pytest.skip(f"known bug, fix pending: {KNOWN_BUGS[sc.name]}")
    if sc.name not in outcomes:
        pytest.skip("needs the full handshake; this probe has no --first-flight-only")
    out, listener = outcomes[sc.name]
    control, _ = outcomes["control_tls13"]
    context = (f"\n$ {out.command}\nexit {out.returncode} after {out.elapsed:.1f}s, "
               f"CPU {out.cpu_seconds:.1f}s, max RSS {out.max_rss_kib} KiB\n"
               f"stderr: {out.stderr[-1500:]}\n"
               f"stdout: {out.stdout[-800:]}\nserver log: {listener.log[-8:]}")
    assert not any("SCRIPT ERROR" in entry for entry in listener.log), context
    assert listener.connections >= 1, context
    assert out.returncode is not None, f"the probe hung (killed after {HARD_TIMEOUT}s){context}"
    assert "Traceback" not in out.stderr + out.stdout, context
    # Within the probe's deadline. A scenario that ends on the server's bytes may be slowed
    # by a busy machine rather than by waiting: then its own CPU time must be small.
    assert out.elapsed < TOTAL_LIMIT + STARTUP_SLACK or (
        not sc.slow and out.cpu_seconds < CPU_LIMIT), context
    assert out.returncode in sc.exit_codes, context
    if sc.verdict:
        assert len(out.stderr_lines) == 1, context
        assert re.search(sc.verdict, out.stderr_lines[0]), context
        assert out.stderr_lines[0].startswith("tlsprobe: 127.0.0.1:"), context
    else:
        assert out.stderr_lines == [], context
    if sc.stdout:
        assert re.search(sc.stdout, out.stdout), context
    if not sc.slow:  # the verdict came from the server's bytes, not from a timeout
        assert "timed out" not in out.stderr, context
    assert out.max_rss_kib < control.max_rss_kib + RSS_MARGIN_KIB, context


@pytest.mark.skipif(not PCAP_OUT, reason="the probe has no --pcap-out yet")
@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_pcap_of_the_same_traffic(sc: Scenario, outcomes, hostile_jobs  # type: ignore[no-untyped-def]
                                  ) -> None:
    """The probe's --pcap-out of each hostile exchange reads back offline (capture layer +
    Flow) without an exception or a hang, and a decode error the probe named live is found
    again in the file."""
    if sc.name in KNOWN_BUGS or sc.name not in outcomes:
        pytest.skip(f"not run: {KNOWN_BUGS.get(sc.name, 'needs the full handshake')}")
    out, _ = outcomes[sc.name]
    path = pcap_path(hostile_jobs.dirs["test_probe_hostile"], sc)
    if not path.exists():
        assert out.returncode == 3, f"no pcap written{out.command}: {out.stderr}"
        return
    report = analyse(path)
    context = f"{out.command}\nlive: {out.stderr_lines}\noffline: {report}"
    assert report.error is None and report.connections == 1, context
    live = re.search(r"malformed data \((record layer|handshake framing)\): (.+?) in ",
                     out.stderr)
    if live:
        assert any(live.group(2) in reason for reason in report.tls_errors), context


@pytest.mark.parametrize("name", PCAP_CLI_SAMPLE)
def test_pcap_command_on_the_same_traffic(name: str, outcomes  # type: ignore[no-untyped-def]
                                          ) -> None:
    """`tlsprobe pcap` on the probe's capture of a hostile exchange: a report (exit 0), no
    traceback, and the connection found."""
    if name not in outcomes or name in KNOWN_BUGS:
        pytest.skip("scenario not run")
    if name not in PCAP_CLI:
        pytest.skip("no capture written, or `tlsprobe pcap` not usable yet")
    res = PCAP_CLI[name]
    context = f"{res.command}\nexit {res.returncode}\n{res.stderr[-1000:]}\n{res.stdout[-1000:]}"
    assert res.returncode == 0, context
    assert "Traceback" not in res.stderr + res.stdout, context
    assert "127.0.0.1" in res.stdout, context
