"""The lab environment: a Python with pyOpenSSL and aioquic, apart from the test environment.

pyOpenSSL caps `cryptography` below the newest release (and aioquic requires pyOpenSSL), so
neither may be in the test environment, which must resolve what a plain `pip install .`
does (tests/project/test_dependencies.py). The lab servers and clients built on them run as
subprocesses of this interpreter instead:
1. `$TLSPROBE_LAB_PYTHON`, when set;
2. `<repo>/.venv-lab/bin/python` (what `bash .ci/run` creates from
   tests/lab_servers/requirements.txt);
3. the test interpreter itself when it happens to have both (a developer's all-in-one venv).
A missing or incomplete lab environment is `servers.peer_unavailable` for the tests that
need it (a skip locally, a failure under CI), with the command that creates it.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS_DIR.parent
ENV_VAR = "TLSPROBE_LAB_PYTHON"
DEFAULT_PYTHON = REPO_ROOT / ".venv-lab" / "bin" / "python"
REQUIREMENTS = TESTS_DIR / "lab_servers" / "requirements.txt"
MODULES = ("OpenSSL", "aioquic")
HINT = (f"create it with `python3 -m venv .venv-lab && .venv-lab/bin/pip install -r "
        f"tests/lab_servers/requirements.txt` (bash .ci/run does) or set {ENV_VAR}")


@lru_cache(maxsize=1)
def _resolve() -> tuple[str | None, str | None]:
    """(python, None) or (None, reason)."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        python = configured
    elif DEFAULT_PYTHON.exists():
        python = str(DEFAULT_PYTHON)
    elif all(importlib.util.find_spec(m) is not None for m in MODULES):
        return sys.executable, None
    else:
        return None, f"no lab environment with pyOpenSSL and aioquic: {HINT}"
    if not os.access(python, os.X_OK):
        return None, f"lab environment {python} is not an executable: {HINT}"
    check = "import " + ", ".join(MODULES)
    try:
        done = subprocess.run([python, "-c", check], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"lab environment {python} does not run ({exc}): {HINT}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"lab environment {python} lacks {', '.join(MODULES)} ({last}): {HINT}"
    return python, None


def lab_python() -> str | None:
    """The lab interpreter, or None (see `missing_reason`)."""
    return _resolve()[0]


def missing_reason() -> str | None:
    """None when the lab environment is usable, else a one-line reason with the fix."""
    return _resolve()[1]


def require() -> str:
    """The lab interpreter; `peer_unavailable` (skip, or fail under CI) when missing."""
    python, reason = _resolve()
    if python is None:
        from tests.helpers.servers import peer_unavailable
        peer_unavailable(reason or "no lab environment")
        raise AssertionError("unreachable")
    return python


def run_script(name: str, args: list[str], *, input: str | None = None,
               timeout: float = 60.0) -> str:
    """Run tests/lab_servers/NAME with the lab interpreter; its stdout (RuntimeError with
    its stderr when it fails)."""
    python = require()
    done = subprocess.run([python, str(TESTS_DIR / "lab_servers" / name), *args],
                          input=input if input is not None else "", capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{name} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout
