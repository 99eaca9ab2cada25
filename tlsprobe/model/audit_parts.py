"""The audit's answer to each of its questions (model/audit.py's `AuditReport` holds them):
versions spoken, DHE parameters, groups, suites, signature schemes, post-quantum key
exchange, one configuration throughout. Frozen dataclasses with a stable JSON form: field
names are part of the JSON schema (add fields, never rename them); model/audit.py
re-exports each.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from tlsprobe.model.probe import Cipher, Codepoint
from tlsprobe.model.vocab import (
    Answer,
    ConsistencyStatus,
    DheStatus,
    GroupMethod,
    KxStrength,
    Order,
    PqCheck,
    SigalgStatus,
    VersionStatus,
)

if TYPE_CHECKING:   # a field type only: a group audit loads no certificate type
    from tlsprobe.model.server_certs import KeyTypeSigalgs

__all__ = ["ORDER_CLIENT", "ORDER_SERVER", "ORDER_SINGLE", "ORDER_UNKNOWN",
           "ConsistencyCheck", "DhParameters", "DheAudit", "GroupAudit", "PqVerdict",
           "SigalgAudit", "Spoken", "SuiteAudit", "SuiteRow", "VersionSupport"]

# Order of preference: who decides among the offered values.
ORDER_SERVER = Order.SERVER        # the server picks by its own preference
ORDER_CLIENT = Order.CLIENT        # the server follows the client's order
ORDER_SINGLE = Order.SINGLE        # one value supported: nothing to order
ORDER_UNKNOWN = Order.UNKNOWN      # not established (see the notes)


class Spoken(StrEnum):
    """What the audit established about one protocol version, for everything that reads it:
    YES (answered with it), NO (refused, as versions.py confirms a refusal), UNKNOWN (the
    check was inconclusive, or the version was not checked at all). A reader must never
    take UNKNOWN for NO: "not applicable, the server does not speak X" rests on NO alone."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class VersionSupport:
    """Whether one protocol version is spoken. `status`: supported, not_supported, inconclusive.
    `minimal`: it was established by the minimal hello, the full offer having been refused
    or left unanswered (a later probe of this version should start from the minimal
    hello). `spoken` is the same as a Spoken value."""

    version: Codepoint
    status: VersionStatus
    detail: str = ""
    minimal: bool = False

    @property
    def spoken(self) -> Spoken:
        return Spoken.YES if self.status == VersionStatus.SUPPORTED else \
            Spoken.NO if self.status == VersionStatus.NOT_SUPPORTED else Spoken.UNKNOWN


@dataclass(frozen=True)
class DhParameters:
    """TLS 1.2 DHE parameters as the server sent them."""

    name: str                       # "ffdhe2048", "modp_2048", or "unknown 1024-bit prime"
    bits: int
    group: Codepoint | None = None  # the RFC 7919 codepoint when the prime is an ffdhe group
    standard: str | None = None     # "RFC 7919", "RFC 3526", "RFC 5114" or None (custom)
    #: kex/dhprime verdict on p: known, safe, not_safe, composite, unchecked (None: not run)
    prime: str | None = None
    prime_detail: str = ""          # the witness or reason ("divisible by 3", ...)

    def label(self) -> str:
        origin = f" ({self.standard})" if self.standard else ""
        return f"{self.name}{origin}, {self.bits} bits"


@dataclass(frozen=True)
class DheAudit:
    """Finite-field DHE of TLS 1.2 (or of the older version a group audit covers). `status`:

    - "rfc7919": the server negotiates RFC 7919 groups from supported_groups (`negotiated`);
    - "fixed": it ignores the client's list and always sends `fixed`;
    - "none": it refused every DHE offer; "not_tested"; "inconclusive".

    For "rfc7919" the audit also asks what a client that lists no ffdhe group gets: `fixed`
    when it is DH parameters, `legacy_refused` True when such a client gets no DHE at all.
    """

    status: DheStatus
    negotiated: tuple[Codepoint, ...] = ()
    fixed: DhParameters | None = None
    order: Order = ORDER_UNKNOWN
    not_supported: tuple[Codepoint, ...] = ()
    inconclusive: tuple[Codepoint, ...] = ()
    connections: int = 0
    notes: tuple[str, ...] = ()
    legacy_refused: bool = False


@dataclass(frozen=True)
class GroupAudit:
    """Groups one protocol version accepts, in the server's order when `order` is "server".

    `method`: "hello_retry_request" (TLS 1.3, offers without key shares), "key_share"
    (TLS 1.3 with real shares, where HelloRetryRequest was inconclusive),
    "server_key_exchange" (TLS 1.2 ECDHE named curve; also TLS 1.1 or 1.0, audited the same
    way on a server that does not speak TLS 1.2: the highest of them it speaks). `spoken` is
    False when the server refused the version itself, None when that could not be told.
    `certificate_curve` (TLS 1.2 and older): the curve of the server's ECDSA certificate,
    which the client must list for any ECDHE suite to be usable (OpenSSL refuses otherwise).
    """

    version: Codepoint
    spoken: bool | None
    method: GroupMethod
    supported: tuple[Codepoint, ...] = ()
    not_supported: tuple[Codepoint, ...] = ()
    inconclusive: tuple[Codepoint, ...] = ()
    order: Order = ORDER_UNKNOWN
    dhe: DheAudit | None = None
    connections: int = 0
    notes: tuple[str, ...] = ()
    certificate_curve: Codepoint | None = None


@dataclass(frozen=True)
class SuiteRow:
    """One accepted suite with the key exchange the connection that accepted it
    established, as testssl.sh and sslscan show it, and whether the suite is weak.

    `kx_kind`: ECDHE, DHE, RSA (static key transport), ECDH/DH (static, the certificate's
    key), hybrid or KEM (TLS 1.3 post-quantum groups), PSK, SRP, ... (the suite's key
    exchange when its size was not established). `kx_bits`: the size as testssl.sh and
    `openssl s_client` count it (x25519 253, x448 448, secp384r1 384; the DH prime's bits;
    the RSA key's bits: the certificate's, or the ServerKeyExchange's temporary key of an
    export suite); None for a post-quantum group (named instead) and where nothing was
    established. `kx_label`: "ECDH 253", "DH 1024", "RSA 2048", "X25519MLKEM768", "PSK",
    or "unknown". `kx_group`: the named group, if any. `kx_source`: where it was read
    (key_share, hello_retry_request, server_key_exchange, certificate), None when it was
    not. `kx_strength` and `weak` follow policy/suite_strength.py; `weak_reasons` say
    why (the suite's weaknesses, then the key exchange's)."""

    suite: Cipher
    kx_kind: str
    kx_bits: int | None = None
    kx_label: str = "unknown"
    kx_group: Codepoint | None = None
    kx_source: str | None = None
    kx_strength: KxStrength = KxStrength.UNKNOWN
    weak: bool = False
    weak_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuiteAudit:
    """Cipher suites of one protocol version, by elimination (many suites per hello).
    `rows`: one per supported suite, in the same order, with its key exchange and weak
    marks (empty where the audit did not record them, e.g. a report built by hand)."""

    version: Codepoint
    supported: tuple[Cipher, ...] = ()
    order: Order = ORDER_UNKNOWN
    complete: bool = True           # False: elimination stopped on an inconclusive outcome
    connections: int = 0
    notes: tuple[str, ...] = ()
    rows: tuple[SuiteRow, ...] = ()

    def row(self, code: int) -> SuiteRow | None:
        """The row of suite `code` (None: not recorded)."""
        return next((r for r in self.rows if r.suite.id == code), None)


@dataclass(frozen=True)
class SigalgAudit:
    """Signature schemes the server signs with in one version. `status`: established,
    not_established (with `reason`), inconclusive. TLS 1.2: `supported` is every scheme of
    every certificate, and `by_key_type` the schemes of each certificate (its suites
    offered alone select it); empty in TLS 1.3, whose schemes select the certificate."""

    version: Codepoint
    status: SigalgStatus
    supported: tuple[Codepoint, ...] = ()
    order: Order = ORDER_UNKNOWN
    reason: str = ""
    connections: int = 0
    by_key_type: tuple[KeyTypeSigalgs, ...] = ()


@dataclass(frozen=True)
class PqVerdict:
    """One post-quantum question. `verdict`: yes, no, inconclusive, not_tested."""

    check: PqCheck
    subject: str                    # the group or the offer it is about
    verdict: Answer
    detail: str = ""


@dataclass(frozen=True)
class ConsistencyCheck:
    """Whether the target answered as one configuration throughout the audit: the versions
    check's hello of the highest spoken version, sent again when each later phase ends.

    `status`: "consistent", "inconsistent" (the same hello got different answers, or was
    refused with an alert and then answered: likely several servers or configurations
    behind one name, so results built from many connections may merge them; `affected`
    names those results), or "not_checked". `answers`: "phase: answer" per connection."""

    status: ConsistencyStatus
    reference: str = ""
    answers: tuple[str, ...] = ()
    affected: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
