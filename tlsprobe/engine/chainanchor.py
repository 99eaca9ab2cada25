"""The path OpenSSL builds from the server's leaf to the trust store (without
-partial_chain: a self-signed anchor, its very copy for a self-signed certificate), and
why a path that reaches none is not trusted (18, 19, 20), as engine/chain.py's verdict
and the scan's chain check (probes/checks/chain.py) both read it.
"""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tlsprobe.engine.certext import invalid_near
from tlsprobe.engine.chainpath import (
    MAX_PATH,
    akid_fits,
    anchors_of,
    follow,
    issued,
    same_key,
    self_signed,
    store_issuer,
)
from tlsprobe.engine.chainresult import (
    V_NO_ISSUER,
    V_NO_LOCAL_ISSUER,
    V_SELF_SIGNED,
    V_SELF_SIGNED_IN_CHAIN,
    dates,
    subject,
)
from tlsprobe.engine.nameconstraints import same_name

__all__ = ["trusted_path", "untrusted"]


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
            root = next((r for r in roots if dates([r], now) is None), roots[0])
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
            return V_NO_ISSUER, (f"{subject(top)} in the trust store is not self-signed, "
                                 f"and its issuer {top.issuer.rfc4514_string() or '(empty name)'}"
                                 " is not in the trust store")
        path.append(above[0])
    return None


def untrusted(path: list[x509.Certificate], chain: list[x509.Certificate],
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
