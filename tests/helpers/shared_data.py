"""The read-only data laid beside every clone in CI (`../shared`: the third-party captures
corpus with tshark's truth, the IANA registries, the lab's DH parameters). CI always has it,
so a test that needs it fails where it is absent, naming the path and how to point at it;
it is never skipped (a skip would let a run without the corpus pass unseen).

Every test finds it here, and nowhere else (tests/project/test_suite_layout.py checks):
`captures_dir()`, `iana_dir()`, `lab_dh_dir()`, each `$TLSPROBE_SHARED/<part>` (default
`<repo>/../shared/<part>`) unless its own variable says otherwise; `required(...)` returns
the path or fails the test with `shared_missing`."""
from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]
#: the whole folder elsewhere (a git worktree's ../shared is not the clone's)
SHARED_ENV = "TLSPROBE_SHARED"
CAPTURES_ENV = "TLSPROBE_CAPTURES"
IANA_ENV = "TLSPROBE_IANA"


def shared_root() -> Path:
    return Path(os.environ.get(SHARED_ENV) or REPO.parent / "shared")


def captures_dir() -> Path:
    """The third-party captures corpus ($TLSPROBE_CAPTURES, else <shared>/captures)."""
    return Path(os.environ.get(CAPTURES_ENV) or shared_root() / "captures")


def iana_dir() -> Path:
    """The copy of IANA's TLS registries ($TLSPROBE_IANA, else <shared>/iana)."""
    return Path(os.environ.get(IANA_ENV) or shared_root() / "iana")


def lab_dh_dir() -> Path:
    """The lab's DH parameter files (<shared>/lab/dh)."""
    return shared_root() / "lab" / "dh"


def shared_missing(what: str, path: Path | str, env: str | None = None) -> NoReturn:
    """Fail the test: `what` is not at `path` (set `env` to point elsewhere)."""
    hint = f"set {env} to its folder, or " if env else ""
    pytest.fail(f"{what} not found at {path} ({hint}set {SHARED_ENV} to the shared folder, "
                "or lay ../shared beside the clone, as CI does)", pytrace=False)


def required(path: Path, what: str, env: str | None = None) -> Path:
    """`path` when it exists; otherwise the test fails (`shared_missing`)."""
    if not path.exists():
        shared_missing(what, path, env)
    return path
