"""The active checks, by name: the static catalog (each check module imported here, by name,
so that no module of the package imports its own caller; model/check_catalog.py holds the
names, sections and phases as data for `scan --help`, and a test keeps the two equal), and
`run_active_checks`, which the audit calls after its phases.
"""

from __future__ import annotations

import asyncio
import os
import traceback

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.check_catalog import ACTIVE
from tlsprobe.model.checks import CheckResult
from tlsprobe.probes.audit.scheduler import TargetRunner
from tlsprobe.probes.checks import (
    alpn,
    banners,
    ccs,
    cert_lifetime,
    chain,
    client_auth,
    client_renegotiation,
    clock_skew,
    compression,
    cookies,
    downgrade_sentinel,
    early_data,
    ems,
    etm,
    fallback,
    grease,
    heartbleed,
    hsts,
    http_compression,
    key_usage,
    large_hello,
    many_suites,
    must_staple,
    npn,
    ocsp_response,
    ocsp_stapling,
    renegotiation,
    resumption,
    robot,
    sct,
    security_headers,
    server_banner,
    sni_chain,
    split_record,
    split_segment,
    sslv2,
    ticketbleed,
    tls13_intolerance,
    tls_timestamp,
    unknown_version,
)
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

__all__ = ["CHECKS", "LAST", "in_catalog_order", "run_active_checks"]

#: every active check, in model/check_catalog.py ACTIVE order
CHECKS: dict[str, ActiveCheck] = {c.name: c for c in (
    fallback.CHECK, heartbleed.CHECK, ccs.CHECK, ticketbleed.CHECK, resumption.CHECK,
    early_data.CHECK, ocsp_stapling.CHECK, ems.CHECK, etm.CHECK, large_hello.CHECK,
    split_record.CHECK, split_segment.CHECK, grease.CHECK, unknown_version.CHECK,
    tls13_intolerance.CHECK, hsts.CHECK, http_compression.CHECK, server_banner.CHECK,
    banners.CHECK, security_headers.CHECK, cookies.CHECK, clock_skew.CHECK,
    cert_lifetime.CHECK, sct.CHECK, key_usage.CHECK, must_staple.CHECK,
    chain.CHECK, sni_chain.CHECK, ocsp_response.CHECK, client_auth.CHECK, compression.CHECK,
    client_renegotiation.CHECK, robot.CHECK, sslv2.CHECK, renegotiation.CHECK,
    downgrade_sentinel.CHECK,
    many_suites.CHECK, tls_timestamp.CHECK, alpn.CHECK, npn.CHECK,
)}


async def _one(name: str, runner: TargetRunner, report: AuditReport) -> CheckResult:
    check = CHECKS[name]
    ctx = CheckContext(runner, report, name, ACTIVE[name].category, check.title, check.details)
    try:
        return await check.run(ctx)
    except Exception as exc:  # noqa: BLE001 (a bug in the check: its verdict is lost, no other)
        reason = f"internal error: {type(exc).__name__}: {exc}"
        runner.scheduler.internal_errors.setdefault(runner.target.display, reason)
        if os.environ.get("TLSPROBE_DEBUG") == "1":
            traceback.print_exception(exc)
        return ctx.inconclusive(reason)


#: checks the audit runs at its very end, after every other connection to the target: the
#: server may stay busy after their connection closed, and a server that serves one
#: connection at a time keeps every connection queued behind it waiting. client_renegotiation:
#: openssl s_server -www sleeps 1 s in its HTTP loop once it refused a renegotiation (its
#: SSL_read asks to retry), when the check already has its answer, the no_renegotiation alert
LAST = ("client_renegotiation",)


async def run_active_checks(names: tuple[str, ...], runner: TargetRunner,
                            report: AuditReport, *, last: bool | None = None
                            ) -> tuple[CheckResult, ...]:
    """Every active check in `names` (others ignored), concurrently; with `last` False only
    those not in LAST, with `last` True only those in LAST (the audit runs them after its
    other connections); results in catalog order. The scheduler's per-host cap bounds how
    many connections run at once."""
    wanted = [n for n in CHECKS if n in names and (last is None or (n in LAST) == last)]
    return tuple(await asyncio.gather(*(_one(n, runner, report) for n in wanted)))


def in_catalog_order(results: tuple[CheckResult, ...]) -> tuple[CheckResult, ...]:
    """`results` (of active checks) in catalog order, as one `run_active_checks` gives
    them."""
    order = {name: i for i, name in enumerate(CHECKS)}
    return tuple(sorted(results, key=lambda r: order.get(r.name, len(order))))
