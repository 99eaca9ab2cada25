"""`tlsprobe scan` (the audit) against the hostile server.

The audit reports what each connection found as data (a protocol violation becomes a note
or an inconclusive result, not necessarily an error exit), so here the checks are the
robustness ones: it ends in bounded time even though it opens many connections, with an
exit code from tlsprobe/errors.py, at most one stderr line, no traceback, a peak memory
that does not follow what the server sends, and never more connections open at once than
the per-host limit. A representative subset runs by default (one
or two scenarios per kind of misbehaviour); TLSPROBE_HOSTILE_SCAN_ALL=1 runs every scenario.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from .catalog import Scenario, all_scenarios
from .runner import ProbeOutcome, run_tlsprobe
from .server import Listener

TIMEOUT = 2.0
SCAN_LIMIT = 25.0        # seconds for a whole audit of one hostile server at --timeout 2
SCAN_CPU_LIMIT = 8.0     # seconds of the audit's own CPU time
HARD_TIMEOUT = 90.0
RSS_MARGIN_KIB = 16 * 1024
DOCUMENTED_EXITS = {0, 1, 3, 4, 5, 6, 8}
DEFAULT_PER_HOST = 3
SUBSET = (
    "control_tls12", "control_tls13", "close_after_client_hello", "truncated_record",
    "handshake_length_16mb", "record_length_over_limit", "certificate_first",
    "malformed_key_share", "suite_not_offered_13", "hrr_twice", "share_not_on_curve",
    "tls13_bad_finished", "tls13_bad_record_tag", "bad_ske_signature",
    "fatal_alert_after_clienthello", "http_answer", "smtp_banner", "no_answer",
    "rst_after_client_hello", "rst_mid_flight", "endless_handshake_messages",
    "endless_warning_alerts", "certificate_unknown_curve", "endless_application_data",
    "endless_change_cipher_spec", "trickle", "tls13_endless_padding", "endless_hello_requests",
)
#: a test waits for at most its own child and the control's (each killed past HARD_TIMEOUT),
#: so its pytest timeout is the sum of those, not the 120 s default sized for one step
pytestmark = pytest.mark.timeout(2 * HARD_TIMEOUT + 60)
KNOWN_BUGS_ALL: dict[str, str] = {}
#: TLSPROBE_HOSTILE_RUN_KNOWN=1 runs the known-bug scenarios too (to check a fix)
KNOWN_BUGS = {} if os.environ.get("TLSPROBE_HOSTILE_RUN_KNOWN") == "1" else KNOWN_BUGS_ALL
RUN_ALL = os.environ.get("TLSPROBE_HOSTILE_SCAN_ALL") == "1"
SCENARIOS = [sc for sc in all_scenarios() if RUN_ALL or sc.name in SUBSET]


def _scan(listener: Listener) -> ProbeOutcome:
    return run_tlsprobe("scan", f"127.0.0.1:{listener.port}", "--timeout", str(TIMEOUT),
                        "--no-progress", "--retries", "0", hard_timeout=HARD_TIMEOUT)


def hostile_plan(tmp_dir: Path) -> list[tuple]:
    """The audits this module needs (see conftest `hostile_jobs`)."""
    return [(f"scan:{sc.name}", sc, _scan, sc.slow) for sc in SCENARIOS
            if sc.name not in KNOWN_BUGS]


def scan_of(hostile_jobs, name: str) -> tuple[ProbeOutcome, Listener]:  # type: ignore[no-untyped-def]
    """This scenario's audit (each test waits for its own child only)."""
    return hostile_jobs.result(f"scan:{name}")


def test_subset_names_exist() -> None:
    names = {sc.name for sc in all_scenarios()}
    assert set(SUBSET) <= names and set(KNOWN_BUGS_ALL) <= set(SUBSET)


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.name for sc in SCENARIOS])
def test_scan_survives(sc: Scenario, hostile_jobs) -> None:  # type: ignore[no-untyped-def]
    if sc.name in KNOWN_BUGS:
        pytest.skip(f"known bug, fix pending: {KNOWN_BUGS[sc.name]}")
    out, listener = scan_of(hostile_jobs, sc.name)
    control, _ = scan_of(hostile_jobs, "control_tls12")
    first = listener.first_accept()
    context = (f"\n$ {out.command}\nexit {out.returncode} after {out.elapsed:.1f}s "
               f"({out.after(first or out.started):.1f}s from the first accept), "
               f"CPU {out.cpu_seconds:.1f}s, "
               f"max RSS {out.max_rss_kib} KiB, {listener.connections} connections\n"
               f"stderr: {out.stderr[-1500:]}\nstdout: {out.stdout[-1200:]}")
    assert out.returncode is not None, f"the audit hung{context}"
    assert "Traceback" not in out.stderr + out.stdout, context
    assert out.returncode in DOCUMENTED_EXITS, context
    assert len(out.stderr_lines) <= 1, context
    # bounded work (CPU) and bounded waiting (from the first accept, start-up left out)
    assert out.cpu_seconds < SCAN_CPU_LIMIT, context
    assert first is not None and (not sc.slow or min(
        out.after(first), listener.last_end() - first) < SCAN_LIMIT), context
    assert out.max_rss_kib < control.max_rss_kib + RSS_MARGIN_KIB, context
    assert listener.connections >= 1, context
    if sc.exit_codes == (0,):
        assert out.returncode in (0, 1) and out.stdout.strip(), context
    if out.returncode in (3, 4, 5, 6, 8):  # an error exit names the target
        assert out.stderr_lines and out.stderr_lines[0].startswith(
            f"tlsprobe: 127.0.0.1:{listener.port}"), context


@pytest.mark.parametrize("name", ["control_tls12", "control_tls13", "no_answer",
                                  "tls13_bad_finished"])
def test_scan_keeps_to_the_per_host_limit(name: str, hostile_jobs  # type: ignore[no-untyped-def]
                                          ) -> None:
    """Never more connections open at once than --per-host (default 3). Measured on
    scenarios whose server watches for the client's close after misbehaving, so the server
    side knows when each connection really ended."""
    out, listener = scan_of(hostile_jobs, name)
    assert listener.connections > DEFAULT_PER_HOST, listener.spans
    assert listener.max_concurrent() <= DEFAULT_PER_HOST, (out.command, listener.spans)
