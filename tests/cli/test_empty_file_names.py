"""An option that names a file or a folder given an empty name (`--csv ''`, a variable
left unset in a script): a one-line usage error, exit 2, before any work. It was taken as
not given (the audit ran, no file was written, exit 0) or, for `survey --out ''`, as the
current folder (the survey's files written into it)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

CAPTURE = Path(__file__).resolve().parents[2] / "captures" / "tls13_hrr.pcap"

CASES = [
    ("survey", "{targets}", "--out", ""),
    ("survey", "diff", "{tmp}", "{tmp}", "--jsonl", ""),
    ("survey", "diff", "{tmp}", "{tmp}", "--parquet", " "),
    ("survey", "summary", "{tmp}", "--html", ""),
    ("scan", "127.0.0.1:1", "--csv", ""),
    ("scan", "127.0.0.1:1", "--json-out", ""),
    ("scan", "127.0.0.1:1", "--sarif", ""),
    ("scan", "127.0.0.1:1", "-f", ""),
    ("clients", "127.0.0.1:1", "--html", ""),
    ("pcap", str(CAPTURE), "--csv", ""),
    ("127.0.0.1:1", "--keylog", ""),
]


@pytest.mark.parametrize("words", CASES, ids=lambda w: " ".join(w))
def test_an_empty_file_name_is_a_usage_error(words: tuple[str, ...], tmp_path: Path,
                                             run_cli: Callable[..., Any]) -> None:
    targets = tmp_path / "targets.txt"
    targets.write_text("127.0.0.1:1\n")
    before = sorted(tmp_path.iterdir())
    done = run_cli(*(w.format(tmp=tmp_path, targets=targets) for w in words), timeout=120)
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    option = next(w for w in reversed(words) if w.startswith("-"))
    assert f"error: argument {option}" in lines[0] and "an empty" in lines[0], lines[0]
    assert sorted(tmp_path.iterdir()) == before       # nothing written (cwd is tmp_path)
