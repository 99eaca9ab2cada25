"""Many cipher suites: does the server answer a ClientHello that lists more than 128?

Some servers and middleboxes (F5 BIG-IP before 11.x and other load balancers, old IIS and
embedded stacks) kept the client's suites in a fixed table of 128 entries and reset, dropped
or refused a hello that listed more; scanners that offer every suite at once (testssl.sh
sends at most 128 per hello for that reason) and clients with long lists then fail. The
check sends the plain hello (tolerance's minimal hello of the highest version spoken) with
its suites listed first, so that a tolerant server picks one of them, followed by further
suites the registry defines for that version (what the audit offers anyway; for TLS 1.3
the TLS 1.2 suites too, which every browser lists beside them) and, past those,
unassigned codepoints (0x4000 onwards; never GREASE, an SCSV or a defined suite), up
to SUITES (150) in all, padded as the plain hello is. Answered with a suite it offered:
tolerated; refused: confirmed and set against the plain hello (_tolerance.py `judge`);
a ServerHello with a suite the hello did not offer breaks the protocol (not tolerated).
One connection when tolerated, six at most.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tlsprobe import registry
from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult, Severity
from tlsprobe.probes.checks._tolerance import Variant, judge, plain_hello
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.registry import version_name
from tlsprobe.wire.ext_decoders import is_grease
from tlsprobe.wire.hello import ClientHello

TLS13, TLS12 = 0x0304, 0x0303
SUITES = 150        # more than the 128 a fixed table held
FILLER_START = 0x4000   # an unassigned block of the IANA TLS Cipher Suites registry


def suite_list(first: tuple[int, ...], version: int, count: int = SUITES) -> list[int]:
    """`first` (in order), then defined suites of `version`, then unassigned codepoints:
    `count` distinct suites in all (`first` whole even when it is longer)."""
    out = list(dict.fromkeys(first))
    taken = set(out)
    defined = tuple(registry.suites_for_version(version))
    if version == TLS13:
        defined = (*defined, *registry.suites_for_version(TLS12))
    for code in defined:
        if len(out) >= count:
            return out
        info = registry.cipher_suite(code)
        if code not in taken and info is not None and not info.is_scsv:
            out.append(code)
            taken.add(code)
    code = FILLER_START
    while len(out) < count:
        if code not in taken and registry.cipher_suite(code) is None and not is_grease(code):
            out.append(code)
        code += 1
    return out


def _many(version: int) -> Callable[[ClientHello], ClientHello]:
    """The edit: the hello's suites (the SCSV kept last) extended to SUITES, padded."""
    def edit(hello: ClientHello) -> ClientHello:
        own = [c for c in hello.cipher_suites if c != 0x00FF]
        suites = suite_list(tuple(own), version)
        if 0x00FF in hello.cipher_suites:
            suites = [*suites[:-1], 0x00FF]
        return replace(hello, cipher_suites=suites).padded()
    return edit


async def run(ctx: CheckContext) -> CheckResult:
    got = plain_hello(ctx)
    if isinstance(got, CheckResult):
        return got
    versions, config = got
    top = versions[0]
    name = version_name(top)
    variant = Variant(f"a {name} ClientHello listing {SUITES} cipher suites (its own first)",
                      replace(config, padding=False), _many(top))
    plain = Variant(f"the plain {name} ClientHello", config)
    return await judge(ctx, [variant], plain, severity=Severity.medium)


CHECK = ActiveCheck("many_suites", "a ClientHello with more than 128 cipher suites", run,
                    ToleranceDetails)
