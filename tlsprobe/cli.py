"""Command line: argument parsing, dispatch and exit codes only.

`tlsprobe HOST[:PORT] [options]` probes a server; `tlsprobe SUBCOMMAND ...` runs the others.
Building a command's parser imports nothing heavy (no engine, registry, kex, wire,
`cryptography` or rich): each command imports what it needs when it runs, so that `--help`,
`--version` and argument errors answer at interpreter speed (tests/test_startup.py).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

from tlsprobe._version import __version__
from tlsprobe.errors import EXIT_CLOSED_PIPE, EXIT_INTERNAL, EXIT_USAGE, TlsprobeError

#: set to 1 to let unexpected exceptions end in a traceback (for bug reports)
DEBUG_ENV = "TLSPROBE_DEBUG"

# subcommand -> module under tlsprobe.commands; "probe" is the default command.
SUBCOMMANDS = {
    "probe": "probe",
    "scan": "scan",
    "pcap": "pcap",
    "speed": "speed",
    "demo": "demo",
    "timing": "timing",
    "survey": "survey",
}


#: the longest timeout accepted, in seconds (one day): larger values overflow socket timeouts
MAX_SECONDS = 86400.0


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `tlsprobe: error: MESSAGE (see tlsprobe [SUB] --help)`,
    exit 2, instead of the usage block (the README promises one-line errors).

    `epilog_factory`, when set, makes the epilog when help is shown: an epilog that needs
    heavy imports (speed's catalog) costs nothing to the runs that never show it."""

    epilog_factory: Callable[[], str] | None = None

    def format_help(self) -> str:
        if self.epilog_factory is not None:
            self.epilog, self.epilog_factory = self.epilog_factory(), None
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split()) + self._suggestion(message)
        self.exit(EXIT_USAGE, f"tlsprobe: error: {message} (see {self.prog} --help)\n")

    def _suggestion(self, message: str) -> str:
        """' (did you mean --json?)' for a mistyped option (argparse's 'unrecognized
        arguments: --jsn'), or for a mistyped choice ('invalid choice: 'hihg''), else ''."""
        from tlsprobe.errors import did_you_mean
        if message.startswith("unrecognized arguments: "):
            words = message.split(": ", 1)[1].split()
            option = next((w.split("=", 1)[0] for w in words if w.startswith("-")), None)
            return did_you_mean(option, self._option_string_actions) if option else ""
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            return did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]))
        return ""


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds, > 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 and at most {MAX_SECONDS:g}, "
                                         f"got {text!r}")
    return value


def _whole_number(minimum: int, wording: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {wording}, got {text!r}")
        return value
    return parse


#: argparse types: an integer of at least 1, and of 0 or more
positive_int = _whole_number(1, "at least 1")
count = _whole_number(0, "0 or more")


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"tlsprobe.commands.{SUBCOMMANDS[name]}")


def build_parser(command: str) -> argparse.ArgumentParser:
    module = _load(command)
    prog = "tlsprobe" if command == "probe" else f"tlsprobe {command}"
    parser = ArgumentParser(prog=prog, description=(module.__doc__ or "").strip().split("\n")[0])
    parser.add_argument("--version", action="version", version=f"tlsprobe {__version__}")
    module.add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # also while a command module is still being imported
        print("tlsprobe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return closed_pipe()


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
    try:
        args_list = _legacy_words(command, args_list)
    except TlsprobeError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    args = parser.parse_intermixed_args(args_list)
    args.started = started
    try:
        return int(_load(command).run(args))
    except TlsprobeError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tlsprobe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return closed_pipe()
    except Exception as exc:  # last resort: one line, never a traceback
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        from tlsprobe.report.escape import shown
        if isinstance(exc, (OSError, ValueError)):
            text = shown(" ".join(str(exc).split())[:300])
            print(f"tlsprobe: error: {exc.__class__.__name__}: {text}", file=sys.stderr)
            return EXIT_USAGE
        text = shown(" ".join(str(exc).split())[:300])
        print(f"tlsprobe: internal error: {exc.__class__.__name__}: {text} "
              f"(set {DEBUG_ENV}=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


def error_line(exc: TlsprobeError) -> str:
    """The one stderr line for `exc`: usage errors read `tlsprobe: error: ...`."""
    from tlsprobe.report.escape import shown
    text = shown(" ".join(str(exc).split()))
    if exc.exit_code == EXIT_USAGE and not text.startswith("error: "):
        text = "error: " + text
    return f"tlsprobe: {text}"
