"""The active checks, by name: `check(name)` (its module imported when it is to run: a scan
imports only the checks it runs), the static catalog `CHECKS` (every check module imported
here, by name, on first use, so that no module of the package imports its own caller;
model/check_catalog.py holds the names, sections and phases as data for `scan --help`, and a
test keeps the two equal), and `run_active_checks`, which the audit calls after its phases.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import traceback
from typing import TYPE_CHECKING

from tlsprobe.model.audit import AuditReport
from tlsprobe.model.check_catalog import ACTIVE
from tlsprobe.model.checks import CheckResult
from tlsprobe.probes.audit.scheduler import TargetRunner
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

__all__ = ["CHECKS", "LAST", "MODULES", "check", "in_catalog_order", "run_active_checks"]

#: the checks whose module bears another name than theirs (every other check's module is
#: tlsprobe/probes/checks/NAME.py)
MODULES = {"breach": "http_compression"}

if TYPE_CHECKING:
    #: every active check, in model/check_catalog.py ACTIVE order (`__getattr__` below)
    CHECKS: dict[str, ActiveCheck]


def check(name: str) -> ActiveCheck:
    """The active check `name`: the CHECK of its module, tlsprobe/probes/checks/NAME.py
    (or MODULES' name), imported when the check is to run, so that a scan imports the checks
    it runs and no other (a test holds every check to its module). Once the whole catalog
    was made (`CHECKS`), the check is the catalog's."""
    made = globals().get("CHECKS")
    if made is not None:
        found: ActiveCheck = made[name]
        return found
    module = importlib.import_module(f"tlsprobe.probes.checks.{MODULES.get(name, name)}")
    found = module.CHECK
    return found


def __getattr__(name: str) -> object:
    """`CHECKS`, the static catalog (every check module imported, by name, here: no module
    of the package imports its own caller), made on first use and kept."""
    if name == "CHECKS":
        checks = {n: check(n) for n in ACTIVE}
        globals()["CHECKS"] = checks
        return checks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def _one(name: str, runner: TargetRunner, report: AuditReport) -> CheckResult:
    one = check(name)
    ctx = CheckContext(runner, report, name, ACTIVE[name].category, one.title, one.details)
    try:
        return await one.run(ctx)
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
    wanted = [n for n in ACTIVE if n in names and (last is None or (n in LAST) == last)]
    return tuple(await asyncio.gather(*(_one(n, runner, report) for n in wanted)))


def in_catalog_order(results: tuple[CheckResult, ...]) -> tuple[CheckResult, ...]:
    """`results` (of active checks) in catalog order, as one `run_active_checks` gives
    them."""
    order = {name: i for i, name in enumerate(ACTIVE)}
    return tuple(sorted(results, key=lambda r: order.get(r.name, len(order))))
