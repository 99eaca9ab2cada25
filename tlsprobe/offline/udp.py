"""The UDP datagrams of a capture -> the tracker that reads their handshake.

QUIC long headers go to offline.quic, DTLS records (also inside CAPWAP control's 4-byte
preamble) to offline.dtls, OpenVPN sessions to offline.openvpn; each tracker is built on
the first datagram it is for; RDP over UDP (MS-RDPEUDP and MS-RDPEUDP2) to offline.rdpudp,
whose sessions without readable TLS are listed with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from tlsprobe.capture import Datagram
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import Analyzed

if TYPE_CHECKING:  # each imported when its first datagram comes
    from tlsprobe.offline.datagram_trace import MessageTrace
    from tlsprobe.offline.dtls import DtlsTracker
    from tlsprobe.offline.openvpn import OpenVpnTracker
    from tlsprobe.offline.quic import QuicTracker
    from tlsprobe.offline.rdpudp import RdpUdpTracker

PORT: Final = 3389  # RDP over UDP (MS-RDPEUDP)


class UdpHandshakes:
    """The datagram trackers of one capture analysis."""

    def __init__(self, file: str, caches: AnalysisCaches, brief: bool = False,
                 secrets: Callable[[bytes], dict[str, bytes] | None] | None = None,
                 tracing: Callable[[], MessageTrace] | None = None) -> None:
        self.name = file
        self.caches = caches
        self.brief = brief  # the trackers make `BriefReport`s (AnalyzerOptions.brief)
        self.secrets = secrets  # a key log's secrets for a client random (None: no key log)
        self.tracing = tracing  # makes a conversation's `--msg` trace (None: no trace)
        self._quic: QuicTracker | None = None
        self._dtls: DtlsTracker | None = None
        self._openvpn: OpenVpnTracker | None = None
        self._rdp: RdpUdpTracker | None = None

    def trackers(self) -> list[QuicTracker | DtlsTracker | OpenVpnTracker | RdpUdpTracker]:
        return [t for t in (self._quic, self._dtls, self._openvpn, self._rdp)
                if t is not None]

    def _dtls_tracker(self) -> DtlsTracker:
        if self._dtls is None:
            from tlsprobe.offline.dtls import DtlsTracker
            self._dtls = DtlsTracker(self.name, self.caches)
            self._dtls.brief = self.brief
            self._dtls.tracing = self.tracing
            self._dtls.secrets = self.secrets
        return self._dtls

    def connections(self) -> int:
        """Conversations the trackers followed."""
        return sum(t.connections for t in self.trackers())

    def finish(self) -> Iterator[Analyzed]:
        """End of the capture: the trackers' open conversations worth a report."""
        for tracker in self.trackers():
            yield from tracker.finish()

    def datagram(self, ev: Datagram) -> Iterator[Analyzed]:
        """One datagram: the reports of the handshakes it completes."""
        data = ev.data
        if not data:
            return
        first = data[0]
        tracker: QuicTracker | OpenVpnTracker | DtlsTracker
        if self._rdp is not None and self._rdp.knows(ev):  # any first byte: RDPEUDP2
            yield from self._rdp.datagram(ev)
            return
        if first & 0x80:  # a QUIC long header (its fixed bit may be greased, RFC 9287)
            if data[:4] == b"\xff\xff\xff\xff":  # no QUIC version: an RDP-UDP SYN?
                yield from self._other_udp(ev)
                return
            if self._quic is None:
                from tlsprobe.offline.quic import QuicTracker
                self._quic = QuicTracker(self.name, caches=self.caches)
                self._quic.brief = self.brief
                self._quic.secrets = self.secrets
                self._quic.tracing = self.tracing
            tracker = self._quic
        elif self._openvpn is not None and self._openvpn.knows(ev):
            tracker = self._openvpn
        elif 20 <= first <= 26 and len(data) >= 13:
            if self._dtls is None:
                from tlsprobe.offline.dtls import looks_like_dtls
                if not looks_like_dtls(data):
                    return
            tracker = self._dtls_tracker()
        elif first & 7 == 0 and first >> 3 in (1, 7, 10) and len(data) >= 14:
            if self._openvpn is None:  # a client's hard reset: maybe an OpenVPN session
                from tlsprobe.offline.openvpn import OpenVpnTracker
                self._openvpn = OpenVpnTracker(self.name, self.caches)
                self._openvpn.brief = self.brief
                self._openvpn.tracing = self.tracing
                self._openvpn.secrets = self.secrets
            tracker = self._openvpn
        else:
            yield from self._other_udp(ev)
            return
        yield from tracker.datagram(ev)

    def _other_udp(self, ev: Datagram) -> Iterator[Analyzed]:
        """CAPWAP control (UDP 5246/5247: a 4-byte preamble, then DTLS) is unwrapped;
        a SYN of RDP over UDP (port 3389) starts a session of the RDP-UDP tracker."""
        data = ev.data
        ports = (ev.sport, ev.dport)
        if data[:4] == b"\x01\x00\x00\x00" and (5246 in ports or 5247 in ports):
            from tlsprobe.offline.dtls import looks_like_dtls
            if not looks_like_dtls(data[4:]):
                return
            yield from self._dtls_tracker().datagram(ev._replace(data=data[4:]), "capwap")
        elif PORT in ports:
            from tlsprobe.offline.rdpudp import RdpUdpTracker, is_syn
            if not is_syn(data):
                return
            if self._rdp is None:
                self._rdp = RdpUdpTracker(self.name, self.caches, self._dtls_tracker)
                self._rdp.brief = self.brief
                self._rdp.tracing = self.tracing
                self._rdp.secrets = self.secrets
            yield from self._rdp.datagram(ev)

    def keyed(self) -> tuple[int, dict[str, int]]:
        """Handshakes over UDP reported whose secrets the key log has, and why some of them
        were not decrypted (reason -> handshakes)."""
        count, why = 0, dict[str, int]()
        for tracker in self.trackers():
            count += tracker.keyed_count
            for reason, n in tracker.not_decrypted.items():
                why[reason] = why.get(reason, 0) + n
        return count, why

    def unwrapped(self) -> list[str]:
        """What was not read: QUIC connections of unknown versions, RDP-over-UDP sessions
        from which no TLS was read (listed, with why)."""
        quic = self._quic.unread() if self._quic is not None else []
        return quic + self._rdp_unread()

    def _rdp_unread(self) -> list[str]:
        if self._rdp is None or not self._rdp.unreadable:
            return []
        items = list(self._rdp.unreadable.items())[:8]
        flows = [f"{c[0]}:{c[1]} -> {s[0]}:{s[1]} ({why})" for (c, s), why in items]
        n = self._rdp.unreadable_count
        more = f" (+{n - len(items)} more)" if n > len(items) else ""
        return [(f"{n} RDP-over-UDP session{'s' if n > 1 else ''} (MS-RDPEUDP) without TLS "
                 f"read: {', '.join(flows)}{more}")]
