"""What the rest of tlsprobe may read of a client handshake: the engine's public interface.

`ClientHandshake` (engine.client) keeps its state private; everything outside `engine/`
goes through the members `Handshake` declares (tests/engine/test_engine_interface.py
holds the code to that list):

- driving it: `start()`, `receive(data)`, `connection_closed()`, `take_output()`,
  `close()`, `send_application_data(data)`, and `protections()` (the keys in force, for a
  renegotiation tunnelled under them);
- where it is: `done`, `first_flight_done`, `handshake_complete`, `closed`, `peer_closed`,
  `waiting_for` (a `Waiting`), `incomplete_reason` (the engine cannot go on: why),
  `hello_violation` (a ServerHello or HRR that broke a rule), `warning_alerts`;
- what it produced: `application_data`, `events` (the trace), `keylog_lines`;
- what it established: `config` (the request it runs), `messages` (`HelloExchange`: the
  hellos and the server's typed `ServerFlight`), `verification` (`HandshakeVerification`:
  chain, signature, Finished, key share, resumption) and `session_keys()` (`SessionKeys`: what a
  resumption, a renegotiation or QUIC's packet protection needs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tlsprobe.engine.common import ServerFlight
    from tlsprobe.engine.config import BuiltHello, ClientConfig
    from tlsprobe.engine.protection import RecordProtection, Tls13Protection
    from tlsprobe.model.facts import HandshakeFacts, HandshakeTimings, KeyExchangeFacts
    from tlsprobe.session.flow import Event
    from tlsprobe.wire.hello import ClientHello, ServerHello


class Waiting(StrEnum):
    """What the client waits for next (the version half's state). The values are the
    messages' names as the errors and the trace print them."""

    NOTHING_YET = ""                                   # before the ServerHello
    SERVER_HELLO_DONE = "ServerHelloDone"              # TLS 1.0-1.2 first flight
    CHANGE_CIPHER_SPEC = "ChangeCipherSpec"            # TLS 1.0-1.2
    ENCRYPTED_EXTENSIONS = "EncryptedExtensions"       # TLS 1.3
    CERTIFICATE = "Certificate"                        # TLS 1.3
    CERTIFICATE_VERIFY = "CertificateVerify"           # TLS 1.3
    FINISHED = "Finished"
    CONNECTED = "connected"                            # the handshake is over


@dataclass(frozen=True)
class HelloExchange:
    """The handshake's messages: the ClientHellos sent (a second one after an HRR), the hello
    the first was built from, the ServerHello (None until a valid one came), the
    HelloRetryRequest and the rest of the server's flight, typed."""

    hellos: tuple[ClientHello, ...]
    built: BuiltHello | None
    server_hello: ServerHello | None
    hrr: ServerHello | None
    flight: ServerFlight


@dataclass(frozen=True)
class HandshakeVerification:
    """What the engine checked and computed: the chain as sent, the server's signature and
    Finished (None: not checked), the key exchange (a refused share's problem, whether a
    secret was computed, the size of the client's TLS 1.2 share, the groups the client held
    a private share for), resumption and 0-RTT, and a CertificateRequest seen."""

    certificates: tuple[bytes, ...]
    signature_verified: bool | None
    signature_detail: str | None
    finished_verified: bool | None
    share_problem: str | None
    shared_secret_computed: bool
    client_share_bytes: int | None
    share_groups: frozenset[int]
    resumed: bool
    early_data_accepted: bool
    certificate_requested: bool


@dataclass(frozen=True)
class SessionKeys:
    """The secrets a follow-up connection needs: the suite and its hash; TLS 1.0-1.2's master
    secret and both Finished verify_data (RFC 5746 renegotiation_info); TLS 1.3's traffic
    secrets (QUIC packet keys) and resumption master secret. None: not (yet) derived."""

    cipher_suite: int
    hash_name: str | None = None
    master_secret: bytes | None = None
    client_verify_data: bytes = b""
    server_verify_data: bytes = b""
    client_handshake_traffic_secret: bytes | None = None
    server_handshake_traffic_secret: bytes | None = None
    client_application_traffic_secret: bytes | None = None
    server_application_traffic_secret: bytes | None = None
    resumption_master_secret: bytes | None = None
    tls13: bool = False

    def protection(self, secret: bytes) -> Tls13Protection:
        """A fresh TLS 1.3 record protection for `secret` with this session's suite."""
        from tlsprobe.engine.epochs import tls13_protection
        from tlsprobe.engine.suites import suite_params
        params = suite_params(self.cipher_suite)
        if params is None or self.hash_name is None:
            raise ValueError(f"no record protection for suite 0x{self.cipher_suite:04x}")
        return tls13_protection(params.cipher, params.key_len, self.hash_name, secret)


class Handshake(Protocol):
    """The engine's public interface (see the module docstring); ClientHandshake has it."""

    def start(self) -> bytes: ...
    def receive(self, data: bytes) -> bytes: ...
    def connection_closed(self) -> None: ...
    def take_output(self) -> bytes: ...
    def close(self) -> bytes: ...
    def send_application_data(self, data: bytes) -> None: ...
    def protections(self) -> tuple[RecordProtection | None, RecordProtection | None]: ...
    def session_keys(self) -> SessionKeys | None: ...
    def facts(self, timings: HandshakeTimings | None = None) -> HandshakeFacts: ...
    def key_exchange(self) -> KeyExchangeFacts | None: ...

    @property
    def done(self) -> bool: ...
    @property
    def first_flight_done(self) -> bool: ...
    @property
    def handshake_complete(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def peer_closed(self) -> bool: ...
    @property
    def waiting_for(self) -> Waiting: ...
    @property
    def incomplete_reason(self) -> str | None: ...
    @property
    def hello_violation(self) -> str | None: ...
    @property
    def warning_alerts(self) -> tuple[int, ...]: ...
    @property
    def application_data(self) -> bytes: ...
    @property
    def events(self) -> Sequence[Event]: ...
    @property
    def keylog_lines(self) -> Sequence[str]: ...
    @property
    def config(self) -> ClientConfig: ...
    @property
    def messages(self) -> HelloExchange: ...
    @property
    def verification(self) -> HandshakeVerification: ...


#: the names of the interface (the test compares the names read outside engine/ with it)
INTERFACE = frozenset(name for name in vars(Handshake) if not name.startswith("_"))

__all__ = [
    "INTERFACE",
    "Handshake",
    "HandshakeVerification",
    "HelloExchange",
    "SessionKeys",
    "Waiting",
]
