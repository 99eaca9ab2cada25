"""Result model of `tlsprobe pcap`: one `ConnectionReport` per TLS connection in a capture.

The pieces are the live probe's (`model.probe`: Offer, Codepoint, Cipher, KeyExchange,
CertificateInfo, AlertInfo), so a connection read from a capture is described with the
same words and the same JSON fields as a probe. Field names are part of the documented JSON
schema: add fields, never rename them. `AlertInfo.direction` is the sender here ("client"
or "server"), since the capture is neither side.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from tlsprobe.model.capture_json import connection_json
from tlsprobe.model.encode import (
    JsonEncoder,
    JsonObject,
    number,
    string,
    to_json_object,
)
from tlsprobe.model.probe import (
    SCHEMA_VERSION,
    AlertInfo,
    CertificateInfo,
    Cipher,
    Codepoint,
    KeyExchange,
    Offer,
)

__all__ = [
    "SCHEMA_VERSION",
    "AlertInfo",
    "BriefReport",
    "CaptureSummary",
    "CertificateInfo",
    "Cipher",
    "ClientAuth",
    "Codepoint",
    "ConnectionReport",
    "ConnectionTimings",
    "Fingerprints",
    "KeyExchange",
    "Offer",
    "ReportText",
    "capture_encoder",
    "connection_json",
    "shape_json",
]


@dataclass(frozen=True)
class Fingerprints:
    """JA3 / JA3S (md5 and the string hashed) and JA4 (hashed and raw) of the hellos."""

    ja3: str | None = None
    ja3_full: str | None = None
    ja3s: str | None = None
    ja3s_full: str | None = None
    ja4: str | None = None
    ja4_r: str | None = None


@dataclass(frozen=True)
class ConnectionTimings:
    """`start`: capture time (epoch seconds) of the first packet; the rest in ms from the
    first ClientHello: to the ServerHello, to both sides encrypting; and first to last
    packet."""

    start: float | None = None
    server_hello_ms: float | None = None
    handshake_ms: float | None = None
    duration_ms: float | None = None


@dataclass(frozen=True)
class ClientAuth:
    """Client authentication as the capture shows it (a report's `client_auth`; null when
    neither a CertificateRequest nor a client Certificate was read: none sent, or TLS 1.3
    without keys, whose encrypted handshake hides both). `requested`: the server sent a
    CertificateRequest (None: not known, none read where the capture lost bytes of the
    server's handshake; `problems` says so); `signature_schemes` and `certificate_authorities` (how many
    distinguished names) are what it asked for (TLS 1.3: its signature_algorithms and
    certificate_authorities extensions; an SSL 3.0-TLS 1.1 request has no schemes).
    `sent`: the client answered with a Certificate message (None: not seen, e.g. the
    capture or the keys stop before it); `certificates`: its chain, leaf first (empty when
    `sent` with no certificate); `certificate_authority_names`: the distinguished names
    the request lists, in its order, as RFC 4514 text (as tshark's and s_client's lists;
    the server's text, exact here, escaped in the text views); `certificate_types`: the
    request's certificate_types (RFC 5246 7.4.4: rsa_sign (1), ecdsa_sign (64), ...; TLS 1.3
    has none), in its order."""

    requested: bool | None
    signature_schemes: tuple[Codepoint, ...] = ()
    certificate_authorities: int = 0
    sent: bool | None = None
    certificates: tuple[CertificateInfo, ...] = ()
    certificate_authority_names: tuple[str, ...] = ()
    certificate_types: tuple[Codepoint, ...] = ()


@dataclass(frozen=True)
class ConnectionReport:
    """One connection as the capture shows it.

    `protocol`: "tls" (TCP), "quic" (UDP, from the Initial packets). `client_random`
    (hex) names the connection in a key log; `client_extensions` / `server_extensions`
    are the extension types of the first ClientHello and the ServerHello in wire order
    (GREASE kept). `resumption`:
    "session_id" (TLS 1.2 abbreviated handshake), "psk" (TLS 1.3 ServerHello
    pre_shared_key), "session_ticket" (TLS 1.2 ticket accepted), None. `encrypted`: both
    sides switched to protected records. `handshake_complete`: both Finished messages were
    decrypted (None when no key was known). `midstream`: the capture starts inside the
    connection; `preamble`: printable start of the plain text before TLS (STARTTLS, proxy);
    `gap_bytes`: bytes the capture missed; `client_auth`: client authentication as far
    as the capture shows it (`ClientAuth`, None when it shows none); `problems`: malformed data and other remarks;
    `compression`: the TLS compression method the ServerHello chose when not null (1
    DEFLATE, RFC 3749; 64 LZS), else None. `sslv2_cipher_specs`: every cipher spec of an
    SSLv2-format ClientHello in wire order (3-byte ids, hex "0x050080", SSL 2.0 names;
    0x00XXYY specs are the TLS suites also listed in `offer.cipher_suites`), else [].
    `framing`: the protocol the TLS bytes were unwrapped from ("openvpn": its control
    channel; "capwap": the CAPWAP DTLS preamble; "rdp-udp": RDP over UDP's reliable
    channel, or its lossy one for DTLS; "tds": SQL Server's MS-TDS PRELOGIN packets),
    else None."""

    file: str
    id: int
    transport: str
    protocol: str
    client: str
    server: str
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int
    first_frame: int
    last_frame: int
    sni: str | None = None
    offer: Offer | None = None
    client_hellos: int = 0
    client_random: str | None = None
    client_extensions: tuple[Codepoint, ...] = ()
    server_extensions: tuple[Codepoint, ...] = ()
    version: Codepoint | None = None
    cipher: Cipher | None = None
    key_exchange: KeyExchange | None = None
    hello_retry_request: Codepoint | None = None
    signature_scheme: Codepoint | None = None
    alpn: str | None = None
    resumption: str | None = None
    session_ticket_lifetime: int | None = None
    certificates: tuple[CertificateInfo, ...] = ()
    client_auth: ClientAuth | None = None
    alerts: tuple[AlertInfo, ...] = ()
    messages: tuple[str, ...] = ()
    fingerprints: Fingerprints = field(default_factory=Fingerprints)
    timings: ConnectionTimings = field(default_factory=ConnectionTimings)
    client_bytes: int = 0
    server_bytes: int = 0
    encrypted: bool = False
    decrypted: bool = False
    handshake_complete: bool | None = None
    close: str | None = None
    midstream: bool = False
    preamble: str | None = None
    gap_bytes: int = 0
    problems: tuple[str, ...] = ()
    compression: Codepoint | None = None
    sslv2_cipher_specs: tuple[Cipher, ...] = ()
    framing: str | None = None
    quic_version: Codepoint | None = None

    @property
    def group(self) -> Codepoint | None:
        return self.key_exchange.group if self.key_exchange is not None else None

    @property
    def violation(self) -> str | None:
        """The first protocol violation named in `problems` (None: none)."""
        return violation_of(self.problems) if self.problems else None

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"kind": "connection"}
        out.update(to_json_object(self))
        return out

    def to_json(self, indent: int | None = None, encoder: JsonEncoder | None = None) -> str:
        """The JSON object; one line (as `json.dumps(to_dict())` would write it) unless
        `indent` is given. `encoder`: the run's `capture_encoder()`, which remembers the
        text of values the reports share (a fresh one, remembering nothing, if None)."""
        if indent is not None:
            return json.dumps(self.to_dict(), indent=indent)
        dumps = (encoder or capture_encoder()).encode
        shared = self.__dict__.get(SHAPE_JSON)
        if shared is None or not _FAST_JSON:
            return '{"kind": "connection", ' + dumps(self)[1:]
        t = self.timings
        return connection_json(
            dumps, shared[0] or shape_json(shared, dumps, self.__getattribute__),
            self.file, self.id, self.transport, self.protocol, self.client, self.server,
            self.client_ip, self.client_port, self.server_ip, self.server_port,
            self.first_frame, self.last_frame, self.client_hellos, self.client_random,
            self.session_ticket_lifetime, f'{{"start": {number(t.start)}, '
            f'"server_hello_ms": {number(t.server_hello_ms)}, '
            f'"handshake_ms": {number(t.handshake_ms)}, '
            f'"duration_ms": {number(t.duration_ms)}}}', self.client_bytes,
            self.server_bytes, self.encrypted,
            self.decrypted, self.handshake_complete, self.close, self.midstream,
            self.preamble, self.gap_bytes, self.problems, self.compression,
            self.sslv2_cipher_specs, self.framing, self.quic_version)


def shape_json(shared: list[tuple[str, ...] | None], dumps: Callable[[object], str],
               value: Callable[[str], object]) -> tuple[str, ...]:
    """The JSON text of the fields that depend only on a handshake's shape (`value`: the
    field's value by name), remembered in the shape's holder `shared` (SHAPE_JSON)."""
    parts = shared[0] = tuple(", ".join(f"{string(n)}: {dumps(value(n))}" for n in names)
                              for names in _SHAPE_PARTS)
    return parts


class ReportText(NamedTuple):
    """A TCP connection's report as the JSON text its `ConnectionReport.to_json` gives, and
    its id: what `pcap --json/--jsonl` writes when no filter, statistics or trace reads the
    report's fields, so the analysis writes the text without building the report (offline
    AnalyzerOptions.json_text)."""

    id: int
    text: str

    def to_json(self, indent: int | None = None, encoder: JsonEncoder | None = None) -> str:
        """The report's JSON object, as `ConnectionReport.to_json` writes it."""
        if indent is not None:
            return json.dumps(json.loads(self.text), indent=indent)
        return self.text


class BriefReport(NamedTuple):
    """The fields of a `ConnectionReport` that the connection table and the statistics
    show, with the same values: `pcap` without JSON, details, trace or filters needs no
    more, so the analysis makes these instead (offline AnalyzerOptions.brief)."""

    id: int
    transport: str
    protocol: str
    client: str
    server: str
    first_frame: int
    sni: str | None
    offer: Offer | None
    version: Codepoint | None
    cipher: Cipher | None
    key_exchange: KeyExchange | None
    hello_retry_request: Codepoint | None
    alpn: str | None
    resumption: str | None
    alerts: tuple[AlertInfo, ...]
    fingerprints: Fingerprints
    encrypted: bool = False
    violation: str | None = None
    #: both Finished messages read (decrypted; None: not decrypted): a fatal alert after
    #: them did not end the handshake (the table's "failed" reads it)
    handshake_complete: bool | None = None
    #: a QUIC handshake's version (id, hex, name: v1, v2, draft-29, ...), else None
    quic_version: Codepoint | None = None


#: what marks a problem that is a protocol violation named with its RFC rule (the live
#: probe's wording, engine.serverhello.choice_problem)
VIOLATION_MARK = "(protocol violation, "


def violation_of(problems: Iterable[str]) -> str | None:
    """The first protocol violation among a connection's problems (None: none)."""
    return next((p for p in problems if VIOLATION_MARK in p), None)


@dataclass(frozen=True)
class CaptureSummary:
    """One capture file: what was read (the capture layer's counters and warnings) and how
    many TLS connections it held. `warnings` are damage to the file (exit 7); `notes` say
    what the analysis could not do with an intact file (a key log that matched nothing,
    handshake messages the capture missed); `losses` what the capture holds but was not
    read (packets of an unknown link type or interface, fragments never completed: exit 7).
    `error` is set, and everything else empty, for
    a file nothing could be read from (missing, not a capture, unreadable): JSON output
    then still has a record of it."""

    file: str
    file_format: str
    packets: int
    connections: int
    tls_connections: int
    reported: int
    complete: bool
    warnings: tuple[str, ...] = ()
    capture: JsonObject = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    error: str | None = None
    losses: tuple[str, ...] = ()

    @classmethod
    def unreadable(cls, file: str, error: str) -> CaptureSummary:
        """The record of a file that could not be read at all."""
        return cls(file=file, file_format="", packets=0, connections=0, tls_connections=0,
                   reported=0, complete=False, error=error)

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"kind": "capture"}
        out.update(to_json_object(self))
        return out


#: hidden attribute of a report made by offline.build: a one-item list shared by all the
#: reports of one handshake shape, holding the JSON text of the fields that depend only on
#: that shape (filled by the first `to_json`)
SHAPE_JSON = "_shape_json"
_SHAPE_PARTS = (("sni", "offer"),
                ("client_extensions", "server_extensions", "version", "cipher", "key_exchange",
                 "hello_retry_request", "signature_scheme", "alpn", "resumption"),
                ("certificates", "client_auth", "alerts", "messages", "fingerprints"))
#: the field order the fast `to_json` writes; another order uses the generic path
_FAST_JSON = tuple(f.name for f in dataclasses.fields(ConnectionReport)) == (
    "file", "id", "transport", "protocol", "client", "server", "client_ip", "client_port",
    "server_ip", "server_port", "first_frame", "last_frame", *_SHAPE_PARTS[0],
    "client_hellos", "client_random", *_SHAPE_PARTS[1], "session_ticket_lifetime",
    *_SHAPE_PARTS[2], "timings", "client_bytes", "server_bytes", "encrypted", "decrypted",
    "handshake_complete", "close", "midstream", "preamble", "gap_bytes", "problems",
    "compression", "sslv2_cipher_specs", "framing", "quic_version") and \
    tuple(f.name for f in dataclasses.fields(ConnectionTimings)) == (
        "start", "server_hello_ms", "handshake_ms", "duration_ms")
#: values a capture repeats (interned by the report builder): their JSON text is remembered
#: by the run's encoder
_INTERNED = (Codepoint, Cipher, Offer, KeyExchange, CertificateInfo, Fingerprints)


def capture_encoder() -> JsonEncoder:
    """The encoder of one `pcap` run: remembers the text of the values its reports share."""
    return JsonEncoder(_INTERNED)
