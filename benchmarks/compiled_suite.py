"""The whole test suite against a compiled copy of the project (not part of CI).

tests/project/test_compiled.py compares the compiled build with the sources only on what
captures exercise; this runs every test with the compiled package in the sources' place: a
copy of the checkout at HEAD (`git archive`) whose tlsprobe/ is the compiled site's (the
extension modules beside the sources of the modules left uncompiled), from
benchmarks/compiled_tree.py. The first run (2026-12-06) found a code shape mypyc translates
wrongly (a function's import binding the module's global: tests/project/test_compiled_shapes.py).

Some tests cannot pass on a compiled copy and are listed below with the reason (they patch
a compiled function from outside, which compiled callers never see, or check what the build
differs in by design); any other failure is a finding. Exit 1 when there is one.

Usage: python3 benchmarks/compiled_suite.py SITE [pytest arguments...]
    (SITE: compiled_tree.py's DIR/site; e.g. `-n 3 --dist loadgroup` or a test path)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: test id prefix -> why it cannot pass on a compiled copy
EXPECTED = {
    "tests/project/test_packaging.py::": "the copy's tree holds built extensions",
    "tests/project/test_scan_imports.py::": "compiled modules import what they use at once",
    "tests/project/test_dependencies.py::": "checks the environment, not the build",
    "tests/cli/test_cli_conventions.py::test_every_command_prints_the_program_version":
        "the version line names the compiled fast path",
    "tests/capture/test_pipe.py::": "patches compiled functions (TcpTracker.close, "
        "PipedStream's methods, _reader_main, can_pipe) or relies on such a spy",
    "tests/offline/test_reader_agreement.py::test_the_flow_reader_only_for_connections":
        "patches flowreader.FlowReader, which the compiled analyzer calls directly",
    "tests/probes/test_handshake_facts.py::": "patches offline.build.handshake_facts",
    "tests/wire/test_hello_summaries.py::test_corpus_hellos_agree_with_the_codec":
        "spies on Facts.on_message",
}


def copy_tree(site: Path, dest: Path) -> None:
    """HEAD's files at `dest`, its tlsprobe/ replaced by the compiled site's."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    shutil.rmtree(dest / "tlsprobe")
    shutil.copytree(site / "tlsprobe", dest / "tlsprobe")


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / "tlsprobe").is_dir():
        print("usage: compiled_suite.py SITE [pytest arguments...] (SITE: the site directory "
              "benchmarks/compiled_tree.py DIR made, DIR/site)", file=sys.stderr)
        return 2
    site, extra = Path(argv[0]).resolve(), argv[1:]
    with tempfile.TemporaryDirectory(prefix="tlsprobe-compiled-suite-") as tmp:
        copy_tree(site, Path(tmp))
        # the copy is the working directory, its tlsprobe/ the compiled one (no
        # PYTHONSAFEPATH: the lab servers' scripts import their neighbours)
        env = dict(os.environ, PYTHONPATH=tmp)
        env.pop("PYTHONSAFEPATH", None)
        env.setdefault("TLSPROBE_SHARED", str(REPO.parent / "shared"))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-rfE", *(extra or ["tests"])], cwd=tmp, env=env,
                              capture_output=True, text=True, check=False)
    Path("compiled_suite.log").write_text(proc.stdout + proc.stderr)
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.MULTILINE)
    found = [t for t in failed if not any(t.startswith(p) for p in EXPECTED)]
    summary = proc.stdout.strip().splitlines()[-1:] or ["(no summary: pytest said nothing)"]
    print(summary[0], "(whole output: compiled_suite.log)")
    for test in failed:
        reason = next((r for p, r in EXPECTED.items() if test.startswith(p)), None)
        print(("expected  " if reason else "FINDING   ") + test
              + (f"  ({reason})" if reason else ""))
    if proc.returncode not in (0, 1):
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        return 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
