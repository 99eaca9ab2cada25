"""The fixtures stay correct when several test processes share the machine (pytest-xdist
workers, `.ci/run -n`): a port another process took between probing and binding is never
mistaken for the daemon's own, the early `mypy --strict` run is started once per run, not
once per worker, the modules with costly per-worker fixtures are grouped on one worker, and
a hostile run that a loaded machine's start-up used up is run again, not judged."""
from __future__ import annotations

import socket
import sys
import types
from pathlib import Path

import pytest

from tests.lab_servers import daemons
from tests.helpers.servers import CertSet

# A stand-in daemon: listens on the port given, or, when that is taken, keeps running
# without listening (as a daemon that logs the bind error and goes on would).
_DAEMON = """import socket, sys, time
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(5)
    print("listening", flush=True)
except OSError as exc:
    print("bind failed:", exc.strerror, flush=True)
time.sleep(120)
"""


def test_a_port_held_by_another_process_is_retried_on_new_ports(
        monkeypatch: pytest.MonkeyPatch, certs: CertSet, tmp_path: Path) -> None:
    thief = socket.socket()
    thief.bind(("127.0.0.1", 0))
    thief.listen(1)
    stolen = thief.getsockname()[1]
    ports = [stolen]
    calls: list[Path] = []

    def recipe(workdir: Path, certs: CertSet) -> daemons.Launch:
        calls.append(workdir)
        port = ports.pop(0) if ports else daemons.free_ports(1)[0]
        return daemons.Launch([sys.executable, "-c", _DAEMON, str(port)], {"smtp": port}, [])
    module = types.ModuleType("tests.lab_servers.fake_daemon")
    module.RECIPES = {"fake": recipe}   # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests.lab_servers.fake_daemon", module)
    monkeypatch.setitem(daemons.DAEMONS, "fake", "fake_daemon")
    try:
        started = daemons.start_daemon("fake", tmp_path / "d", certs, timeout=20)
        try:
            assert started.ports["smtp"] != stolen
            assert len(calls) == 2 and calls[1] == tmp_path / "d" / "retry-1"
            assert "listening" in started.log_tail()
        finally:
            started.stop()
    finally:
        thief.close()



def test_early_mypy_runs_once_for_all_xdist_workers(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers import early_mypy
    monkeypatch.setattr(early_mypy, "ARGV", [sys.executable, "-c",
                                             "print('checked'); raise SystemExit(3)"])
    controller = pytester.parseconfig()
    nodes = [types.SimpleNamespace(workerinput={}) for _ in range(3)]
    for node in nodes:
        early_mypy.xdist_configure_node(controller, node)
    folders = {node.workerinput[early_mypy.WORKER_KEY] for node in nodes}
    assert len(folders) == 1
    workers = [types.SimpleNamespace(workerinput=node.workerinput, stash=pytest.Stash())
               for node in nodes]
    for worker in workers:      # a worker's own collection starts nothing
        early_mypy.start(worker, [types.SimpleNamespace(nodeid=early_mypy.NODE)])  # type: ignore[arg-type, list-item]
        assert early_mypy.KEY not in worker.stash
    early_mypy.xdist_collected(controller, ["tests/x.py::t"])
    assert early_mypy.KEY not in controller.stash   # not collected by that worker: not yet
    for _ in nodes:
        early_mypy.xdist_collected(controller, ["tests/x.py::t", early_mypy.NODE])
    first = controller.stash[early_mypy.KEY]
    try:
        for worker in workers:  # every worker that runs the test reads the one run
            assert early_mypy.result(worker, timeout=60) == (3, "checked\n")  # type: ignore[arg-type]
        assert controller.stash[early_mypy.KEY] is first
    finally:
        early_mypy.stop(controller)
    assert not Path(folders.pop()).exists()


ROOT_CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


@pytest.fixture
def conftest(request: pytest.FixtureRequest) -> types.ModuleType:
    """tests/conftest.py as pytest loaded it (`import conftest` may name another folder's)."""
    for plugin in request.config.pluginmanager.get_plugins():
        if Path(getattr(plugin, "__file__", "") or "/").resolve() == ROOT_CONFTEST:
            return plugin  # type: ignore[no-any-return]
    raise AssertionError("tests/conftest.py is not loaded")


def test_every_xdist_group_names_a_test_module(conftest: types.ModuleType) -> None:
    """A renamed module would silently leave its group (and set up its fixtures per worker)."""
    root = Path(conftest.__file__).resolve().parent.parent
    for prefix in (*conftest.XDIST_GROUPS, *conftest.XDIST_SLOW_FIRST, *conftest.XDIST_LAST):
        assert (root / prefix).is_file(), prefix
    # a group handed out first that no module is in any more would order nothing
    assert set(conftest.XDIST_FIRST_GROUPS) <= set(conftest.XDIST_GROUPS.values())
    assert conftest.xdist_group("tests/hostile/test_scan_hostile.py::test_scan_survives[x]") \
        == "hostile-scan"
    assert conftest.xdist_group("tests/hostile/test_scan_hostile_more.py::test") is None


#: fixtures whose set-up is costly per worker: each module whose tests take one is grouped
GROUPED_FIXTURES = {"daemon", "dask_cluster", "cluster_run", "hostile_jobs", "parity",
                    "parity_rows", "page", "dists"}


def test_modules_with_costly_worker_fixtures_are_grouped(conftest: types.ModuleType) -> None:
    import ast
    root = Path(conftest.__file__).resolve().parent.parent
    missing = []
    for path in sorted((root / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and \
                    {a.arg for a in node.args.args} & GROUPED_FIXTURES:
                rel = path.relative_to(root).as_posix()
                if rel not in conftest.XDIST_GROUPS:
                    missing.append(f"{rel}::{node.name}")
                break
    assert missing == [], "add to tests/conftest.py XDIST_GROUPS"


def test_a_hostile_run_that_only_started_up_is_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.hostile import runner
    said = ("tlsprobe: 127.0.0.1:1: timed out: the total time limit of 12.0 s was used up by "
            "tlsprobe's own start-up (12.3 s; a busy machine?) before connecting\n")
    runs: list[str] = [said, said, ""]

    def once(args: tuple[str, ...], hard_timeout: float, cwd: str | None
             ) -> runner.ProbeOutcome:
        return runner.ProbeOutcome(args, 3 if runs[0] else 0, "", runs.pop(0), 1.0, 0)
    monkeypatch.setattr(runner, "_run_once", once)
    assert runner.run_tlsprobe("x").returncode == 0 and runs == []
    runs[:] = [said] * 4    # never gets further: the last run is what the test judges
    out = runner.run_tlsprobe("x")
    assert out.returncode == 3 and len(runs) == 4 - runner.STARTUP_TRIES
