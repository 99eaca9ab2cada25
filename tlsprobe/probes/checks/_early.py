"""What the heartbleed, ccs and ticketbleed checks share: the TLS 1.0-1.2 version they ask
in, the engine driven through the server's first flight (or a whole handshake) on a
connection the check holds, and a bounded reader of the records the server sends after it.

These checks send their own records between the server's ServerHelloDone and the client's
key exchange (a HeartbeatRequest, an early ChangeCipherSpec), where nothing is encrypted
yet: the engine (engine/client.py) builds the hello and reads the flight, then the check
writes raw records on the same transport and reads the answer here. Every wait is bounded
by a deadline; what is read is bounded in bytes. Whatever the server sends there is the
check's evidence, never an error of the scan: bytes that are not TLS records (an HTTP
reply, a record over the length limit, an unknown content type) end the reading with
`Reply.error` naming them (escaped), and the check decides what they mean (`read_reply`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tlsprobe import registry
from tlsprobe.engine.client import ClientHandshake, HandshakeFailure
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.interface import Handshake
from tlsprobe.errors import NetworkError
from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.net.driver import adrive
from tlsprobe.net.not_tls import is_not_tls, not_tls_message
from tlsprobe.net.transport import AsyncTransport
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.audit.scheduler import check_limits
from tlsprobe.probes.checks.base import CheckContext, Talk
from tlsprobe.registry import HandshakeType
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.record import Record, RecordReader

__all__ = ["ALERT", "CCS", "HEARTBEAT", "Reply", "ask_version", "converse", "drive",
           "odd_bytes", "read_reply", "send", "wait_until"]

TLS10, TLS12 = 0x0301, 0x0303
CCS, ALERT, HANDSHAKE, HEARTBEAT = 20, 21, 22, 24
MAX_READ = 64 * 1024      # bytes read after the flight, at most

T = TypeVar("T")


def ask_version(ctx: CheckContext, what: str) -> int | CheckResult:
    """The highest of TLS 1.2, 1.1 and 1.0 the server speaks (the versions `what` lives
    in); when it speaks none of them, the check's result: not applicable, or inconclusive
    when the audit could not establish one of them."""
    legacy = [v for v in ctx.spoken if TLS10 <= v <= TLS12]
    if legacy:
        return max(legacy)
    unknown = [registry.version_name(v) for v in ctx.report.unknown_versions(TLS10, TLS12)]
    if unknown:
        return ctx.inconclusive(f"{', '.join(unknown)} support not established, and {what} "
                                "is a TLS 1.2-and-earlier matter")
    return ctx.result(Verdict.not_applicable, f"the server speaks none of TLS 1.0, 1.1 and "
                      f"1.2, where {what} lives")


async def drive(transport: AsyncTransport, deadline: float, config: ClientConfig, *,
                full: bool = False,
                until: Callable[[Handshake], bool] | None = None
                ) -> tuple[Handshake, str]:
    """Run the engine with `config`: to the server's ServerHelloDone, or through the whole
    handshake when `full`, or until `until(hs)`. Returns the handshake and "" when it got
    there, else why not (an alert, a close, a malformed message: one line)."""
    hs = ClientHandshake(config, annotate=False, stop_after_first_flight=not full,
                         limits=check_limits())
    stop = until or (lambda h: h.handshake_complete if full else
                     h.messages.flight.has(HandshakeType.server_hello_done))
    try:
        await adrive(hs, transport, deadline, until=stop)
    except HandshakeFailure as exc:
        if until is not None and until(hs):
            return hs, ""
        return hs, str(exc)
    if stop(hs):
        return hs, ""
    return hs, hs.incomplete_reason or ("the server closed the connection" if hs.peer_closed
                                        or not hs.done else "the handshake stopped early")


async def converse(ctx: CheckContext, talk: Talk[T | str], hello: str) -> T | CheckResult:
    """`talk`'s value on a connection of the check's own; inconclusive when no connection
    was had, or when `talk` says (a str) why `hello` did not reach ServerHelloDone."""
    got = await ctx.converse(talk)
    if isinstance(got, Outcome):
        return ctx.inconclusive(f"no conversation: {got.describe()}")
    if isinstance(got, str):
        return ctx.inconclusive(f"{hello} did not reach ServerHelloDone: {got}")
    return got


@dataclass
class Reply:
    """What the server sent after our records: its records in order, and how the reading
    ended (an alert or a close, the byte bound, silence until the deadline, an error)."""

    records: list[Record] = field(default_factory=list)
    closed: bool = False        # the server closed (or reset) the connection
    reset: bool = False         # ... with a reset
    silent: bool = False        # nothing more came before the deadline
    bytes_read: int = 0
    error: str = ""             # the records stopped making sense (one line, escaped)
    #: ... because the server left TLS: plain bytes (not a record) where a record belongs,
    #: such as an HTTP reply (`error` quotes them); plain bytes after an alert are not read
    #: (vsftpd and MariaDB send a fatal alert, then their protocol's error line)
    plain: bool = False
    reader: RecordReader = field(default_factory=lambda: RecordReader(allow_sslv2=False),
                                 repr=False)
    raw: bytearray = field(default_factory=bytearray, repr=False)   # every byte read

    def alert(self) -> tuple[int, int] | None:
        """The first alert the server sent: (level, description)."""
        for r in self.records:
            if r.content_type == ALERT and len(r.fragment) >= 2:
                return r.fragment[0], r.fragment[1]
        return None

    def of_type(self, content_type: int) -> list[Record]:
        return [r for r in self.records if r.content_type == content_type]

    def describe(self) -> str:
        """What came back, for people: the alert, a close, silence, record counts."""
        alert = self.alert()
        if alert is not None:
            level = "fatal" if alert[0] == 2 else "warning" if alert[0] == 1 else \
                f"level {alert[0]}"
            return f"{level} alert {registry.alert_name(alert[1])} ({alert[1]})"
        parts = []
        kinds: dict[int, int] = {}
        for r in self.records:
            kinds[r.content_type] = kinds.get(r.content_type, 0) + 1
        for t, n in kinds.items():
            parts.append(f"{n} {registry.content_type_name(t)} record{'s' * (n > 1)}")
        if self.error:
            parts.append(self.error)
        if self.reset:
            parts.append("the server reset the connection")
        elif self.closed:
            parts.append("the server closed the connection")
        elif self.silent:
            parts.append("no answer")
        return "; ".join(parts) or "nothing"


async def read_reply(transport: AsyncTransport, deadline: float,
                     done: Callable[[Reply], bool] = lambda r: False,
                     reply: Reply | None = None) -> Reply:
    """Read the server's records until an alert, a close, `done(reply)`, MAX_READ bytes or
    `deadline` (then `silent`), adding to `reply` when given. A reset counts as a close
    (`reset` tells it apart); other network failures raise (the scheduler makes them
    inconclusive). Bytes that are not TLS records stop the reading with `error` (see
    `odd_bytes`): the server's doing, for the check to judge, never an exception."""
    out = reply if reply is not None else Reply()
    reader = out.reader     # kept: a later read goes on where this one stopped
    while not out.closed and not out.error and out.alert() is None and not done(out):
        if out.bytes_read >= MAX_READ:
            out.error = f"stopped reading after {out.bytes_read} bytes"
            break
        try:
            data = await transport.receive(deadline)
        except NetworkError as exc:
            if exc.cause in ("timeout", "deadline"):
                out.silent = True
                break
            if exc.cause == "reset":
                out.closed = out.reset = True
                break
            raise
        if not data:
            out.closed = True
            break
        out.bytes_read += len(data)
        out.raw += data
        try:
            out.records += [r for r in reader.feed(data) if isinstance(r, Record)]
            if reader.error is not None:    # records before the fault came with this read
                raise reader.error
        except DecodeError as exc:
            if out.alert() is not None:
                # the reading ends at the alert, whatever followed it in the same read:
                # the verdict must not depend on whether both came in one segment
                break
            out.error = odd_bytes(bytes(out.raw), exc)
            out.plain = bool(is_not_tls(_fault(bytes(out.raw), exc)[:5]))
            break
    return out


def _fault(stream: bytes, error: DecodeError) -> bytes:
    """The bytes of `stream` from where the record reader found its fault."""
    return stream[error.offset - _field_offset(error.path):] if error.offset <= len(stream) \
        else b""


def odd_bytes(stream: bytes, error: DecodeError) -> str:
    """One line (escaped) naming what the server sent where a TLS record should start:
    `stream` is everything read on that side, `error` the record reader's verdict (its
    offset counts from the start of `stream`)."""
    at = _fault(stream, error)
    if at and is_not_tls(at[:5]):
        what = not_tls_message(at).removeprefix("not a TLS server: it sent ")
        return f"the server sent {what} where a TLS record belongs"
    return f"the server's bytes are not TLS records ({error.reason})"


def _field_offset(path: str) -> int:
    """Where the record header field `path` of a DecodeError sits in its header."""
    return {"record.version": 1, "record.length": 3}.get(path, 0)


async def send(transport: AsyncTransport, data: bytes) -> bool:
    """Send `data`; False when the server had already closed or reset the connection."""
    try:
        await transport.send(data)
    except NetworkError:
        return False
    return True


def wait_until(deadline: float, seconds: float) -> float:
    """A deadline `seconds` from now, never past `deadline`."""
    return min(deadline, time.monotonic() + seconds)
