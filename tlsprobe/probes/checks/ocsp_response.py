"""The stapled OCSP response checked (RFC 6960): is what the server staples a valid answer
about its own leaf?

A client that asks for stapling (Firefox, which fails the connection on a bad stapled
response; OpenSSL, GnuTLS and Java clients configured to check) verifies it as it would a
response fetched from the CA. The response comes from the certificate checks' shared
connection, which offers status_request (_cert_chain.py); no connection of its own. All of
it with `cryptography` (x509.ocsp): decoded, then
  - its responseStatus is successful;
  - its single response's CertID is the leaf's: serial number, and the issuer's name and
    key hashed with the CertID's own hash algorithm (the issuer: the sent certificate that
    signed the leaf, else a trust store certificate that did);
  - its signer is the issuer itself or a delegated responder, a certificate the response
    carries, signed by the issuer, with the OCSPSigning extended key usage (RFC 6960
    4.2.2.2); the responderID names that signer (by name or by key hash), and the signer's
    key verifies the signature over tbsResponseData;
  - thisUpdate is not in the future and nextUpdate, when present, not in the past (five
    minutes of clock skew allowed either way);
  - the certificate status: good; revoked (with the time and reason) or unknown are
    findings, when the checks above established the response as the issuer's answer
    about this leaf; otherwise the status is only what the response says, and is said so.
Verdicts: no stapled response: not applicable (the ocsp_stapling check says whether the
server staples). Any problem: vulnerable, one finding listing each problem with its reason
(revoked: critical; not for this leaf, a bad signature or responder, outside its validity
window, unreadable: high, as a client that checks refuses it; status unknown: medium; an
unsuccessful responseStatus: low, a client ignores it). None: not vulnerable. The issuer
neither sent nor in the trust store (the signature and the CertID's issuer hashes cannot be
checked), or a signature this check cannot verify (RSASSA-PSS, a key type it does not
handle), and no problem found: inconclusive, saying which (and what status the response
gives: "it says the leaf is revoked ...", never "REVOKED" as a fact). Every other chain
(another key type's) is judged too, with the response stapled on a connection that selects
it (_every_chain.py).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.x509 import ocsp
from cryptography.x509.oid import ExtendedKeyUsageOID, SignatureAlgorithmOID

from tlsprobe.engine.certtwin import readable_certificate
from tlsprobe.model.check_details import OcspCertStatus, OcspResponseDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.model.pubkey import public_key
from tlsprobe.probes.checks._cert_chain import Served, issued, leaf_in, trust_anchors
from tlsprobe.probes.checks._every_chain import every_chain
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

__all__ = ["CHECK", "judge_response"]

SKEW = datetime.timedelta(minutes=5)
Problem = tuple[Severity, str]


def _verify(signer: x509.Certificate, response: ocsp.OCSPResponse
            ) -> tuple[bool | None, str]:
    """(True, "") when `signer`'s key verifies the response's signature; (False, why) when
    it does not; (None, why) when it cannot be checked here (a key or padding this check
    does not handle: no verdict either way)."""
    if response.signature_algorithm_oid == SignatureAlgorithmOID.RSASSA_PSS:
        return None, "an RSASSA-PSS signature is not checked here"
    try:
        key = public_key(signer)
        data, sig, algo = (response.tbs_response_bytes, response.signature,
                           response.signature_hash_algorithm)
        if isinstance(key, rsa.RSAPublicKey) and algo is not None:
            key.verify(sig, data, padding.PKCS1v15(), algo)
        elif isinstance(key, ec.EllipticCurvePublicKey) and algo is not None:
            key.verify(sig, data, ec.ECDSA(algo))
        elif isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
            key.verify(sig, data)
        else:
            return None, f"a {type(key).__name__} key's signature is not checked here"
    except InvalidSignature:
        return False, "the signature does not verify"
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        return None, f"the signature cannot be checked here ({exc})"
    return True, ""


def _names_signer(response: ocsp.OCSPResponse, cert: x509.Certificate) -> bool:
    """The responderID names `cert`: by name, or by the SHA-1 of its key (RFC 6960 4.2.1)."""
    if response.responder_name is not None:
        return response.responder_name == cert.subject
    try:
        digest = x509.SubjectKeyIdentifier.from_public_key(public_key(cert)).digest
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return False
    return response.responder_key_hash == digest


def _delegated(response: ocsp.OCSPResponse, issuer: x509.Certificate
               ) -> tuple[x509.Certificate | None, list[Problem]]:
    """The delegated responder the response carries and names, and what is wrong with it."""
    named = [c for c in response.certificates if _names_signer(response, c)]
    if not named:
        return None, [(Severity.high, ("the responderID names neither the leaf's issuer nor "
                       "a responder certificate the response carries"))]
    cert = named[0]
    problems: list[Problem] = []
    who = cert.subject.rfc4514_string()
    if issued(cert, issuer) is not True:
        problems.append((Severity.high, (f"the responder certificate {who} is not signed by "
                         "the leaf's issuer")))
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        signing = ExtendedKeyUsageOID.OCSP_SIGNING in eku
    except (x509.ExtensionNotFound, x509.DuplicateExtension, ValueError, TypeError):
        signing = False
    if not signing:
        problems.append((Severity.high, (f"the responder certificate {who} lacks the "
                         "OCSPSigning extended key usage (RFC 6960 4.2.2.2)")))
    return cert, problems


def _cert_id(response: ocsp.OCSPResponse, cert: x509.Certificate,
             issuer: x509.Certificate) -> list[Problem]:
    """Whether the single response's CertID names `cert`'s issuer (its name and key hashed
    with the CertID's own hash algorithm; the serial is compared by the caller)."""
    out: list[Problem] = []
    try:
        request = ocsp.OCSPRequestBuilder().add_certificate(
            cert, issuer, response.hash_algorithm).build()
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        return out + [(Severity.high, f"its CertID hash cannot be computed ({exc})")]
    if request.issuer_name_hash != response.issuer_name_hash or \
            request.issuer_key_hash != response.issuer_key_hash:
        out.append((Severity.high, ("its CertID's issuer name or key hash is not the leaf's "
                    "issuer's")))
    return out


def _window(response: ocsp.OCSPResponse, now: datetime.datetime) -> list[Problem]:
    out: list[Problem] = []
    this, nxt = response.this_update_utc, response.next_update_utc
    if this > now + SKEW:
        out.append((Severity.high, f"thisUpdate {this:%Y-%m-%d %H:%M} UTC is in the future"))
    if nxt is not None and nxt < now - SKEW:
        out.append((Severity.high, (f"it expired: nextUpdate {nxt:%Y-%m-%d %H:%M} UTC is "
                    "past")))
    return out


def _status(response: ocsp.OCSPResponse) -> tuple[OcspCertStatus, list[Problem]]:
    """The status the response gives, and the problem it is when the response is an
    established answer about the leaf (`_claimed` words it when it is not)."""
    status = response.certificate_status
    if status == ocsp.OCSPCertStatus.REVOKED:
        when = response.revocation_time_utc
        reason = response.revocation_reason
        text = f"the leaf is REVOKED{f' since {when:%Y-%m-%d %H:%M} UTC' if when else ''}" \
            f"{f' ({reason.value})' if reason is not None else ''}"
        return OcspCertStatus.revoked, [(Severity.critical, text)]
    if status == ocsp.OCSPCertStatus.UNKNOWN:
        return OcspCertStatus.unknown, [(Severity.medium, ("the responder does not know the "
                                         "leaf (status unknown)"))]
    return OcspCertStatus.good, []


def _claimed(found: list[Problem]) -> str | None:
    """What a response that is not established (not verified, or not about this leaf) says
    of the leaf's status: a claim, never a fact."""
    if not found:
        return None
    text = found[0][1].replace("the leaf is REVOKED", "the leaf is revoked", 1)
    return f"it says {text}, not established"


def _signer(response: ocsp.OCSPResponse, issuer: x509.Certificate
            ) -> tuple[str | None, list[Problem], str | None]:
    """Who signed (None: not established), the problems, and why the signature could not
    be checked here (None: it was)."""
    if _names_signer(response, issuer):
        signer: x509.Certificate | None = issuer
        who, problems = "issuer", list[Problem]()
    else:
        signer, problems = _delegated(response, issuer)
        who = "delegated responder"
    if signer is None:
        return None, problems, None
    ok, why = _verify(signer, response)
    if ok is None:
        return None, problems, f"the {who}'s signature: {why}"
    if ok is False:
        problems.append((Severity.high, f"signature of the {who}: {why}"))
    return (who if not problems else None), problems, None


@dataclass(frozen=True)
class Judged:
    """A response judged: its facts, its problems (severity, reason), and what could not be
    checked (None: everything was)."""

    details: OcspResponseDetails
    problems: list[Problem]
    unchecked: str | None = None


def judge_response(der: bytes, cert: x509.Certificate, issuer: x509.Certificate | None,
                   now: datetime.datetime | None = None) -> Judged:
    """The response judged for the leaf `cert` issued by `issuer` (None: unknown, so
    neither the signature nor the CertID's issuer hashes can be checked)."""
    now = now or datetime.datetime.now(datetime.UTC)
    try:
        response = ocsp.load_der_ocsp_response(der)
    except ValueError as exc:
        return Judged(OcspResponseDetails(None, None, None, None, None, ("unreadable",)),
                      [(Severity.high, f"not a readable OCSP response ({str(exc)[:80]})")])
    status_name = response.response_status.name.lower()
    if response.response_status != ocsp.OCSPResponseStatus.SUCCESSFUL:
        return Judged(OcspResponseDetails(status_name, None, None, None, None, (status_name,)),
                      [(Severity.low, (f"responseStatus {status_name}: it says nothing of "
                        "the leaf"))])
    if sum(1 for _ in response.responses) != 1:
        return Judged(OcspResponseDetails(status_name, None, None, None, None, ("several",)),
                      [(Severity.medium, ("it holds several single responses (a stapled "
                        "response answers for the leaf alone)"))])
    try:
        return _judge_single(response, cert, issuer, now)
    except ValueError as exc:
        return Judged(OcspResponseDetails(status_name, None, None, None, None,
                                          ("unreadable",)),
                      [(Severity.high, f"its single response does not parse ({exc})")])


def _judge_single(response: ocsp.OCSPResponse, cert: x509.Certificate,
                  issuer: x509.Certificate | None, now: datetime.datetime) -> Judged:
    problems: list[Problem] = []
    if response.serial_number != cert.serial_number:
        problems.append((Severity.high, (f"it is about serial {response.serial_number:x}, "
                         f"not the leaf's {cert.serial_number:x}")))
    signer, unchecked = None, None
    if issuer is not None:
        problems += _cert_id(response, cert, issuer)
        signer, found, unchecked = _signer(response, issuer)
        problems += found
    else:
        unchecked = "the leaf's issuer is neither sent nor in the trust store: the " \
            "response's signature and CertID issuer hashes cannot be checked"
    cert_status, said = _status(response)
    if problems or unchecked is not None:   # not its issuer's answer about the leaf
        claim = _claimed(said)
        if claim is not None and problems:
            problems.append((Severity.high, claim))
        elif claim is not None:
            unchecked = f"{claim}: {unchecked}"
    else:
        problems += said
    problems += _window(response, now)
    nxt = response.next_update_utc
    details = OcspResponseDetails("successful", cert_status, signer,
                                  response.this_update_utc.isoformat(),
                                  nxt.isoformat() if nxt else None,
                                  tuple(p for _, p in problems))
    return Judged(details, problems, unchecked)


def _issuer(cert: x509.Certificate, chain: tuple[bytes, ...],
            anchors: tuple[x509.Certificate, ...]) -> x509.Certificate | None:
    """The certificate that signed the leaf: a sent one, else one of the trust store."""
    candidates = []
    for der in chain[1:]:
        try:
            candidates.append(readable_certificate(der))
        except ValueError:
            continue
    return next((c for c in (*candidates, *anchors) if issued(cert, c) is True), None)


async def run(ctx: CheckContext) -> CheckResult:
    return await every_chain(ctx, judge, stapling=True)


async def judge(ctx: CheckContext, got: Served) -> CheckResult:
    """The verdict on the response stapled with one chain."""
    cert = leaf_in(ctx, got)
    if isinstance(cert, CheckResult):
        return cert
    if got.response is None and got.stapled is None:
        return ctx.inconclusive(f"whether the server staples an OCSP response is not known "
                                f"(stapling: {got.stapling})")
    if got.response is None:
        return ctx.result(Verdict.not_applicable, f"no stapled OCSP response to check "
                          f"(stapling: {got.stapling})")
    anchors, _, _ = trust_anchors(ctx)
    issuer = _issuer(cert, got.chain, anchors or ())
    judged = judge_response(got.response, cert, issuer)
    details, problems = judged.details, judged.problems
    evidence = (f"stapled: {len(got.response)} bytes", *(
        f"{label}: {value}" for label, value in (
            ("status", details.cert_status), ("signed by", details.signer),
            ("thisUpdate", details.this_update), ("nextUpdate", details.next_update))
        if value is not None))
    if problems:
        worst = max((s for s, _ in problems), key=list(Severity).index)
        return ctx.result(Verdict.vulnerable, "the stapled OCSP response is not valid for "
                          "this leaf: " + "; ".join(p for _, p in problems), evidence,
                          severity=worst, details=details)
    if judged.unchecked is not None:
        lead = "" if judged.unchecked.startswith("it says") else "no problem found, but "
        return ctx.inconclusive(f"{lead}{judged.unchecked}", evidence, details)
    return ctx.result(Verdict.not_vulnerable, f"the stapled OCSP response is valid: status "
                      f"good, signed by the {details.signer}, for this leaf, within its "
                      "validity window", evidence, details=details)


CHECK = ActiveCheck("ocsp_response", "the stapled OCSP response checked (RFC 6960)", run,
                    OcspResponseDetails)
