"""Large ClientHellos: does the server answer a hello of more than 512 and more than 1500
bytes?

A hello with an X25519MLKEM768 key share is about 1.8 kB: over 512 bytes, which some
middleboxes and old load balancers never expected (the F5 "256-511 bytes" bug is why
clients pad to 512, RFC 7685), and over a 1500-byte Ethernet MTU, so it spans TCP segments
on a real network. The check sends the plain hello (tolerance's minimal hello of the highest
version spoken, without its padding) padded by the padding extension (RFC 7685) to 600 and
to 1800 bytes, one connection each; a refusal is confirmed and set against the plain
512-byte hello (probes/checks/_tolerance.py). Two connections when tolerated, twelve at most.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult, Severity
from tlsprobe.probes.checks._tolerance import Variant, judge, plain_hello
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.registry import version_name
from tlsprobe.wire.hello import ClientHello

SIZES = (600, 1800)


def _pad(size: int) -> Callable[[ClientHello], ClientHello]:
    return lambda hello: hello.padded(size)


async def run(ctx: CheckContext) -> CheckResult:
    got = plain_hello(ctx)
    if isinstance(got, CheckResult):
        return got
    versions, config = got
    top = versions[0]
    unpadded = replace(config, padding=False)
    name = version_name(top)
    variants = [Variant(f"a {name} ClientHello padded to {size} bytes", unpadded, _pad(size),
                        label=str(size)) for size in SIZES]
    plain = Variant(f"the plain {name} ClientHello", config)
    return await judge(ctx, variants, plain, severity=Severity.medium)


CHECK = ActiveCheck("large_hello", "ClientHellos over 512 and over 1500 bytes", run,
                    ToleranceDetails)
