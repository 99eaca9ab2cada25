"""Result model of an audit (`tlsprobe scan`): frozen dataclasses with a stable JSON form.

Every check says how it was established and how many connections it cost. Three states are
kept apart everywhere: supported, not supported (the server refused the offer with an alert
or a close), and inconclusive (timeouts, resets, protocol errors, or a method that could not
decide). Field names are part of the JSON schema: add fields, never rename them. The answer
to each of the audit's questions (versions, groups, suites, ...) is model/audit_parts.py's,
re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from tlsprobe.errors import FailureKind
from tlsprobe.model.audit_parts import (
    ORDER_CLIENT,
    ORDER_SERVER,
    ORDER_SINGLE,
    ORDER_UNKNOWN,
    ConsistencyCheck,
    DheAudit,
    DhParameters,
    GroupAudit,
    PqVerdict,
    SigalgAudit,
    Spoken,
    SuiteAudit,
    SuiteRow,
    VersionSupport,
)
from tlsprobe.model.checks import CheckResult
from tlsprobe.model.encode import JsonObject, document, dumps, run_head
from tlsprobe.model.probe import CertificateInfo, ServerCertificate, TrustCheck
from tlsprobe.model.rating import Rating
from tlsprobe.model.severity import Severity
from tlsprobe.model.vocab import GroupMethod, VersionStatus

if TYPE_CHECKING:   # field types only: a scan without --clients / --starttls never loads them,
    # a group audit no certificate type
    from tlsprobe.model.clients import ClientSimulation
    from tlsprobe.model.starttls import StartTlsInfo

__all__ = ["AUDIT_SCHEMA_VERSION", "ORDER_CLIENT", "ORDER_SERVER", "ORDER_SINGLE",
           "ORDER_UNKNOWN", "SEVERITIES", "AuditReport", "ConsistencyCheck",
           "DhParameters", "DheAudit", "Finding", "GateVerdict", "GroupAudit",
           "PqVerdict", "SigalgAudit", "Spoken", "SuiteAudit", "SuiteRow",
           "VersionSupport", "severity_rank"]

AUDIT_SCHEMA_VERSION = 1

SEVERITIES = tuple(Severity)


def severity_rank(severity: str) -> int:
    """0 (info) .. 4 (critical); unknown names rank below info."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


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
