"""Shared pytest fixtures: test PKI, loopback TLS servers, the captures corpus, the CLI.

Fixtures (see tests/helpers/servers.py for the server options):
- `certs` (session): CertSet with the test CA (`certs.ca`) and rsa / ecdsa / ed25519 leaves.
- `tls_server` (function): `tls_server(impl, **options) -> Server`; every server it started is
  stopped at teardown, pass or fail. Skips the test when the implementation is not installed.
- `server_cache` (session): same call, but one running server per distinct configuration is
  shared by all tests of the session (do not stop it; treat it as read-only).
- `captures_dir` (session): the third-party captures corpus (--captures-dir, env
  TLSPROBE_CAPTURES, else $TLSPROBE_SHARED/captures, default <repo>/../shared/captures); fails
  the test when it is absent (tests/helpers/shared_data.py).
- `own_heap` (function): the objects held before the test are left out of its garbage
  collections (tests/helpers/own_heap.py; `run_cli`'s in-process runs have the same).
- `run_cli` (function): `run_cli(*args, timeout=60.0, input=None, env=None, isolated=False)
  -> CliResult` runs `tlsprobe ARGS` in tmp_path, in this process unless `isolated` (then
  `python -m tlsprobe`); CliResult unpacks as (returncode, stdout, stderr).
Marker: `@pytest.mark.needs_impl("gnutls", ...)` skips unless those servers can run here.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.helpers.own_heap import earlier_objects_frozen
from tests.helpers.servers import (CertSet, Server, ServerUnavailable, make_certs,
                                   missing_reason, peer_unavailable, start_server)
from tests.helpers.shared_data import captures_dir as corpus_dir
from tests.helpers.shared_data import shared_missing

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent

ServerFactory = Callable[..., Server]
pytest_plugins = ["pytester"]  # the fixture tests in test_servers.py run inner sessions


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--captures-dir", default=None,
                     help="third-party pcap corpus (default: env TLSPROBE_CAPTURES, "
                          "else <repo>/../shared/captures: tests/helpers/shared_data.py)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs_impl(*impls): skip unless these TLS server implementations can run "
                   "(openssl, gnutls, nginx, pyopenssl, tlslite, pyssl)")


#: pytest-xdist (`.ci/run` runs `-n 6 --dist loadgroup`): tests whose module shares
#: expensive per-worker state run on one worker, so that it is set up once. Node id prefix
#: -> group name; every other test goes to whichever worker is free, one at a time, and
#: the groups, largest first, before them. (xdist's own `xdist_group` marks do not work with
#: pytest 9.2, whose node ids xdist 3.8 can no longer rename: `pytest_xdist_make_scheduler`
#: below groups by these prefixes instead.)
XDIST_GROUPS = {
    # the hostile boards run every child of their module in a pool (tests/hostile/conftest.py)
    "tests/hostile/test_probe_hostile.py": "hostile-probe",
    "tests/hostile/test_scan_hostile.py": "hostile-scan",
    # one Dask LocalCluster per module and worker (tests/survey/conftest.py dask_cluster)
    "tests/survey/test_survey_run.py": "survey-cluster",
    # two surveys of the survey lab around a reconfiguration (tests/diff/test_survey_diff.py
    # `surveys`)
    "tests/diff/test_survey_diff.py": "survey-diff",
    "tests/survey/test_survey_read.py": "survey-cluster",
    # the STARTTLS daemons (tests/starttls/conftest.py `daemon`: PostgreSQL's initdb,
    # MariaDB's data folder, ...) start once per worker: the modules that use them
    "tests/starttls/test_starttls_api.py": "starttls-daemons",
    "tests/starttls/test_starttls_cli.py": "starttls-daemons",
    "tests/starttls/test_starttls_cli_errors.py": "starttls-daemons",
    "tests/starttls/test_starttls_daemons.py": "starttls-daemons",
    "tests/starttls/test_starttls_scan.py": "starttls-daemons",
    "tests/starttls/test_starttls_scan_recording.py": "starttls-daemons",
    # module fixtures: the corpus read by tlsprobe and tshark, pages rendered by chromium,
    # the sdist and wheel built
    "tests/offline/test_pcap_corpus.py": "pcap-corpus",
    "tests/report/test_report_html.py": "report-html",
    "tests/report/test_survey_charts.py": "report-html",
    "tests/report/test_report_html_targets.py": "report-html",
    "tests/project/test_packaging.py": "packaging",
    # the compiled wheel built once (mypyc: a minute or more of CPU) for its three tests
    "tests/project/test_compiled.py": "compiled",
}


#: groups handed out first, before the groups with more tests: the compiled build is the
#: longest chain of the run (the wheel's build, about 150 s of one core, several times that
#: beside the other workers, then its three tests: 600-900 s of a loaded CI run's 850 s), and
#: it started only once a worker had nearly finished its first groups
XDIST_FIRST_GROUPS = ("compiled",)


def xdist_group(nodeid: str) -> str | None:
    for prefix, group in XDIST_GROUPS.items():
        if nodeid.startswith(prefix + "::"):
            return group
    return None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`, and plain `-n N` (`--dist load`, which would spread a group over
    the workers and set its fixtures up in each): xdist's scope scheduler with XDIST_GROUPS
    as the scopes."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PrefixGroups(LoadScopeScheduling):    # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid) or nodeid

        def _assign_work_unit(self, node: Any) -> None:
            # xdist orders the groups by their number of tests; XDIST_FIRST_GROUPS go
            # before all of them
            for group in reversed(XDIST_FIRST_GROUPS):
                if group in self.workqueue:
                    self.workqueue.move_to_end(group, last=False)
            super()._assign_work_unit(node)
    return PrefixGroups(config, log)


#: under xdist, the modules whose tests take longest are handed out first (after the groups,
#: which the scheduler starts first), so that no long test starts at the end of the run;
#: test_typing last, when the early mypy run it reads is done
XDIST_SLOW_FIRST = (
    "tests/probes/test_timing.py", "tests/speed/test_speed.py", "tests/speed/test_speed_cli.py",
    "tests/scan/test_scan_small_items.py", "tests/capture/test_eviction.py",
    "tests/checks/test_checks_lab_servers.py", "tests/offline/test_streams.py",
    # tshark's follow against our reassembly (20-90 s in loaded CI runs), a million
    # connections' timeline (18-25 s)
    "tests/capture/test_corpus.py", "tests/report/test_plot_bounds.py",
)
XDIST_LAST = ("tests/project/test_typing.py",)


def _xdist_rank(item: pytest.Item) -> int:
    path = item.nodeid.partition("::")[0]
    return 0 if path in XDIST_SLOW_FIRST else 2 if path in XDIST_LAST else 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # the same order in every worker (a stable sort)
        items.sort(key=_xdist_rank)
    from tests.helpers import early_mypy   # mypy --strict in a child process (test_typing)
    early_mypy.start(config, items)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist controller, per worker: where the one early mypy run reports."""
    from tests.helpers import early_mypy
    early_mypy.xdist_configure_node(node.config, node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """pytest-xdist controller: start mypy once, when a worker collected test_typing's test."""
    from tests.helpers import early_mypy
    early_mypy.xdist_collected(node.config, ids)


def pytest_unconfigure(config: pytest.Config) -> None:
    from tests.helpers import early_mypy
    early_mypy.stop(config)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers(name="needs_impl"):
        for impl in marker.args:
            reason = missing_reason(impl)
            if reason:
                peer_unavailable(reason)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertSet:
    """Test CA plus RSA-2048, ECDSA P-256 and Ed25519 server certificates (SAN localhost,
    127.0.0.1, ::1), generated once per session."""
    return make_certs(tmp_path_factory.mktemp("certs"))


def _starter(certs: CertSet, workdir: Callable[[str], Path],
             started: list[Server]) -> ServerFactory:
    def start(impl: str, **options: Any) -> Server:
        try:
            server = start_server(impl, certs=certs, workdir=workdir(impl), **options)
        except ServerUnavailable as exc:
            peer_unavailable(str(exc))
        started.append(server)
        return server
    return start


def _stop_all(servers: list[Server]) -> None:
    """Stop every server even if stopping one of them raises (then re-raise the first).
    All are sent SIGTERM first, so that they end together rather than one after another (a
    worker's session ends with dozens of cached servers)."""
    import signal
    for server in servers:
        if server.alive():
            try:
                os.killpg(server.pid, signal.SIGTERM)
            except OSError:
                pass
    errors: list[BaseException] = []
    for server in servers:
        try:
            server.stop()
        except Exception as exc:  # keep going: the others must not be left running
            errors.append(exc)
    if errors:
        raise errors[0]


@pytest.fixture
def tls_server(certs: CertSet, tmp_path: Path) -> Iterator[ServerFactory]:
    """Factory: start a server for this test only; all are stopped at teardown."""
    started: list[Server] = []
    counter = iter(range(1_000_000))
    yield _starter(certs, lambda impl: tmp_path / f"server-{next(counter)}-{impl}", started)
    _stop_all(started)


def _cache_key(impl: str, options: dict[str, Any]) -> tuple[Any, ...]:
    def freeze(value: Any) -> Any:
        return tuple(value) if isinstance(value, (list, tuple)) else str(value) \
            if isinstance(value, os.PathLike) else value
    return (impl, *sorted((k, freeze(v)) for k, v in options.items()))


@pytest.fixture(scope="session")
def server_cache(certs: CertSet,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """Factory like `tls_server`, but reuses one running server per identical configuration
    for the whole session (restarted if it died). Tests must not stop cached servers."""
    cache: dict[tuple[Any, ...], Server] = {}
    started: list[Server] = []
    start = _starter(certs, lambda impl: tmp_path_factory.mktemp(f"cached-{impl}"), started)

    def get(impl: str, **options: Any) -> Server:
        key = _cache_key(impl, options)
        server = cache.get(key)
        if server is None or not server.alive():
            server = cache[key] = start(impl, **options)
        return server
    yield get
    _stop_all(started)


@pytest.fixture
def own_heap() -> Iterator[None]:
    """For tests that run a probe through its API in this process (the timing probe, which
    collects garbage between its rounds): the objects the worker held before are frozen for
    the test (tests/helpers/own_heap.py), as `run_cli` does for an in-process command."""
    with earlier_objects_frozen():
        yield


@pytest.fixture(scope="session")
def captures_dir(request: pytest.FixtureRequest) -> Path:
    """The read-only third-party captures corpus; fails the test when it is not there (CI
    always has it)."""
    configured = request.config.getoption("--captures-dir")
    path = Path(configured) if configured else corpus_dir()
    if not path.is_dir():
        shared_missing("captures corpus", path, "TLSPROBE_CAPTURES (or --captures-dir)")
    return path


class CliResult(NamedTuple):
    """Outcome of one `python -m tlsprobe` run."""

    returncode: int
    stdout: str
    stderr: str


#: subcommands always run as a real subprocess: survey starts Dask worker processes, whose
#: start method re-imports the main module (pytest's, in process)
ISOLATED_COMMANDS = frozenset({"survey"})


class _CliTimeout(BaseException):
    """Raised in the main thread when an in-process CLI run outlives its timeout (a
    BaseException, so that the command's last-resort `except Exception` lets it through)."""


def _in_process(argv: list[str], cwd: Path, env: dict[str, str], input: str | None,
                timeout: float) -> tuple[int, str, str] | None:
    """`tlsprobe.cli.main(argv)` in this process, as `python -m tlsprobe` would run it: cwd,
    environment, stdin (empty unless `input`), stdout and stderr (bytes streams, decoded as
    text=True would, universal newlines) swapped for the call and restored after. Saves the
    interpreter start and imports of a subprocess (about 0.4 s of CPU per run). The objects
    the test process held before are frozen for the run (tests/helpers/own_heap.py), as if
    they were not there: a collection the command runs walks only what it made. None when
    it timed out (the caller fails the test)."""
    import io
    import signal
    from tlsprobe.cli import main

    def stream(data: bytes = b"") -> io.TextIOWrapper:
        return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="backslashreplace",
                                write_through=True)
    out, err = stream(), stream()
    saved = (sys.stdin, sys.stdout, sys.stderr, sys.argv, os.getcwd(), dict(os.environ))
    sys.stdin = stream((input or "").encode())
    sys.stdout, sys.stderr = out, err
    sys.argv = ["tlsprobe", *argv]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)

    # pytest-timeout may have an alarm of its own running for the whole test: ours must not
    # cancel it. The sooner of the two is set; when the outer one is due, its handler runs
    # (the test fails as pytest-timeout says); after the run the outer alarm is set again
    # for what is left of it.
    started = time.monotonic()
    outer_delay, _ = signal.getitimer(signal.ITIMER_REAL)

    def expire(signum: int, frame: Any) -> None:
        if outer_delay and time.monotonic() - started >= outer_delay - 0.05 and \
                callable(previous):
            previous(signum, frame)
        raise _CliTimeout()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, min(timeout, outer_delay) if outer_delay else timeout)
    try:
        try:
            with earlier_objects_frozen():  # the command's collections walk its own objects
                code = main(argv)
        except SystemExit as exc:   # argparse: --help, --version, usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except _CliTimeout:
            return None
        except Exception:           # escaped the command's own handling: as python would
            import traceback
            traceback.print_exc()
            code = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay:
            left = outer_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
        sys.stdin, sys.stdout, sys.stderr, sys.argv = saved[:4]
        os.chdir(saved[4])
        os.environ.clear()
        os.environ.update(saved[5])

    def text(s: io.TextIOWrapper) -> str:
        raw = s.buffer.getvalue()   # type: ignore[attr-defined]
        return raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    return code, text(out), text(err)


@pytest.fixture
def run_cli(tmp_path: Path) -> Callable[..., CliResult]:
    """Run `tlsprobe *args` (cwd tmp_path, fixed 120-column terminal width, no colour); fails
    the test if it outlives `timeout` seconds. By default in this process (`_in_process`: the
    same `main` `python -m tlsprobe` calls, with its streams, cwd and environment); as a real
    `python -m tlsprobe` subprocess when `isolated=True`, for ISOLATED_COMMANDS, or for every
    run when the environment has TLSPROBE_TEST_ISOLATED=1."""
    def run(*args: Any, timeout: float = 60.0, input: str | None = None,
            env: dict[str, str] | None = None, isolated: bool = False) -> CliResult:
        child_env = dict(os.environ)
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + ([child_env["PYTHONPATH"]] if child_env.get("PYTHONPATH") else []))
        child_env.update({"COLUMNS": "120", "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"})
        child_env.update(env or {})
        words = [str(a) for a in args]
        isolated = isolated or os.environ.get("TLSPROBE_TEST_ISOLATED") == "1"
        if not isolated and not (words and words[0] in ISOLATED_COMMANDS):
            done = _in_process(words, tmp_path, child_env, input, timeout)
            if done is None:
                pytest.fail(f"tlsprobe {' '.join(words)} timed out after {timeout}s "
                            "(in process)")
            return CliResult(*done)
        argv = [sys.executable, "-m", "tlsprobe", *words]
        stdin: dict[str, Any] = {"input": input} if input is not None else {
            "stdin": subprocess.DEVNULL}
        try:
            proc = subprocess.run(argv, cwd=tmp_path, env=child_env, capture_output=True,
                                  text=True, timeout=timeout, **stdin)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{' '.join(argv[2:])} timed out after {timeout}s; stderr so far: "
                        f"{(exc.stderr or b'')[-500:]!r}")
        return CliResult(proc.returncode, proc.stdout, proc.stderr)
    return run
