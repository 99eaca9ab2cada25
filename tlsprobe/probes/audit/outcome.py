"""What one scan connection established (`Outcome`), read off the sans-IO handshake, and
when a connection has answered its question (`finished`, the stop conditions of a `Job`).
The scheduler (probes/audit/scheduler.py) runs the connections; this module only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tlsprobe import registry
from tlsprobe.engine.config import ClientConfig
from tlsprobe.engine.interface import Handshake
from tlsprobe.errors import FailureKind
from tlsprobe.kex.dhprime import DhPrimeCheck, check_dh_prime, dh_group_name
from tlsprobe.model.facts import KeyExchangeFacts
from tlsprobe.registry import HandshakeType
from tlsprobe.session.flow import SERVER, ApplicationDataEvent


class OutcomeStatus(StrEnum):
    """What a scan connection got (`Outcome.status`)."""

    HELLO_RETRY = "hello_retry_request"
    SERVER_HELLO = "server_hello"
    ALERT = "alert"                 # a refusal with an alert
    CLOSED = "closed"               # a refusal by closing
    INCONCLUSIVE = "inconclusive"   # no answer (`Outcome.reason` says why)


class Stop(StrEnum):
    """Where a job's connection has answered its question (`Job.stop`)."""

    HELLO = "hello"                 # at the ServerHello (or HelloRetryRequest)
    FLIGHT = "flight"               # after the server's first flight (TLS 1.2 ServerHelloDone)
    VERIFY = "verify"               # TLS 1.3: after the decrypted CertificateVerify


HELLO_RETRY = OutcomeStatus.HELLO_RETRY
SERVER_HELLO = OutcomeStatus.SERVER_HELLO
ALERT = OutcomeStatus.ALERT
CLOSED = OutcomeStatus.CLOSED
INCONCLUSIVE = OutcomeStatus.INCONCLUSIVE
STOP_HELLO, STOP_FLIGHT, STOP_VERIFY = Stop.HELLO, Stop.FLIGHT, Stop.VERIFY


@dataclass(frozen=True)
class Outcome:
    """What one connection established.

    `status`: hello_retry_request, server_hello, alert, closed (a refusal), or inconclusive
    (`reason` says why). For TLS 1.3 `group` is the ServerHello key_share group; for TLS 1.2
    the ServerKeyExchange named curve, or the RFC 7919 codepoint of a recognised DH prime;
    `dh_check` is the verdict on the DH modulus (prime, safe prime, composite; kex/dhprime).
    `kind` travels with the outcome from where it was decided (no sorting by message text).
    """

    status: OutcomeStatus
    version: int | None = None
    cipher_suite: int | None = None
    group: int | None = None
    hrr_group: int | None = None
    dh_name: str | None = None
    dh_bits: int | None = None
    dh_check: DhPrimeCheck | None = None
    explicit_curve: bool = False
    signature_scheme: int | None = None
    certificates: tuple[bytes, ...] = ()
    alert: int | None = None
    reason: str = ""
    attempts: int = 1
    decrypted: bool = False         # the TLS 1.3 encrypted flight was decrypted
    confirmed: bool = False         # a refusal seen on a second connection too
    #: ServerHello.random (the RFC 8446 4.1.3 downgrade sentinel is in its last 8 bytes) and
    #: legacy_compression_method (CRIME: 1 is DEFLATE) and its extension types, for the
    #: checks that read them
    server_random: bytes = b""
    compression_method: int = 0
    extensions: tuple[int, ...] = ()
    #: why an inconclusive outcome is (network, not_tls, protocol, internal); a refusal's
    #: kind is alert or closed; None for an answer
    kind: FailureKind | None = None
    #: the engine's facts of the key exchange (`Handshake.key_exchange()`), None before a
    #: ServerHello; and the bits of an export suite's temporary RSA key (its
    #: ServerKeyExchange), which the facts do not carry
    key_exchange: KeyExchangeFacts | None = None
    rsa_temp_bits: int | None = None
    #: the hello that answered broke a rule the client checks (engine hello_violation, the
    #: rule named): no answer, inconclusive, but not "not answered" either
    violation: str | None = None

    @property
    def answered(self) -> bool:
        return self.status in (HELLO_RETRY, SERVER_HELLO)

    @property
    def refused(self) -> bool:
        return self.status in (ALERT, CLOSED)

    @property
    def conclusive(self) -> bool:
        return self.status != INCONCLUSIVE

    @property
    def share_problem(self) -> str | None:
        """Why the server's key share gave no shared secret (a point off the curve, a
        low-order point, a wrong length), when the client computed one; else None."""
        kx = self.key_exchange
        if kx is None or kx.valid is not False:
            return None
        return kx.problem or "invalid key share"

    def describe(self) -> str:
        """One line for notes: 'alert handshake_failure (40)', 'timed out', ..."""
        if self.status == ALERT and self.alert is not None:
            return f"alert {registry.alert_name(self.alert)} ({self.alert})"
        if self.status == CLOSED:
            return "connection closed without an answer"
        if self.status == HELLO_RETRY and self.hrr_group is not None:
            return f"HelloRetryRequest for {registry.group_label(self.hrr_group)}"
        if self.status == SERVER_HELLO:
            return f"ServerHello {registry.version_name(self.version or 0)}"
        if self.violation is not None:
            return f"a hello that breaks the protocol: {self.violation}"
        return self.reason or self.status


@dataclass(frozen=True)
class Job:
    """One connection: what to offer, where to stop, and the phase it is counted under."""

    config: ClientConfig
    phase: str
    stop: Stop = STOP_HELLO
    #: read only what the server names, computing nothing (engine ClientHandshake
    #: names_only): the group audit's share-less hellos and TLS 1.2 flights
    names_only: bool = False


def finished(hs: Handshake, stop: Stop) -> bool:
    """Has the connection answered its question (stop condition `stop`)?"""
    got = hs.messages
    if got.hrr is not None and got.server_hello is None:
        # The HelloRetryRequest answers group, suite and version questions.
        return stop != STOP_VERIFY
    if got.server_hello is None:
        return False
    if stop == STOP_HELLO:
        return True
    if stop == STOP_VERIFY and _version(hs) >= 0x0304:
        if got.flight.has(HandshakeType.certificate_verify) or hs.done:
            return True
        # An engine that cannot decrypt the TLS 1.3 flight shows it as opaque records.
        return any(isinstance(ev, ApplicationDataEvent) and ev.direction == SERVER and
                   not ev.decrypted for ev in hs.events)
    return hs.done or hs.first_flight_done


def _version(hs: Handshake) -> int:
    sh = hs.messages.server_hello
    return sh.selected_version if sh is not None else 0


def outcome_of(hs: Handshake, reason: str = "") -> Outcome:
    """Read the answer off a handshake that got at least a ServerHello or an HRR."""
    got = hs.messages
    sh, hrr = got.server_hello, got.hrr
    if sh is None:
        if hrr is not None:
            return Outcome(HELLO_RETRY, version=hrr.selected_version,
                           cipher_suite=hrr.cipher_suite, hrr_group=hrr.hrr_selected_group)
        return Outcome(INCONCLUSIVE, reason=reason or "no ServerHello",
                       kind=FailureKind.PROTOCOL)
    version = sh.selected_version
    dh_name = dh_bits = sig = None
    dh_check: DhPrimeCheck | None = None
    kx = hs.key_exchange()   # the engine's one rule, as the probe and captures say it
    group = kx.group if kx is not None else None
    explicit = kx is not None and kx.explicit_curve
    p = kx.dh_prime if kx is not None else None
    if p:
        dh_bits = p.bit_length()
        dh_name = dh_group_name(p)
        dh_check = check_dh_prime(p)
        if dh_name and dh_name.startswith("ffdhe"):
            group = registry.parse_group(dh_name)
    ske = got.flight.server_key_exchange
    rsa_temp_bits = None
    if ske is not None:
        sig = ske.algorithm
        if ske.rsa_modulus:
            rsa_temp_bits = int.from_bytes(ske.rsa_modulus, "big").bit_length()
    cv = got.flight.certificate_verify
    if cv is not None:
        sig = cv.algorithm
    certs = hs.verification.certificates
    cert_msg = got.flight.certificate
    if not certs and cert_msg is not None:
        certs = tuple(cert_msg.certificates)
    if cv is None and not reason and hs.incomplete_reason:
        reason = hs.incomplete_reason
    return Outcome(SERVER_HELLO, version=version, cipher_suite=sh.cipher_suite, group=group,
                   hrr_group=hrr.hrr_selected_group if hrr is not None else None,
                   dh_name=dh_name, dh_bits=dh_bits, dh_check=dh_check,
                   explicit_curve=explicit,
                   signature_scheme=sig, certificates=certs, reason=reason,
                   decrypted=cv is not None, server_random=sh.random,
                   compression_method=sh.legacy_compression_method,
                   extensions=tuple(e.type for e in sh.extensions),
                   key_exchange=kx, rsa_temp_bits=rsa_temp_bits)


__all__ = ["ALERT", "CLOSED", "HELLO_RETRY", "INCONCLUSIVE", "SERVER_HELLO", "STOP_FLIGHT",
           "STOP_HELLO", "STOP_VERIFY", "Job", "Outcome", "finished", "outcome_of"]
