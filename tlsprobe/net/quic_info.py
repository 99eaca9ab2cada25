"""What a QUIC probe learnt beside the TLS handshake: the QUIC version, connection IDs, Retry
and Version Negotiation, the server's transport parameters, the packets both ways (for
--msg) and what was ignored. Filled by net.quic_conn as the connection goes; plain values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tlsprobe.escaping import escaped_bytes
from tlsprobe.model.quic import QuicParameter, QuicSummary
from tlsprobe.net import quic_params as qp
from tlsprobe.net import quic_wire as w

MAX_LOG = 200      # packet lines kept for --msg
MAX_KEPT = 1000    # datagrams kept for --pcap-out (a handshake takes a few dozen)
MAX_IGNORED = 20   # texts kept of what was ignored (all are counted)
#: the transport error codes (RFC 9000 20.1; 0x11: RFC 9368 10.2)
QUIC_ERRORS = {0x0: "NO_ERROR", 0x1: "INTERNAL_ERROR", 0x2: "CONNECTION_REFUSED",
               0x3: "FLOW_CONTROL_ERROR", 0x4: "STREAM_LIMIT_ERROR",
               0x5: "STREAM_STATE_ERROR", 0x6: "FINAL_SIZE_ERROR",
               0x7: "FRAME_ENCODING_ERROR", 0x8: "TRANSPORT_PARAMETER_ERROR",
               0x9: "CONNECTION_ID_LIMIT_ERROR", 0xA: "PROTOCOL_VIOLATION",
               0xB: "INVALID_TOKEN", 0xC: "APPLICATION_ERROR", 0xD: "CRYPTO_BUFFER_EXCEEDED",
               0xE: "KEY_UPDATE_ERROR", 0xF: "AEAD_LIMIT_REACHED", 0x10: "NO_VIABLE_PATH",
               0x11: "VERSION_NEGOTIATION_ERROR"}

_FRAME_NAMES = {0x00: "PADDING", 0x01: "PING", 0x02: "ACK", 0x03: "ACK", 0x06: "CRYPTO",
                0x07: "NEW_TOKEN", 0x18: "NEW_CONNECTION_ID", 0x1C: "CONNECTION_CLOSE",
                0x1A: "PATH_CHALLENGE", 0x1B: "PATH_RESPONSE", 0x1D: "CONNECTION_CLOSE",
                0x1E: "HANDSHAKE_DONE"}


@dataclass(frozen=True)
class Datagram:
    """One UDP datagram as sent or received (capture.writer's SegmentLike, for --pcap-out)."""

    from_client: bool
    data: bytes
    time: float


@dataclass
class QuicInfo:
    """The QUIC side of one probe."""

    scid: bytes
    original_dcid: bytes
    version: int = w.QUIC_V1                 # of the connection (after any negotiation)
    offered: tuple[int, ...] = ()           # our version_information's available versions
    negotiated_from: int | None = None      # the version we started in, if the server moved
    client_hello_packets: int = 0       # Initial packets our first ClientHello took
    datagrams_received: int = 0
    handshake_done: bool = False
    finished_sent: bool = False      # our Finished left: the server's HANDSHAKE_DONE is due
    version_negotiation: list[int] | None = None
    retry_scid: bytes | None = None
    bad_retry: int = 0
    transport_parameters: list[tuple[int, int | bytes]] | None = None
    log: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    ignored_count: int = 0
    closed_by_us: int | None = None                  # the error code of our CONNECTION_CLOSE
    closed_by_server: tuple[int, str] | None = None  # its error code and reason
    closed_by_application: bool = False   # the server's close was frame 0x1d (the app's code)
    datagrams: list[Datagram] = field(default_factory=list)   # both ways, for --pcap-out
    client_address: tuple[str, int] | None = None
    server_address: tuple[str, int] | None = None

    def keep(self, from_client: bool, data: bytes) -> None:
        """Remember one datagram for --pcap-out (the first MAX_KEPT)."""
        if len(self.datagrams) < MAX_KEPT:
            self.datagrams.append(Datagram(from_client, data, time.time()))

    def ignore(self, what: str) -> None:
        """A datagram or packet that was dropped (unreadable, not ours, not opening)."""
        self.ignored_count += 1
        if len(self.ignored) < MAX_IGNORED:
            self.ignored.append(what)
        else:
            self.ignored[-1] = what

    def note(self, way: str, kind: str, pn: int, dcid: bytes, scid: bytes,
             payload: bytes) -> None:
        """One packet line for --msg: direction, type, CIDs, packet number, frames."""
        if len(self.log) >= MAX_LOG:
            return
        try:
            frames = w.parse_frames(payload)
            names = [_frame_text(f) for f in frames]
        except ValueError as exc:
            names = [f"(unreadable: {exc})"]
        cids = f"dcid={dcid.hex()}" + (f" scid={scid.hex()}" if scid else "")
        self.log.append(f"{way} {kind} {w.version_name(self.version)} {cids} pn={pn}: "
                        f"{', '.join(names)}")

    def summary(self) -> QuicSummary:
        """The report's `quic` object (model/quic.py)."""
        params = None if self.transport_parameters is None else tuple(
            QuicParameter(pid, qp.describe(pid, value)[0],
                          value if isinstance(value, int) else value.hex())
            for pid, value in self.transport_parameters)
        closed = self.closed_by_server
        return QuicSummary(
            version=f"0x{self.version:08x}", version_name=w.version_name(self.version),
            compatible_from=None if self.negotiated_from is None else
            w.version_name(self.negotiated_from),
            client_hello_packets=self.client_hello_packets,
            retry_source_connection_id=None if self.retry_scid is None else
            self.retry_scid.hex(),
            bad_retries=self.bad_retry,
            version_negotiation=None if self.version_negotiation is None else tuple(
                f"0x{v:08x}" for v in self.version_negotiation),
            transport_parameters=params,
            handshake_done=self.handshake_done if self.finished_sent else None,
            datagrams_received=self.datagrams_received, ignored=self.ignored_count,
            closed_by_server=None if closed is None else closed[0],
            closed_by_server_reason=None if closed is None or not closed[1] else
            _escaped(closed[1]),
            closed_by_server_application=None if closed is None else
            self.closed_by_application,
            closed_by_us=self.closed_by_us)

    def lines(self) -> list[str]:
        """The report lines of the QUIC side (escaped: network values are hex or numbers)."""
        out = [f"QUIC version: 0x{self.version:08x} ({w.version_name(self.version)})"]
        if self.negotiated_from is not None:
            out.append("Compatible version negotiation: from "
                       f"{w.version_name(self.negotiated_from)} (RFC 9368)")
        out.append(f"ClientHello Initial packets: {self.client_hello_packets}")
        if self.retry_scid is not None:
            out.append(f"Retry: yes (server connection ID {self.retry_scid.hex()}, "
                       "integrity tag checked)")
        if self.bad_retry:
            out.append(f"Retry with a bad integrity tag ignored: {self.bad_retry}")
        if self.transport_parameters is not None:
            out.append("Server transport parameters:")
            for pid, value in self.transport_parameters:
                name, shown = qp.describe(pid, value)
                out.append(f"  {name}: {shown}")
        out.append("HANDSHAKE_DONE received: " + ("yes" if self.handshake_done else "no" if
                                                  self.finished_sent else "no (not due: "
                                                  "tlsprobe did not send its Finished)"))
        if self.closed_by_server is not None:
            out.append("Server closed with: CONNECTION_CLOSE "
                       f"{close_text(self.closed_by_server[0], self.closed_by_application)}")
        if self.closed_by_us is not None:
            out.append(f"Closed with: CONNECTION_CLOSE {_error(self.closed_by_us)} sent")
        return out


def _escaped(text: str) -> str:
    """A reason phrase (its bytes as latin-1 text) as every message's network bytes."""
    return escaped_bytes(text.encode("latin-1"))


def _error(code: int) -> str:
    if 0x100 <= code <= 0x1FF:
        return f"0x{code:x} (TLS alert {code - 0x100})"
    return f"{QUIC_ERRORS.get(code, 'error')} (0x{code:x})"


def close_text(code: int, application: bool) -> str:
    """A server's CONNECTION_CLOSE code as said: an application close (frame 0x1d) has the
    application's code space (HTTP/3: 0x100 is H3_NO_ERROR), named by neither QUIC's
    transport errors nor TLS alerts."""
    return f"application error 0x{code:x}" if application else _error(code)


def frame_name(ftype: int) -> str:
    """A frame type's name (RFC 9000 19), its number when tlsprobe has none."""
    return "STREAM" if 0x08 <= ftype <= 0x0F else _FRAME_NAMES.get(ftype, f"0x{ftype:02x}")


def _frame_text(frame: w.Frame) -> str:
    name = frame_name(frame.type)
    if frame.type == 0x06:
        return f"CRYPTO(offset={frame.offset}, {len(frame.data)} bytes)"
    if frame.type in (0x02, 0x03):
        return "ACK(" + " ".join(f"{lo}-{hi}" for lo, hi in frame.ranges) + ")"
    if frame.type in (0x1C, 0x1D):
        kind = "application error" if frame.type == 0x1D else "error"
        return f"{name}({kind}=0x{frame.error:x})"
    return name
