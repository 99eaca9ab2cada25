"""OCSP must-staple without stapling: does a leaf that demands a stapled OCSP response get
one?

A certificate with the TLS Feature extension (RFC 7633, 1.3.6.1.5.5.7.1.24) listing
status_request promises that the server staples an OCSP response; Firefox refuses the
connection when it does not (MOZILLA_PKIX_ERROR_REQUIRED_TLS_FEATURE_MISSING). The leaf and
the stapling come from the certificate checks' shared connection, which offers
status_request (_cert_chain.py). No such extension: not applicable; stapled: not vulnerable;
not stapled: asked once more on a second connection (a server such as nginx fetches the
response lazily and staples from a later connection on), and only when that one is not
stapled either: vulnerable (high). Every other chain (another key type's) is judged too,
from connections that select it (_every_chain.py).
"""

from __future__ import annotations

from cryptography import x509

from tlsprobe.model.check_details import MustStapleDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._cert_chain import Served, again, extension, leaf_in
from tlsprobe.probes.checks._every_chain import every_chain
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


def must_staple(leaf: x509.Certificate) -> bool | str:
    """Whether the leaf's TLS Feature extension lists status_request (a str: unreadable)."""
    features = extension(leaf, x509.TLSFeature, "TLS Feature")
    if features is None:
        return False
    if isinstance(features, str):
        return features
    return x509.TLSFeatureType.status_request in features


async def run(ctx: CheckContext) -> CheckResult:
    return await every_chain(ctx, judge, stapling=True)


async def judge(ctx: CheckContext, got: Served) -> CheckResult:
    """The verdict on one chain's leaf and the stapling of its connections."""
    cert = leaf_in(ctx, got)
    if isinstance(cert, CheckResult):
        return cert
    demanded = must_staple(cert)
    if isinstance(demanded, str):
        return ctx.inconclusive(demanded)
    if not demanded:
        return ctx.result(Verdict.not_applicable, "the leaf does not demand stapling (no TLS "
                          "Feature extension with status_request)",
                          details=MustStapleDetails(False, (got.stapled,)))
    if got.stapled:
        return ctx.result(Verdict.not_vulnerable, "the leaf demands stapling (TLS Feature "
                          "status_request) and the server staples an OCSP response",
                          (f"stapling: {got.stapling}",),
                          details=MustStapleDetails(True, (True,)))
    second: Served | str = await again(ctx, got, "chain again")
    if isinstance(second, str):
        return ctx.inconclusive(f"the leaf demands stapling and the first connection got no "
                                f"stapled response ({got.stapling}); a second one: {second}")
    details = MustStapleDetails(True, (False, second.stapled))
    if second.stapled:
        return ctx.result(Verdict.not_vulnerable, "the leaf demands stapling; the first "
                          "connection got no stapled OCSP response, the second one did",
                          (f"stapling: {got.stapling}", f"again: {second.stapling}"),
                          details=details)
    if got.stapled is None or second.stapled is None:
        return ctx.inconclusive("the leaf demands stapling and no connection got a stapled "
                                "OCSP response, but whether the server staples is not known: "
                                "a handshake ended before the place of its CertificateStatus",
                                (f"stapling: {got.stapling}", f"again: {second.stapling}"),
                                details=details)
    return ctx.result(Verdict.vulnerable, "the leaf demands stapling (TLS Feature "
                      "status_request) but the server staples no OCSP response, on two "
                      "connections: Firefox refuses the connection",
                      (f"stapling: {got.stapling}", f"again: {second.stapling}"),
                      severity=Severity.high, details=details)


CHECK = ActiveCheck("must_staple", "OCSP must-staple (RFC 7633) without stapling", run,
                    MustStapleDetails)
