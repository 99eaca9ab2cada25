"""`tlsprobe pcap --jobs 2`: the shared corpus read by two worker processes gives the
sequential run's output byte for byte (JSON lines with the stats aggregated over all files,
and the --stats tables of the brief path), the same stderr and the same exit code; a
directory argument reads the captures under it, in path order.

The corpus' files under 150 kB (about 155 of its 194 captures, with damaged and truncated
ones) keep the four runs to a few CPU seconds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.run_members import without_run_members

REPO = Path(__file__).resolve().parents[2]
SMALL = 150_000


@pytest.fixture(scope="module")
def corpus_args(captures_dir: Path) -> list[str]:
    """The small captures of files.tsv, a missing file (exit 2, a JSON record) and the
    scapy folder as a directory argument."""
    files = []
    for line in (captures_dir / "files.tsv").read_text().splitlines()[1:]:
        path, size, kind = line.split("\t")[:3]
        if kind == "capture" and int(size) < SMALL and not path.startswith("scapy/"):
            files.append(str(captures_dir / path))
    assert len(files) > 100
    return [*files, str(captures_dir / "no-such.pcap"), str(captures_dir / "scapy")]


def pcap(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", *args],
                          env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("mode", [("--jsonl", "--stats"), ("--stats",)])
def test_two_jobs_give_the_sequential_output(corpus_args: list[str], mode: tuple[str, ...]
                                             ) -> None:
    sequential = pcap(*mode, *corpus_args)
    parallel = pcap(*mode, "--jobs", "2", *corpus_args)
    assert sequential.returncode == 2, sequential.stderr     # the missing file
    assert parallel.returncode == sequential.returncode
    assert without_run_members(parallel.stdout) == without_run_members(sequential.stdout)
    assert parallel.stderr == sequential.stderr
    assert "no-such.pcap: no such file" in parallel.stderr
    # a damaged capture's line too (alone it would make exit code 7)
    assert "tls_DER-incomplete-header.pcap: impossible pcap record length" in parallel.stderr
    if mode[0] == "--jsonl":
        lines = [json.loads(line) for line in parallel.stdout.splitlines()]
        captures = [d["file"] for d in lines if d.get("kind") == "capture"]
        scapy = [f for f in captures if "/scapy/" in f]
        # every file once, in input order; the folder's captures by path (not its README)
        assert captures[:len(corpus_args) - 1] == corpus_args[:-1]
        assert scapy == sorted(scapy) and len(scapy) == 3
        stats = lines[-1]
        assert stats["kind"] == "stats"
        assert stats["connections"] == sum(d["kind"] == "connection" for d in lines) > 300
    else:
        assert "Versions (" in parallel.stdout and "Groups (" in parallel.stdout


def test_a_worker_count_beyond_the_machine_is_a_usage_error(captures_dir: Path) -> None:
    """--jobs far beyond the CPUs is refused at once (exit 2, one line) instead of forking
    that many processes; up to 4 per CPU is taken, and never more workers than files."""
    limit = 4 * (os.cpu_count() or 1)
    one = str(captures_dir / "files.tsv")
    for jobs in ("0", str(limit + 1), "100000"):
        proc = pcap("--jobs", jobs, one)
        assert proc.returncode == 2 and proc.stdout == ""
        [line] = proc.stderr.splitlines()
        assert line.startswith("tlsprobe: error: --jobs ") and (
            "at least 1" in line if jobs == "0" else f"at most {limit} on this machine" in line)
    small = sorted(p for p in (REPO / "captures").glob("*.pcap"))[:2]
    proc = pcap("--jsonl", "--jobs", str(limit), *map(str, small))
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["file"] for line in proc.stdout.splitlines()
            if json.loads(line)["kind"] == "capture"] == list(map(str, small))


def test_no_more_worker_processes_than_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool is sized by the files as well as by --jobs (Python's pool with fork starts
    every worker it may have at once)."""
    import concurrent.futures

    from tlsprobe.offline.analyzer import AnalyzerOptions
    from tlsprobe.offline.filters import ConnectionFilter
    from tlsprobe.survey.captures import read_in_order
    sizes: list[int | None] = []

    class Pool(concurrent.futures.ProcessPoolExecutor):
        def __init__(self, max_workers: int | None = None, **kwargs: object) -> None:
            sizes.append(max_workers)
            super().__init__(max_workers=max_workers, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Pool)
    small = [str(p) for p in sorted((REPO / "captures").glob("*.pcap"))[:2]]
    read = list(read_in_order(small, AnalyzerOptions(), ConnectionFilter(), jobs=8,
                              scheduler=None))
    assert sizes == [2] and [error for _, error in read] == [None, None]
