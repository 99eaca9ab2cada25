"""Exit codes and the user-facing error type shared by every command.

Exit codes (documented in the README):
  0  success (and, for policy checks, no finding at or above --fail-on)
  1  scan: findings at or above --fail-on, a rating below --fail-under, or a regression
     since --baseline with --fail-on-change (a failed verification is a result: exit 0)
  2  usage error (bad argument, unreadable file)
  3  network error: unknown host, connection refused, timeout, reset
  4  the server answered but not with TLS (HTTP, SSH banner, garbage)
  5  the server sent a TLS alert or ended the handshake (e.g. no shared group), or refused
     STARTTLS in plain text (--starttls)
  6  the server broke the protocol (malformed or unexpected message, bad signature/Finished)
  7  broken input file (pcap): partially read (damaged, snaplen cuts, or packets skipped
     and said in a note line: unknown link type or interface, too deep, fragments lost)
  8  the server sent more than one of tlsprobe's own limits allows (--max-chain,
     --max-message, --max-records, --max-bytes): no fault of the server's; the option named
     raises the limit
  130 interrupted (Ctrl-C, SIGINT)
  141 stdout closed by its reader (`tlsprobe scan HOST | head -1`), as a tool killed by
     SIGPIPE (128 + 13); nothing on stderr
  70 internal error: a bug in tlsprobe (one line; TLSPROBE_DEBUG=1 shows the traceback), or
     pcap's reader process dying (capture/pipe.py), a speed worker dying (speed/runner.py)
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from enum import StrEnum
from typing import Literal

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_NETWORK = 3
EXIT_NOT_TLS = 4
EXIT_ALERT = 5
EXIT_PROTOCOL = 6
EXIT_BAD_INPUT = 7
EXIT_LIMIT = 8
EXIT_INTERNAL = 70  # EX_SOFTWARE in sysexits.h
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a tool Ctrl-C ended
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a tool SIGPIPE ended


class FailureKind(StrEnum):
    """Why a connection, probe or audit did not give its answer. A str, so JSON and text
    show the value (``"not_tls"``) as before; the exit code comes from `exit_code_for`."""

    NETWORK = "network"      # unknown host, refused, timeout, reset
    NOT_TLS = "not_tls"      # the server answered with something that is not TLS
    ALERT = "alert"          # the server sent a fatal alert
    CLOSED = "closed"        # the server ended the handshake without an alert
    REFUSED = "refused"      # the server refused STARTTLS in plain text (its reply quoted),
    #                          or named an older version than the hello offers (no version
    #                          in common, RFC 5246 E.1)
    PROTOCOL = "protocol"    # the server broke the protocol (malformed, unexpected, bad MAC)
    USAGE = "usage"          # a bad argument or targets-file line
    BAD_INPUT = "bad_input"  # a damaged input file
    LIMIT = "limit"          # the server sent more than a limit of ours allows (--max-*)
    INTERNAL = "internal"    # a bug in tlsprobe


EXIT_BY_KIND: dict[FailureKind, int] = {
    FailureKind.NETWORK: EXIT_NETWORK, FailureKind.NOT_TLS: EXIT_NOT_TLS,
    FailureKind.ALERT: EXIT_ALERT, FailureKind.CLOSED: EXIT_ALERT,
    FailureKind.REFUSED: EXIT_ALERT,
    FailureKind.PROTOCOL: EXIT_PROTOCOL, FailureKind.USAGE: EXIT_USAGE,
    FailureKind.BAD_INPUT: EXIT_BAD_INPUT, FailureKind.INTERNAL: EXIT_INTERNAL,
    FailureKind.LIMIT: EXIT_LIMIT,
}


def exit_code_for(kind: str | None) -> int:
    """The documented exit code of a failure kind (a protocol error when unknown)."""
    try:
        return EXIT_BY_KIND[FailureKind(kind or "")]
    except ValueError:
        return EXIT_PROTOCOL


class TlsprobeError(Exception):
    """An error to be shown as one line, with an exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(TlsprobeError):
    """A bad argument, option or input line (exit 2, kind "usage"): said before any work."""

    exit_code = EXIT_USAGE


class UnreadableInput(TlsprobeError):
    """A file from which nothing can be read (missing, not a capture, empty, corrupt gzip):
    exit 2 as for any unreadable file (what `tlsprobe pcap` exits with), kind "bad_input"."""

    exit_code = EXIT_USAGE
    kind = FailureKind.BAD_INPUT


#: why a network operation failed, for callers that decide by it (retry, keep a partial
#: answer): the per-read wait ran out ("timeout"), the total deadline passed ("deadline"),
#: the peer reset the connection ("reset"), nothing listens ("refused"), the name does not
#: resolve ("unknown_host"), anything else ("other")
#: "closed": the server ended the connection before TLS could start (a STARTTLS preamble cut
#: short), retried as a network failure, reported as a close (exit 5) when it lasts
NetworkCause = Literal["timeout", "deadline", "reset", "refused", "unknown_host", "closed",
                       "other"]


class NetworkError(TlsprobeError):
    """A network failure (exit 3), raised by tlsprobe/net: the message names the target and
    the cause; `reason` is the cause alone ("connection refused") and `cause` its class."""

    exit_code = EXIT_NETWORK
    kind = FailureKind.NETWORK

    def __init__(self, message: str, cause: NetworkCause = "other",
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.cause: NetworkCause = cause
        self.reason = reason if reason is not None else message


def did_you_mean(word: str, known: Iterable[str], n: int = 3) -> str:
    """' (did you mean A, B?)' naming the closest of `known` to a mistyped `word` (difflib,
    case-insensitive), or '' when none is close. For one-line usage errors."""
    import difflib
    choices = {k.lower(): k for k in known}
    close = difflib.get_close_matches(word.lower(), list(choices), n=n, cutoff=0.6)
    return f" (did you mean {', '.join(choices[c] for c in close)}?)" if close else ""


#: how the running call's caller spells its inputs: the command line's options (True) or
#: the Python API's parameters (False; apiargs.checked sets it for each API call), so that a
#: hint made deep in net/ ("try --starttls imap") names the input as its caller writes it;
#: requests/names.Names does so for the checks that know their caller
OPTIONS_SPELLING: ContextVar[bool] = ContextVar("tlsprobe_options_spelling", default=True)


def spelt(option: str, parameter: str) -> str:
    """`option` ("--starttls imap") to a command line user, `parameter` ("starttls='imap'")
    to a caller of the Python API."""
    return option if OPTIONS_SPELLING.get() else parameter


def os_error_text(exc: BaseException) -> str:
    """An operating system error in tlsprobe's words: the system's reason in lower case
    ("not a directory", "permission denied", "no space left on device"), without Python's
    capitals, "[Errno 20]" and the file name repeated (the message names the file). The
    one wording of file errors; net/tcp.describe_os_error words sockets' with it."""
    import errno
    import os
    import re
    number = exc.errno if isinstance(exc, OSError) else None
    if number is not None and number in errno.errorcode:   # pyarrow's OSErrors too
        return os.strerror(number).lower()
    strerror = getattr(exc, "strerror", None)
    if isinstance(exc, OSError) and isinstance(strerror, str) and strerror:
        return strerror.lower()
    text = " ".join(str(exc).split())
    said = re.search(r"\[errno (\d+)\]", text, re.IGNORECASE)   # pyarrow's "Detail: ..."
    if said:
        return os.strerror(int(said.group(1))).lower()
    return text or type(exc).__name__
