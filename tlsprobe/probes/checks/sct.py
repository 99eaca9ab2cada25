"""Certificate Transparency: does the server present Signed Certificate Timestamps?

Chrome and Safari require SCTs (RFC 6962) for publicly trusted certificates; they come
embedded in the leaf (extension 1.3.6.1.4.1.11129.2.4.2), in the signed_certificate_timestamp
TLS extension (type 18, which the certificate checks' shared connection offers:
_cert_chain.py), or in a stapled OCSP response (1.3.6.1.4.1.11129.2.4.5). Any of them:
supported, with where and how many; none: not supported (a low finding: normal for a
private CA, fatal in Chrome and Safari for a public one). An empty list (in the leaf, the
TLS extension or the OCSP response) holds none. Every other chain (another key type's) is
judged too, from a connection that selects it (_every_chain.py: one per key type, shared
with the other checks that read what comes with a chain).
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import ExtensionOID

from tlsprobe.model.check_details import SctDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._cert_chain import Served, leaf_in
from tlsprobe.probes.checks._every_chain import every_chain
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


def embedded(leaf: x509.Certificate) -> tuple[str, int | None] | None:
    """('N SCTs embedded in the leaf' (or a note when present but unreadable), N), None if
    none (no extension, or an empty list)."""
    oid = ExtensionOID.PRECERT_SIGNED_CERTIFICATE_TIMESTAMPS
    try:
        value = leaf.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None
    except (x509.DuplicateExtension, ValueError, TypeError) as exc:
        return f"an SCT list embedded in the leaf that does not parse ({exc})", None
    if not isinstance(value, x509.PrecertificateSignedCertificateTimestamps):
        return "an SCT list embedded in the leaf", None     # not read as one
    count = len(value)
    if not count:   # an empty list holds no SCT: Chrome and Safari count none
        return None
    return f"{count} SCT{'' if count == 1 else 's'} embedded in the leaf", count


async def run(ctx: CheckContext) -> CheckResult:
    return await every_chain(ctx, judge, stapling=True)


async def judge(ctx: CheckContext, served: Served) -> CheckResult:
    """The verdict on one chain and what came with it."""
    cert = leaf_in(ctx, served)
    if isinstance(cert, CheckResult):
        return cert
    inside = embedded(cert)
    details = SctDetails(inside[1] if inside else None, served.sct_sources)
    where = [inside[0]] if inside else []
    where += [f"SCTs in {s}" for s in served.sct_sources]
    if where:
        return ctx.result(Verdict.supported, "; ".join(where), tuple(where), details=details)
    if served.stapled is None:   # a stapled OCSP response may carry SCTs
        return ctx.inconclusive("no SCT embedded in the leaf nor in the TLS extension; "
                                "whether a stapled OCSP response carries any is not known "
                                f"(stapling: {served.stapling})", details=details)
    return ctx.result(Verdict.not_supported, "no SCT: none embedded in the leaf, none in the "
                      "TLS extension (offered), none in a stapled OCSP response "
                      f"(stapling: {served.stapling})", severity=Severity.low,
                      details=details)


CHECK = ActiveCheck("sct", "Signed Certificate Timestamps (Certificate Transparency)", run,
                    SctDetails)
