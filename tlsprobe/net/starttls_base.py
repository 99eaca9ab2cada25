"""The vocabulary the STARTTLS dialogues share (sans-IO: no sockets here).

A dialogue is a generator: it yields requests (`Send` bytes, read a `Line` or exactly
`Exact` bytes, read an `Xml` element) and gets back what it asked for; it returns when the
stream is at the start of TLS and raises `PreambleFailure` when it cannot get there. The one
owner of the buffer, the limits and the record is `tlsprobe.net.starttls.StartTls`, which
drives these generators; the dialogues themselves only say what they expect and what they
make of it. Everything here is pure, so the protocols are tested by feeding bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from dataclasses import dataclass
from enum import StrEnum

from tlsprobe.errors import FailureKind, spelt
from tlsprobe.escaping import escaped_bytes, quoted_bytes


class Problem(StrEnum):
    """Why a preamble did not reach TLS; `FAILURE_KIND` maps each to a FailureKind."""

    NOT_OFFERED = "not_offered"        # speaks the protocol, does not advertise STARTTLS
    REFUSED = "refused"                # answered our STARTTLS (or greeting) with a refusal
    BUSY = "busy"                      # refused for now, in the protocol's words (SMTP 421/
                                       # 454, FTP 421, IMAP BYE, POP3 [SYS/TEMP], XMPP
                                       # resource-constraint, LDAP busy, MySQL 1040, ...):
                                       # retried with backoff (net/starttls_connect.py)
    WRONG_PROTOCOL = "wrong_protocol"  # speaks something else (HTTP, SSH, TLS, another mail
                                       # protocol)
    CLOSED = "closed"                  # ended the connection before TLS could start
    TOO_LONG = "too_long"              # a line, packet or the whole preamble broke a bound
    MALFORMED = "malformed"            # broke the asked protocol's framing or sent bytes
                                       # after its go-ahead
    NETWORK = "network"                # silent (timeout) or a socket error


# Not offered and another protocol: "the server answered but not with TLS" (exit 4). A refusal
# in plain text: "refused", and an early close: both exit 5, as an alert would be. Bounds and
# framing: the server broke the protocol (exit 6). A temporary refusal that outlasts the
# retries: the server is unavailable for now, as a refused or timed-out connection (exit 3).
FAILURE_KIND: dict[Problem, FailureKind] = {
    Problem.BUSY: FailureKind.NETWORK,
    Problem.NOT_OFFERED: FailureKind.NOT_TLS,
    Problem.WRONG_PROTOCOL: FailureKind.NOT_TLS,
    Problem.REFUSED: FailureKind.REFUSED,
    Problem.CLOSED: FailureKind.CLOSED,
    Problem.TOO_LONG: FailureKind.PROTOCOL,
    Problem.MALFORMED: FailureKind.PROTOCOL,
    Problem.NETWORK: FailureKind.NETWORK,
}


class PreambleFailure(Exception):
    """A dialogue cannot reach TLS: `problem` (what happened) and a one-line message whose
    network text is already escaped and truncated (see `quote`)."""

    def __init__(self, problem: Problem, message: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message

    @property
    def kind(self) -> FailureKind:
        return FAILURE_KIND[self.problem]


@dataclass(frozen=True)
class Send:
    """Bytes for the server; `note` names them in the record when they are not text."""

    data: bytes
    note: str | None = None


@dataclass(frozen=True)
class Line:
    """One line from the server (the dialogue gets it without its CR LF). `waiting` names it
    for error texts ("the greeting"); `start`, when set, is checked against the first
    `len(start pattern)` bytes as soon as they arrive, so another protocol is named at once
    (even when its first line never ends)."""

    waiting: str
    start: re.Pattern[bytes] | None = None
    start_len: int = 0


@dataclass(frozen=True)
class Exact:
    """Exactly `size` bytes from the server; `start` as for `Line`, on the first bytes."""

    size: int
    waiting: str
    note: Callable[[bytes], str] | None = None
    start: re.Pattern[bytes] | None = None
    start_len: int = 0
    record: bool = True   # False for a header that the packet's note describes


@dataclass(frozen=True)
class Xml:
    """The next complete XML tag from the server (start, end or empty element), as raw
    bytes from '<' to '>'; character data between tags is skipped (bounded like a line),
    or with `text` handed over too, before the tag (what a stream error's <text> says)."""

    waiting: str
    text: bool = False


@dataclass(frozen=True)
class Note:
    """Remember what the server said for the report: its banner or the line advertising
    STARTTLS (each as raw bytes, shown escaped)."""

    banner: bytes | None = None
    capability: bytes | None = None


Request = Send | Line | Exact | Xml | Note
Dialogue = Generator[Request, bytes, None]


@dataclass(frozen=True)
class Context:
    """What a dialogue may need from the caller: the name the client gives itself (EHLO,
    LHLO) and the server's domain (XMPP `to=`)."""

    client_name: str = "tlsprobe.invalid"
    server_name: str | None = None


def busy(proto: str, what: str, line: bytes | bytearray) -> PreambleFailure:
    """A temporary refusal (retried): the server's reply quoted."""
    return PreambleFailure(Problem.BUSY, f"{proto}: the server refused {what} temporarily: "
                           f"{quote(line)}")


#: bytes from the network for display, and in single quotes for a one-line message: the
#: one style of every message (wire._util: '421 Busy\\r\\n', \\x1b)
escape = escaped_bytes
quote = quoted_bytes


#: OpenSSL's words for a plain-text first record (vsftpd's "500 OOPS: error:0A00010B:SSL
#: routines::wrong version number"), and its accept call named in an error
_TLS_LIBRARY_ERROR = re.compile(rb"SSL routines|wrong version number|SSL_accept",
                                re.IGNORECASE)


def what_is(data: bytes | bytearray) -> str:
    """A guess at the protocol behind the first bytes a server sent, for "not speaking X"."""
    head = bytes(data[:16])
    if head[:1] in (b"\x15", b"\x16") and head[1:2] == b"\x03":
        return TLS_RECORD
    if _TLS_LIBRARY_ERROR.search(bytes(data[:200])):   # e.g. vsftpd's "500 OOPS: ..."
        return TLS_ERROR
    # a MySQL/MariaDB packet of sequence 0: the initial handshake (protocol 10) or an error
    if len(head) >= 5 and head[3] == 0 and head[4] in (0x0A, 0xFF) and head[2] == 0:
        return "a MySQL or MariaDB greeting"
    if head.startswith((b'"IMPLEMENTATION"', b'"SIEVE"', b'"SASL"', b'"STARTTLS"')):
        return "a ManageSieve greeting"
    # a ManageSieve status line (RFC 5804 4): Dovecot's answer to bytes that came before
    # its greeting ('BYE "Input buffer full, aborting"'), with no greeting before it
    if re.match(rb'(?:OK|NO|BYE)(?: \([^)]*\))? "', head):
        return "a ManageSieve reply"
    if head[:5] in (b"HTTP/", b"<html", b"<!DOC", b"<HTML"):
        return "an HTTP response"
    if head[:4] == b"SSH-":
        return "an SSH banner"
    if re.match(rb"220[ -]", head):
        return "an SMTP or FTP banner"
    if re.match(rb"[45][0-5]\d[ -]", head):
        return A_REPLY
    if head[:4] == b"* OK" or head[:9] == b"* PREAUTH":
        return "an IMAP greeting"
    if head[:3] == b"+OK":
        return "a POP3 greeting"
    if re.match(rb"20[01][ -]", head):
        return "an NNTP greeting"
    if head[:1] == b"<":
        return "XML"
    return SOMETHING_ELSE


SOMETHING_ELSE = "something else"
A_REPLY = "an SMTP or FTP reply"
TLS_RECORD = "a TLS record"
TLS_ERROR = "an error of a TLS library"
#: guesses worth their whole line before a message quotes it (a reply may go on to quote a
#: TLS library's error)
LINE_GUESSES = (A_REPLY, TLS_ERROR)


def not_speaking(proto: str, data: bytes | bytearray) -> PreambleFailure:
    """The failure for a server whose first bytes are not `proto` (TLS: what to do)."""
    guess = what_is(data)
    if guess in (TLS_RECORD, TLS_ERROR):
        guess += f" (an implicit-TLS port? try without {spelt('--starttls', 'starttls')})"
    return PreambleFailure(Problem.WRONG_PROTOCOL,
                           f"not speaking {proto}: it sent {guess} ({quote(data)})")


def try_starttls(protocol: str) -> str:
    """'try --starttls smtp' as the caller names the input ("try starttls='smtp'" to the
    Python API); `protocol` may be "smtp or lmtp", "smtp (or ftp)"."""
    names = [p for p in re.findall(r"[\w-]+", protocol) if p != "or"]
    return "try " + spelt(f"--starttls {protocol}",
                          " or ".join(f"starttls={p!r}" for p in names))
