"""The read-only data laid beside every clone in CI (`../shared`: the third-party captures
corpus with tshark's truth, the IANA registries, the lab's DH parameters). CI always has it,
so a test that needs it fails where it is absent, naming the path and how to point at it;
it is never skipped (a skip would let a run without the corpus pass unseen)."""
from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import pytest


def shared_missing(what: str, path: Path | str, env: str | None = None) -> NoReturn:
    """Fail the test: `what` is not at `path` (set `env` to point elsewhere)."""
    hint = f"set {env} to its folder, or " if env else ""
    pytest.fail(f"{what} not found at {path} ({hint}lay ../shared beside the clone, as CI "
                "does)", pytrace=False)
