"""The typed details of the checks' results (`CheckResult.details`, JSON `details`): what each
check established, as values an API or JSON user reads without parsing the prose.

One frozen dataclass per check (a few shared by checks that ask the same kind of question:
the tolerance checks, the extension echoes, the derived suite checks); each check declares
its type (`ActiveCheck.details`, probes/checks/base.py) and its results carry an instance of
it or None. Versions and suites are their registry names ("TLS 1.2",
"TLS_RSA_WITH_AES_128_GCM_SHA256"), as in the evidence. Field names are JSON: add fields,
never rename them. docs/CHECKS.md lists each check's details.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# ReplyKind lives with the audit's vocabularies (the audit's confirmation reads it without
# importing the checks' details: scan's start-up); named here as before
from tlsprobe.model.vocab import ReplyKind

__all__ = [
    "AcceptedSuite", "AlpnDetails", "BannerDetails", "BannersDetails", "CcsDetails",
    "ChainDetails", "CheckDetails", "ClientAuthDetails", "ClockSkewDetails",
    "CompressionDetails", "Cookie", "CookiesDetails", "DhDetails", "DowngradeSentinelDetails",
    "EarlyDataDetails", "EchoDetails", "FallbackAnswer", "FallbackDetails", "HeaderValue",
    "HeartbleedDetails", "HstsDetails", "HttpCompressionDetails", "KeyUsageDetails",
    "LifetimeDetails", "MustStapleDetails", "NpnDetails", "OcspCertStatus",
    "OcspResponseDetails", "RandomKind", "RandomSample", "RedirectHop", "RenegotiationDetails",
    "RenegotiationsDetails", "ReplyKind", "ResumptionDetails", "ResumptionMechanism",
    "RobotAnswer", "RobotDetails", "RobotOracle", "SctDetails", "SecurityHeadersDetails",
    "SentinelAnswer", "SniChainDetails", "Sslv2Details", "StaplingDetails",
    "SuiteCheckDetails", "TicketbleedDetails", "TimestampDetails", "ToleranceDetails",
    "VariantAnswer", "WeakHeader",
]


@dataclass(frozen=True)
class CheckDetails:
    """The base of every check's details type (no fields of its own)."""


# -- derived checks (read off the audit) ---------------------------------------------------

@dataclass(frozen=True)
class AcceptedSuite:
    """A suite the audit found accepted, and in which version."""

    suite: str
    version: str


@dataclass(frozen=True)
class SuiteCheckDetails(CheckDetails):
    """poodle, freak, logjam, rc4, sweet32, beast, null, anon: the accepted suites the check
    is about (empty: none, on complete suite lists)."""

    accepted: tuple[AcceptedSuite, ...]


@dataclass(frozen=True)
class DhDetails(CheckDetails):
    """dh: the fixed DH parameters the server sends (None: none seen), their size, the
    well-known prime they are (or None) and the primality verdict (model DhParams.prime),
    and the RFC 7919 groups it negotiates with their sizes."""

    bits: int | None
    standard: str | None
    prime: str | None
    groups: tuple[str, ...]
    smallest_bits: int | None


# -- vulnerability checks --------------------------------------------------------------------

class FallbackAnswer(StrEnum):
    """What the server did with a downgraded hello carrying TLS_FALLBACK_SCSV."""

    inappropriate_fallback = "inappropriate_fallback"
    accepted = "accepted"
    refused_otherwise = "refused otherwise"


@dataclass(frozen=True)
class FallbackDetails(CheckDetails):
    """fallback: the lower version asked with the SCSV, the server's highest, its answer."""

    version: str
    highest: str
    answer: FallbackAnswer


@dataclass(frozen=True)
class HeartbleedDetails(CheckDetails):
    """heartbleed: the extension acknowledged, and the payload bytes the server sent beyond
    the one it was sent (0 when it sent none; the content is never kept)."""

    acknowledged: bool
    bytes_leaked: int


@dataclass(frozen=True)
class CcsDetails(CheckDetails):
    """ccs: whether a second ChangeCipherSpec was sent (the first met silence), the alert
    that answered (None: none) and whether the server closed."""

    second_sent: bool
    alert: int | None
    closed: bool


@dataclass(frozen=True)
class TicketbleedDetails(CheckDetails):
    """ticketbleed: the session ID length sent with the ticket, the length echoed."""

    sent_length: int
    echoed_length: int


@dataclass(frozen=True)
class CompressionDetails(CheckDetails):
    """compression: the compression method the server chose (0 null, 1 DEFLATE); None when
    it refused the hello offering DEFLATE."""

    method: int | None


@dataclass(frozen=True)
class RenegotiationsDetails(CheckDetails):
    """client_renegotiation: renegotiations asked at most, completed in a row, answered
    with a ServerHello; whether RFC 5746 was negotiated; whether the server refused."""

    limit: int
    accepted: int
    answered: int
    secure: bool
    refused: bool


class RobotOracle(StrEnum):
    """The strength of a ROBOT padding oracle (as sslyze and robot-detect decide)."""

    weak = "weak"
    strong = "strong"


@dataclass(frozen=True)
class RobotAnswer:
    """The server's first answer to one of the five ClientKeyExchange probes."""

    probe: str
    answer: str


@dataclass(frozen=True)
class RobotDetails(CheckDetails):
    """robot: the oracle (None: the five answers alike), the probes answered differently
    from the valid block, every probe's answer (the same in each round), the version and
    rounds, and whether a client certificate was asked for."""

    oracle: RobotOracle | None
    distinguished: tuple[str, ...]
    answers: tuple[RobotAnswer, ...]
    version: str
    rounds: int
    certificate_requested: bool


@dataclass(frozen=True)
class Sslv2Details(CheckDetails):
    """sslv2: whether the server answered SSLv2, and the cipher specs its SERVER-HELLO
    lists (their codes)."""

    speaks_sslv2: bool
    cipher_specs: tuple[int, ...]


# -- hygiene checks --------------------------------------------------------------------------

@dataclass(frozen=True)
class ResumptionMechanism:
    """One mechanism asked: "TLS 1.2 session ID", "TLS 1.2 session ticket" or "TLS 1.3
    ticket"; sessions (IDs or tickets) issued; resumed (None: not established)."""

    mechanism: str
    issued: int
    resumed: bool | None


@dataclass(frozen=True)
class ResumptionDetails(CheckDetails):
    """resumption: mechanisms tried, how many resumed, each one's answer."""

    tried: int
    resumed: int
    mechanisms: tuple[ResumptionMechanism, ...]


@dataclass(frozen=True)
class EarlyDataDetails(CheckDetails):
    """early_data: the ticket's max_early_data_size, 0-RTT accepted, its replay accepted
    (None: not asked)."""

    max_early_data_size: int
    accepted: bool
    replay_accepted: bool | None


@dataclass(frozen=True)
class StaplingDetails(CheckDetails):
    """ocsp_stapling: a response stapled, its size, what it says (not verified)."""

    stapled: bool
    response_bytes: int
    status: str | None


@dataclass(frozen=True)
class EchoDetails(CheckDetails):
    """ems, etm: the version asked, whether the ServerHello echoed the extension, and the
    suite it chose."""

    version: str
    echoed: bool
    suite: str | None


@dataclass(frozen=True)
class RenegotiationDetails(CheckDetails):
    """renegotiation: the version asked, renegotiation_info in the ServerHello, and the
    connections it rests on (two when it was missing)."""

    version: str
    renegotiation_info: bool
    connections: int


@dataclass(frozen=True)
class SentinelAnswer:
    """One lower-version hello: the version asked and answered, the sentinel present."""

    version: str
    sentinel: bool


@dataclass(frozen=True)
class DowngradeSentinelDetails(CheckDetails):
    """downgrade_sentinel: the server's highest version and each lower version's answer."""

    highest: str
    answers: tuple[SentinelAnswer, ...]


class RandomKind(StrEnum):
    """What the first 4 bytes of a version's ServerHello.random are: a clock (they follow
    ours from one connection to the next), random, or the same bytes on every connection."""

    clock = "clock"
    random = "random"
    fixed = "fixed"


@dataclass(frozen=True)
class RandomSample:
    """tls_timestamp, one version: its name, what the bytes are, the first 4 bytes of each
    connection's ServerHello.random (as big-endian integers: the Unix time, for a clock)
    and, for a clock, its offset from ours in seconds (positive: ahead)."""

    version: str
    kind: RandomKind
    first_bytes: tuple[int, ...]
    skew_seconds: int | None


@dataclass(frozen=True)
class TimestampDetails(CheckDetails):
    """tls_timestamp: each version asked, and the skew of the first clock seen (None:
    none)."""

    samples: tuple[RandomSample, ...]
    skew_seconds: int | None


@dataclass(frozen=True)
class AlpnDetails(CheckDetails):
    """alpn: the version asked, the protocols offered, those the server accepted in the
    order it chose them (its preference, when `preference` is "server"), whether it chose by
    its own order ("server"), by ours ("client") or could not be told (None), and whether it
    answered a list it shares nothing with by the no_application_protocol alert (None: not
    seen)."""

    version: str
    offered: tuple[str, ...]
    accepted: tuple[str, ...]
    preference: str | None
    refuses_unknown: bool | None


@dataclass(frozen=True)
class NpnDetails(CheckDetails):
    """npn: the version asked, whether the ServerHello carried next_protocol_negotiation,
    and the protocols it advertised (as sent; the report escapes them)."""

    version: str
    advertised: bool
    protocols: tuple[str, ...]


# -- tolerance checks ------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantAnswer:
    """One variant hello: what it is, its ClientHello size, what the server did first, and
    whether a refusal was confirmed."""

    variant: str
    size: int
    answer: ReplyKind
    confirmed: bool


@dataclass(frozen=True)
class ToleranceDetails(CheckDetails):
    """large_hello, split_record, split_segment, grease, unknown_version,
    tls13_intolerance: each variant's answer (empty: the audit answered it already)."""

    variants: tuple[VariantAnswer, ...]


# -- HTTP checks -----------------------------------------------------------------------------

@dataclass(frozen=True)
class RedirectHop:
    """One redirect answer on the way from GET /: the path asked, the status line, the
    Location as sent, and whether it was followed (the next answer is its target's)."""

    path: str
    status: str
    location: str
    followed: bool


@dataclass(frozen=True)
class HstsDetails(CheckDetails):
    """hsts: the HTTP status line, the header (None: absent), max-age (None: missing or
    invalid), includeSubDomains, preload; the redirects on the way (the header read is the
    first one along them, from GET / on)."""

    status: str
    header: str | None
    max_age: int | None
    include_subdomains: bool
    preload: bool
    redirects: tuple[RedirectHop, ...] = ()


@dataclass(frozen=True)
class HttpCompressionDetails(CheckDetails):
    """breach: the HTTP status line, the Content-Encodings of the answer, the compressing
    ones; the redirects followed to that answer."""

    status: str
    encodings: tuple[str, ...]
    compressing: tuple[str, ...]
    redirects: tuple[RedirectHop, ...] = ()


@dataclass(frozen=True)
class BannerDetails(CheckDetails):
    """server_banner: the HTTP status line and the Server headers, as sent (the report escapes
    them); the redirects followed to that answer."""

    status: str
    banners: tuple[str, ...]
    redirects: tuple[RedirectHop, ...] = ()


@dataclass(frozen=True)
class HeaderValue:
    """One header as sent: its name (as the check spells it) and its value (the report
    escapes it)."""

    name: str
    value: str


@dataclass(frozen=True)
class WeakHeader:
    """A security header present with a value that does not protect, and why."""

    name: str
    why: str


@dataclass(frozen=True)
class SecurityHeadersDetails(CheckDetails):
    """security_headers: the HTTP status line, the security headers present (each value),
    those missing, those whose value is weak; the redirects followed to that answer."""

    status: str
    present: tuple[HeaderValue, ...]
    missing: tuple[str, ...]
    weak: tuple[WeakHeader, ...]
    redirects: tuple[RedirectHop, ...] = ()


@dataclass(frozen=True)
class Cookie:
    """One Set-Cookie: the answer's path, the cookie's name, its Secure and HttpOnly
    attributes, its SameSite value (None: absent)."""

    path: str
    name: str
    secure: bool
    http_only: bool
    same_site: str | None


@dataclass(frozen=True)
class CookiesDetails(CheckDetails):
    """cookies: the HTTP status line and every cookie set along the redirects (in order);
    the redirects."""

    status: str
    cookies: tuple[Cookie, ...]
    redirects: tuple[RedirectHop, ...] = ()


@dataclass(frozen=True)
class ClockSkewDetails(CheckDetails):
    """clock_skew: the HTTP status line, the Date header (None: absent), the Age header's
    seconds (None: absent or not a number), the server's time (Date + Age) and ours when
    the answer came (ISO 8601, None when not read), their difference in seconds (server
    minus ours: negative when the server is behind), the tolerance."""

    status: str
    date: str | None
    age: int | None
    server_time: str | None
    our_time: str | None
    skew_seconds: int | None
    tolerance_seconds: int
    redirects: tuple[RedirectHop, ...] = ()


@dataclass(frozen=True)
class BannersDetails(CheckDetails):
    """banners: the HTTP status line, the application banners (X-Powered-By, ...) and the
    proxy banners (Via, X-Cache, ...) as sent; the redirects followed to that answer."""

    status: str
    application: tuple[HeaderValue, ...]
    proxy: tuple[HeaderValue, ...]
    redirects: tuple[RedirectHop, ...] = ()


# -- certificate checks ----------------------------------------------------------------------

@dataclass(frozen=True)
class LifetimeDetails(CheckDetails):
    """cert_lifetime: the leaf's validity period in seconds (notBefore to notAfter
    inclusive), and its two dates (ISO 8601)."""

    seconds: int
    not_before: str
    not_after: str


@dataclass(frozen=True)
class SctDetails(CheckDetails):
    """sct: SCTs embedded in the leaf (None: none, or a list not counted), and the other
    places they came in ("the TLS extension", "the stapled OCSP response")."""

    embedded: int | None
    sources: tuple[str, ...]


@dataclass(frozen=True)
class KeyUsageDetails(CheckDetails):
    """key_usage: the uses the leaf's keyUsage allows (None: no extension), the use the
    negotiated suite needs, and the uses the server was seen making that it leaves out."""

    allowed: tuple[str, ...] | None
    needed: str | None
    violations: tuple[str, ...]


@dataclass(frozen=True)
class MustStapleDetails(CheckDetails):
    """must_staple: the leaf demands stapling, and whether each connection got a stapled
    response (None: not known, its TLS 1.2 handshake ended before the place of the
    CertificateStatus the ServerHello announced)."""

    demanded: bool
    stapled: tuple[bool | None, ...]


@dataclass(frozen=True)
class ChainDetails(CheckDetails):
    """chain: the certificates as sent (RFC 4514 subjects, leaf first); `path` the indexes
    of the sent certificates that certify one another from the leaf on, in path order;
    `complete` whether that path reaches the trust store (or a root the server sends; None:
    no trust store to tell), `missing_issuer` the issuer it needs and nobody sent (None:
    none missing), `extra` the sent certificates off the path, `ordered` whether the path's
    certificates are sent in path order, `anchor_sent` the self-signed root the server
    sends (None: none), `trust_store` the store judged against."""

    subjects: tuple[str, ...]
    path: tuple[int, ...]
    complete: bool | None
    missing_issuer: str | None
    extra: tuple[int, ...]
    ordered: bool
    anchor_sent: str | None
    trust_store: str | None


@dataclass(frozen=True)
class SniChainDetails(CheckDetails):
    """sni_chain: the leaf with SNI (its SHA-256 and subject) and without (None: the server
    refused a hello without server_name: `refused` says how), and whether the chains are
    the same certificates."""

    name: str
    sha256: str
    subject: str
    without_sha256: str | None
    without_subject: str | None
    same_chain: bool | None
    refused: str | None


class OcspCertStatus(StrEnum):
    """The status a stapled OCSP response gives the leaf (RFC 6960 4.2.1)."""

    good = "good"
    revoked = "revoked"
    unknown = "unknown"


@dataclass(frozen=True)
class OcspResponseDetails(CheckDetails):
    """ocsp_response: the stapled response's status (None: not a successful response), the
    leaf's status in it, who signed it ("issuer", "delegated responder", None: neither),
    its thisUpdate / nextUpdate (ISO 8601; None: absent), and each problem found."""

    response_status: str | None
    cert_status: OcspCertStatus | None
    signer: str | None
    this_update: str | None
    next_update: str | None
    problems: tuple[str, ...]


@dataclass(frozen=True)
class ClientAuthDetails(CheckDetails):
    """client_auth: whether the server asks for a client certificate (CertificateRequest),
    whether it requires one (None: not established), the version asked in, and the CA names
    it accepts (RFC 4514 strings, as sent; a name that does not parse as its hex), and the
    request's certificate_types as 'rsa_sign (1)' (TLS 1.0-1.2; TLS 1.3 has none)."""

    requested: bool
    required: bool | None
    version: str
    ca_names: tuple[str, ...]
    certificate_types: tuple[str, ...] = ()

