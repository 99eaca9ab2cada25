"""Command line: argument parsing, dispatch and exit codes only.

`tlsprobe HOST[:PORT] [options]` probes a server; `tlsprobe SUBCOMMAND ...` runs the others.
Building a command's parser imports nothing heavy (no engine, registry, kex, wire,
`cryptography` or rich): each command imports what it needs when it runs, so that `--help`,
`--version` and argument errors answer at interpreter speed (tests/project/test_startup.py).
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sys import UnraisableHookArgs

from tlsprobe.commands.common import ArgumentParser, command_parser, error_line, thaw
from tlsprobe.errors import (
    EXIT_CLOSED_PIPE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    TlsprobeError,
)

#: set to 1 to see the traceback of an internal error (a bug) after its one line
DEBUG_ENV = "TLSPROBE_DEBUG"


# The command table: subcommand -> its module, imported when that command runs (a module
# imports only the standard library, `errors` and commands/common.py at module level, so
# one import costs little; importing all of them would cost every run). Plain import
# statements, no importlib: the import graph (tests/project/test_layers.py) sees every edge.
def _probe() -> ModuleType:
    from tlsprobe.commands import probe
    return probe


def _scan() -> ModuleType:
    from tlsprobe.commands import scan
    return scan


def _pcap() -> ModuleType:
    from tlsprobe.commands import pcap
    return pcap


def _speed() -> ModuleType:
    from tlsprobe.commands import speed
    return speed


def _demo() -> ModuleType:
    from tlsprobe.commands import demo
    return demo


def _timing() -> ModuleType:
    from tlsprobe.commands import timing
    return timing


def _survey() -> ModuleType:
    from tlsprobe.commands import survey
    return survey


def _clients() -> ModuleType:
    from tlsprobe.commands import clients
    return clients


#: subcommand -> the function that imports its module; "probe" is the default command
SUBCOMMANDS: dict[str, Callable[[], ModuleType]] = {
    "probe": _probe, "scan": _scan, "pcap": _pcap, "speed": _speed, "demo": _demo,
    "timing": _timing, "survey": _survey, "clients": _clients}


#: whether `main` registered the freeze at interpreter exit: what is left then is frozen
#: (gc.freeze) before the interpreter's last collection, which otherwise walks every object
#: the command and its imports made, only to free memory the process gives back anyway (a
#: quarter of the teardown's instructions, 2 % of a group audit's; an in-process caller runs
#: it once, at its own exit)
_EXIT_FREEZE: list[bool] = []


def _load(name: str) -> ModuleType:
    return SUBCOMMANDS[name]()


def build_parser(command: str) -> argparse.ArgumentParser:
    prog = "tlsprobe" if command == "probe" else f"tlsprobe {command}"
    return command_parser(_load(command), prog)


def main(argv: Sequence[str] | None = None) -> int:
    if not _EXIT_FREEZE:
        _EXIT_FREEZE.append(True)
        atexit.register(gc.freeze)
    previous = _terminate_as_interrupt()
    program = argv is None      # the process's own command line: its exit is ours
    if program:
        sys.unraisablehook = _interrupt_kept(sys.unraisablehook)
    try:
        code = _main(argv)
        if code == EXIT_INTERRUPTED and program:    # a command that said it (speed)
            _hold_signals()
        return code
    except KeyboardInterrupt:  # also while a command module is still being imported
        return interrupted(program)
    except BrokenPipeError:
        return closed_pipe()
    except Exception as exc:  # noqa: BLE001 - a bug: one line (TLSPROBE_DEBUG=1: traceback), 70
        return internal_error(exc)
    finally:
        thaw()      # what a command's start-up froze (commands/common.py start_up)
        _forget_caught_interrupts()
        if previous is not None and not _HELD:
            signal.signal(signal.SIGTERM, previous)


#: whether `_hold_signals` ran: a second Ctrl-C or SIGTERM then exits 130 at once
_HELD: list[bool] = []


def interrupted(program: bool) -> int:
    """The run ends interrupted (Ctrl-C, SIGTERM): "tlsprobe: interrupted", exit 130. For
    the process's own run (`program`), a further signal from here on (a second Ctrl-C
    during the teardown, or one sent to the process group and by PID) exits 130 at once
    rather than killing the process by the signal: the exit code stays the one said."""
    while program:
        try:
            _hold_signals()     # (returns without holding off the main thread)
            break
        except KeyboardInterrupt:   # the second signal came before the first was held
            continue
    print("tlsprobe: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def _interrupt_kept(hook: Callable[[UnraisableHookArgs], object]
                    ) -> Callable[[UnraisableHookArgs], None]:
    """sys.unraisablehook: a KeyboardInterrupt raised where Python cannot raise (Ctrl-C in
    a weakref callback of the import lock, in a __del__) was printed as "Exception ignored"
    and lost, the run going on to its end; the signal is sent again instead, to be raised
    where the run is (SIGINT when Python handles it, else SIGTERM: both end as Ctrl-C)."""
    def unraisable(info: UnraisableHookArgs) -> None:
        if not isinstance(info.exc_value, KeyboardInterrupt):
            hook(info)
            return
        handled = callable(signal.getsignal(signal.SIGINT))
        signal.raise_signal(signal.SIGINT if handled else signal.SIGTERM)

    return unraisable


def _hold_signals() -> None:
    """SIGINT and SIGTERM exit 130 at once (what is buffered written first)."""
    def again(signum: int, frame: FrameType | None) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - closed or mid-write: what was written stays
                pass
        os._exit(EXIT_INTERRUPTED)

    try:
        signal.signal(signal.SIGINT, again)
        signal.signal(signal.SIGTERM, again)
    except ValueError:   # not the main thread
        return
    _HELD.append(True)
    # the interpreter's finalization sets a handler back to the default (killed by the
    # signal) but leaves an ignored signal ignored: the last Python-level step (an atexit
    # callback registered last runs first; the threads are joined before) ignores them
    atexit.register(_ignore_signals)


def _forget_caught_interrupts() -> None:
    """Under `python -m tlsprobe`, CPython kills its process with SIGINT at exit (exit
    code -2, not ours) when a KeyboardInterrupt once ended the running of a source string
    (`exec` of a string: a dataclass or namedtuple being made while a module loads lazily,
    the first Ctrl-C's usual place at start-up), even one caught and answered since: the
    flag `_PyRuntime.signals.unhandled_keyboard_interrupt`, set by such an eval, cleared at
    the start of the next one, read by Py_RunMain. Running one string here, once every
    interruption was answered, clears it (the console script exits by another path)."""
    exec("None")  # noqa: S102 - a constant: the flag's reset, nothing else is run


def _ignore_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def _terminate_as_interrupt() -> signal.Handlers | None:
    """SIGTERM (a CI job's timeout, `kill PID`) ends a run as Ctrl-C does: the results
    printed so far stay, "tlsprobe: interrupted" says the run did not finish, exit 130
    (the default SIGTERM killed it with nothing said: a scan's or a survey's end simply
    missing). Only where SIGTERM is at its default (a program that set its own, or
    ignores it, keeps it) and in the main thread; the previous handler to set back, or
    None. A process forked from this one (a worker) that gets SIGTERM ends as by default."""
    if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return None
    main_pid = os.getpid()

    def terminated(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != main_pid:   # a forked worker: the default end, quietly
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, terminated)
    except ValueError:   # not the main thread (an in-process caller's)
        return None
    return signal.SIG_DFL


def closed_pipe() -> int:
    """stdout was closed by its reader (`tlsprobe scan HOST | head -1`): exit 141, as a
    Unix tool killed by SIGPIPE does (128 + 13; never 1, which means "findings at or above
    --fail-on"), with nothing on stderr. What is left in stdout's buffer goes to /dev/null
    (Python's documented way), so that the flush at interpreter exit does not print
    "Exception ignored ... BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):    # no file descriptor behind stdout (a test's buffer)
        pass
    return EXIT_CLOSED_PIPE


def _legacy_words(command: str, words: list[str]) -> list[str]:
    """Command-line words as argparse should see them: `--checks -sct` (a value that starts
    with '-', an exclusion) is `--checks=-sct`. `pcap --version VALUE` (the TLS version
    filter before it became --tls-version) is a usage error rather than the program's
    version and exit 0 where a filter was meant."""
    out: list[str] = []
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if out and out[-1] == "--checks" and word.startswith("-") and \
                not word.startswith("--"):
            out[-1] = f"--checks={word}"
            continue
        if command == "pcap" and word == "--version" and nxt and not nxt.startswith("-"):
            from tlsprobe.errors import UsageError
            raise UsageError(f"pcap --version prints the program's version; the TLS version "
                             f"filter is --tls-version (--tls-version {nxt})")
        out.append(word)
    return out


def _main(argv: Sequence[str] | None) -> int:
    started = time.monotonic()    # a command's total time limit counts from here
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = "probe"
    if args_list and args_list[0] in SUBCOMMANDS:
        command = args_list.pop(0)
    parser = build_parser(command)
    others = ", ".join(k for k in SUBCOMMANDS if k != "probe")
    if not args_list and command == "probe":
        print(f"usage: tlsprobe HOST[:PORT] [options]  |  tlsprobe SUBCOMMAND ... ({others})",
              file=sys.stderr)
        print("tlsprobe: error: no target given (see tlsprobe --help)", file=sys.stderr)
        return EXIT_USAGE
    if command == "probe" and args_list and args_list[0] in ("-h", "--help"):
        parser.epilog = f"subcommands: {others} (tlsprobe SUBCOMMAND --help)"
    if command == "probe" and isinstance(parser, ArgumentParser) and \
            not args_list[0].startswith("-"):
        parser.first_word = args_list[0]
        parser.subcommands = tuple(k for k in SUBCOMMANDS if k != "probe")
    try:
        args_list = _legacy_words(command, args_list)
    except TlsprobeError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    args = parser.parse_intermixed_args(args_list)
    args.started = started
    if isinstance(parser, ArgumentParser):
        args.given_options = parser.given_options(args_list)
    try:
        return int(_load(command).run(args))
    except TlsprobeError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return closed_pipe()


def internal_error(exc: Exception) -> int:
    """An exception no command expected (a stray ValueError or OSError is a bug too: the
    expected errors are TlsprobeErrors with their own codes): one stderr line naming it an
    internal error, the traceback too with TLSPROBE_DEBUG=1; exit 70, never 2 (usage), so
    that a bug does not read as the user's mistake."""
    from tlsprobe.report.escape import shown
    if os.environ.get(DEBUG_ENV) == "1":
        import traceback
        traceback.print_exception(exc, file=sys.stderr)
    text = shown(" ".join(str(exc).split())[:300])
    print(f"tlsprobe: internal error: {exc.__class__.__name__}: {text} (a bug in tlsprobe; "
          f"rerun with {DEBUG_ENV}=1 for the traceback)", file=sys.stderr)
    return EXIT_INTERNAL


__all__ = ["SUBCOMMANDS", "build_parser", "closed_pipe", "error_line", "main"]
