"""The state of one client handshake and the engine's public interface on it.

`HandshakeState` holds every field of a ClientHandshake (engine.client), private, and the
read-only members engine.interface.Handshake declares (state, output, `messages`,
`verification`, `session_keys()`); ClientHandshake, built on it, is the one place the
fields change.
"""

from __future__ import annotations

from collections.abc import Sequence

from tlsprobe import kex
from tlsprobe.engine.common import ServerFlight, is_tls13
from tlsprobe.engine.config import BuiltHello, ClientConfig
from tlsprobe.engine.guards import Limits, ServerInput
from tlsprobe.engine.interface import (
    HandshakeVerification,
    HelloExchange,
    SessionKeys,
    Waiting,
)
from tlsprobe.engine.keyschedule import Transcript
from tlsprobe.engine.records import ClientRecords
from tlsprobe.engine.tls12 import Tls12Client
from tlsprobe.engine.tls13 import Tls13Client
from tlsprobe.engine.verdict import VersionHalf
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import Event, Flow
from tlsprobe.wire.hello import ClientHello, ServerHello


class HandshakeState(ClientRecords):
    """The fields of one client handshake (private) and the interface's reads of them."""

    def __init__(self, config: ClientConfig, *, annotate: bool,
                 stop_after_first_flight: bool, read_server_flight: bool,
                 limits: Limits | None, prebuilt: BuiltHello | None) -> None:
        self._config = config
        self._prebuilt = prebuilt   # a ClientHello built before (a replay sends it again)
        self._limits = limits or Limits()
        super().__init__(Flow(annotate=annotate, max_message=self._limits.max_message))
        self._server_input = ServerInput(self, self._limits)
        self._stop_after_first_flight = stop_after_first_flight
        self._read_server_flight = read_server_flight
        self._built: BuiltHello | None = None
        self._hellos: list[ClientHello] = []
        self._shares: dict[int, kex.KeyShare] = {}
        self._server_hello: ServerHello | None = None
        self._hrr: ServerHello | None = None
        self._flight = ServerFlight()
        self._transcript = Transcript()
        self._shared_secret: bytes | None = None
        self._share_problem: str | None = None
        self._client_share_bytes: int | None = None   # TLS 1.2 ClientKeyExchange key size
        self._certificates: list[bytes] = []
        self._signature_verified: bool | None = None
        self._signature_detail: str | None = None
        self._finished_verified: bool | None = None
        self._handshake_complete = False
        self._incomplete_reason: str | None = None
        #: a ServerHello or HRR that broke a rule of engine.serverhello (its suite, its
        #: extensions, legacy fields, key share, what an HRR asks for; ClientHandshake.
        #: _hello_rules): the named violation; that hello is then not taken for an answer
        #: (server_hello, hrr stay None). A version not offered is not one: that hello is
        #: the server's answer (it names the version it has).
        self._hello_violation: str | None = None
        self._keylog_lines: list[str] = []
        self._application_data = bytearray()
        self._peer_closed = False
        self._closed = False
        self._done = False
        self._first_flight_done = False
        self._version_state: VersionHalf | None = None
        self._waiting_for = Waiting.NOTHING_YET   # the version half's state
        self._awaiting_acceptance = False    # TLS 1.3: our Finished out, nothing heard since
        self._reading = "record"   # what receive() is handling, for its error boundary

    # -- the public interface (engine.interface.Handshake) -------------------------------
    @property
    def done(self) -> bool:
        """Nothing more to read: the handshake completed, stopped where asked, or the
        engine cannot go on (`incomplete_reason`)."""
        return self._done

    @property
    def first_flight_done(self) -> bool:
        """The server's first flight is in (TLS 1.2 ServerHelloDone, TLS 1.3 ServerHello)."""
        return self._first_flight_done

    @property
    def handshake_complete(self) -> bool:
        return self._handshake_complete

    @property
    def closed(self) -> bool:
        """We sent close_notify."""
        return self._closed

    @property
    def peer_closed(self) -> bool:
        """The server sent close_notify after the handshake."""
        return self._peer_closed

    @property
    def waiting_for(self) -> Waiting:
        return self._waiting_for

    @property
    def incomplete_reason(self) -> str | None:
        return self._incomplete_reason

    @property
    def hello_violation(self) -> str | None:
        """A ServerHello or HRR that broke a rule the client checks (its suite, extensions,
        legacy fields, key share; engine.serverhello): the named violation; that hello is
        then not taken for an answer (no server_hello, no hrr)."""
        return self._hello_violation

    @property
    def warning_alerts(self) -> tuple[int, ...]:
        """The warning alerts the handshake went on after (descriptions, in order)."""
        return tuple(self._server_input.warning_alerts)

    @property
    def application_data(self) -> bytes:
        """The server's application data after the handshake, decrypted."""
        return bytes(self._application_data)

    @property
    def events(self) -> Sequence[Event]:
        """Both directions' events in order, as the trace shows them."""
        return self._events

    @property
    def keylog_lines(self) -> Sequence[str]:
        return tuple(self._keylog_lines)

    @property
    def config(self) -> ClientConfig:
        return self._config

    @property
    def messages(self) -> HelloExchange:
        return HelloExchange(tuple(self._hellos), self._built, self._server_hello, self._hrr,
                             self._flight)

    @property
    def verification(self) -> HandshakeVerification:
        return HandshakeVerification(
            tuple(self._certificates), self._signature_verified, self._signature_detail,
            self._finished_verified, self._share_problem, self._shared_secret is not None,
            self._client_share_bytes, frozenset(self._shares), self._resumed,
            self._early_data_accepted, self._certificate_requested)

    def session_keys(self) -> SessionKeys | None:
        """The session's secrets (None before a ServerHello was taken)."""
        sh, half = self._server_hello, self._version_state
        if sh is None:
            return None
        if isinstance(half, Tls12Client):
            return SessionKeys(sh.cipher_suite, half.prf_hash, half.master_secret,
                               half.client_verify_data, half.server_verify_data)
        if isinstance(half, Tls13Client):
            ks = half.ks
            return SessionKeys(
                sh.cipher_suite, half.hash,
                client_handshake_traffic_secret=ks.client_handshake_traffic_secret,
                server_handshake_traffic_secret=ks.server_handshake_traffic_secret,
                client_application_traffic_secret=ks.client_application_traffic_secret_0,
                server_application_traffic_secret=ks.server_application_traffic_secret_0,
                resumption_master_secret=ks.resumption_master_secret, tls13=True)
        return SessionKeys(sh.cipher_suite, tls13=is_tls13(sh.selected_version))

    @property
    def _certificate_requested(self) -> bool:
        """The server sent a CertificateRequest (tlsprobe answers with no certificate)."""
        return self._flight.has(HandshakeType.certificate_request)

    @property
    def _client_random(self) -> bytes:
        return self._hellos[0].random

    @property
    def _resumed(self) -> bool:
        """The server resumed the offered session: a TLS 1.2 abbreviated handshake, or a
        TLS 1.3 ServerHello that selected the offered PSK."""
        half = self._version_state
        return isinstance(half, (Tls12Client, Tls13Client)) and half.resumed

    @property
    def _early_data_accepted(self) -> bool:
        """TLS 1.3: the server's EncryptedExtensions accepted our 0-RTT data."""
        half = self._version_state
        return isinstance(half, Tls13Client) and half.early_data_accepted
