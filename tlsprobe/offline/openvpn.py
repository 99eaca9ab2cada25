"""OpenVPN over UDP: one report per session, the TLS of its control channel read by the
fast reader (the packets are unwrapped by offline.openvpn_channel)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tlsprobe.capture import Datagram
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import Analyzed, Conversation, SessionTracker
from tlsprobe.offline.facts import CLIENT, SERVER
from tlsprobe.offline.fast import FastReader
from tlsprobe.offline.openvpn_channel import (
    MAX_SESSIONS,
    TLS_CRYPT,
    ControlChannel,
    answers,
    is_reset,
)

if TYPE_CHECKING:
    from tlsprobe.offline.flowreader import FlowReader

__all__ = ["TLS_CRYPT", "ControlChannel", "OpenVpnTracker", "is_reset"]


class _Session(Conversation):
    """One OpenVPN session over UDP: its control channels and the TLS read from them."""

    __slots__ = ("channels", "confirmed", "reader")

    def __init__(self, sid: int, client: tuple[str, int], server: tuple[str, int], ts: float,
                 frame: int, caches: AnalysisCaches | None = None) -> None:
        super().__init__(sid, client, server, ts, frame, caches)
        self.facts.framing = "openvpn"
        self.reader: FastReader | FlowReader = FastReader(self.facts)
        self.channels = (ControlChannel(False), ControlChannel(False))
        self.confirmed = False  # the server's hard reset answered the client's, or TLS found

    def trace_lines(self) -> list[str] | None:
        return self.reader.trace_lines()


class OpenVpnTracker(SessionTracker[_Session]):
    """UDP datagrams of OpenVPN sessions in (a session starts with a client's hard
    reset), one report per session out: at its first data-channel packets (the handshake
    is over) or at the end of the capture."""

    protocol = "tls"
    transport = "tcp"

    def datagram(self, ev: Datagram) -> Iterator[Analyzed]:
        session, direction = self.find(ev)
        if session is None:
            if not is_reset(ev.data, True):
                return
            session = _Session(self.connections, (ev.src, ev.sport), (ev.dst, ev.dport),
                               ev.ts, ev.frame, self.caches)
            session.reader = self.stream_reader(session.facts)
            self.follow(session)
            direction = CLIENT
            if len(self.open) > MAX_SESSIONS:
                self.unfollow(self.open[next(iter(self.open))])
        first = session.channels[CLIENT].first
        if direction == SERVER and session.channels[SERVER].first is None and \
                first is not None and answers(ev.data, first):
            session.confirmed = True  # the server's first packet, as over TCP: a later
            # one that only looks like a reset (DNS echoes the query's id) is no answer
        session.last_ts, session.last_frame = ev.ts, ev.frame
        session.nbytes[direction] += len(ev.data)
        channel = session.channels[direction]
        tls = channel.packet(ev.data)
        if tls:
            session.confirmed = True
            session.reader.feed_side(direction, tls, ev.ts, ev.frame)
        if channel.data_packets and session.channels[1 - direction].data_packets:
            self.unfollow(session)
            if session.confirmed:
                yield self._build(session)

    def _build(self, session: _Session) -> Analyzed:
        why = next((c.unreadable for c in session.channels if c.unreadable is not None), None)
        if why is None and not session.facts.client_hellos and \
                all(c.hmac is None for c in session.channels):
            why = "no TLS record found in the control channel: " + TLS_CRYPT
        if why is not None:
            session.facts.problem(f"OpenVPN: {why}")
        self.keys_unused(session, "OpenVPN over UDP: its TLS records are not decrypted "
                                  "(tshark -o tls.keylog_file:FILE decrypts them)")
        return super()._build(session)

    def reportable(self, conv: _Session) -> bool:
        """Every session that was OpenVPN (a server answered) is reported, its TLS read or
        not (then with the reason)."""
        return bool(conv.confirmed)
