"""The suite's own layout (docs/INTERNALS.md, "tests/"): one home per package, helpers
imported by name, ../shared found in one place and never skipped when absent."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
#: the top of tests/: the fixtures and the package marker, no test module
TOP_FILES = {"__init__.py", "conftest.py"}


def _sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_test_module_lives_in_the_folder_of_its_package() -> None:
    top = sorted(p.name for p in TESTS.glob("*.py") if p.name not in TOP_FILES)
    assert top == [], "move these into tests/<package>/ (or tests/project/)"


def test_every_folder_of_tests_is_a_package() -> None:
    """(a data folder holds fixtures and the script that makes them, not test modules)"""
    folders = {p.parent for p in _sources() if "data" not in p.relative_to(TESTS).parts}
    missing = sorted(str(f.relative_to(REPO)) for f in folders
                     if not (f / "__init__.py").is_file())
    assert missing == [], "add an __init__.py: tests import each other by full name"


def test_nothing_edits_sys_path() -> None:
    """Helpers are imported by name (pyproject's pythonpath puts the repository first), the
    server scripts run as `python -m tests...` or from their own folder."""
    edits = re.compile(r"\bsys\.path\s*(\.\w+\(|\[[^\]]*\]\s*=|[+]?=)")
    found = [f"{p.relative_to(REPO)}:{n}" for p in _sources()
             for n, line in enumerate(p.read_text().splitlines(), 1) if edits.search(line)]
    assert found == []


def test_shared_data_is_found_only_through_its_helper() -> None:
    """../shared (corpus, IANA copies, lab DH) is located by tests/helpers/shared_data.py
    alone, which fails a test when it is absent: no other module builds the path."""
    own = {TESTS / "helpers" / "shared_data.py", Path(__file__).resolve()}
    path_literal = re.compile(r"""(/\s*["']shared["'])|(["']\.\./shared)|(["']shared["']\s*/)""")
    found = [f"{p.relative_to(REPO)}:{n}" for p in _sources() if p not in own
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if path_literal.search(line)]
    assert found == []


def test_tests_that_need_shared_fail_without_it(tmp_path: Path) -> None:
    """Without ../shared, each kind of user (the captures fixture, the corpus, the IANA
    copies, the lab's DH files) fails with the path it looked at; none is skipped."""
    picks = ["tests/kex/test_kex.py::test_ffdhe_primes_match_lab_files",
             "tests/registry/test_registry.py::test_committed_module_matches_generator_output",
             "tests/capture/test_corpus.py::test_corpus_matches_truth_streams_frames_and_counts",
             "tests/offline/test_pcap_corpus.py::test_agreement_is_near_total_on_the_core_fields",
             "tests/wire/test_captures.py::test_files_without_tls_over_tcp_are_listed"]
    absent = tmp_path / "no-shared"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TLSPROBE_CAPTURES", "TLSPROBE_IANA", "PYTEST_XDIST_WORKER",
                        "PYTEST_ADDOPTS")}
    env["TLSPROBE_SHARED"] = str(absent)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-p", "no:randomly", *picks],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    summary = out.strip().splitlines()[-1]
    assert "skipped" not in summary and "passed" not in summary, summary
    assert len(re.findall(r"^(FAILED|ERROR) ", out, re.M)) == len(picks), out[-3000:]
    assert out.count(f"not found at {absent}") >= len(picks), out[-3000:]
