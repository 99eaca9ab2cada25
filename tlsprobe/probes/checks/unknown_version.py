"""Unknown protocol versions: does the server pick a version it knows when the client lists
one it does not?

A client that speaks a future version lists it first; the server must choose among those it
knows (RFC 8446 section 4.2.1), or, without the supported_versions extension, answer a
higher legacy_version with its own highest version (RFC 5246 appendix E.1, RFC 8446
section 4.1.2). Servers that refused such hellos ("version intolerance") are why browsers
once fell back, and why TLS 1.3 moved the version out of legacy_version. The check sends two
variants of tolerance's plain hello (the audit's minimal hello of the highest version
spoken), one connection each:
  - supported_versions listing the unknown 0x0305 first, then the versions of the plain
    hello (for a server without TLS 1.3 the extension is added, listing 0x0305 and that
    version), legacy_version unchanged (at most TLS 1.2);
  - no supported_versions, legacy_version 0x0305 (the plain hello of the highest version up
    to TLS 1.2; left out when the server speaks no such version).
Answered with a version the server speaks: tolerated; the unknown version picked: not
tolerated; refused: confirmed and set against the same hello without 0x0305
(_tolerance.py). Two connections when tolerated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tlsprobe.engine.config import TLS12
from tlsprobe.model.check_details import ToleranceDetails
from tlsprobe.model.checks import CheckResult, Severity
from tlsprobe.probes.audit.outcome import Outcome
from tlsprobe.probes.checks._tolerance import Variant, judge, plain_config, plain_hello
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext
from tlsprobe.registry import version_name
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.hello import ClientHello

UNKNOWN = 0x0305
SUPPORTED_VERSIONS = 43


def listing(versions: list[int]) -> Callable[[ClientHello], ClientHello]:
    """An edit: the hello's supported_versions replaced by (or, absent, added as, before any
    padding) `versions`."""
    def edit(hello: ClientHello) -> ClientHello:
        new = ext.supported_versions_client(versions)
        exts = list(hello.extensions)
        at = next((i for i, e in enumerate(exts) if e.type == SUPPORTED_VERSIONS), None)
        if at is not None:
            exts[at] = new
        else:
            pad = next((i for i, e in enumerate(exts) if e.type == ext.PADDING), len(exts))
            exts.insert(pad, new)
        return replace(hello, extensions=exts, extensions_absent=False)
    return edit


def legacy(version: int) -> Callable[[ClientHello], ClientHello]:
    """An edit: the hello's legacy_version set to `version`."""
    return lambda hello: replace(hello, legacy_version=version)


def picked_unknown(out: Outcome) -> str | None:
    if out.version == UNKNOWN:
        return f"the server selected the unknown version 0x{UNKNOWN:04x}"
    return None


def _hex(versions: list[int]) -> str:
    return ", ".join(f"0x{v:04x}" for v in versions)


async def run(ctx: CheckContext) -> CheckResult:
    got = plain_hello(ctx)
    if isinstance(got, CheckResult):
        return got
    versions, config = got
    top = versions[0]
    known = list(config.versions)
    name = version_name(top)
    listed = Variant(f"a {name} ClientHello with supported_versions {_hex([UNKNOWN] + known)}",
                     config, listing([UNKNOWN] + known), label="supported_versions",
                     plain=Variant(f"the same hello with supported_versions {_hex(known)}",
                                   config, listing(known), label="supported_versions"))
    variants = [listed]
    older = [v for v in versions if v <= TLS12]
    if older:
        old = plain_config(ctx, older[0])
        variants.append(Variant(f"a {version_name(older[0])} ClientHello with legacy_version "
                                f"0x{UNKNOWN:04x} and no supported_versions", old,
                                legacy(UNKNOWN), label="legacy_version",
                                plain=Variant(f"the plain {version_name(older[0])} "
                                              "ClientHello", old, label="legacy_version")))
    return await judge(ctx, variants, listed.plain or listed, severity=Severity.medium,
                       sanity=picked_unknown)


CHECK = ActiveCheck("unknown_version", "unknown future versions (0x0305) in the ClientHello",
                    run, ToleranceDetails)
