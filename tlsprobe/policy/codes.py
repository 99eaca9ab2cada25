"""Every finding code tlsprobe can emit, in one registry: what a policy's `severity` and
`waive` tables may name (policy/load.py refuses any other code, with the closest known ones).

Built from the places that make findings, not written out twice:
  - policy findings: the codes of DEFAULT_SEVERITY below (which `Policy.sev` reads) and
    `version.not_allowed` (policy/findings.py `POLICY_RULES`, the rules `evaluate` applies);
  - check findings: `check.NAME` for every active check of probes/checks/catalog.py (an
    active check's finding code is always `check.` + its name: probes/checks/base.py makes
    it) and the derived checks' own findings (policy/checks.py OWN_FINDINGS);
  - built-in findings (policy/findings.py, policy/certificate.py): BUILTIN below, the one
    place they are named; tests/policy/test_policy_codes.py reads those modules' code literals and
    collects the codes of full scans against loopback servers, and fails on any code
    missing here.
`check_of(code)` is the `scan --checks` name a code belongs to (its findings are shown only
when that check was asked for). A table key may also be `AREA.*` ("certificate.*") for every
code of an area; an exact code wins over its area.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TypeVar

from tlsprobe.errors import did_you_mean
from tlsprobe.escaping import quoted_value
from tlsprobe.model.severity import Severity

T = TypeVar("T")

__all__ = ["BUILTIN", "DEFAULT_SEVERITY", "UNDETERMINED", "all_codes", "check_of", "lookup",
           "unknown_code"]

# Outside the policy is medium (the policy is what the user asked to be held to); what a
# policy only recommends (a group, the server's own order) is low. version.not_allowed:
# see policy/findings.py _version_severity.
#: the policy findings (policy/findings.py `evaluate`) but version.not_allowed, and their
#: default severities
DEFAULT_SEVERITY = {"version.missing": Severity.medium, "suite.not_allowed": Severity.medium,
                    "group.not_allowed": Severity.medium, "group.missing": Severity.low, "dh.too_small": Severity.medium,
                    "certificate.key_too_small": Severity.medium,
                    "certificate.type_not_allowed": Severity.medium,
                    "certificate.curve_not_allowed": Severity.medium,
                    "order.not_server": Severity.low}

#: built-in findings (whatever the policy): policy/findings.py and policy/certificate.py
BUILTIN = (
    "suite.weak", "suite.no_forward_secrecy", "version.no_modern", "dh.weak", "dh.not_prime",
    "dh.custom", "pq.intolerant", "pq.classic_preferred", "pq.none", "certificate.expired",
    "certificate.not_yet_valid", "certificate.expires_soon", "certificate.weak_key",
    "certificate.md5_signature", "certificate.sha1_signature", "certificate.no_san",
    "certificate.self_signed", "certificate.untrusted", "certificate.hostname_mismatch",
    "certificate.not_verified", "target.inconsistent", "audit.inconclusive",
)

#: the built-in findings that state what could NOT be established: inconclusive findings
#: (model/audit.py Finding.inconclusive), which count toward no gate unless a policy's
#: `severity` table names the code itself (not its `AREA.*`). A check's finding is
#: inconclusive when the check's verdict is (policy/checks.py: check.lucky13)
UNDETERMINED = ("audit.inconclusive", "certificate.not_verified")

#: the check (`scan --checks`) each finding code belongs to, by the code's first part
#: (`check.NAME` belongs to NAME; target.* and audit.* to none: always kept)
AREA_CHECK = {"version": "versions", "suite": "suites", "order": "suites", "group": "groups",
              "dh": "groups", "pq": "pq", "certificate": "cert", "target": "", "audit": ""}


@cache
def all_codes() -> tuple[str, ...]:
    """Every finding code, sorted."""
    from tlsprobe.model.check_catalog import ACTIVE
    from tlsprobe.policy.checks import OWN_FINDINGS
    codes = {*BUILTIN, *DEFAULT_SEVERITY, "version.not_allowed",
             *(f"check.{name}" for name in ACTIVE), *(c for c, _ in OWN_FINDINGS.values())}
    return tuple(sorted(codes))


def areas() -> tuple[str, ...]:
    """The first parts of the codes ("certificate", "check", ...)."""
    return tuple(sorted({c.partition(".")[0] for c in all_codes()}))


def check_of(code: str) -> str:
    """The check a finding code belongs to ("" when none: always kept)."""
    area, _, rest = code.partition(".")
    return rest if area == "check" else AREA_CHECK.get(area, "")


def unknown_code(key: str) -> str | None:
    """None when `key` names a finding code (or `AREA.*`); else why not, with the closest
    known codes."""
    if key in all_codes() or key.endswith(".*") and key[:-2] in areas():
        return None
    return f"unknown finding code {quoted_value(key)}" + (did_you_mean(key, all_codes()) or
                                              " (see docs/POLICY.md, Findings)")


def lookup(table: Mapping[str, T], code: str) -> T | None:
    """`table`'s value for `code`: the exact code, else its `AREA.*` key, else None."""
    if code in table:
        return table[code]
    return table.get(code.partition(".")[0] + ".*")
