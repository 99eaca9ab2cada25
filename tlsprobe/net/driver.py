"""The one driver of the sans-IO client handshake over a transport, sync and asyncio.

`drive` (blocking, the probe and the timing runs) and `adrive` (asyncio, the scan scheduler)
do the same thing: send the ClientHello, then feed each chunk the server sends to the engine
and send the engine's answer, until the handshake is done, the server closes (the engine is
told: `connection_closed`), or the caller's `until(handshake)` says the question is answered
(checked after each chunk; the engine's answer to that chunk is then not sent). The server's
first bytes get the one not-TLS verdict (net/not_tls.py) before the engine sees them; when
they are not TLS, the rest of their first line is read (briefly) for the message.

Nothing is caught: a `HandshakeFailure` (its `kind` NOT_TLS for the verdict) or a
`NetworkError` (with its `cause`) goes to the caller, who turns it into its own value (the
probe's error, a scan outcome, a timing failure). What the callers need beyond the engine's
own state (events, key log, certificates) is in `Progress`, filled in place so that it is
there after an exception too: the server's first bytes and whether it closed. Every wait is
bounded by `deadline` (time.monotonic()) and the transport's own per-read timeout; recording
(--pcap-out) is a transport wrapper (net/transport.py Recorder).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tlsprobe.engine.common import HandshakeFailure
from tlsprobe.engine.interface import Handshake
from tlsprobe.errors import FailureKind, NetworkError
from tlsprobe.net.not_tls import SNIPPET, is_not_tls, not_tls_message, starttls_hint
from tlsprobe.net.transport import AsyncTransport, Transport
from tlsprobe.wire.record import HEADER_SIZE

Until = Callable[[Handshake], bool]

SNIPPET_WAIT = 0.5   # seconds to wait for the rest of a not-TLS answer's first line


@dataclass
class Progress:
    """What the driver saw of the server: its first bytes (a record header, more when they
    came in one chunk), the verdict on them (None: undecided) and whether it closed."""

    head: bytes = b""
    not_tls: bool | None = None
    closed: bool = False

    @property
    def sslv2(self) -> bool:
        """The answer began with an SSLv2 record header."""
        return bool(self.head) and bool(self.head[0] & 0x80)

    def check(self, data: bytes) -> bool:
        """Judge the first bytes (accumulated until the verdict is known): True when they
        are not TLS (the caller completes the snippet, then raises `failure()`)."""
        if self.not_tls is None and len(self.head) < HEADER_SIZE:
            self.head = (self.head + data)[:SNIPPET + 1]   # +1: the message marks a cut
            self.not_tls = is_not_tls(self.head)
        return bool(self.not_tls)

    def add(self, data: bytes) -> None:
        self.head = (self.head + data)[:SNIPPET + 1]

    @property
    def shown_enough(self) -> bool:
        """The snippet holds a line or all it can show: no need to wait for more."""
        return len(self.head) > SNIPPET or b"\n" in self.head

    def failure(self) -> HandshakeFailure:
        return HandshakeFailure(FailureKind.NOT_TLS, not_tls_message(self.head)
                                + starttls_hint(self.head))


def drive(handshake: Handshake, transport: Transport, deadline: float, *,
          until: Until | None = None, progress: Progress | None = None) -> Progress:
    """Run `handshake` over `transport` until it is done, the server closes, or `until`;
    by `deadline`. Raises HandshakeFailure or NetworkError (see the module docstring)."""
    seen = progress if progress is not None else Progress()
    try:
        _send(transport, handshake.start())
        while not handshake.done:
            data = transport.receive(deadline)
            if not data:
                seen.closed = True
                handshake.connection_closed()
                break
            if seen.check(data):
                _complete(transport, seen, deadline)
                raise seen.failure()
            out = handshake.receive(data)
            if until is not None and until(handshake):
                break
            _send(transport, out)
        return seen
    finally:
        _keep_secrets(handshake)


async def adrive(handshake: Handshake, transport: AsyncTransport, deadline: float, *,
                 until: Until | None = None, progress: Progress | None = None,
                 half_close: bool = False) -> Progress:
    """`drive` for asyncio: the same steps, the same exceptions. `half_close`: the caller's
    `until` holds before the engine has anything more to send (an audit job that stops at
    the server's hello or first flight), so the client's side is closed right after the
    ClientHello (`AsyncTransport.finish_sending`) while the answer is read. Should the
    engine still have bytes to send, they cannot go: the server, which has our FIN, then
    closes before `until` holds, and the caller (probes/audit/scheduler.py) asks again
    without the half-close."""
    seen = progress if progress is not None else Progress()
    try:
        first = handshake.start()
        if first:
            await transport.send(first)
        if half_close:
            await transport.finish_sending()
        while not handshake.done:
            data = await transport.receive(deadline)
            if not data:
                seen.closed = True
                handshake.connection_closed()
                break
            if seen.check(data):
                await _acomplete(transport, seen, deadline)
                raise seen.failure()
            out = handshake.receive(data)
            if until is not None and until(handshake):
                break
            if out and not half_close:
                await transport.send(out)
        return seen
    finally:
        _keep_secrets(handshake)


def _keep_secrets(handshake: Handshake) -> None:
    """A recorded connection (`scan --keylog FILE`: the current tape) keeps the secrets of
    every handshake driven on it, those of the active checks, which drive their own
    engines, as well as the audit's jobs'; a key log written as the handshakes end (the
    probe's `--keylog`: `SECRETS`) gets them before the connection is closed."""
    from tlsprobe.net.recording import SECRETS, TAPE
    tape = TAPE.get()
    if tape is not None:
        tape.add_secrets(handshake.keylog_lines)
    sink = SECRETS.get()
    if sink is not None and handshake.keylog_lines:
        sink(handshake.keylog_lines)


async def aclose(handshake: Handshake, transport: AsyncTransport, deadline: float) -> None:
    """After a completed handshake: close_notify, then read what the server sends until it
    closes; going quiet until `deadline` or a network error ends it quietly, a fatal alert
    raises HandshakeFailure (TLS 1.3's certificate_required, for one, comes after the
    client's Finished)."""
    try:
        await transport.send(handshake.close())
        while not handshake.peer_closed:
            data = await transport.receive(deadline)
            if not data:
                return
            handshake.receive(data)
    except NetworkError:
        return


def _complete(transport: Transport, seen: Progress, deadline: float) -> None:
    """Not TLS, decided on a short first chunk: read what else the server sends at once (up
    to a line or the snippet's length, for at most SNIPPET_WAIT), so that the message is the
    same however the bytes were cut."""
    wait = min(deadline, time.monotonic() + SNIPPET_WAIT)
    while not seen.shown_enough:
        try:
            more = transport.receive(wait)
        except NetworkError:
            return
        if not more:
            return
        seen.add(more)


async def _acomplete(transport: AsyncTransport, seen: Progress, deadline: float) -> None:
    wait = min(deadline, time.monotonic() + SNIPPET_WAIT)
    while not seen.shown_enough:
        try:
            more = await transport.receive(wait)
        except NetworkError:
            return
        if not more:
            return
        seen.add(more)


def _send(transport: Transport, data: bytes) -> None:
    if data:
        transport.send(data)


__all__ = ["Progress", "Until", "aclose", "adrive", "drive"]
