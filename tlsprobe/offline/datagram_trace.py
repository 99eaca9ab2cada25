"""The `--msg` trace of a handshake read from datagrams (QUIC, DTLS).

A TCP connection's trace shows its TLS records (offline.flowreader). QUIC carries the TLS
handshake in CRYPTO frames and DTLS in its own fragmented records, so their trace shows what
tlsprobe read of the handshake: each whole handshake message, decoded and annotated as in
the TCP trace ("(decrypted)" for one from a QUIC Handshake packet opened with a key log),
and an alert (a DTLS alert record, or a QUIC CONNECTION_CLOSE carrying one). The lines are
made by the same formatter (report.trace.TraceFormatter, passed in by the caller); at most
`max_events` events of a connection are traced, the rest counted in a last line.
"""

from __future__ import annotations

from tlsprobe.offline.flowreader import EventFormatter
from tlsprobe.session.flow import AlertEvent, MessageEvent
from tlsprobe.wire.alert import Alert
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.handshake import ParseContext, decode_handshake


class MessageTrace:
    """One conversation's trace lines."""

    __slots__ = ("events", "formatter", "lines", "max_events")

    def __init__(self, formatter: EventFormatter, max_events: int) -> None:
        self.formatter = formatter
        self.lines: list[str] = []
        self.events = 0
        self.max_events = max_events

    def _room(self) -> bool:
        self.events += 1
        return self.events <= self.max_events

    def message(self, direction: int, msg: bytes, protected: bool,
                context: ParseContext) -> None:
        """A whole handshake message (its 4-byte TLS header included)."""
        if not self._room():
            return
        try:
            ev = MessageEvent(direction, msg, decode_handshake(msg, context, annotate=True),
                              protected)
        except DecodeError as exc:
            ev = MessageEvent(direction, msg, None, protected, exc)
        self.lines.extend(self.formatter.event_lines(ev))

    def alert(self, direction: int, level: int, description: int, protected: bool) -> None:
        if self._room():
            self.lines.extend(self.formatter.event_lines(
                AlertEvent(direction, Alert(level, description), protected)))

    def result(self) -> list[str]:
        """The lines, with the count of events past the bound."""
        more = self.events - self.max_events
        if more > 0:
            return [*self.lines, (f"... {more} more handshake message(s) and alert(s) not "
                                  "traced")]
        return self.lines


__all__ = ["MessageTrace"]
