"""The per-target error boundary of an audit run: whatever goes wrong while auditing one
target (a bug in tlsprobe included) becomes that target's report, never a traceback nor the
loss of the other targets' results."""

from __future__ import annotations

import os
import traceback

from tlsprobe.errors import FailureKind
from tlsprobe.model.audit import AuditReport
from tlsprobe.net.tcp import Target
from tlsprobe.probes.audit.scheduler import Scheduler


def internal_error_report(target: Target, scheduler: Scheduler,
                          exc: Exception) -> AuditReport:
    """The report of a target whose audit raised an unexpected exception (a bug in tlsprobe):
    an error of its own (kind "internal", exit 70), never a traceback nor a lost run."""
    if os.environ.get("TLSPROBE_DEBUG") == "1":
        traceback.print_exception(exc)
    counts = scheduler.count(target)
    return AuditReport(host=target.host, port=target.port, connections=counts,
                       total_connections=sum(counts.values()),
                       starttls=scheduler.channel.preamble(target),
                       error=f"{target.display}: internal error: {type(exc).__name__}: {exc}",
                       error_kind=FailureKind.INTERNAL)
