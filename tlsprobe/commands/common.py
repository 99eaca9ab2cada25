"""What every command module shares with the command line: the one-line-error parser, the
argparse value types and the one stderr line of a `TlsprobeError`.

It lives here (not in cli.py) so that commands never import cli: cli imports the commands
(its static table), the commands import this module, and there is no cycle. Standard
library and `errors` only at module level: building a parser stays cheap
(tests/project/test_startup.py).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, NoReturn

from tlsprobe.errors import EXIT_USAGE, TlsprobeError, UsageError, os_error_text

#: the longest timeout accepted, in seconds (one day): larger values overflow socket timeouts
MAX_SECONDS = 86400.0

#: whether `start_up` froze the objects of a command's imports (`thaw` undoes it)
_FROZEN: list[bool] = []


@contextlib.contextmanager
def start_up() -> Iterator[None]:
    """A command's imports, without the cyclic garbage collector: they make long-lived
    objects (modules, classes, functions, tables) and no garbage, yet the growing heap made
    the collector run about 80 times during `scan`'s imports (6 % of a group audit's CPU).
    At the end the objects made so far are frozen (gc.freeze: left out of every later
    collection, so that the ones the command's work triggers scan only what it made) and the
    collector is on again; `thaw`, at the command's end, puts them back."""
    from tlsprobe.commands.lazy_methods import deferred
    enabled = gc.isenabled()
    gc.disable()
    try:
        with deferred():
            yield
    finally:
        gc.freeze()
        _FROZEN.append(True)
        if enabled:
            gc.enable()


def thaw() -> None:
    """Undo `start_up`'s freeze (cli.py, after the command: a program that runs commands
    in-process, as the tests do, keeps collecting what they left)."""
    if _FROZEN:
        _FROZEN.clear()
        gc.unfreeze()


def terminal_columns() -> int:
    """The width help is wrapped to, as `shutil.get_terminal_size` gives it (COLUMNS, else
    the terminal of stdout, else 80), without importing shutil: argparse's formatter does,
    and with it bz2, lzma and fnmatch, on every command's start-up."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout else 0
        except (AttributeError, ValueError, OSError):  # closed, detached, not a terminal
            columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, its default width from `terminal_columns` (as argparse's own:
    the terminal's less 2)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)


class _Unset(list[str]):
    """The value of an option not given, in `ArgumentParser.given_options`: a list, since an
    "append" action copies what the namespace holds and appends to the copy (a new object:
    given); a "store" action replaces it."""


#: the metavars of the options whose value names a file or a folder
NAMED_PATHS = ("FILE", "DIR", "NAME|FILE")


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `tlsprobe: error: MESSAGE (see tlsprobe [SUB] --help)`,
    exit 2, instead of the usage block (the README promises one-line errors).

    `epilog_factory`, when set, makes the epilog when help is shown: an epilog that needs
    heavy imports (speed's catalog) costs nothing to the runs that never show it."""

    epilog_factory: Callable[[], str] | None = None
    #: the probe's parser: its first word and the subcommands, for a first word that
    #: misspells one (`tlsprobe scna HOST` reads as a probe of "scna", HOST unrecognized)
    first_word: str = ""
    subcommands: tuple[str, ...] = ()

    def format_help(self) -> str:
        if self.epilog_factory is not None:
            self.epilog, self.epilog_factory = self.epilog_factory(), None
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split()) + self._suggestion(message)
        self.exit(EXIT_USAGE, f"tlsprobe: error: {message} (see {self.prog} --help)\n")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        """An option's value; an empty name for a file or folder (`--csv ''`, `--out ''`)
        is an error: it was taken as not given (no file written, in silence) or as the
        current folder (a survey written into it)."""
        if (action.option_strings and action.metavar in NAMED_PATHS
                and any(not word.strip() for word in arg_strings)):
            raise argparse.ArgumentError(action, f"an empty {action.metavar}: give its name")
        return super()._get_values(action, arg_strings)

    def given_options(self, words: list[str]) -> frozenset[str]:
        """The dests of the options among `words` (already parsed once: valid), whatever
        their values: an option given at its default value is given all the same, which a
        comparison with the defaults cannot tell (`survey summary DIR --workers 2` on two
        cores). argparse sets a default only where the namespace has no value yet."""
        unset = {a.dest: _Unset() for a in self._actions if a.option_strings}
        seen = argparse.Namespace(**unset)
        self.parse_intermixed_args(words, namespace=seen)
        return frozenset(dest for dest, value in vars(seen).items()
                         if dest in unset and value is not unset[dest])

    def _suggestion(self, message: str) -> str:
        """' (did you mean --json?)' for a mistyped option (argparse's 'unrecognized
        arguments: --jsn'), or for a mistyped choice ('invalid choice: 'hihg''), else ''."""
        from tlsprobe.errors import did_you_mean
        if message.startswith("unrecognized arguments: "):
            words = message.split(": ", 1)[1].split()
            option = next((w.split("=", 1)[0] for w in words if w.startswith("-")), None)
            hint = did_you_mean(self.first_word, self.subcommands) if self.first_word else ""
            if hint:    # the first word misspells a command: what follows is its arguments
                return hint.replace("did you mean ", f"is {self.first_word!r} a command? "
                                    "did you mean tlsprobe ")
            return did_you_mean(option, self._option_string_actions) if option else ""
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if choice:
            return did_you_mean(choice[1], re.findall(r"'([^']*)'", choice[2]))
        return ""


def add_connection_arguments(g: argparse._ArgumentGroup, concurrency: int,
                             concurrency_help: str) -> None:
    """The connection options `scan` and `survey` share (checked by
    requests/scan.py `ConnectionSettings`): per-host cap, concurrency, delay, retries,
    timeout."""
    g.add_argument("--per-host", type=int, default=3, metavar="N", help="connections at once "
                   "per host, 1 to 64 (default 3)")
    g.add_argument("--concurrency", type=int, default=concurrency, metavar="N",
                   help=f"{concurrency_help}, 1 to 1024 (default {concurrency})")
    g.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="pause between "
                   "connection starts to one host, 0 to 3600 (default 0)")
    g.add_argument("--retries", type=int, default=2, metavar="N", help="retries after a reset "
                   "or timeout, with backoff, 0 to 10 (default 2)")
    g.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS", help="connect and "
                   "read timeout per connection, above 0 and at most 3600 (default 5)")


def add_sni_arguments(g: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """--sni NAME and --no-sni, as every command that connects to a server takes them."""
    g.add_argument("--sni", metavar="NAME", help="server_name to send (default: the host "
                   "name; none for IP addresses, as clients do); 1 to 65535 bytes, no spaces")
    g.add_argument("--no-sni", action="store_true", help="send no server_name")


def add_trust_arguments(g: argparse._ArgumentGroup) -> None:
    """--cafile FILE and --no-verify: the trust store the certificate chain is checked
    against, as probe, scan and clients take them."""
    g.add_argument("--cafile", metavar="FILE", help="trust store (PEM bundle) to verify the "
                   "certificate chain against (default: the system bundle)")
    g.add_argument("--no-verify", action="store_true", help="do not check the certificate "
                   "chain and host name (the report says the check was skipped); not with "
                   "--cafile")


class _Version(argparse.Action):
    """--version: the version and which build runs (tlsprobe.buildinfo), worked out only
    when asked for (it looks at the package's files)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from tlsprobe.buildinfo import version_line
        sys.stdout.write(version_line() + "\n")
        parser.exit()


def command_parser(module: ModuleType, prog: str) -> ArgumentParser:
    """The parser of a command module (`add_arguments(parser)`; its docstring's first line
    is the description), with --version."""
    parser = ArgumentParser(prog=prog, description=(module.__doc__ or "").strip().split("\n")[0],
                            formatter_class=HelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and the build (pure Python or compiled), "
                             "and exit")
    module.add_arguments(parser)
    return parser


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


def whole_number(minimum: int, maximum: int) -> Callable[[str], int]:
    """argparse type: a whole number from `minimum` to `maximum` (a bound on what the option
    makes tlsprobe do or hold: no option runs, waits or buffers without one)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"must be from {minimum} to {maximum}, got "
                                             f"{text[:40]!r}")
        return value
    return parse


@contextlib.contextmanager
def written_to(option: str, path: str) -> Iterator[None]:
    """Around the writing of an output file the user named (`--csv FILE`, `--plot FILE`):
    an OSError (the disk full, the folder gone since the check before the work) is that
    file's one-line usage error, exit 2, not an internal error (cli.py: exit 70)."""
    try:
        yield
    except OSError as exc:
        raise UsageError(f"{option} {path}: {os_error_text(exc)}") from None


def add_json_out_argument(g: argparse._ArgumentGroup | argparse.ArgumentParser,
                          what: str, as_json: str = "as --json prints it") -> None:
    """--json-out FILE: the JSON --json prints, written to FILE in the same run as the text
    report (and --html/--csv/--sarif/--junit where the command has them); `as_json` says
    how the file compares with --json's output."""
    g.add_argument("--json-out", metavar="FILE", help=f"also write {what} to FILE {as_json}, "
                   "while the text report goes to stdout (one run)")


#: the options that name a file a command writes (or, `pcap --keylog`, reads beside them)
OUTPUT_FILES = ("json_out", "html", "csv", "sarif", "junit", "msg", "pcap_out", "keylog",
                "plot", "jsonl", "parquet")
#: those of OUTPUT_FILES that `pcap` reads (its --keylog; the probe's appends to it)
READ_FILES = ("keylog",)


def listing_alone(args: argparse.Namespace, listing: str, what: str,
                  dests: Sequence[str] = ()) -> None:
    """`listing` (`clients --list`, `scan --list-policies`) lists `what` and contacts no
    server: a target, a targets file, an output file or one of `dests` beside it went
    unused in silence; a usage error (exit 2) naming it."""
    if getattr(args, "targets", None):
        from tlsprobe.escaping import quoted_text
        raise UsageError(f"{listing} takes no target ({quoted_text(args.targets[0])}): it "
                         f"lists {what} and contacts no server; drop the target, or drop "
                         f"{listing} to run against it")
    for dest in ("targets_file", *OUTPUT_FILES, *dests):
        if getattr(args, dest, None) not in (None, False):
            option = "--" + dest.replace("_", "-")
            raise UsageError(f"{listing} takes no {option}: it lists {what} (on stdout) and "
                             f"contacts no server; drop {option}")


def check_json_out(args: argparse.Namespace) -> None:
    """--json-out FILE can be written, and no two file options of the command name one
    file: a usage error (exit 2) before any work, not after."""
    distinct_files(args)
    path = getattr(args, "json_out", None)
    if path:
        from tlsprobe.report.csv_out import check_writable
        check_writable(path, "--json-out")


def distinct_files(args: argparse.Namespace, inputs: Sequence[tuple[str, str]] = (),
                   outputs: Sequence[tuple[str, str]] = (), reads: Sequence[str] = ()
                   ) -> None:
    """Two file options naming one file (`--sarif r --junit r`), or one the command writes
    naming one it reads: the second written would replace the first in silence, so it is
    a usage error before any work. `inputs` and `outputs`: the command's own (label, path)
    pairs beside its file options, such as the captures `pcap` reads (`pcap cap.pcap --csv
    cap.pcap` emptied the capture) or its `-w` file (which replaced the `--keylog` being
    read); `reads`: those of its file options that it reads (pcap: READ_FILES). Files that
    are only read may be one file. `-` for an option that writes a file
    is a usage error too: it would be written as a file of that name in the current folder
    (stdout holds the report)."""
    named = [(label, path, True) for label, path in inputs if path and path != "-"]
    for dest in OUTPUT_FILES:
        path = getattr(args, dest, None)
        if not isinstance(path, str) or not path:
            continue        # not given, or a flag of that name (probe --msg)
        option = "--" + dest.replace("_", "-")
        if path == "-" and dest not in reads:
            raise UsageError(f"{option} -: this option writes a file, and '-' is not stdout "
                             "here (stdout holds the report); give a file name (./- for a "
                             "file named -)")
        named.append((option, path, dest in reads))
    named += [(label, path, False) for label, path in outputs if path and path != "-"]
    seen: dict[object, tuple[str, bool]] = {}
    for option, path, read in named:
        key: object = os.path.realpath(path)
        try:
            info = os.stat(path)
            key = (info.st_dev, info.st_ino)    # a hard link is the same file too
        except OSError:
            pass        # not there yet: its path tells
        first = seen.get(key)
        if first is not None and not (read and first[1]):
            raise UsageError(f"{first[0]} and {option} name the same file {path}: give "
                             "each its own")
        seen.setdefault(key, (option, read))


def write_json_out(path: str, documents: list[str]) -> None:
    """--json-out FILE: each document then a newline (JSON lines for a command with one
    document per target); a failure to write is the option's usage error."""
    with written_to("--json-out", path), open(path, "w", encoding="utf-8") as fh:
        fh.writelines(doc + "\n" for doc in documents)


def error_line(exc: TlsprobeError) -> str:
    """The one stderr line for `exc`: usage errors read `tlsprobe: error: ...`."""
    from tlsprobe.report.escape import shown
    text = shown(" ".join(str(exc).split()))
    if exc.exit_code == EXIT_USAGE and not text.startswith("error: "):
        text = "error: " + text
    return f"tlsprobe: {text}"


#: the probe's and scan's limits (engine.guards.Limits), written out so that building the
#: parser imports no engine (tests/project/test_startup.py checks that they match)
LIMIT_DEFAULTS = {"max_message": 262144, "max_chain": 16, "max_records": 4096,
                  "max_bytes": 16 * 2 ** 20}
#: the largest value of each limit: a handshake message's length field holds 2^24 - 1; the
#: others bound what one probe holds in memory (the trace keeps 4 events a record)
LIMIT_MAXIMA = {"max_message": 2 ** 24 - 1, "max_chain": 1000, "max_records": 2 ** 20,
                "max_bytes": 2 ** 30}


def add_limit_arguments(group: argparse._ArgumentGroup, past: str) -> None:
    """--max-message, --max-chain, --max-records, --max-bytes (the probe's and scan's one
    set: a connection of either holds the same bounds); `past`: what happens past one."""
    for name, metavar, what in (
            ("max_message", "BYTES", "largest handshake message accepted"),
            ("max_chain", "N", "most certificates accepted in the server's chain"),
            ("max_records", "N", ("most records read from the server (with --quic: its "
                                  "QUIC packets with CRYPTO data)")),
            ("max_bytes", "BYTES", "most bytes read from the server")):
        group.add_argument("--" + name.replace("_", "-"),
                           type=whole_number(1, LIMIT_MAXIMA[name]), metavar=metavar,
                           help=f"{what}, 1 to {LIMIT_MAXIMA[name]} (default "
                           f"{LIMIT_DEFAULTS[name]}); {past}")


__all__ = ["LIMIT_DEFAULTS", "LIMIT_MAXIMA", "MAX_SECONDS", "ArgumentParser",
           "add_connection_arguments", "add_json_out_argument", "add_limit_arguments",
           "check_json_out", "command_parser", "distinct_files", "error_line", "seconds",
           "whole_number", "write_json_out", "written_to"]
