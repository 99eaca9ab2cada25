"""What one handshake established, in raw values: the one record the live engine and the
capture analyzer both build (`engine.facts.facts_of`, `offline.build.handshake_facts`).

Codepoints stay ints (GREASE, private and unknown values survive); sizes are bytes on
the wire; sides are CLIENT (0) and SERVER (1). Wording is not here: `model.describe` turns
these facts into the report's values (`describe.key_exchange`, ...), so a probe and a
capture of the same handshake say the same words. A fact one side could not establish is
None (or empty) and, where the reason is worth saying, named in `unknown` with why (a
capture without its key log cannot see a TLS 1.3 certificate; an engine that stopped
after the ServerHello never saw one).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tlsprobe.escaping import (
    wire_text,  # re-exported: the model's values hold network text
)

CLIENT, SERVER = 0, 1

#: where the key exchange's group (or its absence) was learnt, KeyExchange.source's words:
#: "key_share" (TLS 1.3 ServerHello), "hello_retry_request" (the ServerHello's key_share
#: after an HRR), "server_key_exchange" (TLS 1.0-1.2), "rsa" (RSA key transport: no
#: ephemeral group), "none" (no key exchange message: TLS 1.3 psk_ke, or no
#: ServerKeyExchange in TLS 1.0-1.2), "not_reached" (TLS 1.0-1.2: the server's flight
#: ended before the place of its ServerKeyExchange, so whether it sends one is not known),
#: "not_captured" (a capture gap where the ServerKeyExchange was), "malformed" (a TLS 1.3
#: key_share that could not be read)
KxSource = Literal["key_share", "hello_retry_request", "server_key_exchange", "rsa", "none",
                   "not_reached", "not_captured", "malformed"]

#: how the server resumed the client's session (None in HandshakeFacts: a full handshake)
Resumption = Literal["session_id", "session_ticket", "psk"]


@dataclass(frozen=True)
class HelloFacts:
    """What one ClientHello offered, raw values in wire order (GREASE kept).

    `versions`: supported_versions, or (legacy_version,) without it; `key_shares`:
    (group, key_exchange length); `size`: the whole message, its 4-byte header included;
    `extensions`: the extension types as sent; `session_ticket`: the length of the
    session_ticket extension's ticket (None: no such extension, 0: asking for one)."""

    legacy_version: int
    versions: tuple[int, ...]
    cipher_suites: tuple[int, ...]
    groups: tuple[int, ...] = ()
    key_shares: tuple[tuple[int, int], ...] = ()
    signature_algorithms: tuple[int, ...] = ()
    alpn: tuple[str, ...] = ()
    sni: str | None = None
    size: int = 0
    extensions: tuple[int, ...] = ()
    session_ticket: int | None = None

    def share_length(self, group: int) -> int | None:
        """The length of this hello's key share for `group` (None: no share offered)."""
        return next((n for g, n in self.key_shares if g == group), None)


class HelloSummary(Protocol):
    """What `hello_facts` reads of a ClientHello summary (wire.hello_fields.ClientHelloInfo,
    which the capture reader and the engine both make)."""

    @property
    def legacy_version(self) -> int: ...
    @property
    def supported_versions(self) -> tuple[int, ...]: ...
    @property
    def cipher_suites(self) -> tuple[int, ...]: ...
    @property
    def supported_groups(self) -> tuple[int, ...]: ...
    @property
    def key_shares(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def signature_algorithms(self) -> tuple[int, ...]: ...
    @property
    def alpn(self) -> tuple[bytes, ...]: ...
    @property
    def sni(self) -> str | None: ...
    @property
    def size(self) -> int: ...
    @property
    def extensions(self) -> tuple[int, ...]: ...
    @property
    def session_ticket(self) -> int | None: ...


def hello_facts(info: HelloSummary) -> HelloFacts:
    """The facts of a ClientHello summary (a capture's, or the engine's own hello)."""
    return HelloFacts(
        legacy_version=info.legacy_version,
        versions=info.supported_versions or (info.legacy_version,),
        cipher_suites=info.cipher_suites, groups=info.supported_groups,
        key_shares=info.key_shares, signature_algorithms=info.signature_algorithms,
        alpn=tuple(wire_text(p) for p in info.alpn), sni=info.sni, size=info.size,
        extensions=info.extensions, session_ticket=info.session_ticket)


@dataclass(frozen=True)
class KeyExchangeFacts:
    """How the premaster secret was agreed.

    `kind`: TLS 1.0-1.2: the key exchange the ServerKeyExchange was read as, else the
    suite's (the registry's ECDHE, DHE, RSA, PSK, ECDHE_PSK, ECJPAKE...); TLS 1.3 "TLS13"
    with a key share (its group says the rest), "PSK" for psk_ke; None: not known. `client_share_bytes`: the client's
    key_share entry for the group (TLS 1.3), or the ClientKeyExchange's exchange_keys
    (TLS 1.0-1.2: the ECDH point, dh_Yc, or the RSA-encrypted premaster secret).
    `dh_prime`/`dh_generator`: a TLS 1.0-1.2 ServerKeyExchange's DH parameters;
    `dh_group_name`: the known group the prime is (ffdhe2048, a MODP group...), with
    what the side that built the facts learnt of an unknown one ("unknown 1024-bit,
    NOT PRIME"), None when it did not name it. `valid`/`problem`: did the server's share
    give a shared secret (None: not tried, e.g. a capture)."""

    source: KxSource
    kind: str | None = None
    group: int | None = None
    server_share_bytes: int | None = None
    client_share_bytes: int | None = None
    dh_prime: int | None = None
    dh_generator: int | None = None
    dh_group_name: str | None = None
    explicit_curve: bool = False
    valid: bool | None = None
    problem: str | None = None


@dataclass(frozen=True)
class MessageFact:
    """One handshake message in the order seen: who sent it, its type, whether it was a
    HelloRetryRequest, whether it came in a protected record (a capture reads those only
    with their key log)."""

    sender: int
    msg_type: int
    hrr: bool = False
    protected: bool = False


@dataclass(frozen=True)
class ExtensionsSeen:
    """The extension types (as sent) of one message: ClientHello (msg_type 1), ServerHello
    (2, `hrr` for the HelloRetryRequest), EncryptedExtensions (8)."""

    sender: int
    msg_type: int
    types: tuple[int, ...]
    hrr: bool = False


@dataclass(frozen=True)
class AlertFact:
    """An alert: its sender and, unless it was encrypted without a key to read it
    (a capture), its level and description."""

    sender: int
    level: int | None
    description: int | None


@dataclass(frozen=True)
class HandshakeTimings:
    """Milliseconds as the side that built the facts measured them: the live probe from
    the connect (connect_ms, handshake_ms: connect to done, total_ms), a capture from the
    first ClientHello (server_hello_ms, handshake_ms: to both sides encrypting,
    total_ms: first to last packet). Not comparable across sides."""

    connect_ms: float | None = None
    server_hello_ms: float | None = None
    handshake_ms: float | None = None
    total_ms: float | None = None


@dataclass(frozen=True)
class HandshakeFacts:
    """What one handshake established (see the module docstring)."""

    #: the ClientHellos sent, in order (two after a HelloRetryRequest)
    client_hellos: tuple[HelloFacts, ...] = ()
    #: the version the ServerHello chose (None: no ServerHello, or its version unreadable)
    version: int | None = None
    cipher_suite: int | None = None
    #: the suite's key exchange and the group: None without a ServerHello
    key_exchange: KeyExchangeFacts | None = None
    #: the group a HelloRetryRequest asked for (`hrr`: there was one)
    hrr: bool = False
    hrr_group: int | None = None
    #: the scheme of the server's ServerKeyExchange or CertificateVerify signature
    signature_scheme: int | None = None
    #: the server's certificate chain as sent (DER, leaf first)
    certificates: tuple[bytes, ...] = ()
    #: the ALPN protocol the server chose (ServerHello or EncryptedExtensions)
    alpn: str | None = None
    #: the NewSessionTicket's lifetime (TLS 1.3) or lifetime hint (RFC 5077)
    ticket_lifetime: int | None = None
    #: the size of a stapled OCSP response (CertificateStatus, or the TLS 1.3 leaf's
    #: status_request entry extension)
    ocsp_response_bytes: int | None = None
    #: the server sent a CertificateRequest (None: not known, its flight ended before the
    #: request's place; `certificate_requested_of`)
    certificate_requested: bool | None = False
    #: its certificate_types (RFC 5246 7.4.4; TLS 1.3 has none), as sent
    certificate_types: tuple[int, ...] = ()
    resumption: Resumption | None = None
    messages: tuple[MessageFact, ...] = ()
    extensions: tuple[ExtensionsSeen, ...] = ()
    alerts: tuple[AlertFact, ...] = ()
    #: both Finished messages were seen (and, live, the server's verified)
    handshake_complete: bool = False
    #: the server's Finished verified (None: not reached, or a capture without keys)
    finished_verified: bool | None = None
    #: the server's signature verified (None: not checked) and what was verified or why not
    signature_verified: bool | None = None
    signature_detail: str | None = None
    #: why the live engine stopped before the Finished (a suite it cannot protect...)
    incomplete_reason: str | None = None
    timings: HandshakeTimings = field(default_factory=HandshakeTimings)
    #: (field, reason): facts the side could not establish, and why
    unknown: tuple[tuple[str, str], ...] = ()

    @property
    def client_hello(self) -> HelloFacts | None:
        """The first ClientHello (what the client offered)."""
        return self.client_hellos[0] if self.client_hellos else None

    def extensions_of(self, sender: int, msg_type: int, hrr: bool = False
                      ) -> tuple[int, ...] | None:
        """The extension types of the first such message (None: not seen)."""
        return next((e.types for e in self.extensions if e.sender == sender
                     and e.msg_type == msg_type and e.hrr == hrr), None)

    def why_unknown(self, name: str) -> str | None:
        """Why the field `name` could not be known (None: it was, or nothing was said)."""
        return next((why for field_name, why in self.unknown if field_name == name), None)


#: handshake types: a CertificateRequest, and the server's messages after which none can
#: come (TLS 1.0-1.2 ServerHelloDone; its Finished: TLS 1.3, or a resumed TLS 1.2)
_CERTIFICATE_REQUEST, _PAST_CERTIFICATE_REQUEST = 13, (14, 20)


def certificate_requested_of(server_types: Iterable[int]) -> bool | None:
    """Whether the server asked for a client certificate, from the types of the handshake
    messages it sent: True once a CertificateRequest came, False once its flight went past
    the request's place, else None: the handshake ended before, whether the server would
    have asked is not known (a TLS 1.3 capture without its key log sees none of them)."""
    types = set(server_types)
    if _CERTIFICATE_REQUEST in types:
        return True
    return False if types.intersection(_PAST_CERTIFICATE_REQUEST) else None


__all__ = ["CLIENT", "SERVER", "AlertFact", "ExtensionsSeen", "HandshakeFacts",
           "HandshakeTimings", "HelloFacts", "HelloSummary", "KeyExchangeFacts", "KxSource", "MessageFact",
           "Resumption", "certificate_requested_of", "hello_facts", "wire_text"]
