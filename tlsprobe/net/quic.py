"""QUIC v1 and v2 as a transport (net.transport.Transport): UDP datagrams under the one
driver.

`quic_connector` opens a connected UDP socket and returns a `QuicTransport`, whose send and
receive carry TLS records to and from the engine; net.quic_conn turns them into QUIC
packets (Initial and Handshake CRYPTO frames, ACKs, CONNECTION_CLOSE) and back. The probe
binds the engine to the transport (`bind`): the packet keys of each epoch come from the
engine's TLS 1.3 key schedule.

Waits: each receive waits at most the per-read timeout for a datagram and never past the
deadline; until the server's Initial CRYPTO data answers our ClientHello (an ACK alone
does not: a lost part of a hello spanning several packets is not resent by the server), our
Initial packets are sent again after 0.5 s, 1 s, 2 s (at most `MAX_TRIES` transmissions of
each ClientHello). A stateless reset (RFC 9000 10.3) ends the connection as a reset. After
the engine's close_notify, the transport waits briefly for the server's HANDSHAKE_DONE (its
acceptance of our Finished, or its alert; the Finished is sent once more half way), then
sends CONNECTION_CLOSE. Datagrams that cannot be read (or are of another version) are ignored
and named in the timeout message; an ICMP port unreachable is "connection refused".
"""

from __future__ import annotations

import socket
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from tlsprobe.engine.client import Limits
from tlsprobe.engine.common import HandshakeFailure
from tlsprobe.errors import FailureKind, NetworkCause, NetworkError
from tlsprobe.escaping import quoted_bytes
from tlsprobe.model.units import seconds_text
from tlsprobe.net.quic_conn import QuicConnection
from tlsprobe.net.quic_info import QUIC_ERRORS, QuicInfo
from tlsprobe.net.quic_params import client_parameters
from tlsprobe.net.quic_wire import QUIC_V1, new_connection_ids
from tlsprobe.net.tcp import Target, cause_of, describe_os_error, resolve
from tlsprobe.net.transport import Connector, Transport

if TYPE_CHECKING:
    from tlsprobe.engine.interface import Handshake

MAX_DATAGRAM = 65527
MAX_TRIES = 4          # Initial transmissions before giving up on an answer
FIRST_PTO = 0.5        # seconds before the first retransmission
CLOSE_WAIT = 1.0       # seconds to wait for HANDSHAKE_DONE after our Finished


class QuicCore:
    """What the blocking and the asyncio QUIC transports share (no I/O here): the
    connection, the Initial retransmission timer, the wait for HANDSHAKE_DONE, the decision
    what `receive` returns, and its timeout message."""

    def __init__(self, target: Target, info: QuicInfo, read_timeout: float,
                 limits: Limits | None = None) -> None:
        self.target = target
        self.info = info
        self.conn = QuicConnection(info, limits)
        self.read_timeout = read_timeout
        self.tries = 0
        self.next_try = 0.0
        self.close_by: float | None = None
        self.resend_at: float | None = None    # when our Finished goes again, if no answer
        self.opened_mark = 0     # the connection's packets opened when this read began

    def bind(self, engine: Handshake) -> None:
        """The engine whose key schedule gives the packet keys (called before `send`)."""
        self.conn.engine = engine

    def _error(self, text: str, cause: NetworkCause = "other") -> NetworkError:
        return NetworkError(f"{self.target.display}: {text}", cause, text)

    def _outgoing(self, local: tuple[str, int], peer: tuple[str, int]) -> list[bytes]:
        """The datagrams to send now (kept for --pcap-out)."""
        out, self.conn.outbox = self.conn.outbox, []
        if out and self.info.client_address is None:
            self.info.client_address, self.info.server_address = local, peer
        for datagram in out:
            self.info.keep(True, datagram)
        return out

    def _from_engine(self, data: bytes) -> None:
        hellos = len(self.conn.initial_sent)
        self.conn.from_engine(data)
        if len(self.conn.initial_sent) > hellos:
            self.tries = 1
            self.next_try = time.monotonic() + FIRST_PTO
        if self.conn.closing and self.close_by is None:
            self.close_by = time.monotonic() + CLOSE_WAIT
            self.resend_at = time.monotonic() + FIRST_PTO

    def _start_read(self, deadline: float) -> float:
        """A `receive` begins: when it gives up (the read limit, never past `deadline`)."""
        self.opened_mark = self.conn.opened
        return min(deadline, time.monotonic() + self.read_timeout)

    def _ready(self) -> bytes | None:
        """The engine's next bytes, b"" once the connection is over, None: wait on."""
        self.conn.retry_waiting()
        if self.conn.reset:
            raise self._error("connection reset: the server sent a stateless reset "
                              "(RFC 9000 10.3)", "reset")
        data = self.conn.records()
        if data:
            return data
        self._check_closed()
        if self.resend_at is not None and time.monotonic() >= self.resend_at:
            self.resend_at = None
            if not self.info.handshake_done:
                self.conn.resend_handshake()
        if self.conn.closing and (self.info.handshake_done or self.conn.closed or (
                self.close_by is not None and time.monotonic() >= self.close_by)):
            self.conn.send_close(0)
            return b""
        return None

    def _wake(self, read_by: float) -> float:
        """When to stop waiting for a datagram: the read limit, the close wait, the timer."""
        wake = min(read_by, self.close_by or read_by, self.resend_at or read_by)
        if not self.conn.answered and self.tries and self.tries < MAX_TRIES:
            wake = min(wake, self.next_try)
        return wake

    def _datagram(self, datagram: bytes) -> None:
        self.info.keep(False, datagram)
        self.conn.datagram(datagram)

    def _check_closed(self) -> None:
        """The server's CONNECTION_CLOSE without a TLS alert (an alert reaches the engine)."""
        closed = self.conn.peer_closed
        if closed is None or self.conn.alert is not None:
            return
        error, reason = closed
        if error == 0 and self.conn.closing:
            return
        name = f"application error 0x{error:x}" if self.info.closed_by_application else \
            f"{QUIC_ERRORS.get(error, 'an error')} (0x{error:x})"
        why = f": {quoted_bytes(reason.encode('latin-1'), 200)}" if reason else ""
        self.conn.peer_closed = None
        raise HandshakeFailure(FailureKind.CLOSED, f"server closed the QUIC connection with "
                               f"{name}{why}", refusal=False)

    def _maybe_retransmit(self) -> None:
        if self.conn.answered or self.conn.closed or not self.tries or \
                self.tries >= MAX_TRIES:
            return
        if time.monotonic() >= self.next_try:
            self.conn.retransmit()
            self.tries += 1
            self.next_try = time.monotonic() + FIRST_PTO * (1 << (self.tries - 1))

    def _timeout(self, deadline: float, now: float) -> NetworkError:
        ignored = self.info.ignored
        extra = f"; ignored {self.info.ignored_count} datagrams or packets (last: " \
            f"{ignored[-1]})" if ignored else ""
        sent = f" after {self.tries} Initial transmissions" if not self.conn.answered else ""
        if now >= deadline:
            return self._error(f"timed out: total time limit reached{sent}{extra}", "deadline")
        opened = self.conn.opened - self.opened_mark    # packets that carried nothing new
        what = f"no new handshake data for {seconds_text(self.read_timeout)} s; {opened} QUIC packets " \
            "received in that time" if opened else \
            f"no QUIC answer for {seconds_text(self.read_timeout)} s"
        return self._error(f"timed out waiting for the server ({what}){sent}{extra}",
                           "timeout")

    def _closing(self) -> bool:
        """Whether datagrams are still to be sent when the transport closes: our
        CONNECTION_CLOSE (made now if the connection did not end with one already)."""
        if not self.conn.closed and self.conn.initial_sent:
            try:
                self.conn.send_close(0)
            except (NetworkError, ValueError):
                return False
        return bool(self.conn.outbox)


class QuicTransport(QuicCore, Transport):
    """One QUIC connection over a blocking UDP socket (see the module docstring)."""

    def __init__(self, sock: socket.socket, target: Target, info: QuicInfo,
                 read_timeout: float, limits: Limits | None = None) -> None:
        super().__init__(target, info, read_timeout, limits)
        self.sock = sock
        self.address = str(sock.getpeername()[0])

    @property
    def peer(self) -> tuple[str, int]:
        return self.address, self.target.port

    @property
    def local(self) -> tuple[str, int]:
        try:
            name = self.sock.getsockname()
            return str(name[0]), int(name[1])
        except OSError:
            return ("0.0.0.0", 0)

    def _flush(self) -> None:
        for datagram in self._outgoing(self.local, self.peer):
            try:
                self.sock.send(datagram)
            except OSError as exc:   # refused: the ICMP answer to an earlier datagram
                text = _text(exc) if isinstance(exc, ConnectionRefusedError) else \
                    f"UDP send failed: {_text(exc)}"
                raise self._error(text, cause_of(exc)) from None

    def send(self, data: bytes) -> None:
        self._from_engine(data)
        self._flush()

    def receive(self, deadline: float) -> bytes:
        read_by = self._start_read(deadline)
        while True:
            ready = self._ready()
            self._flush()
            if ready is not None:
                return ready
            now = time.monotonic()
            if now >= read_by:
                raise self._timeout(deadline, now)
            self.sock.settimeout(max(0.001, self._wake(read_by) - now))
            try:
                self._datagram(self.sock.recv(MAX_DATAGRAM))
            except TimeoutError:
                pass
            except OSError as exc:
                raise self._error(_text(exc), cause_of(exc)) from None
            self._maybe_retransmit()

    def close(self) -> None:
        try:
            if self._closing():
                self._flush()
        except NetworkError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


def engine_limits(limits: Limits) -> Limits:
    """The engine's limits over QUIC: its records are tlsprobe's own framing of CRYPTO data
    (net/quic_conn.py `records`), not anything the server sent, so --max-records bounds the
    server's packets with CRYPTO data instead (the connection counts them) and the engine's count is set
    where it never comes first: each packet adds at most one record per 16 KiB of its
    (at most 64 KiB) data and one more, plus the record of a closing alert."""
    return replace(limits, max_records=5 * limits.max_records + 1)


def _text(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (ICMP port unreachable: nothing listens on that UDP port)"
    return describe_os_error(exc)


def quic_connector(timeout: float, read_timeout: float | None = None,
                   info: QuicInfo | None = None,
                   versions: tuple[int, ...] = (QUIC_V1,),
                   limits: Limits | None = None) -> tuple[Connector, QuicInfo]:
    """A connector for `run_probe(connect=...)` and the QuicInfo it fills; the connection
    IDs are chosen here, as the ClientHello's transport parameters name ours
    (`client_parameters(info.scid, info.version, info.offered)`). `versions[0]` is the
    version of our Initial packets; more versions are offered for compatible version
    negotiation, preferred to the first in their order. `limits`: the user's (--max-*):
    --max-message bounds the CRYPTO data of each epoch too, --max-records the server's
    packets with CRYPTO data, --max-bytes the bytes of its datagrams."""
    if info is None:
        scid, dcid = new_connection_ids()
        info = QuicInfo(scid, dcid, versions[0],
                        (*versions[1:], versions[0]) if len(versions) > 1 else ())
    state = info

    def connect(target: Target, deadline: float) -> Transport:
        wait = deadline - time.monotonic()
        try:
            addresses = resolve(target, 0, min(wait, timeout))
            family, _, _, _, sockaddr = addresses[0]
            sock = socket.socket(family, socket.SOCK_DGRAM)
        except (OSError, UnicodeError, IndexError) as exc:
            what = "unknown host" if isinstance(exc, socket.gaierror) else _text(exc) \
                if isinstance(exc, OSError) else "unknown host"
            raise NetworkError(f"{target.display}: {what}", "unknown_host", what) from None
        try:
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            raise NetworkError(f"{target.display}: {_text(exc)}", cause_of(exc)) from None
        return QuicTransport(sock, target, state, read_timeout or timeout, limits)

    return connect, info


__all__ = ["QuicCore", "QuicInfo", "QuicTransport", "client_parameters", "engine_limits",
           "quic_connector"]
