"""Recording every connection of an audit (`scan --msg/--pcap-out/--keylog`, issue 13 item 4).

A scan opens many connections through the scheduler (probes/audit/scheduler.py), each for one
question of one phase ("groups TLS 1.3"); a user who doubts a verdict wants exactly what each
of them sent and received. A `Recording` hands the scheduler one `Tape` per connection
attempt (its factory hook); the tape is made current (`TAPE`, a context variable: each job
runs in its own asyncio task) while the connector opens the connection, so that the
`RecordingConnector` at the bottom of the connector stack (right above TCP, below a STARTTLS
preamble) can wrap the fresh transport in an `AsyncRecorder` that keeps every byte of the
conversation, the plain-text preamble included, and number the connection within its phase
("groups TLS 1.3, connection 3") in the order the connections really opened. The preamble's
lines reach the tape through `note_preamble` (called by the STARTTLS connector); the
scheduler adds the handshake's trace events and key log lines when the conversation ends.

Only connections that were opened are numbered and recorded (a refused connect is none).
Each tape goes to the recording's `sink` once its connection is closed and is not kept, so
an audit of many targets holds only the connections in flight (commands/scan_recording.py
writes the three files as the tapes arrive).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tlsprobe.net.tcp import Target
from tlsprobe.net.transport import (
    AsyncConnector,
    AsyncTransport,
    Segment,
    WrappingConnector,
    WrappingTransport,
)

if TYPE_CHECKING:
    from tlsprobe.net.starttls import PreambleRecord
    from tlsprobe.session.flow import Event

__all__ = ["SECRETS", "TAPE", "AsyncRecorder", "Recording", "RecordingConnector", "Tape",
           "note_preamble", "taping"]


@dataclass(eq=False)
class Tape:
    """One connection of the audit: its label, addresses, bytes, preamble, trace events and
    key log lines. `number` is 0 until the connection opened."""

    target: str                 # Target.display
    phase: str
    number: int = 0             # within (target, phase), from 1, in the order of opening
    order: int = 0              # within the run, from 1
    client: tuple[str, int] | None = None
    server: tuple[str, int] | None = None
    started: float = 0.0        # time.time() of the connect and of the end
    ended: float = 0.0
    segments: list[Segment] = field(default_factory=list)
    preamble: PreambleRecord | None = None   # when --starttls
    events: Sequence[Event] = ()    # of the handshake (for the --msg trace)
    keylog_lines: Sequence[str] = ()
    #: told each handshake's new key log lines as its drive ends, before the connection is
    #: closed (`scan --keylog`: a capture beside the scan decrypts the connection)
    on_secrets: Callable[[Tape, Sequence[str]], None] | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """"groups TLS 1.3, connection 3"."""
        return f"{self.phase}, connection {self.number}"

    @property
    def opened(self) -> bool:
        return self.number > 0

    def finish(self, events: Sequence[Event] = (), keylog_lines: Sequence[str] = ()) -> None:
        """The conversation is over: keep its trace events and secrets."""
        self.events = list(events)
        self.add_secrets(keylog_lines)
        self.ended = time.time()

    def add_secrets(self, keylog_lines: Sequence[str]) -> None:
        """Key log lines of a handshake on this connection (`net/driver.py` adds those of
        every handshake it drives, an active check's too), each kept once, in order."""
        new = [line for line in dict.fromkeys(keylog_lines) if line not in self.keylog_lines]
        self.keylog_lines = [*self.keylog_lines, *new]
        if new and self.on_secrets is not None:
            self.on_secrets(self, new)


#: the tape of the connection the current task is opening (None: nothing is recorded)
TAPE: ContextVar[Tape | None] = ContextVar("tlsprobe_tape", default=None)
#: where the key log lines of each handshake go as soon as its drive ends, before the
#: connection is closed (the probe's `--keylog`: a capture running beside it, `tlsprobe
#: pcap -i` or Wireshark, finds the keys while the connection is still open; None: the
#: lines are only kept for the end)
SECRETS: ContextVar[Callable[[Sequence[str]], None] | None] = ContextVar(
    "tlsprobe_secrets", default=None)


class Recording:
    """The recording of a run (the scheduler's `recording` hook): `tape(target, phase)`
    before each connection attempt, `done(tape)` after it; an opened tape then goes to
    `sink`. `trace`: the handshakes keep the annotated events the --msg trace prints."""

    def __init__(self, sink: Callable[[Tape], None], trace: bool = False) -> None:
        self.sink = sink
        self.trace = trace
        #: each tape's new key log lines as its handshakes end (Tape.on_secrets)
        self.secrets: Callable[[Tape, Sequence[str]], None] | None = None
        self.opened_count = 0
        self._numbers: Counter[tuple[str, str]] = Counter()

    def tape(self, target: Target, phase: str) -> Tape:
        return Tape(target.display, phase, on_secrets=self.secrets)

    def opened(self, tape: Tape, transport: AsyncTransport) -> None:
        """The tape's connection is open: number it and note both addresses."""
        key = (tape.target, tape.phase)
        self._numbers[key] += 1
        self.opened_count += 1
        tape.number = self._numbers[key]
        tape.order = self.opened_count
        tape.started = time.time()
        tape.server = transport.peer
        tape.client = transport.local

    def done(self, tape: Tape) -> None:
        """The attempt is over (its connection closed): an opened tape goes to the sink."""
        if tape.opened:
            self.sink(tape)


@contextmanager
def taping(recording: Recording | None, target: Target, phase: str) -> Iterator[Tape | None]:
    """One connection attempt's tape (None without a recording), current (`TAPE`) inside
    the block and handed to the recording (`done`) after it."""
    tape = recording.tape(target, phase) if recording is not None else None
    token = TAPE.set(tape)
    try:
        yield tape
    finally:
        TAPE.reset(token)
        if tape is not None and recording is not None:
            recording.done(tape)


class AsyncRecorder(WrappingTransport):
    """An `AsyncTransport` that keeps every byte sent and received on its tape, with its
    time (the asyncio twin of net/transport.py `Recorder`)."""

    def __init__(self, inner: AsyncTransport, tape: Tape) -> None:
        super().__init__(inner)
        self.tape = tape

    async def send(self, data: bytes) -> None:
        if data:
            self.tape.segments.append(Segment(True, data, time.time()))
            await self.inner.send(data)

    async def receive(self, deadline: float) -> bytes:
        data = await self.inner.receive(deadline)
        if data:
            self.tape.segments.append(Segment(False, data, time.time()))
        return data

    async def close(self) -> None:
        self.tape.ended = time.time()
        await self.inner.close()


class RecordingConnector(WrappingConnector):
    """An `AsyncConnector` over `inner` (TCP) that records the connection of the current
    tape (`TAPE`) with `recording`; without a current tape it is `inner` unchanged."""

    def __init__(self, inner: AsyncConnector, recording: Recording) -> None:
        super().__init__(inner)
        self.recording = recording

    async def __call__(self, target: Target, deadline: float) -> AsyncTransport:
        transport = await self.inner(target, deadline)
        tape = TAPE.get()
        if tape is None or tape.opened:
            return transport
        self.recording.opened(tape, transport)
        return AsyncRecorder(transport, tape)


def note_preamble(record: PreambleRecord) -> None:
    """What the STARTTLS preamble of the current connection exchanged (also when it failed),
    for its --msg section."""
    tape = TAPE.get()
    if tape is not None and tape.opened:
        tape.preamble = record
