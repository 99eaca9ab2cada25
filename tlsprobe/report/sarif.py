"""`scan --sarif FILE`: the audit's findings as SARIF 2.1.0 (OASIS), the format code-scanning
services (GitHub code scanning, Azure DevOps, GitLab, SonarQube) read.

One run; `tool.driver` is tlsprobe with its version and one rule per finding code seen
(`id` the code, `check.heartbleed`, `version.not_allowed`; a short description; `help` naming
the section of the docs that explains it; the GitHub `security-severity` of the worst
severity seen). Each finding is a result:
- `level` from its severity: critical and high `error`, medium `warning`, low and info
  `note` (the severity itself in `properties.severity`); an inconclusive finding (what
  could not be established: model/audit.py Finding.inconclusive) has `kind` `open` and
  `level` `none` (SARIF: not enough information to say whether there is a problem), as
  has the rule of a code seen only so;
- `message` the finding's text with its items, prefixed by the target;
- `locations`: a target is no file, but GitHub code scanning shows only results with a
  `physicalLocation.artifactLocation.uri` that is a relative path (or a file: URI), so the
  target is the relative URI `tls/HOST/PORT` (the host percent-encoded: an IPv6 address
  keeps no bracket or colon) and, beside it, a `logicalLocation` named `HOST:PORT`, which
  is what the target is;
- `partialFingerprints["tlsprobe/v1"]`: a digest of code, target and version, stable over
  runs, so a service matches a finding with the same one of an earlier scan;
- a finding a policy waives is a result with a `suppressions` entry (kind external, status
  accepted, the waiver as justification): shown as suppressed, never as an open alert.
A target that could not be audited is a `toolExecutionNotifications` entry (level error) of
the run's invocation, whose `executionSuccessful` is false then; `exitCode` is the scan's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import quote

from tlsprobe.model.units import host_port
from tlsprobe.report.escape import shown

if TYPE_CHECKING:
    from tlsprobe.model.audit import AuditReport, Finding
    from tlsprobe.model.encode import JsonObject, JsonValue

__all__ = ["SARIF_SCHEMA", "level_of", "sarif_document", "write_sarif"]

#: the published schema the document names (OASIS SARIF 2.1.0, errata 01)
SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")
_LEVEL = {"critical": "error", "high": "error", "medium": "warning", "low": "note",
          "info": "note"}
#: GitHub code scanning's `security-severity` (CVSS-like: >= 9 critical, >= 7 high, >= 4
#: medium, > 0 low)
_SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "2.0",
                      "info": "0.0"}
_RANK = ("info", "low", "medium", "high", "critical")
_AREAS = {"version": "Protocol version", "suite": "Cipher suite", "order": "Cipher order",
          "group": "Key exchange group", "dh": "Diffie-Hellman parameters",
          "pq": "Post-quantum key exchange", "certificate": "Certificate",
          "target": "Target", "audit": "Audit", "check": "Check"}


def level_of(severity: str) -> str:
    """The SARIF level of a finding severity (critical/high error, medium warning, low and
    info note)."""
    return _LEVEL.get(str(severity), "note")


def _describe(code: str) -> str:
    """"Certificate: expires soon" for certificate.expires_soon: the area and the rest."""
    area, _, rest = code.partition(".")
    return f"{_AREAS.get(area, area.capitalize())}: {rest.replace('_', ' ')}"


def _help(code: str) -> str:
    area, _, rest = code.partition(".")
    if area == "check":
        return (f"The `{rest}` check: what it sends and how it decides is in tlsprobe's "
                "docs/CHECKS.md (its section names `" + rest + "`).")
    return (f"The finding code `{code}`: its default severity and how a policy changes or "
            "waives it are in tlsprobe's docs/POLICY.md (finding codes).")


def _target(r: AuditReport) -> str:
    return host_port(r.host, r.port)


def _location(r: AuditReport) -> JsonObject:
    uri = f"tls/{quote(shown(r.host), safe='')}/{r.port}"
    return {"physicalLocation": {"artifactLocation": {"uri": uri}},
            "logicalLocations": [{"name": shown(_target(r)),
                                  "fullyQualifiedName": shown(_target(r))}]}


def _message(r: AuditReport, f: Finding) -> str:
    """The finding's text with its items, escaped as on the terminal (what a server sent
    can hold control characters, and lone surrogates no UTF-8 file can)."""
    items = f" ({', '.join(f.items)})" if f.items else ""
    return shown(f"{_target(r)}: {f.message}{items}")


def _fingerprint(r: AuditReport, f: Finding) -> str:
    key = "\0".join((f.code, _target(r), f.version or "", ",".join(sorted(f.items))))
    if r.transport is not None:     # scan --quic (--compare-tcp: the TCP audit beside it)
        key += f"\0{r.transport}"
    return hashlib.sha256(shown(key).encode("utf-8")).hexdigest()[:32]


def _result(r: AuditReport, f: Finding, index: int) -> JsonObject:
    properties: JsonObject = {"severity": str(f.severity), "policy": shown(f.policy),
                              "target": shown(_target(r)), "items": [shown(i) for i in f.items]}
    if r.transport is not None:
        properties["transport"] = r.transport
    if f.policy in r.policy_extends:    # a policy file that extends a built-in one
        properties["policy_extends"] = r.policy_extends[f.policy]
    out: JsonObject = {
        "ruleId": f.code, "ruleIndex": index, "level": level_of(f.severity),
        "message": {"text": _message(r, f)}, "locations": [_location(r)],
        "partialFingerprints": {"tlsprobe/v1": _fingerprint(r, f)},
        "properties": properties}
    if f.inconclusive:
        # SARIF 3.27.9: "open", the rule was evaluated without enough information to say
        # whether there is a problem; a kind other than "fail" has the level "none"
        out.update(kind="open", level="none")
    if f.waiver is not None:
        why = f.waiver + (f" (policy {f.waived_by})" if f.waived_by else "")
        out["suppressions"] = [{"kind": "external", "status": "accepted",
                                "justification": shown(why)}]
    return out


def _rules(reports: Sequence[AuditReport]) -> tuple[list[JsonValue], dict[str, int]]:
    """One rule per finding code seen (waived ones too), sorted by code; code -> index."""
    worst: dict[str, str] = {}
    open_only: dict[str, bool] = {}     # code -> seen only in inconclusive findings
    for r in reports:
        for f in (*r.findings, *r.waived):
            seen = worst.get(f.code, "info")
            worst[f.code] = max(seen, str(f.severity), key=_RANK.index)
            open_only[f.code] = open_only.get(f.code, True) and f.inconclusive
    rules: list[JsonValue] = []
    for code in sorted(worst):
        rules.append({
            "id": code, "name": code.replace(".", "_"),
            "shortDescription": {"text": _describe(code)},
            "help": {"text": _help(code)},
            "defaultConfiguration": {"level": "none" if open_only[code]
                                     else level_of(worst[code])},
            "properties": {"security-severity": _SECURITY_SEVERITY[worst[code]],
                           "tags": ["security", "tls"]}})
    return rules, {code: n for n, code in enumerate(sorted(worst))}


def _invocation(reports: Sequence[AuditReport], code: int, reason: str) -> JsonObject:
    notes: list[JsonValue] = [
        {"level": "error", "message": {"text": shown(r.error or "")},
         "locations": [_location(r)] if r.port else [],
         "properties": {"error_kind": str(r.error_kind or "")}}
        for r in reports if r.error]
    out: JsonObject = {"executionSuccessful": not notes, "exitCode": code,
                       "exitCodeDescription": reason}
    starts = sorted(r.started_at for r in reports if r.started_at)
    if starts:
        out["startTimeUtc"] = starts[0]
    if notes:
        out["toolExecutionNotifications"] = notes
    return out


def sarif_document(reports: Sequence[AuditReport], code: int, reason: str) -> JsonObject:
    """The SARIF 2.1.0 log of a scan: one run, its rules, results and invocation."""
    from tlsprobe._version import __version__
    rules, index = _rules(reports)
    results: list[JsonValue] = [_result(r, f, index[f.code]) for r in reports
                                for f in (*r.findings, *r.waived)]
    driver: JsonObject = {"name": "tlsprobe", "version": __version__,
                          "semanticVersion": __version__,
                          "rules": rules}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver}, "results": results,
                      "invocations": [_invocation(reports, code, reason)],
                      "columnKind": "unicodeCodePoints"}]}


def write_sarif(path: str, reports: Sequence[AuditReport], code: int, reason: str) -> None:
    """`scan --sarif FILE` (the path was checked before the audit)."""
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(sarif_document(reports, code, reason), fh, indent=1)
        fh.write("\n")
