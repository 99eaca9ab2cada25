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
chains OpenSSL accepts.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import Encoding

from tlsprobe.engine import chaincodes
from tlsprobe.engine.certext import invalid_near, unreadable
from tlsprobe.engine.certtwin import (
    readable_certificate,
    readable_twin,
    time_format_errors,
)
from tlsprobe.engine.chainlib import second_opinion
from tlsprobe.engine.chainpath import (
    MAX_PATH,
    akid_fits,
    anchors_of,
    by_names,
    follow,
    issued,
    same_key,
    self_signed,
    store_issuer,
)
from tlsprobe.engine.chainunparsed import (
    off_path_note,
    store_may_hold_issuer,
    unparsed_on_path,
)
from tlsprobe.engine.hostname import is_address, match_host, sans
from tlsprobe.engine.nameconstraints import (
    NOT_JUDGED,
    name_constraint_problem,
    same_name,
)
from tlsprobe.engine.truststore import (
    default_cafile,
    load_trust_store,
    unparsed_certificates,
)
from tlsprobe.files import UnreadableFile

V_OK = 0
V_UNSPECIFIED = 1
V_NO_ISSUER = 2
V_SIGNATURE_FAILURE = 7
V_NOT_YET_VALID = 9
V_EXPIRED = 10
V_BAD_NOT_BEFORE, V_BAD_NOT_AFTER = 13, 14   # a time OpenSSL cannot compare
V_SELF_SIGNED = 18
V_SELF_SIGNED_IN_CHAIN = 19
V_NO_LOCAL_ISSUER = 20
V_LEAF_UNVERIFIED = 21
V_HOSTNAME_MISMATCH = 62
V_IP_MISMATCH = 64
V_CA_MD_TOO_WEAK = chaincodes.V_CA_MD_TOO_WEAK
REASONS = {V_OK: "ok", V_UNSPECIFIED: "unspecified certificate verification error",
           V_NO_ISSUER: "unable to get issuer certificate",
           V_SIGNATURE_FAILURE: "certificate signature failure",
           V_NOT_YET_VALID: "certificate is not yet valid", V_EXPIRED: "certificate has expired",
           V_BAD_NOT_BEFORE: "format error in certificate's notBefore field",
           V_BAD_NOT_AFTER: "format error in certificate's notAfter field",
           V_SELF_SIGNED: "self-signed certificate",
           V_SELF_SIGNED_IN_CHAIN: "self-signed certificate in certificate chain",
           V_NO_LOCAL_ISSUER: "unable to get local issuer certificate",
           V_LEAF_UNVERIFIED: "unable to verify the first certificate",
           V_HOSTNAME_MISMATCH: "hostname mismatch", V_IP_MISMATCH: "IP address mismatch",
           **chaincodes.REASONS}


@dataclass(frozen=True)
class ChainResult:
    """Outcome of a chain check: `code` is OpenSSL's X509_V_ERR value (0 = ok).
    `established` False: OpenSSL's verdict could not be told (`detail` says why; `code` is
    then 1 and means nothing): report it as not verified, never as untrusted."""

    code: int
    detail: str | None = None
    hostname_ok: bool | None = None
    established: bool = True

    @property
    def ok(self) -> bool:
        return self.established and self.code == V_OK

    @property
    def reason(self) -> str:
        if not self.established:
            return "verdict not established"
        return REASONS.get(self.code, "certificate verify failed")

    @property
    def message(self) -> str:
        """'0 (ok)', '20 (unable to get local issuer certificate): detail', or 'not
        established: detail'."""
        text = f"{self.code} ({self.reason})" if self.established else "not established"
        return f"{text}: {self.detail}" if self.detail else text


def _dates(certs: list[x509.Certificate], now: datetime.datetime,
           anchor: x509.Certificate | None = None) -> tuple[int, str] | None:
    """The first of `certs` outside its validity period, as a code and its reason (its
    notBefore first, as OpenSSL's check_cert_time: a validity that ends before it begins
    is 9)."""
    for cert in certs:
        subject = (cert.subject.rfc4514_string() or "(empty subject)") + \
            (" (in the trust store)" if cert is anchor else "")
        bad_before, bad_after = time_format_errors(cert)   # (a twin's: 13, 14)
        if bad_before or bad_after and cert.not_valid_before_utc <= now:
            which = "notBefore" if bad_before else "notAfter"
            return (V_BAD_NOT_BEFORE if bad_before else V_BAD_NOT_AFTER,
                    f"{subject}: its {which} is no time OpenSSL compares")
        if cert.not_valid_before_utc > now:
            return V_NOT_YET_VALID, (f"{subject} is valid from "
                                     f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
        if cert.not_valid_after_utc < now:
            return V_EXPIRED, f"{subject} expired {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
    return None


def _signatures_and_dates(path: list[x509.Certificate], broken: int,
                          now: datetime.datetime, anchor: x509.Certificate | None
                          ) -> tuple[int, str] | None:
    """From the top of the path down, as OpenSSL checks them: the signature of the
    certificate at `broken` (-1: none), which its issuer's key does not verify (7), and
    each certificate's dates (9, 10)."""
    for depth in range(len(path) - 1, -1, -1):
        if depth == broken:
            issuer = path[depth + 1].subject.rfc4514_string() or "(empty subject)"
            return V_SIGNATURE_FAILURE, (f"{_subject(path[depth])} is not signed by the key "
                                         f"of its issuer {issuer}")
        dated = _dates([path[depth]], now, anchor)
        if dated is not None:
            return dated
    return None


def _subject(cert: x509.Certificate) -> str:
    return cert.subject.rfc4514_string() or "(empty subject)"


def _same(stored: x509.Certificate, cert: x509.Certificate) -> bool:
    return stored.public_bytes(Encoding.DER) == cert.public_bytes(Encoding.DER)


def _itself(stored: x509.Certificate, cert: x509.Certificate) -> bool:
    return same_name(stored.subject, cert.subject) and same_key(stored, cert)


def trusted_path(chain: list[x509.Certificate], anchors: tuple[x509.Certificate, ...],
                  now: datetime.datetime
                  ) -> tuple[list[x509.Certificate], bool, tuple[int, str] | None]:
    """The path from the leaf (chainpath.follow) up to the first certificate the trust
    store holds or issued, that store certificate last (one within its dates when there
    are several), as OpenSSL builds it: (path, True, None); else the server's path alone,
    False, None. A store certificate that is not self-signed anchors nothing (OpenSSL
    without -partial_chain): the copy of a sent one is passed over, and an issuer from the
    store needs its own issuers from the store up to a self-signed one (code 2 when one
    is missing). A self-signed certificate is anchored only by its very copy: another
    store certificate of its name and key is a mimic OpenSSL refuses (build_chain's X509_cmp
    of a self-signed certificate and its trusted issuer)."""
    sent = [chain[i] for i in follow(chain).indexes]
    for k, cert in enumerate(sent):
        chosen = store_issuer(cert, anchors, now)
        if chosen is not None:   # OpenSSL's pick, whether or not its key signed `cert`
            if issued(cert, chosen) is False:
                return sent, False, None   # by_names states the signature that fails (7)
            path = sent[:k + 1] + [chosen]
            return path, True, _store_issuers(path, anchors)
        mimic_only = self_signed(cert)
        roots = [r for r in anchors_of(cert, anchors)
                 if (_same(r, cert) if mimic_only else self_signed(r) or not _itself(r, cert))]
        if roots:
            root = next((r for r in roots if _dates([r], now) is None), roots[0])
            path = sent[:k] + [root] if _itself(root, cert) else sent[:k + 1] + [root]
            return path, True, _store_issuers(path, anchors)
    return sent, False, None


def _store_issuers(path: list[x509.Certificate], anchors: tuple[x509.Certificate, ...]
                   ) -> tuple[int, str] | None:
    """Extend `path`, which ends at a store certificate, with that certificate's issuers
    from the store up to a self-signed one; code 2 when the store has no issuer of one."""
    while not self_signed(path[-1]):
        top = path[-1]
        above = [a for a in anchors_of(top, anchors)
                 if not _itself(a, top) and all(a is not p for p in path)]
        if not above or len(path) >= MAX_PATH:
            return V_NO_ISSUER, (f"{_subject(top)} in the trust store is not self-signed, "
                                 f"and its issuer {top.issuer.rfc4514_string() or '(empty name)'}"
                                 " is not in the trust store")
        path.append(above[0])
    return None


def _untrusted(path: list[x509.Certificate], chain: list[x509.Certificate],
               anchors: tuple[x509.Certificate, ...]) -> tuple[int, str]:
    """Why a path that reaches no certificate of the trust store is not trusted: 18, 19,
    else 20 (`s_client -verify_return_error` stops there; without it s_client goes on to
    end with 21, "unable to verify the first certificate", for a path of the leaf alone)."""
    last = path[-1]
    name = last.subject.rfc4514_string() or "(empty subject)"
    invalid = invalid_near(last, chain + list(anchors))
    if invalid is not None:
        return V_NO_LOCAL_ISSUER, invalid
    if self_signed(last):
        if len(path) == 1:
            mimic = any(_itself(a, last) for a in anchors)
            return V_SELF_SIGNED, f"{name} signed itself and is not in the trust store" + (
                " (the store holds another certificate of its name and key: OpenSSL "
                "trusts a self-signed certificate only as its very copy)" if mimic else "")
        return V_SELF_SIGNED_IN_CHAIN, (f"the server sent the root {name}, which is not in "
                                        "the trust store")
    issuer = last.issuer.rfc4514_string() or "(empty name)"
    if any(same_name(c.subject, last.issuer) and not akid_fits(last, c) for c in chain):
        return V_NO_LOCAL_ISSUER, (f"the certificate the server sent as {issuer} is not the "
                                   f"issuer of {name} its authorityKeyIdentifier names, and "
                                   "that issuer is not in the trust store")
    if len(path) == 1:
        return V_NO_LOCAL_ISSUER, (f"the server sent no issuer of {name}, and its issuer "
                                   f"{issuer} is not in the trust store")
    return V_NO_LOCAL_ISSUER, f"issuer {issuer} of {name} is not in the trust store"


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
            return ChainResult(*_untrusted(path, chain, anchors))
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
