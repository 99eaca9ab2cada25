"""The files a user names (a policy, a target list, a trust store, a baseline, a folder of
client profiles, a survey's manifest) are read by one reader, tlsprobe/files.py: bounded in
size, one usage line (exit 2) naming the file when it cannot serve, and never a wait
without end on a named pipe that no program writes to (open() of a FIFO waits for its
writer: each of these commands hung on one, a FIFO left in a folder of profiles too)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tlsprobe.files import PIPE_WRITER_WAIT

REPO = Path(__file__).resolve().parents[2]


def _tlsprobe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m tlsprobe *args` in 2 GiB of address space (a reader that reads a device
    whole fails), failing the test if it outlives 60 s (a reader that waits for a writer)."""
    def limit() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "tlsprobe", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=60, check=False,
                          stdin=subprocess.DEVNULL, preexec_fn=limit)


#: (the command line, with {f}: the file; {d}: the folder holding it), how it names {f}
READERS = {
    "policy": (["scan", "127.0.0.1:9", "--policy", "{f}"], "policy file {f}"),
    "targets": (["scan", "-f", "{f}"], "{f}"),
    "survey-targets": (["survey", "{f}", "--out", "{d}/out"], "{f}"),
    "cafile": (["127.0.0.1:9", "--cafile", "{f}"], "--cafile {f}"),
    "baseline": (["scan", "127.0.0.1:9", "--baseline", "{f}"], "--baseline {f}"),
    "profiles-dir": (["clients", "--list", "--profiles-dir", "{d}"],
                     "cannot read the client profiles in {d}: x.json"),
    "survey-manifest": (["survey", "summary", "{d}"], "{f}"),
}


def _file_for(reader: str, tmp_path: Path) -> Path:
    """Where `reader` reads: x.json (a policy's suffix, a profile's) or the manifest."""
    folder = tmp_path / "in"
    folder.mkdir()
    return folder / ("_manifest.json" if reader == "survey-manifest" else "x.json")


def _run(reader: str, path: Path) -> tuple[int, str, str]:
    """(exit code, the one stderr line, how the line must name the file)."""
    args, named = READERS[reader]
    done = _tlsprobe(*(a.format(f=path, d=path.parent) for a in args), cwd=path.parent.parent)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return done.returncode, lines[0], named.format(f=path, d=path.parent)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_named_pipe_without_a_writer_is_a_usage_error_not_a_hang(reader: str,
                                                                   tmp_path: Path) -> None:
    path = _file_for(reader, tmp_path)
    os.mkfifo(path)
    code, line, named = _run(reader, path)
    assert (code, line) == (2, f"tlsprobe: error: {named}: a named pipe that no program "
                            f"opened for writing in {PIPE_WRITER_WAIT:g} s: start its writer "
                            "first, or give a file")


#: what a command says of a file holding "[]" (JSON, but no policy, profile or manifest)
LATE_WRITERS = {
    "policy": "{named}: expected a table/object at the top level",
    "profiles-dir": "{named}: not a client profile (a JSON object, not list)",
    "survey-manifest": "{named}: not a survey manifest",
}


@pytest.mark.parametrize("reader", sorted(LATE_WRITERS))
def test_a_named_pipe_whose_writer_comes_late_is_read(reader: str, tmp_path: Path) -> None:
    """A writer that opens the pipe after tlsprobe did (within PIPE_WRITER_WAIT), or before
    (waiting in its open for a reader), is read to its end: the command judges what it
    wrote."""
    path = _file_for(reader, tmp_path)
    os.mkfifo(path)

    def write() -> None:
        with open(path, "wb") as fh:     # waits for tlsprobe's open
            fh.write(b"[]")
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        code, line, named = _run(reader, path)
    finally:
        if writer.is_alive():        # tlsprobe never opened it: let the writer end
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(5)
    assert (code, line) == (2, "tlsprobe: error: " + LATE_WRITERS[reader].format(named=named))


def test_a_survey_manifest_is_read_bounded(tmp_path: Path) -> None:
    """The manifest of `survey summary DIR` was read whole: a _manifest.json that is a
    device (/dev/zero) grew until the memory ran out (MemoryError, exit 70)."""
    path = _file_for("survey-manifest", tmp_path)
    path.symlink_to("/dev/zero")
    code, line, named = _run("survey-manifest", path)
    assert (code, line) == (2, f"tlsprobe: error: {named}: larger than 64 MiB: not a survey "
                            "manifest")
