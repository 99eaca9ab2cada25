"""The narrow interface between ClientHandshake and its version halves (and its checkers).

ClientHandshake (engine.client) is the one place that changes the handshake's state. The
pieces it consults never touch it: the version halves (engine.tls12, engine.tls13) are
given a `HandshakeContext` when the ServerHello is in, and answer each server message with
a `Verdict`, which says what the message established (certificates, signature and
Finished results, key-log lines, the next state), what to send and which keys to install,
in order, and, when the message breaks the protocol, the `Refusal`. The checkers
(engine.extcheck, engine.guards, engine.serverhello) raise a `Refusal`; ClientHandshake
turns every refusal into its fatal alert and a HandshakeFailure.

Why: with the halves setting the handshake's fields, any of three modules could change
any of ~35 attributes and the modules imported each other; now the data flow is one way
(handshake -> half -> verdict -> handshake) and this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from tlsprobe.engine.interface import Waiting
from tlsprobe.engine.keyschedule import Transcript
from tlsprobe.engine.protection import RecordProtection
from tlsprobe.errors import FailureKind
from tlsprobe.session.flow import MessageEvent
from tlsprobe.wire.context import Message
from tlsprobe.wire.hello import ClientHello, ServerHello


class Refusal(Exception):
    """The server broke a rule: the alert the client sends and the verdict's text; `kind`
    LIMIT when it broke none but sent more than a limit of tlsprobe's allows (--max-*).

    Not a ValueError, so ClientHandshake's decode-error boundary does not catch it."""

    def __init__(self, alert: int, message: str,
                 kind: FailureKind = FailureKind.PROTOCOL) -> None:
        super().__init__(message)
        self.alert = alert
        self.message = message
        self.kind = kind


# -- what the client sends and the keys it installs, in the order they take effect ------
@dataclass(frozen=True)
class SendMessage:
    """One whole handshake message the half built (already in the transcript)."""

    raw: bytes


@dataclass(frozen=True)
class SendRecord:
    """A payload of another content type (a TLS 1.3 KeyUpdate goes out this way)."""

    content_type: int
    payload: bytes


@dataclass(frozen=True)
class SendChangeCipherSpec:
    """A plaintext ChangeCipherSpec record."""


@dataclass(frozen=True)
class WriteKeys:
    """Protect what the client sends from now on. `make` is called twice: once for the
    records sent, once for the Flow's copy that shows them in clear in the trace."""

    make: Callable[[], RecordProtection]


@dataclass(frozen=True)
class ReadKeys:
    """Decrypt the server's records from the next one on."""

    protection: RecordProtection


Output = SendMessage | SendRecord | SendChangeCipherSpec | WriteKeys | ReadKeys


@dataclass
class Verdict:
    """What one server message (or the start of a half) established; None = unchanged.

    ClientHandshake applies it in this order: the facts, the outputs, then either the
    refusal (a fatal alert under the write keys in force) or the end state."""

    outputs: list[Output] = field(default_factory=list)
    waiting_for: Waiting | None = None      # the half's next state (what it waits for)
    certificates: list[bytes] | None = None
    signature_verified: bool | None = None
    signature_detail: str | None = None
    finished_verified: bool | None = None
    share_problem: str | None = None
    shared_secret: bytes | None = None
    client_share_bytes: int | None = None
    keylog_lines: list[str] | None = None
    awaiting_acceptance: bool | None = None  # TLS 1.3: our Finished out, nothing heard since
    first_flight_done: bool = False
    done: bool = False                       # stop reading (first flight or read-only end)
    complete: bool = False                   # the handshake completed
    incomplete: str | None = None            # the engine cannot go on: why
    refusal: Refusal | None = None

    def send(self, output: Output) -> None:
        self.outputs.append(output)


@dataclass(frozen=True)
class HandshakeContext:
    """What a version half may read of the handshake, fixed once the ServerHello is in.

    `transcript` is shared: from the ServerHello on, the half adds the server messages it
    accepts and the messages it sends (its Finished covers them), and nothing else does."""

    client_random: bytes
    offered: ClientHello          # the ClientHello the ServerHello answers
    server_hello: ServerHello
    transcript: Transcript
    stop_after_first_flight: bool
    #: only what the server names is read: no signature or key share is checked
    #: (ClientHandshake names_only)
    names_only: bool = False


class VersionHalf(Protocol):
    """A TLS 1.0-1.2 or TLS 1.3 half as ClientHandshake drives it."""

    @property
    def tls13(self) -> bool: ...

    def start(self) -> Verdict:
        """The keys and state right after the ServerHello."""

    def expects(self, waiting_for: Waiting, msg_type: int) -> bool:
        """Whether a message of this type can come next (checked on its first byte)."""

    def on_message(self, waiting_for: Waiting, ev: MessageEvent, msg: Message, *,
                   may_send: bool) -> Verdict:
        """One decoded server handshake message. `may_send`: the connection is open."""

    def on_change_cipher_spec(self, waiting_for: Waiting) -> Verdict:
        """A (plaintext, well-formed) ChangeCipherSpec from the server."""
