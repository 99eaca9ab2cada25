"""`-` given to an option that writes a file (`--json-out -`, as if it were stdout): a
one-line usage error, exit 2, before any work. It was written as a file named `-` in the
current folder (stdout keeps the report), after the whole run."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.helpers.servers import Server

CASES = [
    ("{target}", "--json-out"),
    ("{target}", "--keylog"),
    ("{target}", "--pcap-out"),
    ("{target}", "--timing", "--timing-runs", "1", "--timing-warmup", "0", "--timing-groups",
     "x25519", "--json-out"),
    ("scan", "{target}", "--checks", "versions", "--csv"),
    ("scan", "{target}", "--checks", "versions", "--msg"),
    ("clients", "{target}", "--json-out"),
]


@pytest.mark.parametrize("words", CASES, ids=lambda w: " ".join(w))
def test_a_dash_for_a_written_file_is_a_usage_error(
        words: tuple[str, ...], server_cache: Callable[..., Server],
        run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    srv = server_cache("openssl", groups=["X25519"], proto="both")
    argv = [w.format(target=f"127.0.0.1:{srv.port}") for w in words]
    done = run_cli(*argv, "-", "--no-verify", timeout=120)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0] == (f"tlsprobe: error: {words[-1]} -: this option writes a file, and '-' "
                        "is not stdout here (stdout holds the report); give a file name (./- "
                        "for a file named -)"), lines[0]
    assert not (tmp_path / "-").exists()      # cwd is tmp_path
