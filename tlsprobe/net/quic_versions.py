"""Version Negotiation, Retry and compatible version negotiation (RFC 9000 6 and 17.2.5,
RFC 9001 5.8, RFC 9368 6) for net.quic_conn.QuicConnection: the packets that change which
version, connection ID, token or Initial keys the client uses, or end it. A mixin, so the
connection module stays one screenful of packet handling; no state of its own.

What RFC 9000 tells a client to discard is discarded (counted in QuicInfo.ignored, never a
result): a Version Negotiation packet after any other packet was processed, a valid Retry
included (6.2, 17.2.1); a second Retry, or one after the server's first packet (17.2.5.2);
a Retry with a bad integrity tag (RFC 9001 5.8), an empty token (17.2.5.2) or a source
connection ID equal to the destination connection ID of our Initial (17.2.5.1). The
handshake goes on, or times out, as it would without them."""

from __future__ import annotations

from tlsprobe.engine.common import HandshakeFailure
from tlsprobe.errors import FailureKind
from tlsprobe.net import quic_wire as w
from tlsprobe.net.quic_info import QuicInfo


class VersionHandling:
    """The Version Negotiation, Retry and version-change handlers of QuicConnection (whose
    attributes and methods these are)."""

    info: QuicInfo
    heard: bool
    retried: bool
    scid: bytes
    original_dcid: bytes
    dcid: bytes
    key_dcid: bytes
    token: bytes
    version: int
    crypto_in: dict[int, w.CryptoStream]

    def _initial_keys(self) -> None:
        raise NotImplementedError

    def retransmit(self) -> None:
        raise NotImplementedError

    def _compatible(self, packet: w.Packet) -> bool:
        """Compatible version negotiation (RFC 9368 6): a server Initial in another version we
        offered, before any of its Initial CRYPTO data (its ServerHello), moves the
        connection to that version (once); the Initial keys are derived again for it from
        the same connection ID. Other packets of another version are ignored."""
        if self.info.negotiated_from is not None or self.crypto_in[w.INITIAL].next or \
                packet.kind != "Initial" or packet.version not in self.info.offered:
            self.info.ignore(f"{packet.kind} packet of QUIC version "
                             f"{w.version_name(packet.version)} (we use "
                             f"{w.version_name(self.version)})")
            return False
        self.info.negotiated_from = self.version
        self.version = self.info.version = packet.version
        self._initial_keys()
        return True

    def _version_negotiation(self, packet: w.Packet) -> None:
        # RFC 9000 6.2, 17.2.1: discarded once any other packet was processed, a valid Retry
        # included (a Retry is the server speaking our version)
        if self.heard or self.retried or packet.dcid != self.scid:
            self.info.ignore("a Version Negotiation packet " + (
                "after a Retry (RFC 9000 6.2)" if self.retried and not self.heard else
                "after the server's first packet (RFC 9000 6.2)" if self.heard else
                "for another connection ID"))
            return
        body = packet.data[packet.pn_offset:]
        versions = [int.from_bytes(body[i:i + 4], "big") for i in range(0, len(body) - 3, 4)]
        if self.version in versions:   # RFC 9000 6.2: a client MUST discard it
            self.info.ignore("a Version Negotiation packet that lists our version "
                             f"{w.version_name(self.version)} (RFC 9000 6.2)")
            return
        self.info.version_negotiation = versions[:32]
        shown = ", ".join(f"0x{v:08x}" for v in versions[:8]) or "none"
        # a version tlsprobe speaks that the server lists (those we offered first)
        also = [v for v in (*self.info.offered, *w.VERSIONS) if v in versions]
        hint = f"; it offers {w.version_name(also[0])}, which tlsprobe would speak, but a " \
            "connection is not started again in another version (RFC 9368 2.4): give " \
            f"--quic-version {w.version_name(also[0])[1:]}" if also else ""
        raise HandshakeFailure(FailureKind.PROTOCOL, "server does not speak QUIC "
                               f"{w.version_name(self.version)} (its Version Negotiation "
                               f"offers: {shown}){hint}")

    def _retry(self, packet: w.Packet) -> None:
        if self.heard or self.retried:    # RFC 9000 17.2.5.2: one Retry, before any answer
            self.info.ignore("a second Retry (RFC 9000 17.2.5.2)" if self.retried else
                             "a Retry after the server's first packet (RFC 9000 17.2.5.2)")
            return
        data = packet.data
        if len(data) < packet.pn_offset + 16 or packet.dcid != self.scid or \
                packet.version != self.version:
            self.info.ignore("malformed Retry")
            return
        if w.retry_tag(self.original_dcid, data[:-16], self.version) != data[-16:]:
            self.info.bad_retry += 1
            self.info.ignore("Retry with a bad integrity tag")
            return
        token = data[packet.pn_offset:-16]
        if not token:    # RFC 9000 17.2.5.2: a client MUST discard it
            self.info.ignore("a Retry with an empty token (RFC 9000 17.2.5.2)")
            return
        if packet.scid == self.dcid:    # RFC 9000 17.2.5.1: a client MUST discard it
            self.info.ignore("a Retry whose source connection ID is our destination "
                             "connection ID (RFC 9000 17.2.5.1)")
            return
        self.retried = True
        self.info.retry_scid = packet.scid
        self.token = token
        self.dcid = self.key_dcid = packet.scid
        self._initial_keys()
        self.retransmit()
