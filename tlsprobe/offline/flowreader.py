"""The Flow reader: a connection read through session.Flow, for the trace and for decryption.

The live probe and this reader share session.Flow and the trace formatter (the caller
passes report.trace.TraceFormatter in: rendering is not this layer's), so the `--msg`
lines of a capture are the probe's lines. Each direction has its own Flow object and
both share one NegotiationState (the Flow keeps per-direction framing, and the state is what
links the two sides); after a gap, the direction that lost bytes gets a fresh Flow on the
same state, fed from the next plausible record header the `Aligner` finds. Keys come from a
key log (offline.decrypt). A trace shows every record (encrypted ones summarised), up to
`max_records`; without a trace or keys, a connection stops being parsed once both sides
encrypt; with keys, after `max_records` records, or without a trace once both Finished and
`POST_HANDSHAKE_RECORDS` more records (tickets, alerts) were read.

A key log still being written (`KeyLog.grows`: a live capture with a browser's
SSLKEYLOGFILE) is behind the packets: the client logs a connection's secrets only once it
has the ServerHello, which the capture sees first. A connection whose ClientHello's random
is not in the log yet is therefore held (its later bytes kept in order, unread) until the
log has its keys, looked up again at each new segment: the client's next flight comes after
it logged them. It is read without keys when they have not come by the client's
`HOLD_CLIENT_SEGMENTS`-th segment after the server spoke, past `HOLD_BYTES`, or at its end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Final, Protocol

from tlsprobe.engine.keylog import (
    CLIENT_HANDSHAKE_TRAFFIC_SECRET,
    CLIENT_RANDOM,
    CLIENT_TRAFFIC_SECRET_0,
    SERVER_HANDSHAKE_TRAFFIC_SECRET,
    SERVER_TRAFFIC_SECRET_0,
    KeyLog,
)
from tlsprobe.offline.decrypt import Decryptor
from tlsprobe.offline.facts import CLIENT, SERVER, Facts
from tlsprobe.offline.fast import MAX_OPAQUE_RECORDS
from tlsprobe.offline.framing import Aligner, role_of
from tlsprobe.session.flow import (
    AlertEvent,
    ApplicationDataEvent,
    ChangeCipherSpecEvent,
    Deprotector,
    ErrorEvent,
    Flow,
    InnerContentEvent,
    MessageEvent,
    NegotiationState,
    RecordEvent,
    SSLv2HelloEvent,
)
from tlsprobe.session.flow import Event as FlowEvent
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.hello_info import sslv2_client_hello_info
from tlsprobe.wire.record import sslv2_record_size

KEY_UPDATE: Final = 24
FINISHED: Final = 20
SERVER_HELLO: Final = 2
CLIENT_HELLO: Final = 1
END_OF_EARLY_DATA: Final = 5
NEW_SESSION_TICKET: Final = 4
#: without a trace, records decrypted after both Finished (NewSessionTicket, alerts)
POST_HANDSHAKE_RECORDS: Final = 16
MAX_HEAD: Final = 1 << 14  # first bytes of a ClientHello kept until it is whole, to read a cut one
#: a connection waiting for its keys in a growing key log: bytes held at most, and the
#: client segments after the server spoke that may come before it is read without them
HOLD_BYTES: Final = 1 << 20
HOLD_CLIENT_SEGMENTS: Final = 2
#: the record header fields whose check fails where the fast reader finds no header
_HEADER_FIELDS: Final = frozenset({"record.content_type", "record.version", "record.length"})
#: wire.handshake.HandshakeReassembler's words for a message over its limit
_OVER_LIMIT: Final = re.compile(r"message length (\d+) over ")
_TLS13_LOGGED: Final = (CLIENT_HANDSHAKE_TRAFFIC_SECRET, SERVER_HANDSHAKE_TRAFFIC_SECRET,
                        CLIENT_TRAFFIC_SECRET_0, SERVER_TRAFFIC_SECRET_0)


class EventFormatter(Protocol):
    """Turns the Flow's events into trace lines (report.trace.TraceFormatter)."""

    def event_lines(self, ev: FlowEvent) -> Iterable[str]: ...


class FormatterFactory(Protocol):
    """Makes one connection's `EventFormatter` (e.g. the TraceFormatter class)."""

    def __call__(self, *, hex_limit: int | None = None) -> EventFormatter: ...


class FlowHalf:
    __slots__ = ("after_gap", "aligner", "counting", "direction", "fed", "first", "flow",
                 "head")

    def __init__(self, direction: int) -> None:
        self.direction = direction
        self.aligner = Aligner(direction)
        #: made when the first record-aligned bytes come (`FlowReader._flow_of`): most
        #: directions a key log leaves to this reader are never TLS (plain HTTP, ...)
        self.flow: Flow | None = None
        self.counting = False
        self.first = True
        self.fed = 0  # bytes given to the current Flow (its record-layer offsets)
        self.head = bytearray()  # client records until a whole ClientHello (for a cut one)
        #: bytes were lost and no handshake message has been read since (`_event`)
        self.after_gap = False


class FlowReader:
    """Feeds one connection's directions through Flows into `facts` (and trace lines)."""

    def __init__(self, facts: Facts, *, formatter: EventFormatter | None,
                 keylog: KeyLog | None, max_records: int = 2000) -> None:
        """`formatter`: the trace's (None: no trace kept)."""
        self.facts = facts
        self.trace = formatter is not None
        self.state = NegotiationState()
        self.halves = [FlowHalf(0), FlowHalf(1)]
        self.formatter = formatter
        self.lines: list[str] = []
        self.decryptor = Decryptor(keylog, self._set_deprotector) if keylog is not None \
            else None
        self.max_records = max_records
        self.records = 0
        self.app_records = [0, 0]  # per side: application data records read unprotected
        self.finished_at: int | None = None
        self.swapped = False
        self._ts = 0.0
        self._frame = 0
        #: bytes (an int: a gap of that size) held while waiting for keys:
        #: (half, data, ts, frame)
        self._held: list[tuple[FlowHalf, bytes | int, float, int]] | None = None
        self._held_bytes = 0
        #: held once at most, and only when the key log is still being written
        self._waited = keylog is None or not keylog.grows
        self._server_spoke = False
        self._client_segments = 0     # client segments held after the server spoke

    def _flow(self) -> Flow:
        flow = Flow(annotate=self.trace, capture=True)
        flow.state = self.state  # both directions share the negotiation state
        return flow

    def _flow_of(self, half: FlowHalf) -> Flow:
        """The half's Flow, made on first use (after a gap or a framing error, a fresh
        one: bytes given to it are counted from 0 again)."""
        flow = half.flow
        if flow is None:
            flow = half.flow = self._flow()
        return flow

    def _set_deprotector(self, direction: int, deprotector: Deprotector | None) -> None:
        self._flow_of(self._half(direction)).set_deprotector(direction, deprotector)

    def _half(self, direction: int) -> FlowHalf:
        return next(h for h in self.halves if h.direction == direction)

    def swap(self) -> None:
        for half in self.halves:
            half.direction ^= 1
            half.aligner.direction ^= 1
        self.swapped = True

    def trace_lines(self) -> list[str] | None:
        return self.lines if self.trace else None

    def release(self) -> None:
        """The connection is done (as FastReader.release): nothing held against the
        analysis's budget here; what waited for keys that never came is read now."""
        self._release()

    # -- waiting for a growing key log ---------------------------------------------------
    def _waits_for_keys(self) -> bool:
        """After the ClientHello: whether to hold the connection until the growing key
        log has its keys (once per connection, and only when they are not there yet)."""
        dec, f = self.decryptor, self.facts
        if dec is None or self._waited or not dec.keylog.grows or dec.active or \
                not f.client_hellos or f.server_hello is not None:
            return False
        self._waited = True
        return not self._keys_logged()

    def _hold(self, half: FlowHalf, data: bytes | int, ts: float, frame: int) -> None:
        """Keep a segment (or a gap) of a connection waiting for keys; read all that was
        held when the keys have come, or without them when waiting has lasted enough."""
        held, dec = self._held, self.decryptor
        assert held is not None and dec is not None
        held.append((half, data, ts, frame))
        self._held_bytes += 0 if isinstance(data, int) else len(data)
        if half.direction == SERVER:
            self._server_spoke = True
        elif self._server_spoke:
            self._client_segments += 1
        if self._keys_logged() or self._held_bytes > HOLD_BYTES or \
                self._client_segments >= HOLD_CLIENT_SEGMENTS:
            self._release()

    def _keys_logged(self) -> bool:
        """Whether the key log has all the keys of this connection a client logs during
        its handshake: the TLS 1.2 master secret, or the TLS 1.3 handshake and first
        application traffic secrets (it writes them one line at a time)."""
        assert self.decryptor is not None
        secrets = self.decryptor.keylog.secrets(self.facts.client_hellos[0].random)
        return secrets is not None and (CLIENT_RANDOM in secrets or all(
            label in secrets for label in _TLS13_LOGGED))

    def _release(self) -> None:
        """Read what was held, in its order."""
        held, self._held = self._held, None
        for half, data, ts, frame in held or ():
            if isinstance(data, int):
                self.gap(half, ts, frame, data)
            elif not half.counting:
                self._feed(half, data, ts, frame)

    # -- input ---------------------------------------------------------------------------
    def feed_side(self, direction: int, data: bytes, ts: float, frame: int) -> None:
        """`feed` the half at index `direction` (a session whose sides never swap), unless
        it only counts bytes now."""
        half = self.halves[direction]
        if not half.counting:
            self.feed(half, data, ts, frame)

    def gap_side(self, direction: int, ts: float, frame: int) -> None:
        """`gap` on the half at index `direction`, unless it only counts bytes now."""
        half = self.halves[direction]
        if not half.counting:
            self.gap(half, ts, frame)

    def gap(self, half: FlowHalf, ts: float = 0.0, frame: int = 0, size: int = 0) -> None:
        """`size` bytes of the half were lost (0: not known): a fresh Flow reads what
        follows from the next record header; TLS 1.3 records under keys are decrypted on
        after it where the sequence number can be found (`Decryptor.after_gap`)."""
        if half.counting:
            return
        if self._held is not None:
            self._hold(half, size, ts, frame)
            return
        if half.head and not self.facts.client_hellos:
            msg = bytearray()  # the handshake bytes of the records kept, the last one cut
            p, head = 0, half.head
            while p + 5 < len(head) and head[p] == 22:
                msg += head[p + 5:p + 5 + ((head[p + 3] << 8) | head[p + 4])]
                p += 5 + ((head[p + 3] << 8) | head[p + 4])
            if len(msg) >= 4 and msg[0] == 1:
                self.facts.cut_client_hello(bytes(msg), ts, frame)
        half.head = bytearray()
        half.aligner.lost()
        if half.flow is not None and half.flow.pending(half.direction):
            self.facts.gap_cut(half.direction)  # (it cut a record or a message)
        half.flow = None  # partial record and message are gone; keys too (seq lost)
        half.fed = 0
        half.after_gap = True
        dec = self.decryptor
        if dec is not None and dec.active:
            resync = dec.after_gap(half.direction, size)
            if resync is not None:
                self._flow_of(half).set_deprotector(half.direction, resync)

    def feed(self, half: FlowHalf, data: bytes, ts: float, frame: int) -> None:
        if self._held is not None:
            self._hold(half, data, ts, frame)
            return
        self._feed(half, data, ts, frame)
        if not self._waited and self._waits_for_keys():
            self._held = []

    def _feed(self, half: FlowHalf, data: bytes, ts: float, frame: int) -> None:
        skipped = half.aligner.skipped
        data = half.aligner.feed(data)
        if half.after_gap and half.aligner.skipped > skipped:
            self.facts.gap_cut(half.direction)  # (the rest of a record it cut)
        if half.aligner.state == "dead":
            half.counting = True
        if not data:
            return
        if half.first:
            half.first = False
            role = role_of(data)
            if role is not None and role != half.direction and not self.facts.client_hellos:
                self.swap()
            if half.direction == SERVER and data[0] & 0x80:
                # an SSL 2.0 server (session.Flow reads only the SSLv2-format ClientHello)
                total = sslv2_record_size(data) or 0
                if len(data) >= total:
                    self.facts.sslv2_record(SERVER, data[:total], ts, frame)
                half.counting = True
                return
        if half.direction == CLIENT and not self.facts.client_hellos and \
                len(half.head) < MAX_HEAD and (half.head or data[:1] == b"\x16" and
                                               data[5:6] == b"\x01"):
            half.head += data[:MAX_HEAD - len(half.head)]  # the start of a ClientHello
        elif half.head:
            half.head = bytearray()
        self._ts, self._frame = ts, frame
        while data:
            data = self._feed_flow(half, data)
        self._maybe_stop()

    def _feed_flow(self, half: FlowHalf, data: bytes) -> bytes:
        """Feed one Flow; after a record-layer error, the bytes to read again (re-aligned
        by a fresh Flow from the next plausible record header)."""
        flow, start = self._flow_of(half), half.fed
        half.fed += len(data)
        failure = None
        for ev in flow.feed(half.direction, data):
            if isinstance(ev, ErrorEvent) and ev.where == "record layer":
                failure = ev.error.offset
                at = failure - start
                if self.facts.sslv2_session and 0 <= at < len(data) and data[at] & 0x80:
                    half.counting = True  # SSL 2.0 records after an SSLv2 hello: not TLS
                    return b""
            self._event(ev)
        if not flow.failed(half.direction) or half.flow is not flow:
            return b""
        half.flow = None
        half.fed = 0
        rest = data[failure - start:] if failure is not None and failure >= start else b""
        if rest:
            return half.aligner.reset_with(rest)
        half.aligner.lost()
        return b""

    def _maybe_stop(self) -> None:
        f = self.facts
        decrypting = self.decryptor is not None and self.decryptor.active
        if decrypting and self.finished_at is None and f.finished[0] and f.finished[1]:
            self.finished_at = self.records
        done = (f.encrypted[0] and f.encrypted[1] and not decrypting and not self.trace) or \
            self.records >= self.max_records or \
            (not self.trace and self.finished_at is not None and
             self.records - self.finished_at >= POST_HANDSHAKE_RECORDS)
        if done:
            for half in self.halves:
                half.counting = True

    # -- events --------------------------------------------------------------------------
    def _event(self, ev: FlowEvent) -> None:
        f, ts, frame = self.facts, self._ts, self._frame
        if self.formatter is not None:
            self.lines.extend(self._trace(ev))
        d = ev.direction
        if isinstance(ev, RecordEvent):
            self.records += 1
            if ev.protected and (self.state.server_hello is not None or d == SERVER or
                                 ev.record.content_type != 23):
                if f.tls13 and not f.encrypted[d] and not (
                        self.decryptor is not None and self.decryptor.active):
                    f.first_protected(d, ev.fragment_length)  # (no key: by its size)
                f.mark_encrypted(d, ts)  # (0-RTT data before the ServerHello does not count)
            elif ev.record.content_type == 23:
                self._opaque(d, ts)
        elif isinstance(ev, MessageEvent):
            if self.halves[0].after_gap or self.halves[1].after_gap:
                self._half(d).after_gap = False
            f.on_message(d, ev.raw, ts, frame, decrypted=ev.protected, decoded=ev.decoded)
            self._keys(ev)
        elif isinstance(ev, AlertEvent):
            f.alert(d, ev.alert.level, ev.alert.description, ev.protected)
        elif isinstance(ev, ChangeCipherSpecEvent):
            f.change_cipher_spec(d)
            if self.decryptor is not None:
                self.decryptor.on_change_cipher_spec(d)  # (a renegotiation's: new keys)
            if f.ccs[d]:  # a capture without the hellos: the Flow cannot know it
                self.state.ccs_seen[d] = True
        elif isinstance(ev, ApplicationDataEvent):
            return
        elif isinstance(ev, SSLv2HelloEvent):
            if d == CLIENT:
                f.sslv2_client_hello(sslv2_client_hello_info(ev.hello), ts, frame)
        elif isinstance(ev, InnerContentEvent):
            if self.decryptor is not None:
                self.decryptor.opened[d] = True
        elif isinstance(ev, ErrorEvent):
            if ev.where == "handshake framing" and self._half(d).after_gap:
                f.gap_cut(d, tail=True)
                # the fast reader's rule: after a gap, a handshake record that starts with
                # no message header is the middle of a message whose start was lost, or
                # protected after a ChangeCipherSpec the gap took (an encrypted Finished
                # read as a message of megabytes): nothing it says is a fact
                if not f.tls13 and f.server_hello is not None and not f.ccs[d]:
                    f.mark_encrypted(d, ts)  # (the fast reader: by its encrypted alert)
                    if not self.trace:
                        self._half(d).counting = True
                return
            f.problem(self._keys_failed(ev) or _error_problem(ev))

    def _keys_failed(self, ev: ErrorEvent) -> str | None:
        """Logged keys that open none of a side's records: the connection is reported as
        not decrypted (its handshake's end unknown, not "incomplete"), with that reason."""
        dec = self.decryptor
        if dec is None or ev.where != "record protection":
            return None
        problem = dec.keys_failed(ev.direction, ev.error.reason.removeprefix(
            "record decryption failed: "))
        if problem is not None:
            self.facts.decrypted = False
        return problem

    def _opaque(self, direction: int, ts: float) -> None:
        """Application data records no handshake has protected (a capture that starts
        mid-stream, or 0-RTT data): after `MAX_OPAQUE_RECORDS` of them the side is taken for
        encrypted, as by the fast reader, and is only counted from then on (kept read for
        a trace, and while decrypting)."""
        dec = self.decryptor
        if dec is not None and (dec.active or dec.early_records):
            return
        self.app_records[direction] += 1
        if self.app_records[direction] == MAX_OPAQUE_RECORDS:
            self.facts.mark_encrypted(direction, ts)
            if not self.trace:
                self._half(direction).counting = True

    def _trace(self, ev: FlowEvent) -> list[str]:
        """The formatter's lines for one event. A hello whose supported_versions cannot be
        decoded makes TraceFormatter raise (it reads the typed view for the version label):
        the message is then shown as undecodable, with the error, instead."""
        formatter = self.formatter
        if formatter is None:
            return []
        try:
            return list(formatter.event_lines(ev))
        except DecodeError as exc:
            if not isinstance(ev, MessageEvent):
                raise
            return list(formatter.event_lines(replace(ev, decoded=None, error=exc)))

    def _keys(self, ev: MessageEvent) -> None:
        dec = self.decryptor
        if dec is None:
            return
        t = ev.msg_type
        if t == CLIENT_HELLO and ev.direction == CLIENT and not ev.protected:
            dec.on_client_hello(self.facts, ev.raw)
        elif t == NEW_SESSION_TICKET and ev.direction == SERVER and not self.facts.tls13:
            dec.on_session_ticket(self.facts, ev.raw)
        elif t == CLIENT_HELLO and ev.direction == CLIENT and not self.facts.tls13:
            dec.on_renegotiation_hello(ev.raw[6:38])  # (a TLS 1.0-1.2 renegotiation's)
        elif t == SERVER_HELLO and ev.direction == SERVER and ev.protected and \
                self.facts.server_hello is not None and not self.facts.tls13:
            problem = dec.on_renegotiation(self.facts.server_hello)
            if problem:
                self.facts.problem(problem)
        elif t == END_OF_EARLY_DATA and ev.direction == CLIENT and ev.protected:
            dec.on_end_of_early_data()
        elif t == SERVER_HELLO and ev.direction == SERVER and self.facts.server_hello is not None \
                and not dec.active and not ev.protected:
            problem = dec.on_server_hello(self.facts)
            if problem:
                self.facts.problem(problem)
            self.facts.decrypted = dec.active
            self.facts.keyless = dec.keyless_side is not None
        elif t == FINISHED and ev.protected and self.facts.tls13:
            dec.on_finished(ev.direction)
        elif t == KEY_UPDATE and ev.protected:
            dec.on_key_update(ev.direction)


def _error_problem(ev: ErrorEvent) -> str:
    """A Flow error as a connection's problem, in the fast reader's words where both
    readers meet the same damage (a record header that is none, a handshake message over
    the size limit), so that a capture reads the same with and without keys. A header the
    Flow cannot read is said once per side, as the fast reader does: the codec's offset
    would count from wherever the reader last re-aligned."""
    side = "client" if ev.direction == CLIENT else "server"
    error = ev.error
    if ev.where == "record layer" and error.path in _HEADER_FIELDS:
        return f"no TLS record header where one was expected ({side})"
    if ev.where == "handshake framing" and error.path == "handshake.length":
        found = _OVER_LIMIT.match(error.reason)
        if found is not None:
            return (f"handshake message of {int(found[1]) + 4} bytes from the {side}: "
                    "over the limit, skipped")
    return f"malformed {ev.where} from the {side}: {error}"
