"""Run `python -m tlsprobe ...` as a child and measure it: exit code, output, wall time and
the child's own peak memory (ru_maxrss from wait4 on that pid, so other children and the
test process do not blur it). A child that outlives `hard_timeout` is killed and reported
as hung."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
_WARNING = re.compile(r"^\S+:\d+: \w*Warning: ")


@dataclass(frozen=True)
class ProbeOutcome:
    argv: tuple[str, ...]
    returncode: int | None   # None: killed after hard_timeout (a hang)
    stdout: str
    stderr: str
    elapsed: float
    max_rss_kib: int
    cpu_seconds: float = 0.0   # user + system time of the child
    started: float = 0.0       # time.monotonic() when the child was started
    ended: float = 0.0         # time.monotonic() when it was seen to exit (or was killed)

    @property
    def python_warnings(self) -> list[str]:
        """`file:line: XxxWarning: ...` lines Python's warnings module printed."""
        return [line for line in self.stderr.splitlines() if _WARNING.match(line)]

    @property
    def stderr_lines(self) -> list[str]:
        """Non-empty stderr lines, Python warnings (and the source line under each) left out:
        those are checked separately, so one known warning does not mask every verdict."""
        lines, skip_next = [], False
        for line in self.stderr.splitlines():
            if skip_next and line.startswith("  "):
                skip_next = False
                continue
            skip_next = bool(_WARNING.match(line))
            if line.strip() and not skip_next:
                lines.append(line)
        return lines

    def after(self, moment: float) -> float:
        """Seconds from `moment` (a time.monotonic() reading, e.g. when the server accepted
        the child's first connection) to the child's exit: the part of its run that its own
        deadlines bound, without the interpreter's start-up, which a busy machine stretches."""
        return self.ended - max(moment, self.started)

    @property
    def command(self) -> str:
        return "python -m tlsprobe " + " ".join(self.argv)


#: what tlsprobe says when its total time limit ran out in its own start-up, before it
#: connected: a run that tested nothing of the server (a loaded machine: the interpreter's
#: start stretched), which is run again rather than judged
STARTUP_USED_UP = "was used up by tlsprobe's own start-up"
STARTUP_TRIES = 3


def run_tlsprobe(*args: str, hard_timeout: float = 20.0, cwd: str | None = None) -> ProbeOutcome:
    """One run of `python -m tlsprobe ARGS`; again (up to STARTUP_TRIES runs) while its time
    limit was used up by its own start-up."""
    for _ in range(STARTUP_TRIES):
        outcome = _run_once(args, hard_timeout, cwd)
        if STARTUP_USED_UP not in outcome.stderr:
            break
    return outcome


def _run_once(args: tuple[str, ...], hard_timeout: float, cwd: str | None) -> ProbeOutcome:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update({"COLUMNS": "120", "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"})
    argv = [sys.executable, "-m", "tlsprobe", *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                cwd=cwd or tempfile.gettempdir())
        status, rusage, hung = None, None, False
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > hard_timeout:
                proc.send_signal(signal.SIGKILL)
                _, status, rusage = os.wait4(proc.pid, 0)
                hung = True
                break
            time.sleep(0.02)
        ended = time.monotonic()
        elapsed = ended - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from reaping again
        out.seek(0)
        err.seek(0)
        return ProbeOutcome(tuple(args), None if hung else proc.returncode,
                            out.read().decode("utf-8", "replace"),
                            err.read().decode("utf-8", "replace"), elapsed, rusage.ru_maxrss,
                            rusage.ru_utime + rusage.ru_stime, start, ended)
