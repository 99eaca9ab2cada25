"""Certificate chain verification, reported like `openssl s_client`'s "Verify return code".

The server's chain is checked against a trust store (`--cafile`, or the system bundle) as
OpenSSL checks it, from facts checked here (the path and its anchor, self-signed,
chaincodes.py's extensions, keys, dates and name constraints, hostname.py's host name
matching), and by `cryptography.x509.verification` (chainlib.py). The outcome is a value,
never an exception: a probe still reports what the server negotiated when its certificate
is untrusted. Codes and reasons are OpenSSL's X509_V_ERR values, the first problem in
OpenSSL's order (`openssl s_client -verify_return_error`), never the library's error text:
a refusal of the library that none of those facts explains is a verdict not established
(`ChainResult.established` False, with the library's reason), as the library refuses
chains OpenSSL accepts. The value and the codes are chainresult.py's, the path to the
trust store chainanchor.py's.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import replace

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import Encoding

from tlsprobe.engine import chaincodes
from tlsprobe.engine.certext import unreadable
from tlsprobe.engine.certtwin import readable_certificate, readable_twin
from tlsprobe.engine.chainanchor import trusted_path, untrusted
from tlsprobe.engine.chainlib import second_opinion
from tlsprobe.engine.chainpath import by_names, issued, self_signed
from tlsprobe.engine.chainresult import (
    REASONS,
    V_HOSTNAME_MISMATCH,
    V_IP_MISMATCH,
    V_NO_LOCAL_ISSUER,
    V_OK,
    V_SIGNATURE_FAILURE,
    V_UNSPECIFIED,
    ChainResult,
    dates,
    subject,
)
from tlsprobe.engine.chainunparsed import (
    off_path_note,
    store_may_hold_issuer,
    unparsed_on_path,
)
from tlsprobe.engine.hostname import is_address, match_host, sans
from tlsprobe.engine.nameconstraints import NOT_JUDGED, name_constraint_problem
from tlsprobe.engine.truststore import (
    default_cafile,
    load_trust_store,
    unparsed_certificates,
)
from tlsprobe.files import UnreadableFile

__all__ = ["NO_SAN_NOTE", "REASONS", "ChainResult", "trusted_path", "verify_chain",
           "verify_with_store"]

def _signatures_and_dates(path: list[x509.Certificate], broken: int,
                          now: datetime.datetime, anchor: x509.Certificate | None
                          ) -> tuple[int, str] | None:
    """From the top of the path down, as OpenSSL checks them: the signature of the
    certificate at `broken` (-1: none), which its issuer's key does not verify (7), and
    each certificate's dates (9, 10)."""
    for depth in range(len(path) - 1, -1, -1):
        if depth == broken:
            issuer = path[depth + 1].subject.rfc4514_string() or "(empty subject)"
            return V_SIGNATURE_FAILURE, (f"{subject(path[depth])} is not signed by the key "
                                         f"of its issuer {issuer}")
        dated = dates([path[depth]], now, anchor)
        if dated is not None:
            return dated
    return None



def _constraints(path: list[x509.Certificate]) -> tuple[int, str] | None:
    """The name constraints' verdict (nameconstraints.py); NOT_JUDGED with the reason when
    a constraints extension's bytes cannot be read as cryptography read it."""
    try:
        return name_constraint_problem(path)
    except ValueError as exc:
        return NOT_JUDGED, f"the name constraints cannot be read as OpenSSL reads them ({exc})"


NO_SAN_NOTE = ("note: the certificate has no subjectAltName (browsers refuse it; OpenSSL "
               "matches a host name against its subject CN)")


def _join(*parts: str | None) -> str | None:
    return "; ".join(p for p in parts if p) or None


def _name_result(leaf: x509.Certificate, hostname: str | None) -> ChainResult:
    """The verdict on the leaf's names once the chain is good: 0, or 62 for `hostname` (64
    for an address, as `-verify_ip` says)."""
    no_san = NO_SAN_NOTE if sans(leaf) is None else None
    if not hostname:
        return ChainResult(V_OK, no_san)
    match = match_host(leaf, hostname)
    if not match.ok:
        return ChainResult(V_IP_MISMATCH if is_address(hostname) else V_HOSTNAME_MISMATCH, _join(
            f"certificate is not valid for {hostname}", no_san), hostname_ok=False)
    if match.by_cn:
        return ChainResult(V_OK, f"{hostname} matched by the subject CN: the certificate has "
                           "no subjectAltName DNS name (browsers refuse it)", hostname_ok=True)
    return ChainResult(V_OK, hostname_ok=True)


def verify_chain(ders: Sequence[bytes], hostname: str | None,
                 anchors: tuple[x509.Certificate, ...],
                 now: datetime.datetime | None = None, *, key_sizes: bool = True
                 ) -> ChainResult:
    """Check the server's chain (leaf first) against `anchors` and `hostname`.

    The code names the first problem as `openssl s_client -verify_return_error` would
    (chaincodes.py: OpenSSL's order); its detail states that problem's facts. A leaf
    without subjectAltName is a separate note after "; ", never the explanation of
    another code. A certificate whose key, signature or extensions cryptography cannot
    handle where no check above judged it (an unknown curve) is a verdict not established,
    never an exception, nor an untrusted one OpenSSL may not give. Without `key_sizes`,
    keys are not judged by OpenSSL's security level (66, 67): the caller applies a
    client's own minimums."""
    try:
        return _verify_chain(ders, hostname, anchors, now, key_sizes)
    except (UnsupportedAlgorithm, ValueError, TypeError, x509.DuplicateExtension) as exc:
        text = " ".join(str(exc).split())[:200]
        return ChainResult(V_UNSPECIFIED, f"cryptography cannot check a certificate of the "
                           f"chain ({text}): OpenSSL's checks of it were not made",
                           established=False)


def _verify_chain(ders: Sequence[bytes], hostname: str | None,
                  anchors: tuple[x509.Certificate, ...],
                  now: datetime.datetime | None, key_sizes: bool) -> ChainResult:
    now = now or datetime.datetime.now(datetime.UTC)
    if not ders:
        return ChainResult(V_UNSPECIFIED, "the server sent no certificate")
    chain, positions, unparsed = [], [], []
    for i, der in enumerate(ders):
        try:   # (critical flags not in DER: read through a twin)
            chain.append(readable_certificate(der, odd_times=True))
            positions.append(i)
        except ValueError as exc:   # OpenSSL may read it (BER lengths)
            text = " ".join(str(exc).split())[:160]
            if i == 0:
                return ChainResult(V_UNSPECIFIED, f"the leaf cannot be parsed by cryptography "
                                   f"({text}): the chain was not checked", established=False)
            unparsed.append((i, der, text))
    if not anchors:
        return ChainResult(V_NO_LOCAL_ISSUER, "no trust store (use --cafile)")
    result = _judge(chain, ders, hostname, anchors, now, key_sizes)
    if unparsed and result.code != chaincodes.V_EE_KEY_WEAK:   # (66: before any path)
        path, anchored, _ = trusted_path(chain, anchors, now)
        named = None if anchored else by_names(chain, anchors, now)
        why = unparsed_on_path(named[0] if named else path, chain, positions, unparsed, now)
        if why is not None:
            return ChainResult(V_UNSPECIFIED, why, established=False)
        result = replace(result, detail=_join(result.detail, off_path_note(unparsed)))
    if result.ok or sans(chain[0]) is not None or NO_SAN_NOTE in (result.detail or "") or \
            unreadable(chain[:1]) is not None:   # whether it has one cannot be told
        return result
    return replace(result, detail=_join(result.detail, NO_SAN_NOTE))


def _judge(chain: list[x509.Certificate], ders: Sequence[bytes], hostname: str | None,
           anchors: tuple[x509.Certificate, ...], now: datetime.datetime,
           key_sizes: bool) -> ChainResult:
    """The verdict on a parsed chain, OpenSSL's checks in its order (chaincodes.py)."""
    leaf, rest = chain[0], chain[1:]
    weak = chaincodes.weak_key(leaf) if key_sizes else None
    if weak is not None:
        return ChainResult(chaincodes.V_EE_KEY_WEAK, weak)
    path, anchored, missing = trusted_path(chain, anchors, now)
    if missing is not None:
        return ChainResult(*missing)
    broken = max((i for i in range(len(path) - 1) if issued(path[i], path[i + 1]) is False),
                 default=-1)   # an issuer OpenSSL takes that did not sign (7, from the top)
    if not anchored:   # OpenSSL finds no issuer, whatever the library's path building says
        named_path = by_names(chain, anchors, now)
        if named_path is None:
            return ChainResult(*untrusted(path, chain, anchors))
        path, broken = named_path   # a path by names, with a signature that fails
    view = [readable_twin(c) for c in path]   # the extensions as OpenSSL reads them
    unread = unreadable(view)
    if unread is not None:   # OpenSSL reads them (certext.py judged what it refuses)
        return ChainResult(V_UNSPECIFIED, unread, established=False)
    problem = chaincodes.extension_problem(view) or chaincodes.auth_level_problem(view, key_sizes)
    if problem is not None:
        return ChainResult(*problem)
    named = _name_result(readable_twin(leaf), hostname)
    if not named.ok:
        return named
    problem = _signatures_and_dates(path, broken, now, path[-1]) or _constraints(view)
    if problem is not None:
        return ChainResult(*problem, established=problem[0] != NOT_JUDGED)
    # a self-signed leaf that is itself in the trust store is trusted, as OpenSSL trusts
    # it (cryptography's verifier refuses an end-entity certificate as its own anchor)
    itself = len(path) == 1 and self_signed(leaf) and path[0].public_bytes(Encoding.DER) == ders[0]
    library = None if itself else second_opinion(path, rest, anchors, now)
    if library is not None:   # a refusal none of OpenSSL's checks above explains
        return ChainResult(V_UNSPECIFIED, _join(
            f"cryptography's verifier refuses the chain ({library}), for a reason none of "
            "OpenSSL's checks made here gives: OpenSSL may accept it", named.detail),
            named.hostname_ok, established=False)
    if len(path) == 1:
        return replace(named, detail=_join(
            "the self-signed certificate is itself in the trust store", named.detail))
    return named


def verify_with_store(ders: Sequence[bytes], hostname: str | None, cafile: str | None, *,
                      key_sizes: bool = True) -> tuple[str | None, ChainResult | str]:
    """`verify_chain` against `cafile`, else the system bundle: (the trust store used, the
    result), or the reason no trust store could be used in place of the result."""
    path = cafile or default_cafile()
    if path is None:
        return None, "no trust store found (use --cafile)"
    try:
        anchors = load_trust_store(path)
        unparsed = unparsed_certificates(path)
    except (OSError, ValueError, UnreadableFile) as exc:
        return path, f"cannot read trust store: {exc}"
    result = verify_chain(ders, hostname, anchors, key_sizes=key_sizes)
    if unparsed and result.established and result.code != chaincodes.V_EE_KEY_WEAK:
        # OpenSSL reads what cryptography refuses: an issuer it takes from the store
        # (trusted first, before the sent ones) may be one of those, whatever the verdict
        # on the path without them (66 alone is given before any issuer is sought)
        many = f"{len(unparsed)} certificates" if len(unparsed) > 1 else "a certificate"
        if store_may_hold_issuer(ders, unparsed, anchors):
            return path, ChainResult(V_UNSPECIFIED, f"{result.message}, but the trust store "
                                     f"holds {many} cryptography cannot parse, which OpenSSL "
                                     "may read: an issuer OpenSSL takes may be among them",
                                     established=False)
        result = replace(result, detail=_join(result.detail, (
            f"the trust store holds {many} cryptography cannot parse, none of them named as "
            "an issuer of a certificate the server sent")))
    return path, result
