"""The installed package imports only the standard library and its declared dependencies.

An import of a package that only the test extra (or the development machine) brings would
work under `pip install -e '.[test]'` and fail for a user after `pip install .`: every
module of tlsprobe is read here and each runtime import (imports under TYPE_CHECKING are
not run) is checked against `sys.stdlib_module_names` and pyproject's dependencies.
"""
from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# distribution name -> the top-level module it installs
MODULE_OF = {"cryptography": "cryptography", "scapy": "scapy", "tlslite-ng": "tlslite",
             "rich": "rich", "kyber-py": "kyber_py", "matplotlib": "matplotlib",
             "dask": "dask", "pyarrow": "pyarrow"}
#: the extras a user installs for a feature (not the test extra): modules the package may
#: import lazily for that feature, with a one-line error naming the extra when it is missing
FEATURE_EXTRAS = ("plot", "cluster")


def _declared() -> set[str]:
    """Modules of the dependencies and of the feature extras (plot, cluster)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    wanted = list(project["dependencies"]) + [d for name in FEATURE_EXTRAS
                                              for d in extras.get(name, [])]
    names = {d.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip() for d in wanted}
    assert names <= set(MODULE_OF), f"map these distributions to modules: {names - set(MODULE_OF)}"
    return {MODULE_OF[n] for n in names}


def _runtime_imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_runtime_imports_are_stdlib_or_declared() -> None:
    allowed = set(sys.stdlib_module_names) | _declared() | {"tlsprobe", "__future__"}
    stray = {}
    for path in sorted((REPO / "tlsprobe").rglob("*.py")):
        extra = _runtime_imports(ast.parse(path.read_text(), str(path))) - allowed
        if extra:
            stray[str(path.relative_to(REPO))] = sorted(extra)
    assert stray == {}, f"undeclared runtime imports: {stray}"


# -- the built distributions ---------------------------------------------------------------
# `python -m build` is run once per module (about 3 s of CPU): the sdist, then the wheel
# built from that sdist, so the wheel also proves the sdist complete. --no-isolation uses the
# test environment's setuptools and wheel (the test extra lists them with `build`) instead
# of downloading them for a fresh environment. `pipx install .` installs this same wheel
# into a venv of its own (checked by hand: too slow and networked for the suite).
PACKAGE_ONLY = ("tlsprobe/", "tlsprobe-")   # the package and its .dist-info, nothing else


def _package_files() -> set[str]:
    """Every file of the source package (data files, py.typed, modules), as wheel paths."""
    return {path.relative_to(REPO).as_posix() for path in (REPO / "tlsprobe").rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"wheel": ..., "sdist": ...} built from a copy of the sources (the build writes its
    build/ and egg-info into the tree it builds)."""
    base = tmp_path_factory.mktemp("dists")
    src, out = base / "src", base / "out"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "setup.py", "MANIFEST.in"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "build_backend", src / "build_backend",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(REPO / "tlsprobe", src / "tlsprobe",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                           str(out), str(src)], capture_output=True, text=True, timeout=300,
                          cwd=base, env={k: v for k, v in os.environ.items()
                                         if k != "TLSPROBE_COMPILE"})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def test_wheel_holds_the_package_its_data_and_entry_point(dists: dict[str, Path]) -> None:
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = set(wheel.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
        metadata = wheel.read(f"{info}/METADATA").decode()
    assert sorted(_package_files() - names) == [], "source files missing from the wheel"
    for needed in ("tlsprobe/py.typed", "tlsprobe/data/known_dh_primes.json",
                   "tlsprobe/data/policies/mozilla-intermediate-6.0.json",
                   "tlsprobe/registry/_generated.py", "tlsprobe/api.py"):
        assert needed in names
    # the JSON Schemas of the outputs (docs/SCHEMAS.md), every one
    schemas = sorted(n for n in names if n.startswith("tlsprobe/data/schemas/")
                     and n.endswith(".schema.json"))
    assert len(schemas) == len(list((REPO / "tlsprobe/data/schemas").glob("*.schema.json"))) >= 7
    assert sorted(n for n in names if not n.startswith(PACKAGE_ONLY)) == []  # no tests/
    # without TLSPROBE_COMPILE=1 the package is pure Python (tests/project/test_compiled.py
    # builds the other one)
    assert [n for n in names if n.endswith((".so", ".pyd"))] == []
    scripts = configparser.ConfigParser()
    scripts.read_string(entry_points)
    assert dict(scripts["console_scripts"]) == {"tlsprobe": "tlsprobe.cli:main"}
    required = {_name(line.split(":", 1)[1]) for line in metadata.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert required == {_name(d) for d in project["dependencies"]}
    # the one version (tlsprobe/_version.py): the distribution's is read from it
    from tlsprobe._version import __version__
    assert f"\nVersion: {__version__}\n" in metadata and "version" not in project


def _name(requirement: str) -> str:
    """The distribution name of a requirement ("kyber-py>=1.0; ..." -> "kyber-py")."""
    requirement = requirement.strip()
    for stop in "<>=![;( ":
        requirement = requirement.split(stop)[0]
    return requirement.strip().lower().replace("_", "-")


_INSTALLED = """\
import sys
from importlib.metadata import entry_points
import tlsprobe
assert tlsprobe.__file__.startswith(sys.argv[1]), tlsprobe.__file__
from tlsprobe.kex.dhprime import known_dh_primes
assert known_dh_primes(), "the known DH primes did not load"
(main,) = [ep.load() for ep in entry_points(group="console_scripts", name="tlsprobe")]
sys.exit(main(["scan", "--list-policies"]))
"""


def test_the_wheel_runs_from_its_own_files(dists: dict[str, Path], tmp_path: Path) -> None:
    """The unpacked wheel alone (not the repository) gives the `tlsprobe` entry point,
    which finds its policy files and DH primes (data files) there."""
    site = tmp_path / "site"
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        wheel.extractall(site)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-c", _INSTALLED, str(site)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mozilla-intermediate-6.0" in done.stdout and "Mozilla" in done.stdout


def test_sdist_holds_the_sources(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    # the build backend and the optional compiled fast path's build travel with the sources
    assert {"pyproject.toml", "README.md", "PKG-INFO", "setup.py", "build_backend/tlsprobe_build.py",
            "build_backend/compiled_modules.txt"} <= names
    assert sorted(_package_files() - names) == []
