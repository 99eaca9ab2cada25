"""`scan --quic` (issue 15): the audit's connections go over QUIC (net/quic_async.py's
connector under the same scheduler, the same elimination method and report).

QUIC carries TLS 1.3 only (RFC 9001 4.2): the versions check asks TLS 1.3 alone, a hello
without TLS 1.3 is never sent (the connector refuses it, no connection), and the sections of
other versions the audit still lists (the TLS 1.2 group audit of `--checks groups`) say
"not applicable over QUIC" instead of an inconclusive result. The report and its JSON say
`"transport": "quic"`.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from tlsprobe.errors import UsageError

if TYPE_CHECKING:
    from tlsprobe.model.audit import AuditReport
    from tlsprobe.net.quic_async import AsyncQuicConnector
    from tlsprobe.probes.audit import AuditOptions


def quic_connector(args: argparse.Namespace) -> AsyncQuicConnector | None:
    """The scan's QUIC connector (None without --quic); --starttls with it is refused."""
    from tlsprobe.commands.quic_option import quic_versions
    if not getattr(args, "quic", False):
        if getattr(args, "quic_version", None) is not None:
            raise UsageError("--quic-version needs --quic")
        return None
    if getattr(args, "starttls", None) is not None:
        raise UsageError("--starttls cannot be used with --quic (QUIC has no plain-text "
                         "preamble)")
    from tlsprobe.net.quic_async import AsyncQuicConnector
    return AsyncQuicConnector(args.timeout, quic_versions(args))


def quic_options(options: AuditOptions) -> AuditOptions:
    """The audit's options over QUIC: TLS 1.3 is the only version to ask about."""
    from tlsprobe.engine.config import TLS13
    return replace(options, versions=(TLS13,))


def quic_report(report: AuditReport, options: AuditOptions) -> AuditReport:
    """The report of an audit over QUIC: the transport named, the sections of versions QUIC
    cannot carry marked not applicable (and the findings and check verdicts derived again
    from what is left, as the audit derives them)."""
    from tlsprobe.engine.config import TLS13
    from tlsprobe.model.audit import GroupAudit
    from tlsprobe.net.quic_async import NOT_APPLICABLE
    before = report.groups
    groups = tuple(g if g.version.id == TLS13 else
                   GroupAudit(version=g.version, spoken=None, method="not_run",
                              notes=(NOT_APPLICABLE,)) for g in report.groups)
    report = replace(report, transport="quic", groups=groups)
    if report.error or groups == before:
        return report
    from tlsprobe.policy.checks import derive_checks
    from tlsprobe.policy.findings import findings_for
    report = replace(report, check_results=derive_checks(report))
    return replace(report, findings=findings_for(report, list(options.policies)))
