"""Result model of a probe: frozen dataclasses with a stable JSON form.

Field names are part of the documented JSON schema (README, "JSON output"): add fields,
never rename them. Codepoints are kept as ints and also given as names, so GREASE, private
and unknown values survive.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from tlsprobe import registry
from tlsprobe.errors import FailureKind
from tlsprobe.model.encode import JsonObject, document, dumps, run_head
from tlsprobe.model.vocab import TrustStatus

if TYPE_CHECKING:   # field types only: a run without --quic / --starttls never loads them
    from tlsprobe.model.quic import QuicSummary
    from tlsprobe.model.starttls import StartTlsInfo

SCHEMA_VERSION = 1

_T = TypeVar("_T")


def _hex(code: int, width: int = 4) -> str:
    return f"0x{code:0{width}x}"


#: Codepoints and Ciphers already made, by code, one table per kind: a ClientHello's offer
#: names dozens (every suite, group and signature scheme) and a capture's hellos repeat the
#: same few hundred; the values are frozen, so one instance serves every report. Codes come
#: from the wire: a table is emptied when it holds `_MADE_MAX` (memory stays bounded).
_MADE_MAX = 4096
_versions: dict[int, Codepoint] = {}
_groups: dict[int, Codepoint] = {}
_sigschemes: dict[int, Codepoint] = {}
_certificate_types: dict[int, Codepoint] = {}
_ciphers: dict[int, Cipher] = {}


def _keep(table: dict[int, _T], code: int, value: _T) -> _T:
    """`value` remembered in `table` under `code` (emptied first when full)."""
    if len(table) >= _MADE_MAX:
        table.clear()
    table[code] = value
    return value


def _codepoint(table: dict[int, Codepoint], code: int,
               name_of: Callable[[int], str]) -> Codepoint:
    """The Codepoint of `code` named by `name_of`, from `table` (made and kept there the
    first time)."""
    made = table.get(code)
    if made is None:
        made = _keep(table, code, Codepoint(code, _hex(code), name_of(code)))
    return made


@dataclass(frozen=True)
class Codepoint:
    """A registry value: id, hex and name (hex when unknown)."""

    id: int
    hex: str
    name: str

    @classmethod
    def version(cls, code: int) -> Codepoint:
        return _codepoint(_versions, code, registry.version_name)

    @classmethod
    def group(cls, code: int) -> Codepoint:
        return _codepoint(_groups, code, registry.group_name)

    @classmethod
    def sigscheme(cls, code: int) -> Codepoint:
        return _codepoint(_sigschemes, code, registry.sigscheme_name)

    @classmethod
    def certificate_type(cls, code: int) -> Codepoint:
        """A CertificateRequest's ClientCertificateType (one byte: hex of two digits)."""
        made = _certificate_types.get(code)
        if made is None:
            from tlsprobe.wire.certificate import certificate_type_name
            made = _keep(_certificate_types, code,
                         Codepoint(code, _hex(code, 2), certificate_type_name(code)))
        return made

    def id_label(self) -> str:
        """'rsa_sign (1)': the name and the decimal id (a ClientCertificateType's)."""
        return f"{self.name} ({self.id})"

    def label(self) -> str:
        return f"{self.name} ({self.hex})"


@dataclass(frozen=True)
class Cipher:
    id: int
    hex: str
    iana_name: str
    openssl_name: str | None

    @classmethod
    def of(cls, code: int) -> Cipher:
        made = _ciphers.get(code)
        if made is None:
            suite = registry.cipher_suite(code)
            made = _keep(_ciphers, code, Cipher(code, _hex(code), registry.suite_name(code),
                                                suite.openssl_name if suite else None))
        return made


@dataclass(frozen=True)
class KeyExchange:
    """The negotiated key exchange: group, where it was learnt, and key sizes.

    `source` is one of "key_share" (TLS 1.3 ServerHello), "hello_retry_request",
    "server_key_exchange" (TLS 1.2 ECDHE named curve), "dhe_parameters" (TLS 1.2 DHE, group
    recognised from the prime), "rsa" (RSA key transport: no ephemeral group), "none" (no
    key exchange message: TLS 1.3 psk_ke, or none sent in TLS 1.2), "not_reached" (TLS
    1.0-1.2: the handshake ended before the ServerKeyExchange's place), "not_captured" (a
    capture gap where the ServerKeyExchange was), "malformed" (a captured TLS 1.3
    ServerHello's key_share that could not be read: kind "unknown").
    """

    kind: str                       # ECDHE, DHE, KEM, hybrid, RSA, PSK
    source: str
    group: Codepoint | None = None
    server_share_bytes: int | None = None
    client_share_bytes: int | None = None
    bits: int | None = None         # as s_client's "Server Temp Key: X25519, 253 bits"
    dh_prime_bits: int | None = None
    dh_group_name: str | None = None
    server_temp_key: str | None = None  # e.g. "X25519, 253 bits"
    explicit_curve: bool = False
    valid: bool | None = None       # the server's share passed validation (None: not checked)
    problem: str | None = None


@dataclass(frozen=True)
class CertificateInfo:
    """One certificate of a chain as `openssl x509 -text` and a browser's viewer show it:
    names, key, signature, dates, `serial` (hex), `sha256` and `sha1` fingerprints of the
    DER (lowercase hex; SHA-1 only for comparing with browsers, which still show it), the
    subjectAltName's DNS names and addresses (then its other entries, as OpenSSL writes
    them: "email:...", "URI:..."), the extendedKeyUsage purposes (OpenSSL's short
    names: "serverAuth", "clientAuth", ...; a purpose without one as its dotted OID), the
    CRL distribution point URIs, and the Authority Information Access URIs (OCSP responders,
    CA issuers). Text from the certificate is kept as it is: the report escapes it."""

    subject: str
    issuer: str
    key_type: str
    key_bits: int | None
    signature_algorithm: str
    not_before: str
    not_after: str
    serial: str
    sha256: str
    san: tuple[str, ...] = ()
    sha1: str = ""
    extended_key_usage: tuple[str, ...] = ()
    crl_urls: tuple[str, ...] = ()
    ocsp_urls: tuple[str, ...] = ()
    ca_issuer_urls: tuple[str, ...] = ()

    @property
    def rsa_key(self) -> bool:
        """An RSA key: rsaEncryption ("RSA") or RSASSA-PSS only ("RSA-PSS", RFC 4055)."""
        return self.key_type in ("RSA", "RSA-PSS")


@dataclass(frozen=True)
class TrustCheck:
    """The certificate chain and host name check, as `tlsprobe probe` does it.

    `status`: "trusted", "untrusted", or "not_checked" (no trust store, no certificate to
    check, `scan --no-verify`, or a verdict not established: `detail` says which). `code` is OpenSSL's X509_V_ERR value
    (0 ok, 18 self-signed, 20 unable to get the local issuer, 62 hostname mismatch, ...) and
    `reason` its text; `hostname` is the name checked (the SNI, else the target host) and
    `hostname_ok` whether the leaf is valid for it (None when it could not be told apart from
    a broken chain)."""

    status: TrustStatus
    code: int | None = None
    reason: str = ""
    detail: str = ""
    hostname: str | None = None
    hostname_ok: bool | None = None
    trust_store: str | None = None


@dataclass(frozen=True)
class ServerCertificate:
    """A certificate chain the server presents for another key type than its default one
    (`AuditReport.certificates`), as a connection of the audit got it: `key_type` is its
    leaf's key ("RSA", "RSA-PSS", "ECDSA", "Ed25519", "Ed448", "DSA"), `version` the
    connection's protocol version and `offer` what its hello offered (the TLS 1.2 suites,
    or the TLS 1.3 signature scheme the server chose); `trust` is its own chain and host
    name check (not_checked with `--no-verify`)."""

    key_type: str
    version: Codepoint
    offer: str
    certificates: tuple[CertificateInfo, ...]
    trust: TrustCheck | None = None


@dataclass(frozen=True)
class Verification:
    """Certificate verification outcome, reported like s_client's Verify return code.
    `code`: OpenSSL's X509_V_ERR value (None when nothing was checked, or when OpenSSL's
    verdict could not be established: `message` then says "not established: " and why, and
    `ok` is false); `skipped`: the check was switched off (--no-verify)."""

    ok: bool
    message: str
    hostname_ok: bool | None = None
    code: int | None = None
    skipped: bool = False


@dataclass(frozen=True)
class Offer:
    """What the ClientHello offered."""

    versions: tuple[Codepoint, ...]
    cipher_suites: tuple[Cipher, ...]
    groups: tuple[Codepoint, ...]
    key_share_groups: tuple[Codepoint, ...]
    signature_algorithms: tuple[Codepoint, ...]
    alpn: tuple[str, ...]
    sni: str | None
    client_hello_bytes: int


@dataclass(frozen=True)
class Timings:
    connect_ms: float | None = None
    handshake_ms: float | None = None
    total_ms: float | None = None


#: the name of an alert whose level and description were encrypted (capture without keys)
ENCRYPTED_ALERT = "(encrypted)"


@dataclass(frozen=True)
class AlertInfo:
    """An alert; in a capture `direction` is "client" or "server", and an alert seen
    without its key (a TLS 1.3 record that can only hold one) has level and description
    None and the name ENCRYPTED_ALERT."""

    direction: str                  # "received" or "sent"
    level: int | None
    description: int | None
    name: str

    @property
    def encrypted(self) -> bool:
        return self.description is None


@dataclass(frozen=True)
class ProbeResult:
    host: str
    port: int
    address: str | None
    offer: Offer
    version: Codepoint | None = None
    cipher: Cipher | None = None
    key_exchange: KeyExchange | None = None
    hello_retry_request: Codepoint | None = None   # the group the HRR asked for
    signature_scheme: Codepoint | None = None
    alpn: str | None = None
    session_ticket_lifetime: int | None = None
    certificates: tuple[CertificateInfo, ...] = ()
    verification: Verification | None = None
    handshake_complete: bool = False
    finished_verified: bool | None = None
    http_status: str | None = None
    signature_verified: bool | None = None   # CertificateVerify / ServerKeyExchange signature
    signature_detail: str | None = None      # what was verified, or why it was not
    incomplete_reason: str | None = None     # why the engine stopped before Finished
    #: CertificateRequest seen (none is sent); None: not known, the handshake ended before
    #: the request's place (TLS 1.0-1.2 ServerHelloDone, the server's Finished)
    client_certificate_requested: bool | None = False
    #: its certificate_types (TLS 1.0-1.2; TLS 1.3 has none), in the server's order
    client_certificate_types: tuple[Codepoint, ...] = ()
    anonymous: bool = False                  # DH_anon/ECDH_anon suite: nobody authenticated
    extended_master_secret: bool | None = None  # TLS 1.0-1.2: RFC 7627 echoed (None: 1.3)
    secure_renegotiation: bool | None = None    # TLS 1.0-1.2: renegotiation_info echoed
    ocsp_stapling: str | None = None    # "stapled", "announced, no CertificateStatus", "none"
    ocsp_response_bytes: int | None = None      # size of the stapled OCSPResponse
    alerts: tuple[AlertInfo, ...] = ()
    messages: tuple[str, ...] = ()  # "<<< ServerHello" style, in order
    timings: Timings = field(default_factory=Timings)
    error: str | None = None
    error_kind: FailureKind | None = None
    findings: tuple[str, ...] = ()
    starttls: StartTlsInfo | None = None     # --starttls: the preamble (absent from JSON without)
    quic: QuicSummary | None = None          # --quic: the QUIC side (absent from JSON without)
    started_at: str | None = None            # when the probe started (ISO 8601 UTC)
    duration_s: float | None = None          # the whole probe, name lookup to the last check

    def to_dict(self) -> JsonObject:
        """The JSON object: schema and tool, then the fields."""
        out = document({"schema": SCHEMA_VERSION, "tool": "tlsprobe", **run_head()}, self)
        if self.starttls is None:
            del out["starttls"]
        if self.quic is None:
            del out["quic"]
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return dumps(self.to_dict(), indent=indent)
