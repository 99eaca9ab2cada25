"""`tlsprobe survey` against real loopback servers: on a Dask LocalCluster (two worker
processes, shared by the module, through --scheduler) and locally without Dask (in-process
and in forked workers, Dask made unimportable) with the same Parquet rows; the summary against the lab's known configurations; stop and resume; and,
last (it kills one of the cluster's workers), 500 targets of the farm of servers across
127.0.0.0/8 (farm.py) against `scan` target by target."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.run_members import without_run_members
from tests.survey.farm import EXPECTED, Farm, FarmTarget

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow not installed "
                         "(pip install '.[cluster]')")

#: a LocalCluster start and rate-limited runs on a busy 2-core machine: more than the default
pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
VOLATILE = ("duration_s", "connections", "started_at")   # timing, retries on a busy machine


def rows(directory: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(directory.glob("shard-*.parquet")):
        for row in pq.read_table(path).to_pylist():
            out.append({k: v for k, v in row.items() if k not in VOLATILE})
    return sorted(out, key=lambda r: r["index"])


def shards_done(directory: Path) -> set[str]:
    """The shards done in a survey folder: a Parquet file, or, while the survey runs, its
    rows waiting in `_rows/` (the Parquet files are written once the audits are over)."""
    return {p.stem for p in [*directory.glob("shard-*.parquet"),
                             *directory.glob("_rows/shard-*.jsonl")]}


def version_row(row: dict[str, Any], version: str) -> dict[str, Any] | None:
    """A target row's group results for one version (None: that version was not tried)."""
    return next((g for g in row["group_results"] if g["version"] == version), None)


def json_lines(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((directory / "_jsonl").glob("shard-*.jsonl"))
            for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def targets_file(lab, tmp_path_factory) -> tuple[Path, list[str]]:
    servers, refused = lab
    targets = [s.target for s in servers] + [refused]
    path = tmp_path_factory.mktemp("survey-targets") / "targets.txt"
    path.write_text("# the lab\n" + "\n".join(targets) + "\n")
    return path, targets


@pytest.fixture(scope="module")
def cluster_run(targets_file, dask_cluster, tmp_path_factory) -> tuple[Path, str]:
    """One survey of the lab on the module's LocalCluster (one shard per address)."""
    out = tmp_path_factory.mktemp("survey-dask") / "out"
    proc = cli("survey", targets_file[0], "--out", out, "--scheduler", dask_cluster,
               "--shard-size", "1")
    assert proc.returncode == 0, proc.stderr
    return out, proc.stderr


def cli(*args: Any, env: dict[str, str] | None = None, timeout: float = 180,
        input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    child = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    child.update(env or {})
    stdin: dict[str, Any] = {"input": input_text} if input_text is not None else {
        "stdin": subprocess.DEVNULL}
    return subprocess.run([sys.executable, "-m", "tlsprobe", *map(str, args)], env=child,
                          capture_output=True, text=True, timeout=timeout, **stdin)


def no_dask_env(tmp_path: Path) -> dict[str, str]:
    """An environment where `import distributed` fails, as without the cluster extra."""
    stub = tmp_path / "no-dask"
    stub.mkdir()
    (stub / "distributed.py").write_text("raise ImportError('no dask here (test stub)')\n")
    return {"PYTHONPATH": os.pathsep.join([str(stub), str(REPO)])}


def test_cluster_run_writes_every_target_once_with_its_groups(cluster_run, targets_file, lab):
    out, stderr = cluster_run
    servers, refused = lab
    got = rows(out)
    assert sorted({r["index"] for r in got}) == list(range(1, len(targets_file[1]) + 1))
    assert len(got) == len(targets_file[1])         # one row per target
    by_target = {f"{r['host']}:{r['port']}": r for r in got}
    for server in servers:
        r13 = version_row(by_target[server.target], "TLS 1.3")
        assert r13 is not None and r13["spoken"] is server.tls13
        assert r13["groups"] == server.supported.get("TLS 1.3", [])
        assert by_target[server.target]["pq_verdict"] == server.pq
    assert by_target[refused]["error_kind"] == "network"
    assert by_target[refused]["pq_verdict"] is None
    # all ports of one address in one shard
    shard_of: dict[str, set[int]] = {}
    for r in got:
        shard_of.setdefault(r["host"], set()).add(r["shard"])
    assert all(len(s) == 1 for s in shard_of.values()), shard_of
    # JSON lines: the scan's object per target, once each
    lines = json_lines(out)
    assert sorted(d["index"] for d in lines) == list(range(1, len(targets_file[1]) + 1))
    assert all(d["kind"] == "audit" and d["checks"] == ["groups", "pq"] for d in lines)
    manifest = json.loads((out / "_manifest.json").read_text())
    assert sorted(manifest["done"]) == [s["name"] for s in manifest["shards"]]
    assert manifest["identity"]["targets"] == len(targets_file[1])
    assert "targets/s" in stderr and f"{len(targets_file[1])}/{len(targets_file[1])} " \
        "targets" in stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_local_run_without_dask_gives_the_same_rows(workers, cluster_run, targets_file,
                                                    tmp_path):
    """Without --scheduler the survey runs on this machine without Dask (in this process,
    or in worker processes forked from it), quietly, with the rows of the Dask run."""
    out = tmp_path / "out"
    proc = cli("survey", targets_file[0], "--out", out, "--shard-size", "1",
               "--workers", workers, "--no-progress", env=no_dask_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert rows(out) == rows(cluster_run[0])


#: what a local survey's process must not import: Dask (its scheduler, nannies and workers
#: cost 1.4 s and 200 MB over `scan -f`), pandas (pyarrow's Table.from_pylist and
#: pyarrow.dataset import it: 0.2 s, 50 MB) and numpy (pyarrow's import of it: 23 MB)
NOT_IMPORTED = ("dask", "distributed", "pandas", "numpy")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_local_run_imports_neither_dask_pandas_nor_numpy(workers, lab, tmp_path):
    servers, refused = lab
    seen = tmp_path / "modules.json"
    code = ("import atexit, json, runpy, sys\n"
            f"atexit.register(lambda: open({str(seen)!r}, 'w').write("
            "json.dumps(sorted(m for m in sys.modules if '.' not in m))))\n"
            "sys.argv = ['tlsprobe'] + sys.argv[1:]\n"
            "runpy.run_module('tlsprobe', run_name='__main__')\n")
    proc = subprocess.run(
        [sys.executable, "-c", code, "survey", "-", "--out", str(tmp_path / "out"),
         "--workers", workers, "--shard-size", "1", "--no-progress"],
        input=f"{servers[3].target}\n{refused}\n", capture_output=True, text=True,
        timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(seen.read_text())
    assert "pyarrow" in modules and "tlsprobe" in modules
    assert [m for m in NOT_IMPORTED if m in modules] == []
    assert [(r["index"], r["groups"], r["error_kind"]) for r in rows(tmp_path / "out")] == [
        (1, ["secp256r1"], None), (2, [], "network")]


def test_summary_counts_match_the_lab(cluster_run, lab):
    servers, _ = lab
    proc = cli("survey", "summary", cluster_run[0], "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    total = reached = len(servers)         # the shares are of the targets reached
    assert (summary["targets"], summary["reached"], summary["unreachable"]) == (
        total + 1, reached, 1)

    def count(section: dict[str, Any]) -> dict[str, int]:
        return {k: v["targets"] for k, v in section.items()}

    assert count(summary["versions"]) == {"TLS 1.3": sum(s.tls13 for s in servers),
                                          "TLS 1.2": sum(s.tls12 for s in servers)}
    assert summary["versions"]["TLS 1.3"]["share"] == pytest.approx(
        sum(s.tls13 for s in servers) / reached, abs=1e-6)
    for version in ("TLS 1.3", "TLS 1.2"):
        expected: dict[str, int] = {}
        for s in servers:
            if version not in s.preferred:
                continue
            # a server that follows the client's order is named as such
            group = s.preferred[version] or "(follows the client's order)"
            expected[group] = expected.get(group, 0) + 1
        assert count(summary["preferred_group"].get(version, {})) == expected, version
    assert "(follows the client's order)" in summary["preferred_group"]["TLS 1.2"]
    verdicts: dict[str, int] = {}         # the refused target has none
    for s in servers:
        verdicts[s.pq] = verdicts.get(s.pq, 0) + 1
    assert count(summary["pq_verdict"]) == verdicts
    supported: dict[str, int] = {}
    for s in servers:
        for name in {g for groups in s.supported.values() for g in groups}:
            supported[name] = supported.get(name, 0) + 1
    assert count(summary["supported_groups"]) == supported
    # server order: TLS 1.3 on all three TLS 1.3 servers (OpenSSL 3.0 picks its own), TLS
    # 1.2 only with -serverpref (a single group is no order)
    assert count(summary["server_order"]) == {"TLS 1.3": 3, "TLS 1.2": 1}
    assert count(summary["failures"]) == {"network": 1}
    assert summary["failures"]["network"]["share"] == pytest.approx(1 / (total + 1))
    text = cli("survey", "summary", cluster_run[0])
    assert text.returncode == 0 and "X25519MLKEM768" in text.stdout
    assert f"survey: {total + 1} targets" in text.stdout
    assert f"reached: {reached} targets" in text.stdout
    assert "unreachable: 1 targets" in text.stdout
    assert "(follows the client's order)" in text.stdout


def test_stopped_survey_resumes_with_every_target_once(targets_file, dask_cluster, tmp_path):
    out = tmp_path / "out"
    args = ["survey", targets_file[0], "--out", out, "--scheduler", dask_cluster,
            "--shard-size", "1", "--rate", "4", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # SIGINT at its default, as in a terminal: a shell's background job (a CI runner's)
    # starts with it ignored, children inherit that, and the stop would never arrive
    proc = subprocess.Popen([sys.executable, "-m", "tlsprobe", *map(str, args)], env=env,
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not shards_done(out):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no shard written in 120 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "tlsprobe: interrupted" in stderr
    first = {p.name: p.stat().st_ino for p in out.glob("shard-*.parquet")}
    manifest = json.loads((out / "_manifest.json").read_text())
    assert 1 <= len(first) < len(manifest["shards"])
    # the Parquet files are the truth; the manifest's list may lag by the shard whose files
    # were renamed into place just as the stop came
    assert set(manifest["done"]) <= {n.removesuffix(".parquet") for n in first}
    assert not list(out.glob(".*.tmp"))
    assert list((out / "_rows").iterdir()) == []    # converted on the way out

    again = cli(*args)
    assert again.returncode == 0, again.stderr
    # the shards written before the stop were not redone
    assert {p.name: p.stat().st_ino for p in out.glob("shard-*.parquet")
            if p.name in first} == first
    n = len(targets_file[1])
    assert sorted({r["index"] for r in rows(out)}) == list(range(1, n + 1))
    assert sorted(d["index"] for d in json_lines(out)) == list(range(1, n + 1))
    assert len(list(out.glob("shard-*.parquet"))) == len(manifest["shards"])
    resumed = json.loads((out / "_manifest.json").read_text())
    assert sorted(resumed["done"]) == [s["name"] for s in resumed["shards"]]

    done = cli(*args)
    assert done.returncode == 0 and "are done" in done.stderr


@pytest.mark.parametrize("where", ["dask", "local"])
def test_rate_is_split_across_the_workers(where, lab, dask_cluster, tmp_path):
    """--rate 8 on two workers (the Dask cluster's, or two local ones): 4 connection starts
    a second in the worker auditing the one target, so its audit lasts at least
    (connections - 1) / 4 seconds (a lower bound holds on a busy machine too)."""
    servers, _ = lab
    out = tmp_path / "out"
    workers = ["--scheduler", dask_cluster] if where == "dask" else ["--workers", "2"]
    proc = cli("survey", "-", "--out", out, *workers, "--rate", "8",
               "--no-progress", input_text=servers[1].target + "\n")
    assert proc.returncode == 0, proc.stderr
    (report,) = json_lines(out)
    assert report["error"] is None and report["total_connections"] >= 6
    assert report["duration_s"] >= (report["total_connections"] - 1) / 4 * 0.95, report


def test_default_local_cluster_of_two_workers(lab, tmp_path):
    """Without --scheduler the command starts (and stops) its own worker processes; a temp
    file left by a killed run is cleared."""
    servers, refused = lab
    out = tmp_path / "out"
    out.mkdir()
    (out / ".shard-00000.parquet.x1.tmp").write_bytes(b"half a file")
    proc = cli("survey", "-", "--out", out, "--workers", "2", "--shard-size", "1",
               input_text=f"{servers[3].target}\n{refused}\n")
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if "targets/s" not in line] == []
    got = rows(out)
    assert [(r["index"], r["versions"], r["groups"], r["error_kind"]) for r in got] == [
        (1, ["TLS 1.2"], ["secp256r1"], None), (2, [], [], "network")]
    assert not list(out.glob(".*.tmp"))


def test_no_pyarrow_beside_the_local_workers(targets_file, tmp_path):
    """--workers 2: while the workers audit (a shard done, others to come), neither the
    command's process nor its forked worker has pyarrow's libraries mapped (34 to 38 MB of
    a survey's memory, issue 35); at the end every shard is a Parquet file, `_rows/` empty."""
    out = tmp_path / "out"
    proc = _start("survey", targets_file[0], "--out", out, "--workers", "2", "--shard-size",
                  "1", "--rate", "4", "--no-progress")
    try:
        deadline = time.monotonic() + 120
        while not shards_done(out):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no shard done in 120 s"
            time.sleep(0.02)
        pids = [proc.pid] + [int(p.name) for p in Path("/proc").iterdir()
                             if p.name.isdigit() and _parent(p) == proc.pid]
        maps = {pid: Path(f"/proc/{pid}/maps").read_text() for pid in pids}
        assert proc.poll() is None and len(shards_done(out)) < len(targets_file[1]), \
            "the survey ended before its processes were looked at"
    finally:
        _, err = _finish(proc)
    assert proc.returncode == 0, err
    assert len(maps) == 2 and [pid for pid, text in maps.items() if "libarrow" in text] == []
    manifest = json.loads((out / "_manifest.json").read_text())
    assert sorted(p.stem for p in out.glob("shard-*.parquet")) == \
        [s["name"] for s in manifest["shards"]]
    assert list((out / "_rows").iterdir()) == []
    assert [r["index"] for r in rows(out)] == list(range(1, len(targets_file[1]) + 1))


def test_a_bad_scheduler_address_is_one_line(tmp_path):
    proc = cli("survey", "127.0.0.1/32:1", "--out", tmp_path / "o", "--scheduler", "foo")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tlsprobe: error: --scheduler foo: "
                                                   "cannot connect"), lines


def test_workers_with_a_scheduler_is_refused_not_ignored(targets_file, dask_cluster,
                                                         tmp_path):
    """--workers sets the local workers; with --scheduler the cluster's workers audit, so a
    count given beside it went unused in silence (the run went on the cluster). It is a
    usage error before any file; the default of --workers with --scheduler still runs."""
    out = tmp_path / "o"
    proc = cli("survey", targets_file[0], "--out", out, "--scheduler", dask_cluster,
               "--workers", "2", "--no-progress")
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("tlsprobe: error: --workers ") and "--scheduler" in lines[0]
    assert not out.exists()


def test_pcap_on_the_cluster_gives_the_sequential_output(dask_cluster, tmp_path):
    """`pcap --scheduler`: one task per capture on the module's cluster, merged into the
    sequential run's output (the project's captures, and a missing file among them)."""
    files = sorted(str(p) for p in (REPO / "captures").glob("*.pcap*"))[:12]
    files.insert(5, str(tmp_path / "missing.pcap"))
    sequential = cli("pcap", "--jsonl", "--stats", "--no-progress", *files)
    on_dask = cli("pcap", "--jsonl", "--stats", "--no-progress", "--scheduler", dask_cluster,
                  *files)
    assert sequential.returncode == 2, sequential.stderr
    assert (on_dask.returncode, without_run_members(on_dask.stdout), on_dask.stderr) == (
        sequential.returncode, without_run_members(sequential.stdout), sequential.stderr)
    assert on_dask.stdout.count('"kind": "capture"') == len(files)
    assert '"kind": "connection"' in on_dask.stdout


# -- at scale: the farm (last in this module: it kills one of the cluster's workers) -------
#: what differs between two audits of one server: timing, retries on a busy machine, and
#: the place in the input
UNSTABLE = ("duration_s", "started_at", "total_connections", "connections", "retries", "index")


@pytest.fixture(scope="module")
def farm(certs: Any) -> Any:
    """500 targets: 125 addresses across 127.0.0.0/8 with four ports each, three server
    configurations, nothing listening on every 25th address (in-process servers)."""
    servers = Farm(certs["ecdsa"].cert, certs["ecdsa"].key, hosts=125, ports_per_host=4,
                   refused_every=25)
    yield servers
    servers.stop()


def _start(*args: Any) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "tlsprobe", *map(str, args)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _targets_file(path: Path, targets: list[FarmTarget]) -> Path:
    path.write_text("".join(t.display + "\n" for t in targets))
    return path


def _kill_a_busy_worker(address: str, out: Path, survey: subprocess.Popen[str]) -> int:
    """SIGKILL the process of a worker that is running a shard, once a first shard is
    written; the number of shards written then."""
    distributed = pytest.importorskip("distributed")
    with distributed.Client(address, timeout="30s") as client:
        deadline = time.monotonic() + 120
        busy: list[str] = []
        while not busy or not shards_done(out):
            assert survey.poll() is None, survey.communicate()
            assert time.monotonic() < deadline, "no shard done with a worker busy in 120 s"
            time.sleep(0.05)
            busy = [w for w, keys in client.processing().items() if keys]
        pids = client.run(os.getpid, workers=busy[:1])
        written = len(shards_done(out))
        os.kill(pids[busy[0]], signal.SIGKILL)
        return written


def test_500_targets_with_a_worker_killed_once_each_as_scan_answers(farm, dask_cluster,
                                                                    tmp_path):
    """`--checks groups` on servers of one group each (5-7 connections a target) keeps 500
    targets to some CPU seconds; `scan` audits every 20th target and a refused one, each
    on its own."""
    targets = farm.targets
    assert len(targets) == 500 and len({t.host for t in targets}) == 125
    out = tmp_path / "out"
    survey = _start("survey", _targets_file(tmp_path / "targets.txt", targets), "--out", out,
                    "--scheduler", dask_cluster, "--checks", "groups", "--shard-size", "16",
                    "--no-progress")
    try:
        written_at_kill = _kill_a_busy_worker(dask_cluster, out, survey)
    finally:
        _, survey_err = _finish(survey)
    assert survey.returncode == 0, survey_err
    sample = targets[::20] + [next(t for t in targets if t.config is None)]
    scan = _start("scan", "-f", _targets_file(tmp_path / "sample.txt", sample), "--checks",
                  "groups", "--no-policy", "--json", "--no-progress", "--concurrency", "1")
    scan_out, scan_err = _finish(scan)

    n = len(targets)
    manifest = json.loads((out / "_manifest.json").read_text())
    assert written_at_kill < len(manifest["shards"]), "the survey ended before the kill"
    assert sorted(manifest["done"]) == [s["name"] for s in manifest["shards"]]
    # every target once: in the JSON lines, and in the Parquet rows (one per target)
    lines = sorted(json_lines(out), key=lambda d: d["index"])
    assert [d["index"] for d in lines] == list(range(1, n + 1))
    assert [(d["host"], d["port"]) for d in lines] == [(t.host, t.port) for t in targets]
    got = rows(out)
    assert [r["index"] for r in got] == list(range(1, n + 1))
    assert all([g["version"] for g in r["group_results"]] == ["TLS 1.3", "TLS 1.2"]
               for r in got)

    by_target = {(d["host"], d["port"]): d for d in lines}
    scanned = [json.loads(line) for line in scan_out.splitlines()]
    assert [(d["host"], d["port"]) for d in scanned] == [(t.host, t.port) for t in sample], \
        scan_err

    def stable(report: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in report.items() if k not in UNSTABLE}

    for report in scanned:
        assert stable(by_target[report["host"], report["port"]]) == stable(report)
    # the answers are the servers' (not one mistake made twice)
    for target, row in zip(targets, got):
        if target.config is None:
            assert row["error_kind"] == "network" and row["pq_verdict"] is None, row
            continue
        row13, row12 = row["group_results"]
        expected = EXPECTED[target.config]
        assert (row12["groups"], row13["groups"]) == (expected["TLS 1.2"],
                                                      expected["TLS 1.3"]), target
        assert row["error"] is None and row13["spoken"] is bool(expected["TLS 1.3"])


def _kill_a_local_worker(out: Path, survey: subprocess.Popen[str]) -> int:
    """SIGKILL one of the survey's forked worker processes once a first shard is written;
    the number of shards written then."""
    deadline = time.monotonic() + 120
    while not shards_done(out):
        assert survey.poll() is None, survey.communicate()
        assert time.monotonic() < deadline, "no shard written in 120 s"
        time.sleep(0.02)
    children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
                and _parent(p) == survey.pid]
    # --workers 2: one forked worker (no fork server yet: none was replaced); the other
    # runs on a thread of the survey's own process (a second process cost 20 MB)
    assert len(children) == 1, children
    written = len(shards_done(out))
    os.kill(children[0], signal.SIGKILL)
    return written


def _parent(proc: Path) -> int | None:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_a_killed_local_worker_is_replaced_and_every_target_written_once(farm, tmp_path):
    """The local workers (no Dask): one killed while auditing; its shards are audited
    again by the worker that replaces it, every target written once."""
    targets = farm.targets[:160]
    out = tmp_path / "out"
    survey = _start("survey", _targets_file(tmp_path / "targets.txt", targets), "--out", out,
                    "--workers", "2", "--checks", "groups", "--shard-size", "8",
                    "--no-progress")
    try:
        written_at_kill = _kill_a_local_worker(out, survey)
    finally:
        _, survey_err = _finish(survey)
    assert survey.returncode == 0 and survey_err == "", survey_err
    manifest = json.loads((out / "_manifest.json").read_text())
    assert written_at_kill < len(manifest["shards"]), "the survey ended before the kill"
    assert sorted(manifest["done"]) == [s["name"] for s in manifest["shards"]]
    lines = sorted(json_lines(out), key=lambda d: d["index"])
    assert [(d["host"], d["port"]) for d in lines] == [(t.host, t.port) for t in targets]
    got = rows(out)
    assert [r["index"] for r in got] == list(range(1, len(targets) + 1))
    for target, row in zip(targets, got):
        if target.config is None:
            assert row["error_kind"] == "network", row
        else:
            assert row["error_kind"] is None and sorted(row["groups"]) == sorted(
                {g for groups in EXPECTED[target.config].values() for g in groups}), row
