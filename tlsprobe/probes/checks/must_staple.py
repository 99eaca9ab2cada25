"""OCSP must-staple without stapling: does a leaf that demands a stapled OCSP response get
one?

A certificate with the TLS Feature extension (RFC 7633, 1.3.6.1.5.5.7.1.24) listing
status_request promises that the server staples an OCSP response; Firefox refuses the
connection when it does not (MOZILLA_PKIX_ERROR_REQUIRED_TLS_FEATURE_MISSING). The leaf and
the stapling come from the certificate checks' shared connection, which offers
status_request (_cert_chain.py). No such extension: not applicable; stapled: not vulnerable;
not stapled: asked once more on a second connection (a server such as nginx fetches the
response lazily and staples from a later connection on), and only when that one is not
stapled either: vulnerable (high).
"""

from __future__ import annotations

from cryptography import x509

from tlsprobe.model.checks import CheckResult, Verdict
from tlsprobe.probes.checks._cert_chain import Served, extension, fetch, on_leaf
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext


def must_staple(leaf: x509.Certificate) -> bool | str:
    """Whether the leaf's TLS Feature extension lists status_request (a str: unreadable)."""
    features = extension(leaf, x509.TLSFeature, "TLS Feature")
    if features is None:
        return False
    if isinstance(features, str):
        return features
    return x509.TLSFeatureType.status_request in features


@on_leaf
async def run(ctx: CheckContext, got: Served, leaf: x509.Certificate) -> CheckResult:
    demanded = must_staple(leaf)
    if isinstance(demanded, str):
        return ctx.inconclusive(demanded)
    if not demanded:
        return ctx.result(Verdict.not_applicable, "the leaf does not demand stapling (no TLS "
                          "Feature extension with status_request)")
    if got.stapled:
        return ctx.result(Verdict.not_vulnerable, "the leaf demands stapling (TLS Feature "
                          "status_request) and the server staples an OCSP response",
                          (f"stapling: {got.stapling}",))
    again: Served | str = await fetch(ctx, "chain again")
    if isinstance(again, str):
        return ctx.inconclusive(f"the leaf demands stapling and the first connection got no "
                                f"stapled response ({got.stapling}); a second one: {again}")
    if again.stapled:
        return ctx.result(Verdict.not_vulnerable, "the leaf demands stapling; the first "
                          "connection got no stapled OCSP response, the second one did",
                          (f"stapling: {got.stapling}", f"again: {again.stapling}"))
    return ctx.result(Verdict.vulnerable, "the leaf demands stapling (TLS Feature "
                      "status_request) but the server staples no OCSP response, on two "
                      "connections: Firefox refuses the connection",
                      (f"stapling: {got.stapling}", f"again: {again.stapling}"),
                      code="check.must_staple", severity="high")


CHECK = ActiveCheck("must_staple", "OCSP must-staple (RFC 7633) without stapling", run)
