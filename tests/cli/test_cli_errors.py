"""cli.py's exit codes for what no command expected: a stray exception of any class (a
ValueError or OSError too) is a bug, exit 70 with one stderr line naming it an internal
error; TLSPROBE_DEBUG=1 adds the traceback. Usage errors stay exit 2 (issue 31 item 4)."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tlsprobe import cli
from tlsprobe.errors import EXIT_INTERNAL, EXIT_USAGE, UsageError

REPO = Path(__file__).resolve().parents[2]


class _Command:
    """A command whose run raises `error` (a bug planted in it)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target")

    def run(self, args: argparse.Namespace) -> int:
        raise self.error


def _run(monkeypatch: pytest.MonkeyPatch, error: BaseException, debug: bool = False
         ) -> tuple[int, str]:
    monkeypatch.setattr(cli, "_load", lambda name: _Command(error))
    if debug:
        monkeypatch.setenv(cli.DEBUG_ENV, "1")
    else:
        monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    # a closed pipe sends stdout's file descriptor to /dev/null: not the one pytest's
    # capture reads back at teardown (on an xdist worker that was a "Bad file descriptor")
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    return cli.main(["scan", "127.0.0.1:1"]), err.getvalue()


@pytest.mark.parametrize("error", [ValueError("invalid literal for int() with base 10: 'x'"),
                                   OSError(22, "Invalid argument"), KeyError("missing"),
                                   TypeError("unsupported operand")],
                         ids=lambda e: type(e).__name__)
def test_a_stray_exception_is_an_internal_error(monkeypatch: pytest.MonkeyPatch,
                                                error: Exception) -> None:
    """Exit 70 and one line naming the exception, never exit 2 (which reads as the user's
    mistake: a stray ValueError/OSError was exit 2 before)."""
    code, err = _run(monkeypatch, error)
    assert code == EXIT_INTERNAL == 70
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tlsprobe: internal error: {type(error).__name__}: ")
    assert lines[0].endswith("(a bug in tlsprobe; rerun with TLSPROBE_DEBUG=1 for the "
                             "traceback)")


def test_debug_shows_the_traceback_and_keeps_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    code, err = _run(monkeypatch, ValueError("planted"), debug=True)
    assert code == EXIT_INTERNAL
    assert err.startswith("Traceback (most recent call last):")
    assert "ValueError: planted" in err
    assert err.splitlines()[-1].startswith("tlsprobe: internal error: ValueError: planted")


def test_only_the_unexpected_is_exit_70(monkeypatch: pytest.MonkeyPatch) -> None:
    """A UsageError stays exit 2 with its one line, a closed pipe 141 with nothing on
    stderr; the ValueError beside them (a bug) is 70, where it was 2."""
    code, err = _run(monkeypatch, UsageError("--flag: bad"))
    assert (code, err) == (EXIT_USAGE, "tlsprobe: error: --flag: bad\n")
    code, err = _run(monkeypatch, BrokenPipeError())
    assert (code, err) == (141, "")
    code, err = _run(monkeypatch, ValueError("--flag: bad"))
    assert code == EXIT_INTERNAL and err.startswith("tlsprobe: internal error: ValueError: ")


def test_the_real_entry_point(tmp_path: Path) -> None:
    """`python -m tlsprobe` with a bug planted in a command (a sitecustomize patching the
    scan command's run): exit 70, one line; an argparse error stays exit 2."""
    (tmp_path / "sitecustomize.py").write_text(
        "import tlsprobe.commands.scan as s\n"
        "def run(args):\n    raise ValueError('planted bug')\n"
        "s.run = run\n", encoding="utf-8")
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "tlsprobe", "scan", "127.0.0.1:1"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
                          check=False)
    assert done.returncode == 70, done.stderr
    assert done.stderr.count("\n") == 1 and "internal error: ValueError: planted bug" in \
        done.stderr
    done = subprocess.run([sys.executable, "-m", "tlsprobe", "scan", "--per-host", "x"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
                          check=False)
    assert done.returncode == 2 and done.stderr.startswith("tlsprobe: error: ")



def test_an_output_file_that_fails_while_written_is_its_usage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk while `pcap --csv FILE` writes is that file's one line, exit 2, naming
    the option (not a stray OSError: that would now read as a bug, exit 70)."""
    from tlsprobe.report import csv_out

    def full(self: csv_out.PcapCsv) -> None:
        self._fh.close()      # the file goes; what was buffered did not fit
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(csv_out.PcapCsv, "close", full)
    out = tmp_path / "rows.csv"
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    code = cli.main(["pcap", str(REPO / "captures" / "tls13_hrr.pcap"), "--csv", str(out),
                     "--no-progress"])
    assert (code, err.getvalue()) == (
        EXIT_USAGE, f"tlsprobe: error: --csv {out}: no space left on device\n")


def _limited(gigabytes: int) -> Callable[[], None]:
    def limit() -> None:     # the child's address space: a reader that reads whole fails
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (gigabytes << 30, gigabytes << 30))
    return limit


@pytest.mark.parametrize("args, words", [
    (("scan", "-f", "/dev/zero"), "/dev/zero: larger than 64 MiB: not a list of HOST[:PORT]"),
    (("survey", "/dev/zero", "--out", "{d}/o"), "/dev/zero: larger than 64 MiB"),
    (("scan", "127.0.0.1:9", "--policy", "/dev/zero"),
     "policy file /dev/zero: larger than 1 MiB"),
    (("scan", "127.0.0.1:9", "--baseline", "/dev/zero"),
     "--baseline /dev/zero: larger than 64 MiB"),
    (("scan", "127.0.0.1:9", "--policy", "{d}/latin1.json"),
     "policy file {d}/latin1.json: not UTF-8 text (byte 0xe9 at offset 10)"),
])
def test_input_files_are_read_bounded_and_decoded_as_usage_errors(tmp_path: Path, args,
                                                                  words) -> None:
    """Target lists, policies and baselines were read whole: `scan -f /dev/zero` (or a
    pipe, which has no size to stat) grew by gigabytes until killed; a policy file in
    Latin-1 was an internal error (UnicodeDecodeError, exit 70). Each is one usage line,
    exit 2, within a bounded memory (2 GiB of address space here)."""
    (tmp_path / "latin1.json").write_bytes('{"name": "\u00e9t\u00e9"}'.encode("latin-1"))
    argv = [a.format(d=tmp_path) for a in args]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "tlsprobe", *argv], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120, check=False,
                          stdin=subprocess.DEVNULL, preexec_fn=_limited(2))
    assert done.returncode == 2, done.stderr[-500:]
    line, = done.stderr.splitlines()
    assert line.startswith("tlsprobe: error: ") and words.format(d=tmp_path) in line, line
