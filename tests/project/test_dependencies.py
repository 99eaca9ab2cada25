"""The test environment has the versions a user gets: for every package a plain
`pip install .` resolves (the [project] dependencies and what they pull in), the installed
version is the one pip picks today. A test extra that caps a dependency (pyOpenSSL caps
`cryptography` below 51, which hid a deprecation warning users saw) fails here.

pip resolves the [project] dependencies themselves (what `pip install .` asks for, without
building tlsprobe: no files written in the checkout) with --dry-run --ignore-installed; it
reads the index (PyPI, and this machine's pip configuration), within a time limit."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PIP_TIMEOUT = 240.0


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _resolve(requirements: list[str]) -> dict[str, str]:
    """name -> version that `pip install REQUIREMENTS` would install in a fresh environment
    of this interpreter."""
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--no-input", "--disable-pip-version-check", "--report", "-",
            *requirements]
    failure = ""
    for _ in range(2):  # one retry: an index read can fail once on a busy network
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT,
                                  stdin=subprocess.DEVNULL, cwd=REPO)
        except subprocess.TimeoutExpired:
            failure = f"pip did not resolve within {PIP_TIMEOUT:.0f} s"
            continue
        if done.returncode == 0:
            report = json.loads(done.stdout)
            return {_canonical(item["metadata"]["name"]): item["metadata"]["version"]
                    for item in report["install"]}
        failure = f"pip exited {done.returncode}: {done.stderr.strip()[-1500:]}"
    pytest.fail(f"cannot tell what `pip install .` resolves ({failure}); the index must be "
                "reachable for this test", pytrace=False)


def test_installed_versions_are_what_pip_install_resolves() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    resolved = _resolve(requirements)
    direct = {_canonical(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in requirements}
    assert direct <= set(resolved), f"pip resolved no {sorted(direct - set(resolved))}"
    differ = []
    for name, version in sorted(resolved.items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "not installed"
        if installed != version:
            differ.append(f"{name}: test environment {installed}, `pip install .` {version}")
    assert not differ, (
        "the test environment differs from a fresh `pip install .` (a test dependency caps "
        "one, or the environment is stale: pip install -U -e '.[test]'):\n  "
        + "\n  ".join(differ))
