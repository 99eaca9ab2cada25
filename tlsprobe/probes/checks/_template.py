"""TEMPLATE (not a check of the catalog): the shape of every check module, to copy. Here:
does the server echo the (hypothetical) extension 0xFFAA?

The docstring says, in this order: the question and why it matters; what the check sends
(which hello, which version, how many connections at most); the verdict rule, one line per
verdict and what it rests on:
  - the ServerHello carries the extension: supported;
  - a ServerHello without it: not supported (a finding of severity low);
  - no ServerHello: inconclusive, with what came back;
  - the server speaks no TLS 1.0-1.2 version: not applicable (inconclusive when the audit
    could not establish that).
Its details (model/check_details.py, one frozen dataclass per check, declared below): here
`EchoDetails` (the version asked, echoed or not, the suite chosen).

To add a check: copy this module to NAME.py (the module bears the check's name: active.py
imports it by that name when the check is to run; else add it to active.py MODULES), add an
`Entry` to model/check_catalog.py ACTIVE (section, audit phases read, harmful or not), its
details type to model/check_details.py if none fits, and a section to docs/CHECKS.md.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS12
from tlsprobe.model.check_details import EchoDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._handshake import echo, legacy_versions
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

EXTENSION = 0xFFAA


async def run(ctx: CheckContext) -> CheckResult:
    # 1. preconditions from the audit: a helper returns what it found, or the result to
    #    return as it is (never a decorator that changes run's signature)
    legacy = legacy_versions(ctx)
    if not legacy:
        return ctx.unless_unknown(TLS10, TLS12, "the server speaks no TLS 1.0-1.2 version")
    # 2. the connections: ctx.hello / ctx.converse, or a shared helper over them
    sent = f"a {registry.version_name(legacy[0])} hello offering extension 0xFFAA"
    got = await echo(ctx, ctx.config((legacy[0],)), sent, "0xFFAA", EXTENSION)
    if isinstance(got, CheckResult):
        return got
    sh, echoed, evidence = got
    # 3. the verdict: every result through ctx.result / ctx.inconclusive, with the typed
    #    details of what was established; a finding is a Severity (its code is check.NAME)
    details = EchoDetails(registry.version_name(legacy[0]), echoed,
                          registry.suite_name(sh.cipher_suite))
    if echoed:
        return ctx.result(Verdict.supported, f"{sent} is answered with it", evidence,
                          details=details)
    return ctx.result(Verdict.not_supported, f"{sent} is answered without it", evidence,
                      severity=Severity.low, details=details)


CHECK = ActiveCheck("template", "the shape of a check (not in the catalog)", run, EchoDetails)
