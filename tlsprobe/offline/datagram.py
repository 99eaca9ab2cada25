"""What the trackers of handshakes over UDP share: QUIC (offline.quic), DTLS (offline.dtls)
and OpenVPN (offline.openvpn).

Each tracker takes the datagrams the analyzer gives it, follows its conversations (two UDP
endpoints; an OrderedDict bounded by the tracker) and yields an `Analyzed` per handshake it
reports, built here the same way for all three. The analyzer imports the trackers, the
trackers import only this base and the layers below: no tracker imports its caller.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from tlsprobe.capture import Datagram
from tlsprobe.model.capture import BriefReport, ConnectionReport, ReportText
from tlsprobe.offline.build import Endpoints, brief_of, build_report
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.facts import Facts

if TYPE_CHECKING:
    from tlsprobe.offline.datagram_trace import MessageTrace
    from tlsprobe.offline.fast import FastReader
    from tlsprobe.offline.flowreader import FlowReader

#: one UDP endpoint (address, port); a conversation's key is (client, server)
Endpoint = tuple[str, int]
ConversationKey = tuple[Endpoint, Endpoint]


class Analyzed(NamedTuple):
    """One connection's report and its `--msg` trace lines (None: no trace asked for). With
    AnalyzerOptions.brief a connection's report is a `model.capture.BriefReport`, with
    `json_text` a TCP connection's a `model.capture.ReportText`."""

    report: ConnectionReport | BriefReport | ReportText
    trace: list[str] | None


class Conversation:
    """One handshake over UDP: its endpoints, times, byte counts and facts."""

    __slots__ = ("client", "facts", "first_frame", "first_ts", "id", "last_frame", "last_ts",
                 "nbytes", "server", "trace")

    def __init__(self, cid: int, client: Endpoint, server: Endpoint, ts: float,
                 frame: int, caches: AnalysisCaches | None = None) -> None:
        self.id = cid
        self.client, self.server = client, server
        self.facts = Facts(caches)
        self.first_ts = self.last_ts = ts
        self.first_frame = self.last_frame = frame
        self.nbytes = [0, 0]
        self.trace: MessageTrace | None = None   # its `--msg` lines (None: not asked for)

    def message(self, direction: int, msg: bytes, ts: float, frame: int,
                decrypted: bool = False) -> None:
        """A whole handshake message (TLS header) to the facts and the trace."""
        self.facts.on_message(direction, msg, ts, frame, decrypted)
        if self.trace is not None:
            self.trace.message(direction, msg, decrypted, self.facts.context(direction))

    def alert(self, direction: int, level: int, description: int,
              decrypted: bool = False) -> None:
        self.facts.alert(direction, level, description, decrypted)
        if self.trace is not None:
            self.trace.alert(direction, level, description, decrypted)

    def trace_lines(self) -> list[str] | None:
        """The `--msg` lines (None: no trace asked for)."""
        return self.trace.result() if self.trace is not None else None


_C = TypeVar("_C", bound=Conversation)


class DatagramTracker(Generic[_C]):
    """Datagrams in, one `Analyzed` per handshake out; `_C`: its kind of conversation.
    Subclasses set `protocol` (the report's protocol column), `transport` (what the
    fingerprints say: JA4 "q", "d" or "t") and implement `datagram`; `reportable` says
    which conversations still open at the end of the capture are reported. `brief`: the
    reports are `BriefReport`s (AnalyzerOptions.brief: the table and the statistics), whose
    derivation parses no certificate (a DTLS server's chain: an X.509 parse each, and the
    import of cryptography's X.509 module for the first)."""

    protocol = "tls"
    transport = "tcp"

    def __init__(self, file: str, caches: AnalysisCaches | None = None) -> None:
        self.file = file
        self.caches = caches if caches is not None else AnalysisCaches()
        self.open: OrderedDict[ConversationKey, _C] = OrderedDict()
        self.connections = 0
        self.brief = False
        #: conversations no longer followed (too many at once), to be reported
        self.evicted: list[_C] = []
        #: makes a conversation's `--msg` trace (None: no trace; set by offline.udp)
        self.tracing: Callable[[], MessageTrace] | None = None
        #: a key log's secrets for a client random (set by offline.udp; None: no key log),
        #: the reported handshakes it had secrets for, and why some of them were not
        #: decrypted: (reason -> handshakes)
        self.secrets: Callable[[bytes], dict[str, bytes] | None] | None = None
        self.keyed_count = 0
        self.not_decrypted: dict[str, int] = {}

    def keys_unused(self, conv: _C, why: str) -> None:
        """A handshake reported without decryption: counted, with `why`, when the key log
        has its secrets (a note must never say no key matched it)."""
        hellos = conv.facts.client_hellos
        if self.secrets is not None and hellos and self.secrets(hellos[0].random):
            self.keyed_count += 1
            self.not_decrypted[why] = self.not_decrypted.get(why, 0) + 1

    def follow_new(self, conv: _C, most: int) -> None:
        """A new conversation followed; past `most` at once, the oldest is no longer
        followed, and is reported (at the next datagram) if it is worth a report: never
        dropped silently."""
        self.open[(conv.client, conv.server)] = conv
        while len(self.open) > most:
            _key, oldest = self.open.popitem(last=False)
            if self.reportable(oldest):
                self.evicted.append(oldest)

    def drain(self) -> Iterator[Analyzed]:
        """The reports of the conversations `follow_new` stopped following."""
        while self.evicted:
            yield self._build(self.evicted.pop(0))

    def traced(self, conv: _C) -> _C:
        """A new conversation, given its trace when one is asked for."""
        if self.tracing is not None:
            conv.trace = self.tracing()
        return conv

    def stream_reader(self, facts: Facts) -> FastReader | FlowReader:
        """The reader of TLS records carried in a session's datagrams (OpenVPN's control
        channel, RDP over UDP): the fast one, or with a trace asked for the Flow reader,
        whose trace shows the records as over TCP."""
        if self.tracing is None:
            from tlsprobe.offline.fast import FastReader
            return FastReader(facts)
        from tlsprobe.offline.flowreader import FlowReader
        trace = self.tracing()
        return FlowReader(facts, formatter=trace.formatter, keylog=None,
                          max_records=trace.max_events)

    def datagram(self, ev: Datagram) -> Iterator[Analyzed]:
        """One datagram: the reports of the handshakes it completes."""
        raise NotImplementedError

    def reportable(self, conv: _C) -> bool:
        """Is a conversation still open at the end of the capture worth a report?"""
        f = conv.facts
        return bool(f.client_hellos or f.server_hellos)

    def _build(self, conv: _C) -> Analyzed:
        if self.brief:
            (client_ip, client_port), (server_ip, server_port) = conv.client, conv.server
            return Analyzed(brief_of(conv.id, "udp", self.protocol, f"{client_ip}:{client_port}",
                                     f"{server_ip}:{server_port}", conv.first_frame,
                                     conv.facts, self.transport), None)
        where = Endpoints(self.file, conv.id, "udp", self.protocol, conv.client[0],
                          conv.client[1], conv.server[0], conv.server[1], conv.first_frame,
                          conv.last_frame, conv.first_ts, conv.last_ts, conv.nbytes[0],
                          conv.nbytes[1], None)
        return Analyzed(build_report(where, conv.facts, self.transport), conv.trace_lines())

    def finish(self) -> Iterator[Analyzed]:
        """End of the capture: the open conversations worth a report, then none kept."""
        yield from self.drain()
        for conv in list(self.open.values()):
            if self.reportable(conv):
                yield self._build(conv)
        self.open.clear()


class SessionTracker(DatagramTracker[_C]):
    """A tracker of sessions started by a client's first datagram and keyed (client,
    server): OpenVPN and RDP over UDP. `find` gives a datagram's session and direction,
    `follow` and `unfollow` keep the flows of both directions known (`knows`: the
    dispatcher asks before looking at the datagram's first byte)."""

    def __init__(self, file: str, caches: AnalysisCaches | None = None) -> None:
        super().__init__(file, caches)
        #: both directions of every open session: (source, port, destination, port)
        self._flows: set[tuple[str, int, str, int]] = set()

    def knows(self, ev: Datagram) -> bool:
        """Whether the datagram belongs to a session being followed."""
        return (ev.src, ev.sport, ev.dst, ev.dport) in self._flows

    def find(self, ev: Datagram) -> tuple[_C | None, int]:
        """(the open session of this datagram or None, its direction: 0 from the client)."""
        src, dst = (ev.src, ev.sport), (ev.dst, ev.dport)
        session = self.open.get((src, dst))
        if session is not None:
            return session, 0
        return self.open.get((dst, src)), 1

    def follow(self, session: _C) -> None:
        """A new session: counted and followed."""
        self.connections += 1
        self.open[(session.client, session.server)] = session
        self._flows.add((*session.client, *session.server))
        self._flows.add((*session.server, *session.client))

    def unfollow(self, session: _C) -> None:
        self.open.pop((session.client, session.server), None)
        self._flows.discard((*session.client, *session.server))
        self._flows.discard((*session.server, *session.client))

    def finish(self) -> Iterator[Analyzed]:
        yield from super().finish()
        self._flows.clear()

