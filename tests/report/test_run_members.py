"""Every JSON document tlsprobe writes says which tlsprobe wrote it and when its work started
and how long it took (issue 33 section 3): `tlsprobe_version`, `started_at` (ISO 8601 UTC,
"...Z") and `duration_s`, in probe, scan, clients and timing JSON and in the run records of
pcap --json / --jsonl, against a real lab server and the repository's captures."""
from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.clients.conftest import DATA
from tlsprobe import __version__

REPO = Path(__file__).resolve().parents[2]


def _when(stamp: object) -> datetime:
    """`started_at` read back: the exact shape "YYYY-MM-DDTHH:MM:SSZ" in UTC."""
    assert isinstance(stamp, str) and stamp.endswith("Z"), stamp
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _check(doc: dict, before: datetime, after: datetime) -> None:
    """The three members, `started_at` within the run (to the second) and the duration a
    non-negative number no longer than the run."""
    assert doc["tlsprobe_version"] == __version__
    start = _when(doc["started_at"])
    assert before - timedelta(seconds=1) <= start <= after, (before, start, after)
    assert isinstance(doc["duration_s"], float) and doc["duration_s"] >= 0
    assert doc["duration_s"] <= (after - before).total_seconds() + 1


def _timed(run_cli, *args):
    before = datetime.now(UTC)
    result = run_cli(*args)
    return result, before, datetime.now(UTC)


def test_probe_scan_clients_timing_json_carry_the_run_members(server_cache, run_cli) -> None:
    server = server_cache("openssl")
    target = f"127.0.0.1:{server.port}"
    (code, out, err), before, after = _timed(run_cli, target, "--json")
    assert code == 0, err
    _check(json.loads(out), before, after)
    (code, out, err), before, after = _timed(run_cli, "scan", target, "--checks", "versions",
                                             "--json", "--no-progress")
    assert code == 0, err
    _check(json.loads(out), before, after)
    (code, out, err), before, after = _timed(run_cli, "clients", target, "--profiles-dir",
                                             str(DATA), "--profiles", "curl", "--json")
    assert code == 0, err
    _check(json.loads(out), before, after)
    (code, out, err), before, after = _timed(run_cli, "timing", target, "--timing-groups", "x25519",
                                             "--timing-runs", "2", "--timing-warmup", "0",
                                             "--timing-versions", "1.3", "--json")
    assert code == 0, err
    _check(json.loads(out), before, after)


def test_a_bad_target_line_has_its_start_too(run_cli, tmp_path: Path) -> None:
    """The error report of a line of -f FILE that is no target is a document too."""
    path = tmp_path / "targets.txt"
    path.write_text("a..b\n", encoding="utf-8")
    (code, out, _), before, after = _timed(run_cli, "scan", "-f", path, "--json",
                                           "--no-progress")
    assert code == 2
    doc = json.loads(out)
    assert doc["error_kind"] == "usage"
    _check(doc, before, after)


def test_pcap_json_and_jsonl_carry_the_run_members(run_cli, tmp_path: Path) -> None:
    """--json: the document's head and tail; --jsonl: each capture record and the stats
    record (a connection's own times are the capture's, it has no run members)."""
    shutil.copy(REPO / "captures" / "tls12_alert.pcap", tmp_path / "a.pcap")
    (code, out, err), before, after = _timed(run_cli, "pcap", "a.pcap", "--json")
    assert code == 0, err
    _check(json.loads(out), before, after)
    (code, out, err), before, after = _timed(run_cli, "pcap", "a.pcap", "--jsonl", "--stats")
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    kinds = [r["kind"] for r in records]
    assert "capture" in kinds and kinds[-1] == "stats", kinds
    for record in records:
        if record["kind"] == "connection":
            assert "started_at" not in record
        else:
            _check(record, before, after)


def test_speed_json_carries_the_run_members(run_cli) -> None:
    """`speed --json` (its older `tlsprobe` member stays beside the new ones)."""
    (code, out, err), before, after = _timed(run_cli, "speed", "--seconds", "0.01", "--json",
                                             "x25519")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["tlsprobe"] == __version__
    _check(doc, before, after)
