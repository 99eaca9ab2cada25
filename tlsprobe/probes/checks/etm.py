"""Encrypt-then-MAC (RFC 7366): does the server MAC the CBC ciphertext rather than the plaintext?

TLS 1.0-1.2 CBC suites MAC the plaintext and then encrypt it with its padding, the order
behind padding-oracle attacks (POODLE TLS, Lucky Thirteen). RFC 7366 reverses it when both
sides agree. The extension only changes CBC suites, so the check sends one hello of the
highest TLS 1.0-1.2 version the server speaks offering encrypt_then_mac and CBC suites only:
  - a CBC suite chosen with encrypt_then_mac echoed: supported;
  - a CBC suite chosen without it: not supported (a finding: CBC records MAC-then-encrypt);
  - the hello refused (alert or close): the server accepts no CBC suite there, and the
    extension has nothing to change (not applicable, said so).
A server that speaks TLS 1.3 only has no CBC suites (not applicable). One connection.
"""

from __future__ import annotations

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS12
from tlsprobe.model.check_details import EchoDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._handshake import echo, legacy_versions
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

ENCRYPT_THEN_MAC = 22
#: CBC suites with ECDHE, DHE and RSA key exchange (the engine completes all of them)
CBC_SUITES = (0xC023, 0xC027, 0xC009, 0xC013, 0xC024, 0xC028, 0xC00A, 0xC014, 0x0067,
              0x006B, 0x0033, 0x0039, 0x003C, 0x003D, 0x002F, 0x0035, 0xC012, 0xC008,
              0x0016, 0x000A)


async def run(ctx: CheckContext) -> CheckResult:
    legacy = legacy_versions(ctx)
    if not legacy:
        return ctx.unless_unknown(TLS10, TLS12, "the server speaks no TLS 1.0-1.2 version: "
                                  "no CBC suites, nothing for encrypt_then_mac to change")
    sent = (f"a {registry.version_name(legacy[0])} hello offering encrypt_then_mac and "
            f"{len(CBC_SUITES)} CBC suites only")
    got = await echo(ctx, ctx.config((legacy[0],), encrypt_then_mac=True,
                                     cipher_suites_12=CBC_SUITES),
                     sent, "encrypt_then_mac", ENCRYPT_THEN_MAC,
                     refused="no CBC suite, nothing for encrypt_then_mac to change")
    if isinstance(got, CheckResult):
        return got
    sh, echoed, evidence = got
    suite = registry.suite_name(sh.cipher_suite)
    details = EchoDetails(registry.version_name(legacy[0]), echoed, suite)
    if echoed:
        return ctx.result(Verdict.supported, f"{sent} is answered with {suite} and "
                          "encrypt_then_mac (RFC 7366)", evidence, details=details)
    return ctx.result(Verdict.not_supported, f"{sent} is answered with {suite} without "
                      "encrypt_then_mac: its CBC records are MAC-then-encrypt (padding "
                      "oracles, RFC 7366)", evidence, severity=Severity.low,
                      details=details)


CHECK = ActiveCheck("etm", "encrypt-then-MAC for CBC suites (RFC 7366)", run, EchoDetails)
