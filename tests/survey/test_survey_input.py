"""`tlsprobe survey` input: CIDR/port lists, sharding by address, the rate limit, and bad
input (one-line errors, exit 2)."""
from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tlsprobe.errors import UsageError
from tlsprobe.net.tcp import Target
from tlsprobe.net.pacing import PacedConnector
from tlsprobe.survey.targets import expand_cidr, read_targets, shard_targets

REPO = Path(__file__).resolve().parents[2]


def cli(*args: object, tmp_path: Path, missing: tuple[str, ...] = ("distributed",)
        ) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "missing"     # in-process: no LocalCluster start for these
    stub.mkdir(exist_ok=True)
    for name in missing:
        (stub / f"{name}.py").write_text("raise ImportError('not here (test stub)')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(stub), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "tlsprobe", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_cidr_expands_every_address_times_every_port():
    assert [t.display for t in expand_cidr("127.0.0.0/30:443,8443")] == [
        f"127.0.0.{i}:{p}" for i in range(4) for p in (443, 8443)]
    assert [t.display for t in expand_cidr("[::1]/128:4433")] == ["[::1]:4433"]
    assert [t.port for t in expand_cidr("127.0.0.1/32")] == [443]


@pytest.mark.parametrize("spec", ["127.0.0.0/33:443", "127.0.0.0/8:0", "127.0.0.0/8:x",
                                  "300.0.0.0/8:443", "10.0.0.0/7:443"])
def test_bad_cidr_is_a_usage_error(spec):
    with pytest.raises(UsageError):
        expand_cidr(spec)


def test_shards_keep_all_ports_of_an_address_together():
    targets = expand_cidr("127.0.0.0/29:443,8443,9443")
    shards = shard_targets(targets, 4)
    hosts = [{t.host for _, t in s.targets} for s in shards]
    for i, a in enumerate(hosts):
        assert all(not a & b for b in hosts[i + 1:])
    assert sorted(i for s in shards for i, _ in s.targets) == list(range(1, 25))
    assert max(len(s.targets) for s in shards) <= 4 + 2


def test_targets_from_stdin(monkeypatch):
    import io
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(
        b"127.0.0.1:4433\n# comment\n\n127.0.0.1:4433\n[::1]:443\n")))
    assert read_targets("-") == ([Target("127.0.0.1", 4433), Target("::1", 443)], [])


def test_bad_lines_are_each_named_and_the_good_targets_still_run(tmp_path):
    """Every bad line is reported as FILE:LINE (not only the first, and not instead of the
    run); the good targets are surveyed; then exit 2, as `scan -f` does."""
    path = tmp_path / "targets.txt"
    path.write_bytes(b"127.0.0.1:1\n127.0.0.1:99999\n# fine\na..b\n\xff\xfe:443\n"
                     b"[::1]:1\n")
    out = tmp_path / "o"
    proc = cli("survey", path, "--out", out, "--no-progress", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("tlsprobe: error:")]
    assert [e.split(": ")[2] for e in errors[:3]] == [f"{path}:{n}" for n in (2, 4, 5)], errors
    assert "bad port" in errors[0] and "not UTF-8" in errors[2]
    assert "3 lines of" in errors[3] and "the other 2 targets were surveyed" in errors[3]
    pq = pytest.importorskip("pyarrow.parquet")
    surveyed = {r["host"] + f":{r['port']}" for p in out.glob("shard-*.parquet")
                for r in pq.read_table(p).to_pylist()}
    assert surveyed == {"127.0.0.1:1", "::1:1"}, surveyed


def test_a_file_of_bad_lines_only_is_a_usage_error(tmp_path):
    path = tmp_path / "targets.txt"
    path.write_text("127.0.0.1:0\nnot a target\n")
    proc = cli("survey", path, "--out", tmp_path / "o", tmp_path=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines[:2]] == [f"{path}:1", f"{path}:2"], lines
    assert lines[-1].endswith(f"no target in {path} (2 bad lines)"), lines


def test_paced_connector_spaces_connection_starts():
    starts: list[float] = []

    async def inner(target: Target, deadline: float) -> object:
        starts.append(time.monotonic())
        return object()

    async def main() -> None:
        paced = PacedConnector(inner, rate=20.0)   # type: ignore[arg-type]
        await asyncio.gather(*(paced(Target("127.0.0.1", 1), time.monotonic() + 5)
                               for _ in range(6)))

    asyncio.run(main())
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(starts) == 6 and min(gaps) >= 0.05 - 0.005, gaps


@pytest.mark.parametrize("args, words", [
    (["127.0.0.0/33:443", "--out", "{tmp}/o"], "bad CIDR"),
    (["127.0.0.1/32:70000", "--out", "{tmp}/o"], "bad port"),
    (["127.0.0.1/32:443", "--out", "{tmp}/file/o"], "cannot write there"),
    (["127.0.0.1/32:443"], "--out DIR is required"),
    (["127.0.0.1/32:443", "--out", "{tmp}/o", "--rate", "0"], "--rate"),
    (["127.0.0.1/32:443", "--out", "{tmp}/o", "--checks", "nope"], "unknown check"),
    (["{tmp}/missing.txt", "--out", "{tmp}/o"], "cannot read"),
    (["127.0.0.1/32:443", "--out", "{tmp}/o", "--workers", "0"], "--workers must be at least 1"),
    (["127.0.0.1/32:443", "--out", "{tmp}/o", "--workers", "100000"],
     f"--workers 100000: at most {4 * (os.cpu_count() or 1)} on this machine"),
    (["summary"], "needs the survey directory"),
    (["summary", "{tmp}/empty"], "no survey there"),
])
def test_bad_input_is_one_line_and_exit_2(args, words, tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "empty").mkdir()
    proc = cli("survey", *(a.format(tmp=tmp_path) for a in args), tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tlsprobe: error: ") and words in lines[0]


def test_a_manifest_of_other_arguments_is_refused(tmp_path):
    """A refused loopback port surveys in an instant; then other --checks into the same DIR."""
    out = tmp_path / "o"
    first = cli("survey", "127.0.0.1/32:1", "--out", out, "--no-progress", tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["identity"]["checks"] == ["groups", "pq"] and manifest["version"]
    proc = cli("survey", "127.0.0.1/32:1", "--out", out, "--checks", "groups",
               tmp_path=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "different arguments" in lines[0] and "checks" in lines[0]
    assert json.loads((out / "_manifest.json").read_text()) == manifest


@pytest.mark.parametrize("damage, problem", [
    ({"identity": [1]}, "identity is not an object"),
    ({"shards": 5}, "shards is not a list of named shards"),
    ({"shards": [{"name": 5}]}, "shards is not a list of named shards"),
    ({"done": 7}, "done is not a list of shard names"),
    ({"arguments": "x"}, "arguments is not an object"),
], ids=["identity", "shards", "shard-name", "done", "arguments"])
@pytest.mark.parametrize("form", ["run", "summary", "diff"])
def test_a_damaged_manifest_is_one_line_exit_2(tmp_path, damage, problem, form):
    """A manifest whose members are of other types (a damaged or hand-edited file): the run
    and `survey summary` failed with an internal error (exit 70: "'list' object has no
    attribute 'get'", "object of type 'int' has no len()")."""
    out = tmp_path / "o"
    first = cli("survey", "127.0.0.1/32:1", "--out", out, "--no-progress", tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr
    path = out / "_manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **damage}))
    words = {"run": ("127.0.0.1/32:1", "--out", out, "--no-progress"),
             "summary": ("summary", out), "diff": ("diff", out, out)}[form]
    proc = cli("survey", *words, tmp_path=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == f"tlsprobe: error: {path}: not a survey manifest ({problem})\n"


@pytest.mark.parametrize("args", [["127.0.0.1/32:1", "--out", "{tmp}/o"],
                                  ["summary", "{tmp}"]])
def test_without_pyarrow_survey_names_the_extra(args, tmp_path):
    proc = cli("survey", *(a.format(tmp=tmp_path) for a in args), tmp_path=tmp_path,
               missing=("distributed", "pyarrow"))
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "pyarrow is not installed" in lines[0] \
        and "pip install 'dask[distributed]' pyarrow" in lines[0]
    assert not (tmp_path / "o").exists()


def test_scheduler_without_dask_is_a_usage_error_before_any_file(tmp_path):
    """--scheduler needs Dask; a local survey does not (it runs without the stubbed one)."""
    proc = cli("survey", "127.0.0.1/32:1", "--out", tmp_path / "o", "--scheduler",
               "tcp://127.0.0.1:1", tmp_path=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "--scheduler needs Dask: distributed is not installed" in \
        lines[0] and "pip install 'dask[distributed]' pyarrow" in lines[0], lines
    assert not (tmp_path / "o").exists()
    local = cli("survey", "127.0.0.1/32:1", "--out", tmp_path / "o", "--no-progress",
                "--retries", "0", tmp_path=tmp_path)
    assert local.returncode == 0 and local.stderr == "", local.stderr


def test_the_parquet_files_written_at_the_end_are_announced(tmp_path):
    """128 refused targets in 128 shards: their Parquet files are written once the audits
    are over, a line on stderr says so (from 100 shards: it takes about 10 ms each), and
    every shard is a Parquet file, none left in _rows/."""
    proc = cli("survey", "127.0.0.0/25:1", "--out", tmp_path / "o", "--shard-size", "1",
               "--workers", "1", "--timeout", "1", "--retries", "0", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1] == \
        "tlsprobe survey: writing the Parquet files of 128 shards"
    assert len(list((tmp_path / "o").glob("shard-*.parquet"))) == 128
    assert list((tmp_path / "o" / "_rows").iterdir()) == []


@pytest.fixture(scope="module")
def refused_survey(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real survey folder: one loopback target that refuses (an instant run)."""
    tmp = tmp_path_factory.mktemp("form")
    proc = cli("survey", "127.0.0.1/32:1", "--out", tmp / "done", "--no-progress",
               tmp_path=tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp


@pytest.mark.parametrize("args, words", [
    # a run given an option of summary or diff: it used to run and leave no such file
    (["127.0.0.1/32:1", "--out", "{tmp}/o", "--jsonl", "{tmp}/c.jsonl"],
     "--jsonl applies to tlsprobe survey diff OLD NEW, not to a survey run"),
    (["127.0.0.1/32:1", "--out", "{tmp}/o", "--parquet", "{tmp}/c.parquet"],
     "--parquet applies to tlsprobe survey diff OLD NEW"),
    (["127.0.0.1/32:1", "--out", "{tmp}/o", "--json"],
     "--json applies to tlsprobe survey summary DIR or tlsprobe survey diff OLD NEW"),
    (["127.0.0.1/32:1", "--out", "{tmp}/o", "{tmp}/o2"],
     "survey TARGETS takes one argument, not also"),
    # summary and diff given a run's options or another form's: they were ignored
    (["summary", "{tmp}/done", "{tmp}/done"], "survey summary takes one directory"),
    (["summary", "{tmp}/done", "--out", "{tmp}/o"],
     "--out applies to tlsprobe survey TARGETS --out DIR, not to survey summary"),
    (["summary", "{tmp}/done", "--checks", "all"], "--checks applies to tlsprobe survey "
     "TARGETS"),
    (["summary", "{tmp}/done", "--jsonl", "{tmp}/c.jsonl"],
     "--jsonl applies to tlsprobe survey diff OLD NEW, not to survey summary"),
    (["diff", "{tmp}/done", "{tmp}/done", "--workers", "7"],
     "--workers applies to tlsprobe survey TARGETS --out DIR, not to survey diff"),
    (["diff", "{tmp}/done", "{tmp}/done", "--no-sni"], "--no-sni applies to"),
    # a run's options given at their default values: they were told apart from the defaults
    # by value only, so these were ignored (exit 0)
    (["summary", "{tmp}/done", "--workers", str(os.cpu_count() or 1)],
     "--workers applies to tlsprobe survey TARGETS --out DIR, not to survey summary"),
    (["summary", "{tmp}/done", "--checks", "groups,pq"], "--checks applies to"),
    (["summary", "{tmp}/done", "--shard-size", "64"], "--shard-size applies to"),
    (["diff", "{tmp}/done", "{tmp}/done", "--timeout", "5"],
     "--timeout applies to tlsprobe survey TARGETS --out DIR, not to survey diff"),
    (["diff", "{tmp}/done", "{tmp}/done", "--extra-groups="], "--extra-groups applies to"),
])
def test_an_option_of_another_form_is_refused_not_ignored(args, words, refused_survey):
    tmp = refused_survey
    proc = cli("survey", *(a.format(tmp=tmp) for a in args), tmp_path=tmp)
    assert proc.returncode == 2, proc.stderr + proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tlsprobe: error: ") and words in lines[0], \
        lines
    assert proc.stdout == ""
    assert not (tmp / "o").exists() and not (tmp / "c.jsonl").exists()


def test_each_form_still_takes_its_own_options(refused_survey):
    tmp = refused_survey
    proc = cli("survey", "summary", tmp / "done", "--json", tmp_path=tmp)
    assert proc.returncode == 0 and json.loads(proc.stdout)["targets"] == 1, proc.stderr
    proc = cli("survey", "diff", tmp / "done", tmp / "done", "--json", "--jsonl",
               tmp / "d.jsonl", tmp_path=tmp)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["compared"] == 1
    assert (tmp / "d.jsonl").exists()
    proc = cli("survey", "127.0.0.1/32:1", "--out", tmp / "done", "--no-progress",
               "--workers", "1", "--timeout", "2", tmp_path=tmp)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("spec, words", [
    ("127.0.0.0/8:443", "makes 16,777,216 targets (16,777,216 addresses x 1 port)"),
    ("127.0.0.0/12:443,8443", "makes 2,097,152 targets (1,048,576 addresses x 2 ports)"),
])
def test_a_cidr_larger_than_a_survey_holds_is_refused_at_once(spec, words, tmp_path):
    """A /8 was accepted, then spent minutes and gigabytes making its targets, shards and
    manifest before any connection (about 0.5 kB a target); the limit counts the ports
    too. Refused in well under a second of CPU, nothing written."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = cli("survey", spec, "--out", tmp_path / "o", tmp_path=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"survey {spec} was not refused: still expanding after 120 s")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 2, proc.stderr
    line, = proc.stderr.splitlines()
    assert words in line and "split it into several surveys" in line
    assert after.ru_utime - before.ru_utime < 5 and not (tmp_path / "o").exists()


def test_diff_of_a_survey_stopped_before_its_first_shard_says_so(tmp_path):
    """A survey stopped before any shard was written holds its manifest and no shard file:
    `survey diff` called it "not the output folder of tlsprobe survey"."""
    out = tmp_path / "o"
    first = cli("survey", "127.0.0.1/32:1", "--out", out, "--no-progress", tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    manifest = json.loads((out / "_manifest.json").read_text())
    (stopped / "_manifest.json").write_text(json.dumps({**manifest, "done": []}))
    (stopped / "_jsonl").mkdir()
    proc = cli("survey", "diff", stopped, out, tmp_path=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == (f"tlsprobe: error: {stopped}: no shard of this survey is done yet "
                           "(a run stopped before its first shard): resume it with the same "
                           "command\n")


def test_a_resumed_survey_all_done_escapes_its_folder_name(tmp_path):
    """`--out` holding a terminal escape: the line of a resumed run whose shards are all
    done wrote it raw to stderr ("all 1 shards of .../o\\x1b[31m are done" with a real ESC);
    every other line shows it escaped."""
    out = tmp_path / "o\x1b[31mred"
    for _ in range(2):
        proc = cli("survey", "127.0.0.1/32:1", "--out", out, "--no-progress",
                   tmp_path=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "\x1b" not in proc.stderr + proc.stdout
    assert "all 1 shards of" in proc.stderr and "o\\x1b[31mred are done" in proc.stderr
