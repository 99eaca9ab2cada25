"""Command line: argument parsing, dispatch and exit codes only.

`tlsprobe HOST[:PORT] [options]` probes a server; `tlsprobe SUBCOMMAND ...` runs the others.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from tlsprobe import __version__
from tlsprobe.errors import EXIT_INTERNAL, EXIT_USAGE, TlsprobeError

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
}


def _load(name: str):
    return importlib.import_module(f"tlsprobe.commands.{SUBCOMMANDS[name]}")


def build_parser(command: str) -> argparse.ArgumentParser:
    module = _load(command)
    prog = "tlsprobe" if command == "probe" else f"tlsprobe {command}"
    parser = argparse.ArgumentParser(prog=prog, description=(module.__doc__ or "").strip().split("\n")[0])
    parser.add_argument("--version", action="version", version=f"tlsprobe {__version__}")
    module.add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = "probe"
    if args_list and args_list[0] in SUBCOMMANDS:
        command = args_list.pop(0)
    elif not args_list or args_list[0] in ("-h", "--help"):
        if not args_list:
            args_list = ["--help"]
    parser = build_parser(command)
    if command == "probe" and args_list and args_list[0] in ("-h", "--help"):
        parser.epilog = "subcommands: " + ", ".join(k for k in SUBCOMMANDS if k != "probe") + \
            " (tlsprobe SUBCOMMAND --help)"
    args = parser.parse_intermixed_args(args_list)
    try:
        return int(_load(command).run(args))
    except TlsprobeError as exc:
        print(f"tlsprobe: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tlsprobe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # last resort: one line, never a traceback
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        if isinstance(exc, (OSError, ValueError)):
            print(f"tlsprobe: {exc.__class__.__name__}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        text = " ".join(str(exc).split())[:300]
        print(f"tlsprobe: internal error: {exc.__class__.__name__}: {text} "
              f"(set {DEBUG_ENV}=1 for the traceback)", file=sys.stderr)
        return EXIT_INTERNAL
