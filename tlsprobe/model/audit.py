"""Result model of an audit (`tlsprobe scan`): frozen dataclasses with a stable JSON form.

Every check says how it was established and how many connections it cost. Three states are
kept apart everywhere: supported, not supported (the server refused the offer with an alert
or a close), and inconclusive (timeouts, resets, protocol errors, or a method that could not
decide). Field names are part of the JSON schema: add fields, never rename them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING

from tlsprobe.errors import FailureKind
from tlsprobe.model.checks import CheckResult
from tlsprobe.model.encode import JsonObject, document, dumps, run_head
from tlsprobe.model.probe import (
    CertificateInfo,
    Cipher,
    Codepoint,
    ServerCertificate,
    TrustCheck,
)
from tlsprobe.model.rating import Rating
from tlsprobe.model.severity import Severity
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

if TYPE_CHECKING:   # field types only: a scan without --clients / --starttls never loads them,
    # a group audit no certificate type
    from tlsprobe.model.clients import ClientSimulation
    from tlsprobe.model.server_certs import KeyTypeSigalgs
    from tlsprobe.model.starttls import StartTlsInfo

AUDIT_SCHEMA_VERSION = 1

SEVERITIES = tuple(Severity)

# Order of preference: who decides among the offered values.
ORDER_SERVER = Order.SERVER        # the server picks by its own preference
ORDER_CLIENT = Order.CLIENT        # the server follows the client's order
ORDER_SINGLE = Order.SINGLE        # one value supported: nothing to order
ORDER_UNKNOWN = Order.UNKNOWN      # not established (see the notes)


def severity_rank(severity: str) -> int:
    """0 (info) .. 4 (critical); unknown names rank below info."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


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


@dataclass(frozen=True)
class Finding:
    """One problem. `message` is for people (long lists are shortened with "and N more");
    `items` is the full list of what it is about (IANA names of suites, group names,
    version names, certificate subjects) for programs; `version` names the protocol version
    the finding is about ("TLS 1.2"), or is None when it is not about one version.
    A finding a policy waives (its `waive` table) is listed in `AuditReport.waived` with the
    policy's reason (`waiver`) and name (`waived_by`); those two JSON members are there only
    on waived findings. `inconclusive`: the finding states what could NOT be established
    (audit.inconclusive, certificate.not_verified, a check whose verdict is inconclusive:
    policy/codes.py UNDETERMINED): it counts toward no gate (--fail-on at any level, the
    JUnit test cases, the SARIF level) unless a policy's `severity` table names its code,
    which makes it an ordinary finding at that severity; the JSON member is there only when
    true."""

    severity: Severity
    code: str                       # stable identifier, e.g. "version.not_allowed"
    message: str
    policy: str = "builtin"
    items: tuple[str, ...] = ()
    version: str | None = None
    waiver: str | None = None       # why it is accepted (only on a waived finding)
    waived_by: str | None = None    # the policy that waives it
    inconclusive: bool = False      # what could not be established: counts toward no gate

    def json_shape(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if (f.name not in ("waiver", "waived_by") or self.waiver is not None)
                and (f.name != "inconclusive" or self.inconclusive)}

    @property
    def gates(self) -> bool:
        """Whether this finding can fail a gate (--fail-on, a JUnit test case): not when
        waived, nor when it only says what could not be established."""
        return self.waiver is None and not self.inconclusive


@dataclass(frozen=True)
class GateVerdict:
    """Whether a target passes the run's gates (scan --fail-on, --fail-under; an error
    fails the run too) and, when it does not, why: one line per reason ("2 finding(s) at or
    above --fail-on medium: certificate.self_signed (high), ...")."""

    passed: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditReport:
    host: str
    port: int
    address: str | None = None
    versions: tuple[VersionSupport, ...] = ()
    groups: tuple[GroupAudit, ...] = ()
    suites: tuple[SuiteAudit, ...] = ()
    signature_schemes: tuple[SigalgAudit, ...] = ()
    post_quantum: tuple[PqVerdict, ...] = ()
    certificates: tuple[CertificateInfo, ...] = ()
    trust: TrustCheck | None = None   # the chain and host name check (cert check)
    #: cert check: the chains the server presents for other key types than the default
    #: one's (an RSA and an ECDSA certificate), each with its own trust check
    other_certificates: tuple[ServerCertificate, ...] = ()
    #: why the search for other key types' certificates is not complete (a connection left
    #: inconclusive); None: complete, or not run (no cert check, no chain)
    other_certificates_note: str | None = None
    #: how the search told apart the key types one TLS 1.2 authentication serves (ECDSA,
    #: Ed25519, Ed448; RSA, RSA-PSS): "signature schemes"; None: no search (no cert check,
    #: no chain), or an earlier tlsprobe's document, whose search offered suites only
    other_certificates_search: str | None = None
    consistency: ConsistencyCheck | None = None   # one configuration throughout? (None: no
                                                  # versions check, nothing to compare)
    findings: tuple[Finding, ...] = ()
    policies: tuple[str, ...] = ()
    #: policy name -> the built-in policy that policy file `extends` (policy/load.py); no
    #: JSON member when none does
    policy_extends: dict[str, str] = field(default_factory=dict)
    #: findings a policy waives (with the reason): not in `findings`, never fail --fail-on
    waived: tuple[Finding, ...] = ()
    checks: tuple[str, ...] = ()
    #: phases among `checks` run only because the checks asked for read them (`--checks
    #: heartbleed` runs the versions phase): their findings are not reported; no JSON member
    #: when none
    read_only: tuple[str, ...] = ()
    connections: dict[str, int] = field(default_factory=dict)
    total_connections: int = 0
    retries: int = 0
    duration_s: float = 0.0
    error: str | None = None
    error_kind: FailureKind | None = None
    index: int | None = None        # the target's place in the input, from 1 (JSON lines
                                    # come as targets finish, not in input order)
    #: verdicts of the vulnerability checks asked for (model/checks.py); the JSON member
    #: "check_results" is there only when some were asked for (see `json_shape`)
    check_results: tuple[CheckResult, ...] = ()
    starttls: StartTlsInfo | None = None   # --starttls: the first connection's preamble
    transport: str | None = None   # "quic" for scan --quic; None: TCP (no JSON member)
    #: why the scan gave the target one connection at a time (a server that queues or
    #: refuses parallel connections, net/pacing.py); None: it did not (no JSON member)
    one_at_a_time: str | None = None
    #: scan --clients: what each client profile negotiated (model/clients.py); no JSON
    #: member without --clients
    clients: tuple[ClientSimulation, ...] = ()
    #: the overall grade (model/rating.py, policy/rating.py); None: not rated (an error,
    #: or a report made without it: no JSON member then)
    rating: Rating | None = None
    #: when the work on this target started (ISO 8601 UTC, model/encode.py utc_stamp);
    #: None only in a report made without running anything (the JSON member is null)
    started_at: str | None = None
    #: scan with --fail-on or --fail-under: whether this target passes and why not
    #: (policy/gate.py); None: no gate asked for (no JSON member)
    gate: GateVerdict | None = None

    def group_audit(self, version: int) -> GroupAudit | None:
        return next((g for g in self.groups if g.version.id == version), None)

    def suite_audit(self, version: int) -> SuiteAudit | None:
        return next((s for s in self.suites if s.version.id == version), None)

    def ske_group_audits(self) -> list[GroupAudit]:
        """The group audits that read ServerKeyExchange (TLS 1.2, or the older version
        audited on a server without TLS 1.2) and found the version spoken."""
        return [g for g in self.groups if g.version.id <= 0x0303 and g.spoken is not False
                and g.method == GroupMethod.SERVER_KEY_EXCHANGE]

    def suite_kx_rows(self) -> list[tuple[SuiteAudit, SuiteRow]]:
        """The accepted DHE and ECDHE suites whose key size only the suite audit read (from
        their own ServerKeyExchange), not counted twice with a group audit's: TLS 1.2's DHE
        ones when its group audit read no DH parameters; in TLS 1.1 and older, all but those
        a group audit of the same version covers (its curves, its DH parameters)."""
        def dh_read(g: GroupAudit | None) -> bool:
            return g is not None and g.dhe is not None and (g.dhe.fixed is not None
                                                            or bool(g.dhe.negotiated))

        ske = self.ske_group_audits()

        def covered(audit: SuiteAudit, row: SuiteRow) -> bool:
            g = self.group_audit(audit.version.id)
            if audit.version.id == 0x0303:
                return row.kx_kind == "ECDHE" or dh_read(g)
            if g is None or g not in ske:
                return False
            if row.kx_kind == "DHE":
                return dh_read(g)
            return row.kx_group is not None and row.kx_group.id in {c.id for c in g.supported}

        return [(audit, row) for audit in self.suites if audit.version.id <= 0x0303
                for row in audit.rows
                if row.kx_bits is not None and row.kx_kind in ("DHE", "ECDHE")
                and not covered(audit, row)]

    def suite_dh_rows(self) -> list[tuple[SuiteAudit, SuiteRow, int]]:
        """The DHE rows of `suite_kx_rows`, each with its prime's bits."""
        return [(audit, row, row.kx_bits) for audit, row in self.suite_kx_rows()
                if row.kx_kind == "DHE" and row.kx_bits is not None]

    def spoken_versions(self) -> list[int]:
        """The versions established as spoken (Spoken.YES), in the report's order."""
        return [v.version.id for v in self.versions if v.status == VersionStatus.SUPPORTED]

    def version_spoken(self, version: int) -> Spoken:
        """YES, NO or UNKNOWN for `version`; UNKNOWN too when it was not checked."""
        support = next((v for v in self.versions if v.version.id == version), None)
        return support.spoken if support is not None else Spoken.UNKNOWN

    def unknown_versions(self, low: int = 0x0300, high: int = 0x0304) -> list[int]:
        """The versions in [low, high] (SSL 3.0 .. TLS 1.3) whose support is not known
        (inconclusive, or not checked), highest first."""
        return [v for v in (0x0304, 0x0303, 0x0302, 0x0301, 0x0300)
                if low <= v <= high and self.version_spoken(v) is Spoken.UNKNOWN]

    def worst_severity(self) -> str | None:
        ranked = sorted(self.findings, key=lambda f: severity_rank(f.severity))
        return ranked[-1].severity if ranked else None

    def json_shape(self) -> dict[str, object]:
        """The fields in declaration order, without "check_results" or "read_only" when there are none and
        without "starttls" when there is none (no --starttls) and without "transport" over
        TCP (only scan --quic sets it) and without "one_at_a_time" for a target that took
        parallel connections and without "rating" when there is none (an error report)
        and without "policy_extends" when no policy extends another, so that an audit that asks for none of them keeps its JSON
        unchanged."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if (f.name != "check_results" or self.check_results)
                and (f.name != "read_only" or self.read_only)
                and (f.name != "starttls" or self.starttls is not None)
                and (f.name != "transport" or self.transport is not None)
                and (f.name != "one_at_a_time" or self.one_at_a_time is not None)
                and (f.name != "clients" or self.clients)
                and (f.name != "rating" or self.rating is not None)
                and (f.name != "gate" or self.gate is not None)
                and (f.name != "policy_extends" or self.policy_extends)}

    def policies_label(self) -> str:
        """The policies checked, each with the built-in one it extends: "ours extends
        mozilla-modern-6.0, old"; "" when none (built-in checks only)."""
        return ", ".join(f"{p} extends {self.policy_extends[p]}" if p in self.policy_extends
                         else p for p in self.policies)

    def to_dict(self) -> JsonObject:
        """The JSON object: schema, tool and kind, then the fields."""
        return document({"schema": AUDIT_SCHEMA_VERSION, "tool": "tlsprobe", "kind": "audit",
                         **run_head()}, self)

    def to_json(self, indent: int | None = None) -> str:
        return dumps(self.to_dict(), indent=indent)
