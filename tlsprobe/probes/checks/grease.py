"""GREASE (RFC 8701): does the server ignore reserved unknown values in the ClientHello?

Clients send reserved "GREASE" values (0x0a0a, 0x1a1a, ... 0xfafa) among their suites,
extensions, groups, key shares and versions so that servers keep ignoring values they do not
know, as TLS requires; a server that chokes on them will choke on the next real new value
(a new post-quantum group, a new extension). The check sends the plain hello (tolerance's
minimal hello of the highest version spoken) with the engine's GREASE (ClientConfig
grease=True): a GREASE suite first, a GREASE group first in supported_groups and a
one-byte GREASE key share (TLS 1.3), a GREASE version first in supported_versions (when the
hello has that extension, i.e. offers TLS 1.3), and two GREASE extensions (one empty, one
with a byte). Answered without picking any GREASE value: tolerated; a GREASE value picked:
not tolerated; refused: confirmed and set against the plain hello (_tolerance.py). One
connection when tolerated, six at most.
"""

from __future__ import annotations

from dataclasses import replace

from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult, Severity
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._tolerance import Variant, judge, plain_hello
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.registry import version_name
from tlsprobe.wire.ext_decoders import is_grease


def picked_grease(out: Outcome) -> str | None:
    """What GREASE value the answer selected, if any (a server must never select one)."""
    for what, value in (("version", out.version), ("suite", out.cipher_suite),
                        ("group", out.group), ("group", out.hrr_group)):
        if value is not None and is_grease(value):
            return f"the server selected the GREASE {what} 0x{value:04x}"
    return None


async def run(ctx: CheckContext) -> CheckResult:
    got = plain_hello(ctx)
    if isinstance(got, CheckResult):
        return got
    versions, config = got
    name = version_name(versions[0])
    kinds = "suite, extensions, group and version" if config.offers_tls13 else \
        "suite, extensions and group"
    variant = Variant(f"the plain {name} ClientHello with GREASE {kinds}",
                      replace(config, grease=True))
    plain = Variant(f"the plain {name} ClientHello", config)
    return await judge(ctx, [variant], plain, severity=Severity.medium, sanity=picked_grease)


CHECK = ActiveCheck("grease", "unknown values: GREASE suites, extensions, groups, versions "
                    "(RFC 8701)", run, ToleranceDetails)
