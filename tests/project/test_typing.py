"""The package is typed to the edge: `mypy --strict tlsprobe` reports nothing (issue 12 item 5).

This is the CI step (mypy comes with the test extra that .ci/run installs): a failure shows
mypy's own report. Tests and benchmarks are not held to --strict. pyproject's [tool.mypy]
sets, for the package, each flag that --strict enables (so that a plain `mypy` checks the
same way); the second test keeps that list equal to what this mypy's --strict means.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _mypy(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "mypy", *args], capture_output=True,
                              text=True, cwd=REPO, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mypy {' '.join(args)} did not end within {timeout:g} s: {exc.stdout!r}")


@pytest.mark.timeout(900)   # a cold cache on a busy 2-core machine: a few minutes
def test_mypy_strict_is_clean(request: pytest.FixtureRequest) -> None:
    from tests.helpers import early_mypy   # started when the session collected this test (tests/helpers/early_mypy.py)
    try:
        early = early_mypy.result(request.config, timeout=840)
    except subprocess.TimeoutExpired:
        pytest.fail("mypy --strict tlsprobe did not end within 840 s")
    if early is None:
        done = _mypy("--strict", "tlsprobe", timeout=840)
        early = done.returncode, done.stdout + done.stderr
    code, report = early
    assert "No module named mypy" not in report, \
        "mypy is missing: pip install -e '.[test]' (it is in the test extra)"
    assert code == 0, f"mypy --strict tlsprobe:\n{report}"


def test_pyproject_sets_every_strict_flag_for_the_package() -> None:
    help_text = " ".join(_mypy("--help", timeout=120).stdout.split())
    listed = re.search(r"--strict Strict mode; enables the following flags: (.*?)(?= --[a-z-]+ "
                       r"[A-Z]| {2}|$)", help_text)
    assert listed is not None, help_text[:2000]
    flags = {f.strip(" ,.").replace("- ", "-") for f in listed.group(1).split(", ")}
    wanted = {f.removeprefix("--").removeprefix("no-").replace("-", "_") for f in flags}
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]
    package = next(o for o in config["overrides"] if "tlsprobe.*" in o["module"])
    have = {k for k, v in package.items() if v is True} | \
        {k for k in ("warn_redundant_casts", "no_implicit_reexport") if config.get(k) is True}
    # --no-implicit-reexport is spelt no_implicit_reexport = true in the config
    have = {k.removeprefix("no_") for k in have}
    assert wanted - have == set(), f"add to pyproject's [tool.mypy]: {sorted(wanted - have)}"
    assert config.get("files") == ["tlsprobe"]
