"""The UDP datagrams of a capture -> the tracker that reads their handshake.

QUIC long headers go to offline.quic, DTLS records (also inside CAPWAP control's 4-byte
preamble) to offline.dtls, OpenVPN sessions to offline.openvpn; each tracker is built on
the first datagram it is for. RDP over UDP (MS-RDPEUDP) is recognised and listed, not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tlsprobe.capture import Datagram
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.datagram import Analyzed, DatagramTracker

MAX_LISTED = 4096  # flows of a framing not unwrapped that are remembered to be listed


class UdpHandshakes:
    """The datagram trackers of one capture analysis."""

    def __init__(self, file: str, caches: AnalysisCaches) -> None:
        self.name = file
        self.caches = caches
        self._quic: Any = None
        self._dtls: Any = None
        self._openvpn: Any = None
        #: RDP-over-UDP flows seen (client, port, server, port): listed, not read
        self._rdp_udp: dict[tuple[str, int, str, int], None] = {}

    def trackers(self) -> list[DatagramTracker]:
        return [t for t in (self._quic, self._dtls, self._openvpn) if t is not None]

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
        tracker: Any
        if first & 0x80:  # a QUIC long header (its fixed bit may be greased, RFC 9287)
            if data[:4] == b"\xff\xff\xff\xff":  # no QUIC version: an RDP-UDP SYN?
                yield from self._other_udp(ev)
                return
            if self._quic is None:
                from tlsprobe.offline.quic import QuicTracker
                self._quic = QuicTracker(self.name, caches=self.caches)
            tracker = self._quic
        elif self._openvpn is not None and self._openvpn.knows(ev):
            tracker = self._openvpn
        elif 20 <= first <= 26 and len(data) >= 13:
            if self._dtls is None:
                from tlsprobe.offline.dtls import DtlsTracker, looks_like_dtls
                if not looks_like_dtls(data):
                    return
                self._dtls = DtlsTracker(self.name, self.caches)
            tracker = self._dtls
        elif first & 7 == 0 and first >> 3 in (1, 7, 10) and len(data) >= 14:
            if self._openvpn is None:  # a client's hard reset: maybe an OpenVPN session
                from tlsprobe.offline.openvpn import OpenVpnTracker
                self._openvpn = OpenVpnTracker(self.name, self.caches)
            tracker = self._openvpn
        else:
            yield from self._other_udp(ev)
            return
        yield from tracker.datagram(ev)

    def _other_udp(self, ev: Datagram) -> Iterator[Analyzed]:
        """CAPWAP control (UDP 5246/5247: a 4-byte preamble, then DTLS) is unwrapped;
        RDP over UDP (MS-RDPEUDP SYN, port 3389) is not, and is listed as such."""
        data = ev.data
        ports = (ev.sport, ev.dport)
        if data[:4] == b"\x01\x00\x00\x00" and (5246 in ports or 5247 in ports):
            from tlsprobe.offline.dtls import DtlsTracker, looks_like_dtls
            if not looks_like_dtls(data[4:]):
                return
            if self._dtls is None:
                self._dtls = DtlsTracker(self.name, self.caches)
            yield from self._dtls.datagram(ev._replace(data=data[4:]), "capwap")
        elif 3389 in ports and data[:4] == b"\xff\xff\xff\xff" and len(data) >= 8 and \
                data[7] & 1 and len(self._rdp_udp) < MAX_LISTED:
            flow = (ev.src, ev.sport, ev.dst, ev.dport)
            if (ev.dst, ev.dport, ev.src, ev.sport) not in self._rdp_udp:
                self._rdp_udp.setdefault(flow, None)

    def unwrapped(self) -> list[str]:
        """Connections whose TLS rides in a framing tlsprobe does not unwrap: listed."""
        if not self._rdp_udp:
            return []
        flows = [f"{c}:{cp} -> {s}:{sp}" for c, cp, s, sp in self._rdp_udp]
        more = f" (+{len(flows) - 8} more)" if len(flows) > 8 else ""
        n = len(flows)
        return [f"{n} RDP-over-UDP flow{'s' if n > 1 else ''} (MS-RDPEUDP) not read: its "
                "TLS/DTLS handshake rides inside RDPEUDP's reliable channel, which tlsprobe "
                f"does not unwrap: {', '.join(flows[:8])}{more}"]
