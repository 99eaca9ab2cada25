"""Key usage matching the key exchange: may the leaf's key do what the server uses it for?

RFC 5280 4.2.1.3 and RFC 5246 7.4.2: with RSA key exchange the client encrypts the premaster
secret to the key (keyEncipherment); with ECDHE/DHE and in TLS 1.3 the key signs
(digitalSignature); static ECDH/DH agrees keys (keyAgreement). Clients that enforce the
extension (OpenSSL-based clients with X509 purpose checks, Go, Java, some embedded stacks)
refuse the handshake when it does not allow the use. The leaf and the suite negotiated come
from the certificate checks' shared connection (_cert_chain.py). No keyUsage extension: not
vulnerable (any use is allowed). Otherwise the negotiated suite's use is checked, and for a
use the extension leaves out that the negotiated suite did not need (keyEncipherment of an
RSA key, digitalSignature), one hello offering only suites that need it (at the highest
version up to TLS 1.2 spoken; TLS 1.3 always needs digitalSignature) says whether the server
uses the key that way too: answered, vulnerable (medium); refused, not, while the hello that
established that version is still answered right after (one connection more,
CheckContext.still_answered; else inconclusive: a rate limiter). Five connections at most
(one shared). Every other chain's leaf is judged too, with the suite of the cert phase's
connection that carried it (_every_chain.py), and its own hellos when a use is left out.
"""

from __future__ import annotations

from dataclasses import replace

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from tlsprobe import registry
from tlsprobe.engine.config import TLS10, TLS12, TLS13
from tlsprobe.model.check_details import KeyUsageDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.model.pubkey import public_key
from tlsprobe.probes.audit.outcome import STOP_HELLO
from tlsprobe.probes.checks._cert_chain import Served, extension, leaf_in
from tlsprobe.probes.checks._every_chain import every_chain
from tlsprobe.probes.checks._tolerance import top_versions
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

SIGN, ENCIPHER, AGREE = "digitalSignature", "keyEncipherment", "keyAgreement"
_FLAG = {SIGN: "digital_signature", ENCIPHER: "key_encipherment", AGREE: "key_agreement"}


def needed_use(suite: int, version: int) -> str | None:
    """The key usage a suite needs of the certificate's key (None: no certificate key)."""
    if version >= TLS13:
        return SIGN
    info = registry.cipher_suite(suite)
    if info is None:
        return None
    if info.kx in ("RSA", "RSA_PSK"):
        return ENCIPHER
    if info.kx in ("ECDH", "DH"):
        return AGREE
    if info.kx in ("ECDHE", "DHE") and info.auth in ("RSA", "ECDSA", "DSS"):
        return SIGN
    return None


def allowed_uses(leaf: x509.Certificate) -> set[str] | None | str:
    """The uses the keyUsage extension allows (None: no extension, any use; str: unreadable)."""
    ku = extension(leaf, x509.KeyUsage, "keyUsage")
    if ku is None or isinstance(ku, str):
        return ku
    return {use for use, flag in _FLAG.items() if getattr(ku, flag)}


async def _used_for(ctx: CheckContext, use: str, rsa_key: bool, version: int,
                    kind: str | None) -> bool | str:
    """Does the server answer a hello of `version` offering only suites that need `use` of a
    key of its type? (a str: no such suite, or the answer was inconclusive; `kind`: another
    chain's key type, in the connection's label)"""
    def fits(code: int) -> bool:
        info = registry.cipher_suite(code)
        if info is None or needed_use(code, version) != use:
            return False
        return info.auth == "RSA" if rsa_key else info.auth in ("ECDSA", "DSS")
    suites = tuple(c for c in registry.suites_for_version(version) if fits(c))
    if not suites:
        return "no suite of that kind"
    config, _ = ctx.version_hello(version)
    out = await ctx.hello(replace(config, cipher_suites_12=suites), STOP_HELLO,
                          label=use if kind is None else f"{use} {kind}")
    if out.answered:
        return True
    if not out.refused:
        return out.describe()
    # refused: a fact only while the server still answers (confirm.still_answered)
    unsure = await ctx.still_answered(version, label=f"{use} control")
    return False if unsure is None else f"refused ({out.describe()}), {unsure}"


async def run(ctx: CheckContext) -> CheckResult:
    return await every_chain(ctx, judge)


async def judge(ctx: CheckContext, got: Served) -> CheckResult:
    """The verdict on one chain: its leaf's keyUsage and the suite its connection got."""
    cert = leaf_in(ctx, got)
    if isinstance(cert, CheckResult):
        return cert
    allowed = allowed_uses(cert)
    if isinstance(allowed, str):
        return ctx.inconclusive(allowed)
    need = needed_use(got.cipher_suite, got.version)
    if allowed is None:
        return ctx.result(Verdict.not_vulnerable, "the leaf has no keyUsage extension: its "
                          "key may be used for any purpose (RFC 5280 4.2.1.3)",
                          details=KeyUsageDetails(None, need, ()))
    rsa_key = isinstance(public_key(cert), rsa.RSAPublicKey)
    name = registry.version_name(got.version)
    suite = registry.suite_name(got.cipher_suite)
    shown = ", ".join(u for u in _FLAG if u in allowed) or \
        "none of digitalSignature, keyEncipherment, keyAgreement"
    evidence = [f"keyUsage: {shown}",
                f"negotiated: {name} {suite} (needs {need or 'no certificate key'})"]
    problems: list[str] = []
    violations: list[str] = []
    unsure: list[str] = []
    if need is not None and need not in allowed:
        problems.append(f"{name} {suite} needs {need}, which the keyUsage leaves out")
        violations.append(need)
    older = [v for v in top_versions(ctx) if v <= TLS12]
    for use in (ENCIPHER, SIGN):
        if use in allowed or use == need or (use == ENCIPHER and not rsa_key):
            continue
        if not older:   # no TLS 1.0-1.2 to ask: nothing to test, unless one is unknown
            unknown = ctx.undetermined(TLS10, TLS12)
            if unknown is not None:
                unsure.append(f"whether the server uses the key for {use} in TLS 1.2 or "
                              f"earlier: {unknown}")
            continue
        what = f"a {registry.version_name(older[0])} hello offering only suites that need " \
            f"{use}"
        used = await _used_for(ctx, use, rsa_key, older[0], got.kind)
        if used is True:
            problems.append(f"the server answers {what}, which the keyUsage leaves out")
            violations.append(use)
            evidence.append(f"{what}: answered")
        elif used is False:
            evidence.append(f"{what}: refused")
        else:
            unsure.append(f"{what}: {used}")
    details = KeyUsageDetails(tuple(u for u in _FLAG if u in allowed), need, tuple(violations))
    if problems:
        return ctx.result(Verdict.vulnerable, "; ".join(problems), tuple(evidence),
                          severity=Severity.medium, details=details)
    if unsure:
        return ctx.inconclusive("; ".join(unsure), tuple(evidence), details)
    return ctx.result(Verdict.not_vulnerable, f"the keyUsage allows what the server uses the "
                      f"key for ({need or 'no certificate key'} for {name} {suite})",
                      tuple(evidence), details=details)


CHECK = ActiveCheck("key_usage", "key usage matching the key exchange (RFC 5280, RFC 5246)",
                    run, KeyUsageDetails)
