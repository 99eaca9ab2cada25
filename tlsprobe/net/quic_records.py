"""The engine's side of net.quic_conn.QuicConnection: the server's CRYPTO data becomes TLS
records for the engine (tlsprobe's own framing: plaintext records for the Initial epoch,
records protected with the server's traffic secret for the Handshake and 1-RTT ones, a TLS
alert the server closed with as an alert record), and the server's transport parameters are
read from its EncryptedExtensions on the way. A mixin, as quic_versions.VersionHandling,
so the connection module stays one screenful of packet handling; no state of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from tlsprobe.engine.common import HandshakeFailure
from tlsprobe.engine.interface import Waiting
from tlsprobe.errors import FailureKind
from tlsprobe.net import quic_params as qp
from tlsprobe.net import quic_wire as w
from tlsprobe.net.quic_info import QuicInfo

if TYPE_CHECKING:
    from tlsprobe.engine.interface import Handshake
    from tlsprobe.engine.protection import Tls13Protection

RECORD = 16384              # the largest record the engine is given


class EngineRecords:
    """The records-for-the-engine methods of QuicConnection (whose attributes these are)."""

    info: QuicInfo
    engine: Handshake | None
    crypto_in: dict[int, w.CryptoStream]
    server_prot: dict[int, Tls13Protection]
    alert: int | None
    hs_stream: bytearray
    crypto_limit: int
    original_dcid: bytes
    version: int

    def send_close(self, error: int) -> None:
        raise NotImplementedError

    # -- records for the engine ----------------------------------------------------------
    def records(self) -> bytes:
        """The next bytes for the engine, of one epoch (the engine must read each epoch's
        records before the next epoch's keys exist); b"" when nothing is ready."""
        engine = self.engine
        initial = self.crypto_in[w.INITIAL].ready
        if initial:
            data = bytes(initial)
            initial.clear()
            return b"".join(b"\x16\x03\x03" + len(c).to_bytes(2, "big") + c
                            for c in _chunks(data))
        waiting = engine.waiting_for if engine is not None else Waiting.NOTHING_YET
        for space in (w.HANDSHAKE, w.APPLICATION):
            ready = self.crypto_in[space].ready
            prot = self.server_prot.get(space)
            if not ready or prot is None or (space == w.APPLICATION
                                             and waiting != Waiting.CONNECTED):
                continue
            data = bytes(ready)
            ready.clear()
            if space == w.HANDSHAKE:
                self._read_parameters(data)
            return b"".join(prot.encrypt(22, c) for c in _chunks(data))
        if self.alert is not None:
            alert, self.alert = bytes([2, self.alert]), None
            space = w.APPLICATION if waiting == Waiting.CONNECTED else w.HANDSHAKE
            prot = self.server_prot.get(space)
            return prot.encrypt(21, alert) if prot is not None else \
                b"\x15\x03\x03\x00\x02" + alert
        return b""

    def _read_parameters(self, data: bytes) -> None:
        """Find EncryptedExtensions in the server's Handshake stream and read 0x39."""
        if self.info.transport_parameters is not None or \
                len(self.hs_stream) > self.crypto_limit:
            return
        self.hs_stream += data
        try:
            params = qp.server_parameters(bytes(self.hs_stream))
        except qp.NoParameters as exc:   # RFC 9001 8.2: closed as missing_extension
            self._parameter_error(qp.Problem(qp.MISSING_EXTENSION, str(exc)))
        except ValueError as exc:
            self._parameter_error(qp.Problem(qp.TRANSPORT_PARAMETER_ERROR, "server's "
                                             f"quic_transport_parameters are malformed: {exc}"))
        if params is None:
            return
        self.info.transport_parameters = params
        problem = qp.server_problem(params, self.original_dcid, self.version,
                                    self.info.negotiated_from is not None)
        if problem:
            self._parameter_error(problem)

    def _parameter_error(self, problem: qp.Problem) -> NoReturn:
        """The server's transport parameters break a rule: our CONNECTION_CLOSE names it
        (RFC 9000 7.4: TRANSPORT_PARAMETER_ERROR; RFC 9368 4: VERSION_NEGOTIATION_ERROR)."""
        self.send_close(problem.code)
        raise HandshakeFailure(FailureKind.PROTOCOL, problem.text)


def _chunks(data: bytes) -> list[bytes]:
    return [data[i:i + RECORD] for i in range(0, len(data), RECORD)]
