"""`tlsprobe survey diff OLD NEW` on two small real surveys of loopback servers (the survey
lab of tests/survey/conftest.py, in-process without Dask; the old one with a versions phase,
the new one with the default checks): one server reconfigured on its port between them, one target added (post-quantum), one removed, one unreachable in both;
text, --jsonl and --parquet (read back with pandas and DuckDB); damaged inputs as one-line
usage errors."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.diff.conftest import cli, start_on
from tests.diff.test_scan_baseline import BOTH, TLS12_P256
from tests.helpers.run_members import without_run_members
from tests.helpers.servers import _free_port
from tests.survey.conftest import lab  # noqa: F401  (the survey lab, a session fixture)

pytestmark = pytest.mark.timeout(300)


def survey(targets: list[str], out: Path, stub: Path, *checks: str) -> None:
    listing = out.parent / f"{out.name}.txt"
    listing.write_text("\n".join(targets) + "\n")
    proc = cli("survey", listing, "--out", out, *checks,
               "--shard-size", "2", "--no-progress", path=(str(stub),), timeout=240)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def surveys(lab: Any, certs: Any, tmp_path_factory: pytest.TempPathFactory  # noqa: F811
            ) -> tuple[Path, Path, dict[str, str]]:
    """(OLD, NEW, names): two surveys of the lab around a reconfiguration."""
    servers, refused = lab
    base = tmp_path_factory.mktemp("survey-diff")
    stub = base / "no-dask"
    stub.mkdir()
    (stub / "distributed.py").write_text("raise ImportError('no dask here (test stub)')\n")
    port = _free_port("127.0.0.1")
    changing = start_on(BOTH, port, certs, base)
    try:
        names = {"pq": servers[0].target, "stable": servers[1].target,
                 "removed": servers[3].target, "changing": f"127.0.0.1:{port}",
                 "refused": refused}
        survey([names["stable"], names["removed"], names["changing"], refused],
               base / "old", stub, "--checks", "versions,groups,pq")
        changing.stop()
        changing = start_on(TLS12_P256, port, certs, base)
        # the new survey with the default checks (groups,pq): no versions phase, whether a
        # version is spoken comes from the group audit, and a version lost is still seen
        survey([names["stable"], names["changing"], refused, names["pq"]], base / "new", stub)
    finally:
        changing.stop()
    return base / "old", base / "new", names


def test_the_changes_per_target_and_the_summary(surveys: tuple[Path, Path, dict[str, str]],
                                                tmp_path: Path) -> None:
    old, new, names = surveys
    proc = cli("survey", "diff", old, new, "--jsonl", tmp_path / "d.jsonl",
               "--parquet", tmp_path / "d.parquet")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    block = out[out.index(f"{names['changing']}:"):]
    assert "[regression] TLS 1.3: version lost (TLS 1.3): supported -> not supported" in block
    assert f"{names['pq']}: new target (only in the new survey)" in out
    assert f"{names['removed']}: gone (only in the old survey)" in out
    assert f"{names['stable']}:" not in out and f"{names['refused']}:" not in out
    assert "Targets: 4 -> 4 (1 added, 1 removed, 3 compared); unreachable 1 -> 1" in out
    assert "Targets with changes: 1 (1 with regressions)" in out
    # of 3 audited targets each: the PQ server added, x25519 gone from the reconfigured one
    assert "X25519MLKEM768 now on 33.3 % of targets (1), +33.3 points (was 0.0 %)" in out
    assert "TLS 1.3 on 66.7 % of targets (2), unchanged" in out

    records = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert records[-1]["kind"] == "survey_diff_summary"
    assert records[-1]["regressed"] == 1 and records[-1]["added"] == 1
    changed = [r for r in records if r.get("status") == "compared"]
    assert [f"{r['host']}:{r['port']}" for r in changed] == [names["changing"]]

    as_json = cli("survey", "diff", old, new, "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert (without_run_members(as_json.stdout)
            == without_run_members((tmp_path / "d.jsonl").read_text()))

    import duckdb
    import pandas as pd
    frame = pd.read_parquet(tmp_path / "d.parquet")
    lost = frame[(frame.kind == "version_lost") & (frame.what == "TLS 1.3")]
    assert len(lost) == 1 and lost.iloc[0].direction == "regression"
    assert int(lost.iloc[0].port) == int(names["changing"].rsplit(":", 1)[1])
    statuses = duckdb.sql(f"select status, count(*) from read_parquet('{tmp_path}/d.parquet') "
                          "group by status order by status").fetchall()
    assert dict(statuses)["added"] == 1 and dict(statuses)["removed"] == 1


def _usage_error(proc: Any) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return str(lines[0])


def test_damaged_or_foreign_inputs_are_one_line_errors(
        surveys: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    old, new, _ = surveys
    assert "no survey JSON lines" in _usage_error(cli("survey", "diff", old, tmp_path))
    assert "two survey directories" in _usage_error(cli("survey", "diff", old))
    damaged = tmp_path / "damaged"
    shutil.copytree(new, damaged)
    shard = min(damaged.glob("_jsonl/*.jsonl"))
    shard.write_bytes(shard.read_bytes()[:300])      # cut inside the first document
    assert f"{shard}:1: not JSON" in _usage_error(cli("survey", "diff", old, damaged,
                                                        "--jsonl", tmp_path / "x.jsonl"))
    assert not list(tmp_path.glob("*x.jsonl*")), "no partial --jsonl file is left"
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "shard-00000.jsonl").write_text(json.dumps({"tool": "zgrab2"}) + "\n")
    assert "not a tlsprobe scan document" in _usage_error(cli("survey", "diff", foreign, new))


def test_jsonl_to_a_fifo_writes_into_it_and_leaves_it_a_fifo(
        surveys: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    """--jsonl onto what is not a regular file (a FIFO here; /dev/null alike) is written in
    place: the temporary file and rename that keep a regular file whole would replace the
    FIFO (or the device) with a file."""
    import os
    import stat
    import threading
    old, new, _names = surveys
    fifo = tmp_path / "lines"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = cli("survey", "diff", old, new, "--jsonl", fifo)
    reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    kinds = [json.loads(line)["kind"] for line in got[0].decode().splitlines()]
    assert kinds[-1] == "survey_diff_summary" and len(kinds) > 1


@pytest.mark.parametrize("where", ["opening", "diffing"])
def test_an_interrupted_diff_leaves_no_temporary_file(
        surveys: tuple[Path, Path, dict[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Ctrl-C (KeyboardInterrupt, wherever the main thread is) while the --jsonl file is
    being opened or written: no partial file and no temporary file is left. The temporary
    file came from tempfile.mkstemp before the cleanup's `try`: an interruption as it
    returned left `.d.jsonl.XXXX.tmp` beside the output (as it did in a stopped survey's
    folder, CI run 68)."""
    import argparse

    from tlsprobe.commands import survey_diff
    from tlsprobe.survey import diff
    old, new, _ = surveys
    if where == "opening":
        real = survey_diff._open

        def opened_then_stopped(*args: Any) -> Any:
            real(*args)                 # the file is made, then the interruption comes
            raise KeyboardInterrupt
        monkeypatch.setattr(survey_diff, "_open", opened_then_stopped)
    else:
        def stopped(*args: Any) -> Any:
            raise KeyboardInterrupt
        monkeypatch.setattr(diff, "diff_surveys", stopped)
    args = argparse.Namespace(directory=str(old), new=str(new),
                              jsonl=str(tmp_path / "d.jsonl"), json=False, parquet=None)
    with open(tmp_path / "text", "w") as text, pytest.raises(KeyboardInterrupt):
        survey_diff.run(args, out=text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text"]
