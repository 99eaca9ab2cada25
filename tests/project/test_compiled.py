"""The optional compiled fast path (issue 35), tested both ways.

`TLSPROBE_COMPILE=1 pip install .` compiles the modules listed in
build_backend/compiled_modules.txt with mypyc (build_backend/tlsprobe_build.py, setup.py);
the default install, and the rest of this suite, run the pure-Python sources. Here the
compiled wheel is built once (python -m build --no-isolation, with this environment's mypy,
setuptools and wheel: the test extra lists them; at the C compiler's -O0,
TLSPROBE_COMPILE_OPT=0: what is checked is mypyc's translation, and -O3 takes twice the
time), unpacked, and:

* every listed module is imported from its C extension, nothing of mypy is needed at run
  time, and `tlsprobe --version` names the build;
* the compiled copy and the sources give the same capture-layer events and the same
  `tlsprobe pcap` table, `--jsonl`, `--stats` and `--details`, and `--jsonl` read by two
  processes (`--jobs 2`: capture/pipe.py), on every capture of the project and of the
  third-party corpus (benchmarks/compiled_equal.py's digests, each tree in a process of its
  own), and the same reports from the worker pool (`--jobs 2` over many files); the pure
  sources' side of both runs beside the build (`pure_runs`);
* a build without a working C compiler stops with one line saying what it needs.

CI installs the compiler and Python's headers (.ci/run: gcc, python3-dev); without them the
build fails here with the build's own message, not a skip.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from tests.helpers.shared_data import captures_dir, shared_root

REPO = Path(__file__).resolve().parents[2]
# a hang guard (pyproject's 300 s is per test, and the first test here waits for the build:
# about 145 s of one core, 25 of mypyc and 115 of gcc -O0 on its one 40 MB C file, several
# times that beside six workers and other load)
pytestmark = pytest.mark.timeout(1800)
SOURCES = ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in")


def listed_modules() -> list[str]:
    """The module names build_backend/compiled_modules.txt lists."""
    lines = (REPO / "build_backend" / "compiled_modules.txt").read_text().splitlines()
    files = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    return [f.removesuffix(".py").replace("/", ".") for f in files]


def _copy_sources(into: Path) -> Path:
    into.mkdir()
    for name in SOURCES:
        shutil.copy2(REPO / name, into / name)
    for folder in ("build_backend", "tlsprobe"):
        shutil.copytree(REPO / folder, into / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    return into


def _build(src: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m build` in a session of its own: past its time limit the whole session
    goes (build's backend process and the C compiler under it; killing `build` alone left
    them compiling for the rest of the run)."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CC")}
    argv = [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
            str(src)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True, cwd=src.parent,
                          env={**environ, **env}, start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=1200)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail("the compiled build outlived 1200 s")
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _env(site: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"},
            "PYTHONPATH": str(site), "TLSPROBE_SHARED": str(shared_root())}


def _corpus() -> list[Path]:
    """benchmarks/pcap_equal.py's corpus: the project's captures and the third party's."""
    spec = importlib.util.spec_from_file_location("pcap_equal",
                                                  REPO / "benchmarks" / "pcap_equal.py")
    assert spec is not None and spec.loader is not None
    pcap_equal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pcap_equal)
    captures: list[Path] = pcap_equal.corpus()
    return captures


class _Run:
    """A child process whose output goes to files (it never waits on a full pipe: the pure
    sources' runs finish while nobody reads them)."""

    def __init__(self, argv: list[str], tree: Path, cwd: Path, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out, self.err = out / "stdout", out / "stderr"
        with self.out.open("w") as stdout, self.err.open("w") as stderr:
            self.proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr,
                                         stdin=subprocess.DEVNULL, cwd=cwd, env=_env(tree))

    def finished(self, timeout: float) -> subprocess.CompletedProcess[str]:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"{self.proc.args!r} outlived {timeout} s; stderr: "
                        f"{self.err.read_text()[-2000:]}")
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode,
                                           self.out.read_text(), self.err.read_text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _start_digests(tree: Path, captures: list[Path], out: Path) -> _Run:
    """benchmarks/compiled_equal.py's digests with `tree`'s tlsprobe first on the path."""
    return _Run([sys.executable, str(REPO / "benchmarks" / "compiled_equal.py"), "--digests",
                 *map(str, captures)], tree, tree, out)


def _start_pool(tree: Path, cwd: Path) -> _Run:
    """`pcap --jobs 2 --jsonl` over the project's captures, `tree`'s tlsprobe first."""
    return _Run([sys.executable, "-m", "tlsprobe", "pcap", "--no-progress", "--jobs", "2",
                 "--jsonl", str(REPO / "captures")], tree, cwd, cwd / "pool-run")


@pytest.fixture(scope="module")
def pure_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, _Run]]:
    """The pure sources' side of the two comparisons, started before the compiled build:
    they run beside it (its C compiler is one process) instead of after it, on the run's
    longest chain (conftest.py XDIST_FIRST_GROUPS). Each test reads its side's answer."""
    base = tmp_path_factory.mktemp("pure")
    started = {"digests": _start_digests(REPO, _corpus(), base / "digests"),
               "pool": _start_pool(REPO, base)}
    yield started
    for run in started.values():
        run.stop()


@pytest.fixture(scope="module")
def compiled_site(pure_runs: dict[str, _Run],
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled wheel, built from a copy of the sources and unpacked (the pure sources'
    runs started first: `pure_runs`)."""
    base = tmp_path_factory.mktemp("compiled")
    done = _build(_copy_sources(base / "src"), base / "out", TLSPROBE_COMPILE="1",
                  TLSPROBE_COMPILE_OPT="0")
    assert done.returncode == 0, ("the compiled build failed (it needs gcc and python3-dev, "
                                  "which .ci/run installs):\n" + (done.stdout + done.stderr)[-3000:])
    (wheel,) = (base / "out").glob("*.whl")
    site = base / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


_IMPORTS = """\
import importlib, json, sys
names = sys.argv[1:]
files = {name: importlib.import_module(name).__file__ for name in names}
import tlsprobe.cli
print(json.dumps({"files": files, "mypy": sorted(m for m in sys.modules
                  if m.split(".")[0] in ("mypy", "mypyc", "librt", "mypy_extensions"))}))
"""


def test_the_listed_modules_run_compiled_and_need_nothing_of_mypy(compiled_site: Path,
                                                                  tmp_path: Path) -> None:
    names = listed_modules()
    assert names, "build_backend/compiled_modules.txt lists no module"
    done = subprocess.run([sys.executable, "-c", _IMPORTS, *names], check=False, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=_env(compiled_site))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    not_compiled = {name: path for name, path in seen["files"].items()
                    if not path.startswith(str(compiled_site))
                    or not path.endswith(tuple(EXTENSION_SUFFIXES))}
    assert not_compiled == {}
    assert seen["mypy"] == []
    version = subprocess.run([sys.executable, "-m", "tlsprobe", "--version"],
                             check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path,
                             env=_env(compiled_site))
    assert version.returncode == 0 and version.stderr == ""
    assert version.stdout.endswith(f"(compiled fast path: {len(names)} modules)\n")


def _digests(run: _Run) -> dict[str, dict[str, str]]:
    done = run.finished(1200)
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, dict[str, str]] = json.loads(done.stdout)
    return answer


def test_compiled_and_pure_give_the_same_events_and_outputs_on_every_capture(
        compiled_site: Path, pure_runs: dict[str, _Run], tmp_path: Path) -> None:
    captures = _corpus()    # the pure side's too (pure_runs), read the same way
    third_party = [p for p in captures if captures_dir() in p.parents]
    assert third_party, (f"the third-party captures are not at {captures_dir()} (set "
                         f"TLSPROBE_SHARED to the folder that holds captures/)")
    # the compiled side in two processes, a half of the captures each: it runs after the
    # build, on the run's longest chain (the pure side ran beside the build: `pure_runs`)
    half = len(captures) // 2
    parts = [_start_digests(compiled_site, part, tmp_path / f"part-{n}")
             for n, part in enumerate((captures[:half], captures[half:]))]
    compiled = {path: digest for part in parts for path, digest in _digests(part).items()}
    pure = _digests(pure_runs["digests"])
    assert sorted(pure) == sorted(compiled) == sorted(map(str, captures))
    differ = {path: [part for part in pure[path] if pure[path][part] != compiled[path][part]]
              for path in pure}
    assert {path: parts for path, parts in differ.items() if parts} == {}
    assert len(pure) == len(captures) >= 200
    assert all(len(parts) == 7 for parts in pure.values())   # events x2, 4 outputs, piped


def test_the_worker_pool_gives_the_same_reports_compiled(
        compiled_site: Path, pure_runs: dict[str, _Run],
        tmp_path: Path) -> None:
    """`pcap --jobs 2` over many files: the reports come back from worker processes
    (pickled: a compiled frozen class that crossed would fail to unpickle)."""
    compiled = _start_pool(compiled_site, tmp_path).finished(600)
    pure = pure_runs["pool"].finished(600)
    assert pure.returncode == compiled.returncode == 0, (pure.stderr + compiled.stderr)[-2000:]
    assert compiled.stdout.count("\n") == pure.stdout.count("\n") > 30
    strip = re.compile(r'"(started_at|duration_s)": ("[^"]*"|[-+.0-9eE]+)')
    assert strip.sub("", compiled.stdout) == strip.sub("", pure.stdout)


def test_a_build_without_a_compiler_says_what_it_needs(tmp_path: Path) -> None:
    done = _build(_copy_sources(tmp_path / "src"), tmp_path / "out", TLSPROBE_COMPILE="1",
                  CC=str(tmp_path / "no-such-compiler"))
    assert done.returncode != 0
    said = done.stderr + done.stdout
    assert "TLSPROBE_COMPILE=1: no C compiler" in said and "gcc python3-dev" in said
    assert not list((tmp_path / "out").glob("*.whl"))
