"""STARTTLS preambles: the plain-text (or binary) dialogue that turns a mail, directory,
database, chat or file-transfer connection into one whose next bytes are TLS.

`StartTls` is sans-IO: `start()` and `receive_data(bytes)` return a `Step` (bytes to send,
then NEED_DATA, READY or FAILED with a `PreambleFailure`). It owns the buffer and every
bound (line length, line count, total bytes, see `Limits`), so a server that sends an endless
banner is cut off; the dialogues themselves (starttls_text, starttls_binary, starttls_xmpp)
only say what they expect. `run_preamble` drives it over any blocking object with
`sendall`/`send` and `recv` (a socket, net.tcp.Channel, a transport) until a deadline, and
returns the `PreambleRecord` (banner, the capability line that advertised TLS, every line
with its direction) for the report; failures raise `StartTlsError` with a FailureKind.
`protocol_for_port` is the `--starttls auto` map.
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

from tlsprobe.errors import (
    FailureKind,
    NetworkError,
    TlsprobeError,
    UsageError,
    exit_code_for,
    spelt,
)
from tlsprobe.net.starttls_base import (
    LINE_GUESSES,
    SOMETHING_ELSE,
    Context,
    Dialogue,
    Exact,
    Line,
    Note,
    PreambleFailure,
    Problem,
    Send,
    Xml,
    escape,
    not_speaking,
    quote,
    what_is,
)
from tlsprobe.net.starttls_binary import BINARY_DIALOGUES
from tlsprobe.net.starttls_text import TEXT_DIALOGUES
from tlsprobe.net.starttls_xmpp import XMPP_DIALOGUES
from tlsprobe.net.tcp import describe_os_error

__all__ = ["PROTOCOLS", "Limits", "PreambleFailure", "PreambleLine", "PreambleRecord",
           "Problem", "StartTls", "StartTlsError", "Status", "Step", "protocol_for_port",
           "run_preamble"]

_DIALOGUES = {**TEXT_DIALOGUES, **BINARY_DIALOGUES, **XMPP_DIALOGUES}
PROTOCOLS = ("smtp", "lmtp", "imap", "pop3", "ftp", "xmpp", "xmpp-server", "ldap", "postgres",
             "mysql", "nntp", "sieve", "irc")
AUTO_PORTS = {25: "smtp", 587: "smtp", 110: "pop3", 143: "imap", 21: "ftp", 389: "ldap",
              5432: "postgres", 3306: "mysql", 5222: "xmpp", 5269: "xmpp-server", 119: "nntp",
              4190: "sieve", 6667: "irc"}
_GUESS_BYTES = 16   # bytes enough to name another protocol (what_is)
_TAG_END = re.compile(rb"<(?:[^>'\"]|'[^']*'|\"[^\"]*\")*>")


def protocol_for_port(port: int) -> str | None:
    """The STARTTLS protocol `--starttls auto` uses on a well-known port, else None
    (implicit-TLS ports such as 465 or 993 need no preamble)."""
    return AUTO_PORTS.get(port)


@dataclass(frozen=True)
class Limits:
    """Bounds on what the server may send before TLS: bytes per line (or tag, or packet),
    lines (tags, packets) in all, bytes in all."""

    max_line: int = 4096
    max_lines: int = 200
    max_bytes: int = 64 << 10


@dataclass(frozen=True)
class PreambleLine:
    """One line (tag, packet) of the preamble: who sent it, its bytes (without CR LF) and,
    for binary packets, what it was."""

    sender: Literal["client", "server"]
    data: bytes
    note: str | None = None

    @property
    def text(self) -> str:
        """The line for display: its note, or its bytes escaped (quote)."""
        return self.note if self.note is not None else escape(self.data)


@dataclass(frozen=True)
class PreambleRecord:
    """What was exchanged before TLS: the protocol, the server's banner (greeting, stream
    header, handshake packet summary), the capability line that advertised TLS (None when
    none did) and every line in order."""

    protocol: str
    banner: bytes | None
    capability: bytes | None
    lines: tuple[PreambleLine, ...]


class Status(StrEnum):
    NEED_DATA = "need_data"
    READY = "ready"     # the next bytes on the stream are TLS: start the handshake
    FAILED = "failed"


@dataclass(frozen=True)
class Step:
    """What to do next: send `send` (maybe empty), then act on `status`."""

    send: bytes
    status: Status
    failure: PreambleFailure | None = None


class StartTls:
    """The state machine of one preamble. Feed every byte the server sends, in order;
    `receive_data(b"")` means the server closed the connection."""

    def __init__(self, protocol: str, *, server_name: str | None = None,
                 client_name: str = "tlsprobe.invalid", limits: Limits = Limits()) -> None:
        if protocol not in _DIALOGUES:
            raise UsageError(f"unknown STARTTLS protocol {protocol!r} (known: "
                             f"{', '.join(PROTOCOLS)})")
        self.protocol = protocol
        self.limits = limits
        self._dialogue: Dialogue = _DIALOGUES[protocol](Context(client_name, server_name))
        self._buffer = bytearray()
        self._pending: Line | Exact | Xml | None = None
        self._received = 0
        self._server_lines = 0
        self._step_lines = 0   # the server's lines since our last Send: of what we wait for
        self._lines: list[PreambleLine] = []
        self._banner: bytes | None = None
        self._capability: bytes | None = None
        self.status = Status.NEED_DATA
        self._started = False
        self._mismatch = False   # the first bytes are not this protocol's; waiting for more

    @property
    def waiting(self) -> str:
        """What the machine waits for, for a timeout message ("the EHLO reply")."""
        return self._pending.waiting if self._pending is not None else "nothing"

    @property
    def record(self) -> PreambleRecord:
        return PreambleRecord(self.protocol, self._banner, self._capability, tuple(self._lines))

    def timed_out(self) -> PreambleFailure:
        """The failure for a server that stopped sending: another protocol when its first
        bytes already said so, else silence (what we waited for, and any partial line)."""
        if self._mismatch:
            return not_speaking(self.protocol, self._buffer)
        partial = f" (after {quote(self._buffer)})" if self._buffer else ""
        if self._step_lines:   # it answered, slowly or without end: not "no answer"
            return PreambleFailure(Problem.NETWORK, f"{self.protocol}: timed out in "
                                   f"{self.waiting}: the server sent {self._step_lines} "
                                   f"line(s) of it but not its end{partial}")
        return PreambleFailure(Problem.NETWORK, f"{self.protocol}: no answer while waiting "
                               f"for {self.waiting}{partial}{self._silence()}")

    def _silence(self) -> str:
        """The hint of a timeout before either side said anything: a server that waits for
        the client (implicit TLS, or a protocol whose client begins); "" otherwise."""
        if self._received or any(line.sender == "client" for line in self._lines):
            return ""
        return ("; the server sent nothing: it may wait for the client to speak first, as a "
                f"port of implicit TLS does (then run without {spelt('--starttls', 'starttls')})"
                " or a protocol whose client begins (xmpp, ldap, postgres)")

    def start(self) -> Step:
        """The first step: bytes when the client speaks first (XMPP, LDAP, PostgreSQL, IRC)."""
        if self._started:
            raise RuntimeError("StartTls.start() called twice")
        self._started = True
        return self._advance(None)

    def receive_data(self, data: bytes) -> Step:
        """Bytes the server sent (b"" at end of stream)."""
        if not self._started:
            raise RuntimeError("StartTls.receive_data() before start()")
        if self.status is not Status.NEED_DATA:
            if self.status is Status.READY and data:
                return self._fail(PreambleFailure(Problem.MALFORMED, f"{self.protocol}: the "
                                  f"server sent {quote(data)} after its go-ahead, before TLS"))
            return Step(b"", self.status)
        if not data:
            if self._mismatch:
                return self._fail(not_speaking(self.protocol, self._buffer))
            partial = f" (after {quote(self._buffer)})" if self._buffer else ""
            return self._fail(PreambleFailure(Problem.CLOSED, f"{self.protocol}: the server "
                              f"closed the connection while we waited for {self.waiting}"
                              f"{partial}"))
        self._received += len(data)
        if self._received > self.limits.max_bytes:
            return self._fail(PreambleFailure(Problem.TOO_LONG, f"{self.protocol}: cut off "
                              f"after {self.limits.max_bytes} bytes without reaching TLS"))
        self._buffer += data
        try:
            got = self._take()
        except PreambleFailure as failure:
            return self._fail(failure)
        return Step(b"", self.status) if got is None else self._advance(got)

    def _advance(self, value: bytes | None) -> Step:
        """Run the dialogue until it needs data the buffer does not hold yet."""
        out = bytearray()
        try:
            while True:
                # next() is send(None): how a generator starts, and resumes without input
                request = next(self._dialogue) if value is None else self._dialogue.send(value)
                value = None
                self._pending = None
                if isinstance(request, Send):
                    self._step_lines = 0
                    out += request.data
                    self._lines.append(PreambleLine("client", request.data.rstrip(b"\r\n"),
                                                    request.note))
                    value = b""
                elif isinstance(request, Note):
                    self._banner = request.banner if request.banner is not None else self._banner
                    if request.capability is not None:
                        self._capability = request.capability
                    value = b""
                else:
                    self._pending = request
                    value = self._take()
                    if value is None:
                        return Step(bytes(out), Status.NEED_DATA)
        except StopIteration:
            self._pending = None
            self.status = Status.READY
            if self._buffer:
                return self._fail(PreambleFailure(Problem.MALFORMED, f"{self.protocol}: the "
                                  f"server sent {quote(self._buffer)} after its go-ahead, "
                                  "before TLS"), bytes(out))
            return Step(bytes(out), Status.READY)
        except PreambleFailure as failure:
            return self._fail(failure, bytes(out))

    def _fail(self, failure: PreambleFailure, send: bytes = b"") -> Step:
        self.status = Status.FAILED
        self._dialogue.close()
        return Step(send, Status.FAILED, failure)

    def _take(self) -> bytes | None:
        """What the pending request asked for, if the buffer holds it (else None)."""
        request, buf, limits = self._pending, self._buffer, self.limits
        if request is None:
            return None
        if isinstance(request, (Line, Exact)) and request.start is not None:
            head = bytes(buf[:request.start_len])
            if len(head) == request.start_len and not (isinstance(request, Line) and (
                    b"\n" in head or b"\r" in head)) and not request.start.match(head):
                self._mismatch = True
                guess = what_is(buf)
                enough = limits.max_line if guess in LINE_GUESSES else _GUESS_BYTES
                if len(buf) >= enough or b"\n" in buf or \
                        guess not in (SOMETHING_ELSE, *LINE_GUESSES):
                    raise not_speaking(self.protocol, buf)
                return None   # a few more bytes (a reply: its line) name the other better
        if isinstance(request, Line):
            end = buf.find(b"\n", 0, limits.max_line + 2)
            if end < 0:
                if len(buf) > limits.max_line:
                    raise PreambleFailure(Problem.TOO_LONG, f"{self.protocol}: cut off: a line "
                                          f"longer than {limits.max_line} bytes "
                                          f"({quote(buf)}) in {request.waiting}")
                return None
            item, note, size = bytes(buf[:end]).rstrip(b"\r"), None, end + 1
        elif isinstance(request, Exact):
            if request.size > limits.max_line:
                raise PreambleFailure(Problem.TOO_LONG, f"{self.protocol}: a {request.size}-byte"
                                      f" packet in {request.waiting} (limit {limits.max_line})")
            if len(buf) < request.size:
                return None
            item, size = bytes(buf[:request.size]), request.size
            note = request.note(item) if request.note is not None else None
        else:
            item, note, size = self._take_tag(request, buf)
            if not size:
                return None
        self._server_lines += 1
        self._step_lines += 1
        if self._server_lines > limits.max_lines:
            raise PreambleFailure(Problem.TOO_LONG, f"{self.protocol}: cut off after "
                                  f"{limits.max_lines} lines without reaching TLS")
        del buf[:size]
        if not isinstance(request, Exact) or request.record:
            self._lines.append(PreambleLine("server", item, note))
        return item

    def _take_tag(self, request: Xml, buf: bytearray) -> tuple[bytes, None, int]:
        """The next whole tag ('<' to '>', quotes respected); text before it is skipped."""
        limit = self.limits.max_line
        if self._server_lines == 0:
            head = bytes(buf).lstrip()
            if head and head[:1] != b"<":
                raise not_speaking(self.protocol, head)
        start = buf.find(b"<")
        if start < 0 or start > limit:
            if len(buf) > limit:
                raise PreambleFailure(Problem.TOO_LONG, f"{self.protocol}: cut off: "
                                      f"{len(buf)} bytes of text without a tag")
            return b"", None, 0
        if buf[start + 1:start + 2] == b"!":
            raise PreambleFailure(Problem.MALFORMED, f"{self.protocol}: a DTD or comment "
                                  f"(forbidden in XMPP): {quote(buf[start:])}")
        found = _TAG_END.match(buf, start)
        if found is None:
            if len(buf) - start > limit:
                raise PreambleFailure(Problem.TOO_LONG, f"{self.protocol}: cut off: a tag "
                                      f"longer than {limit} bytes ({quote(buf[start:])}) "
                                      f"in {request.waiting}")
            return b"", None, 0
        return bytes(buf[0 if request.text else start:found.end()]), None, found.end()


class StartTlsError(TlsprobeError):
    """A preamble that did not reach TLS: `problem`, `kind` (a FailureKind, whose exit code
    this error carries) and the `record` of what was exchanged before it failed.
    `connected` is False for an answer remembered from an earlier connection (no new
    connection was made: net/starttls_connect.py), so a scan counts only real ones."""

    def __init__(self, failure: PreambleFailure, record: PreambleRecord, *,
                 connected: bool = True) -> None:
        super().__init__(failure.message, exit_code_for(failure.kind))
        self.problem = failure.problem
        self.kind: FailureKind = failure.kind
        self.record = record
        self.connected = connected


class _SendOnly(Protocol):
    def send(self, data: bytes, /) -> object: ...
    def recv(self, size: int, /) -> bytes: ...


def run_preamble(stream: socket.socket | _SendOnly, protocol: str, deadline: float, *,
                 server_name: str | None = None, client_name: str = "tlsprobe.invalid",
                 limits: Limits = Limits()) -> PreambleRecord:
    """Run `protocol`'s preamble over a blocking `stream` until `deadline` (time.monotonic);
    on return the next bytes on the stream are TLS. A socket gets the time left before each
    read and write (and sends with sendall); any other stream must bound its own reads.
    Raises StartTlsError (network errors and timeouts included, as FailureKind.NETWORK)."""
    machine = StartTls(protocol, server_name=server_name, client_name=client_name,
                       limits=limits)
    step = machine.start()
    while True:
        try:
            if step.send:
                _timeout(stream, deadline)
                if isinstance(stream, socket.socket):
                    stream.sendall(step.send)
                else:
                    stream.send(step.send)
            if step.status is Status.READY:
                return machine.record
            if step.status is Status.FAILED:
                assert step.failure is not None  # our own invariant, not peer data
                raise StartTlsError(step.failure, machine.record)
            _timeout(stream, deadline)
            data = stream.recv(4096)
        except TimeoutError:
            raise StartTlsError(machine.timed_out(), machine.record) from None
        except OSError as exc:
            raise _network(machine, f"{describe_os_error(exc)} while waiting for "
                           f"{machine.waiting}") from None
        except StartTlsError:
            raise
        except NetworkError as exc:   # a Channel's own (timeout, reset): its target-less
            if exc.cause in ("timeout", "deadline"):   # reason, as arun_preamble says it
                raise StartTlsError(machine.timed_out(), machine.record) from None
            raise _network(machine, f"{exc.reason} while waiting for {machine.waiting}"
                           ) from None
        step = machine.receive_data(data)


def _timeout(stream: object, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    if isinstance(stream, socket.socket):
        stream.settimeout(remaining)


def _network(machine: StartTls, text: str) -> StartTlsError:
    return StartTlsError(PreambleFailure(Problem.NETWORK, f"{machine.protocol}: {text}"),
                         machine.record)
