"""Chain order and completeness: does the server send the certificates a client needs to
build a path from its leaf to a trusted root, in order, and nothing else?

A client builds the path from what the server sends and its own trust store; most clients
(OpenSSL, GnuTLS, Java, Go, Python, Android, curl) never fetch a missing intermediate
(only some browsers do, through the AIA CA-issuers URI or a cache), so a chain that does
not reach the trust store fails for them even where a browser succeeds. RFC 5246 7.4.2
(TLS 1.2) requires each certificate to certify the one before it; RFC 8446 4.4.2 (TLS 1.3)
lets clients accept any order but keeps the leaf first. The chain comes from the
certificate checks' shared connection (_cert_chain.py); the trust store is the scan's
--cafile, else the system bundle (as the cert phase's trust verdict). No connection of
its own. Every other chain (another key type's) is judged too, as the cert phase's
connection got it (_every_chain.py).

The path: from the leaf, each next certificate is the sent one OpenSSL takes for the current
one's issuer (engine/chainpath.follow: names, key identifier, key family, the first within
its dates; one whose key did not sign is noted, the trust verdict's 7), until a
self-signed certificate or none. The path is complete when it reaches the trust store as
the trust verdict's does (engine/chainanchor.trusted_path: OpenSSL without -partial_chain anchors
only at a self-signed store certificate, through the store's own issuers of a store
certificate that is not), or when it ends at a self-signed root the server sends (whether
that root is trusted is the trust verdict's question). Verdicts:
  - the path reaches a store certificate that is not self-signed and whose issuer the
    store lacks: vulnerable, medium, naming that issuer (the trust verdict's code 2);
  - an issuer missing (the path ends at a certificate whose issuer is neither sent nor in
    the trust store): vulnerable, medium, naming the missing issuer;
  - the path's certificates sent out of order: vulnerable, low;
  - sent certificates off the path (extra): vulnerable, low, naming them;
  - none of these, the self-signed root sent: not vulnerable, info (a wasted few hundred
    bytes; a client ignores it);
  - none: not vulnerable;
  - a self-signed leaf: not applicable (no issuer to send);
  - no trust store to judge against and the path ends at a certificate whose issuer was not
    sent: inconclusive; a certificate that does not parse: inconclusive; an issuer missing
    that may be a store certificate cryptography cannot parse (OpenSSL may read it): not
    said incomplete (inconclusive, unless another problem stands).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, replace

from cryptography import x509

from tlsprobe.engine.certtwin import readable_certificate
from tlsprobe.engine.chainanchor import trusted_path
from tlsprobe.engine.chainpath import (
    MAX_PATH,
    anchored,
    follow,
    self_signed,
    store_issuer,
)
from tlsprobe.engine.chainunparsed import store_may_hold_issuer
from tlsprobe.engine.truststore import unparsed_certificates
from tlsprobe.model.check_details import ChainDetails
from tlsprobe.model.checks import CheckResult, Severity, Verdict
from tlsprobe.probes.checks._cert_chain import Served, trust_anchors
from tlsprobe.probes.checks._every_chain import every_chain
from tlsprobe.probes.checks.base import ActiveCheck, CheckContext

__all__ = ["CHECK", "MAX_PATH", "ChainFacts", "chain_facts"]


def _name(name: x509.Name) -> str:
    try:
        return name.rfc4514_string() or "(empty name)"
    except ValueError:
        return "(undecodable name)"


@dataclass(frozen=True)
class ChainFacts:
    """What `chain_facts` found (ChainDetails without the trust store), and the notes on
    signatures that could not be checked."""

    subjects: tuple[str, ...]
    path: tuple[int, ...]
    complete: bool | None
    missing_issuer: str | None
    extra: tuple[int, ...]
    ordered: bool
    anchor_sent: str | None
    self_signed_leaf: bool
    notes: tuple[str, ...] = ()
    #: the trust store's certificate the path reaches, when it is not self-signed and the
    #: store holds no issuer of it (`missing_issuer`): OpenSSL anchors at none (code 2)
    store_top: str | None = None


def chain_facts(chain: list[x509.Certificate],
                anchors: tuple[x509.Certificate, ...] | None) -> ChainFacts:
    """The path through `chain` (leaf first) and what it says; `anchors` None: no trust
    store (completeness then rests on a root the server sends)."""
    subjects = tuple(_name(c.subject) for c in chain)
    walk = follow(chain)
    path, cut = list(walk.indexes), walk.cut
    notes = [f"the signature of certificate {i} by certificate {j} could not be checked "
             "here (its algorithm is refused): the names match" for i, j in walk.unchecked]
    notes += [f"certificate {i} is not signed by certificate {j}, which OpenSSL takes for its "
              "issuer (the trust verdict says 7)" for i, j in walk.unsigned]
    last = chain[path[-1]]
    root = self_signed(last) and len(path) > 1
    if cut:
        notes.append(f"the path was followed for {MAX_PATH} certificates only")
    reached, in_store, lacks_issuer = _store_reach(chain, anchors)
    unsigned = _store_pick_unsigned([chain[i] for i in path], anchors) if not in_store else None
    if unsigned is not None:   # the store holds the issuer by name: no issuer is missing
        in_store = True
        notes.append(unsigned)
    if in_store:
        complete: bool | None = not lacks_issuer
    elif self_signed(last):
        complete = True
    else:
        complete = False if anchors is not None and not cut else None
    missing = _name(reached[-1].issuer if lacks_issuer else last.issuer) if complete is False \
        else None
    return ChainFacts(subjects, tuple(path), complete, missing,
                      tuple(i for i in range(len(chain)) if i not in path),
                      list(path) == sorted(path), subjects[path[-1]] if root else None,
                      len(path) == 1 and self_signed(last), tuple(notes),
                      _name(reached[-1].subject) if lacks_issuer else None)


def _store_reach(chain: list[x509.Certificate], anchors: tuple[x509.Certificate, ...] | None
                 ) -> tuple[list[x509.Certificate], bool, bool]:
    """The trust verdict's path (engine/chainanchor.trusted_path: OpenSSL anchors only at a
    self-signed certificate of the store, a store copy of a sent one that is not
    self-signed is passed over), whether it reaches the trust store, and whether it stops
    there at a certificate that is not self-signed and whose issuer the store lacks."""
    if anchors is None:
        return [], False, False
    path, in_store, missing = trusted_path(chain, anchors, datetime.datetime.now(datetime.UTC))
    return path, in_store, missing is not None


def _store_pick_unsigned(path: list[x509.Certificate],
                         anchors: tuple[x509.Certificate, ...] | None) -> str | None:
    """When the store holds the certificate OpenSSL takes for the issuer of one of the
    path's (chainpath.store_issuer), whose key did not sign it (the trust verdict's 7): a
    note saying so; else None."""
    now = datetime.datetime.now(datetime.UTC)
    for cert in path if anchors is not None else ():
        pick = store_issuer(cert, anchors or (), now)
        if pick is not None:
            return (f"the trust store's {_name(pick.subject)}, which OpenSSL takes for the "
                    f"issuer of {_name(cert.subject)}, did not sign it (the trust verdict "
                    "says 7)")
    return None


def _problems(f: ChainFacts, store: str) -> list[tuple[Severity, str]]:
    out: list[tuple[Severity, str]] = []
    if f.store_top is not None:
        out.append((Severity.medium, (
            f"incomplete: the path reaches {f.store_top} in the trust store {store}, which "
            f"is not self-signed, and its issuer {f.missing_issuer} is not in the trust "
            "store: OpenSSL (without -partial_chain) anchors only at a self-signed "
            "certificate")))
    elif f.missing_issuer is not None:
        out.append((Severity.medium, (
            f"incomplete: the chain ends at {f.subjects[f.path[-1]]}, whose issuer "
            f"{f.missing_issuer} is neither sent nor in the trust store {store}: clients "
            "that do not fetch intermediates (OpenSSL, Java, Go, Python, Android) fail")))
    if not f.ordered:
        order = ", ".join(str(i) for i in f.path)
        out.append((Severity.low, (f"out of order: the path from the leaf is certificates "
                                   f"{order} as sent (RFC 5246 7.4.2: each certificate "
                                   "certifies the one before it)")))
    if f.extra:
        names = "; ".join(f"{i} {f.subjects[i]}" for i in f.extra)
        out.append((Severity.low, f"extra certificates not on the path: {names}"))
    return out


def _root_sent(name: str, root: x509.Certificate, anchors: tuple[x509.Certificate, ...] | None,
               why: str) -> str:
    """The reason for a complete chain that ends at a root the server sends: clients have
    their own copy only when the trust store holds it."""
    if anchors is not None and anchored(root, anchors):
        return (f"complete and in order; the server also sends the root {name} (clients use "
                "their own copy: informational)")
    held = "it is not in the trust store" if anchors is not None else \
        f"whether clients hold it cannot be told: {why}"
    return (f"complete and in order up to the root the server sends, {name} ({held}: "
            "whether it is trusted is the trust verdict's question)")


async def run(ctx: CheckContext) -> CheckResult:
    return await every_chain(ctx, judge)


async def judge(ctx: CheckContext, got: Served) -> CheckResult:
    """The verdict on one chain as the server sent it."""
    try:
        chain = [readable_certificate(der) for der in got.chain]
    except ValueError as exc:
        return ctx.inconclusive(f"a certificate of the chain does not parse: {exc}")
    anchors, store, why = trust_anchors(ctx)
    f = chain_facts(chain, anchors)
    unsure = _store_may_complete(got.chain, f, anchors, store)
    if unsure is not None:   # the missing issuer may be a store certificate OpenSSL reads
        f = replace(f, missing_issuer=None, store_top=None, complete=None,
                    notes=(*f.notes, unsure))
    details = ChainDetails(f.subjects, f.path, f.complete, f.missing_issuer, f.extra,
                           f.ordered, f.anchor_sent, store)
    evidence = tuple(f"sent {i}: {s}" for i, s in enumerate(f.subjects)) + \
        (f"path: {', '.join(str(i) for i in f.path)}",) + f.notes
    if f.self_signed_leaf and len(chain) == 1:
        return ctx.result(Verdict.not_applicable, "the leaf is self-signed: it has no issuer "
                          "to send", evidence, details=details)
    problems = _problems(f, store or "")
    if problems:
        worst = max((s for s, _ in problems), key=list(Severity).index)
        return ctx.result(Verdict.vulnerable, "; ".join(p for _, p in problems), evidence,
                          severity=worst, details=details)
    if unsure is not None:
        return ctx.inconclusive(unsure, evidence, details)
    if f.complete is None:
        return ctx.inconclusive(f"the chain ends at {f.subjects[f.path[-1]]}, issued by "
                                f"{_name(chain[f.path[-1]].issuer)}, which was not sent; "
                                f"{why or f'the path was followed for {MAX_PATH} only'}: "
                                "whether it reaches a root cannot be told", evidence,
                                details)
    if f.anchor_sent is not None:
        return ctx.result(Verdict.not_vulnerable, _root_sent(f.anchor_sent, chain[f.path[-1]],
                                                             anchors, why),
                          evidence, severity=Severity.info, details=details)
    return ctx.result(Verdict.not_vulnerable, f"complete and in order: {len(f.path)} "
                      f"certificate{'' if len(f.path) == 1 else 's'} from the leaf to the "
                      f"trust store {store}", evidence, details=details)


def _store_may_complete(ders: Sequence[bytes], f: ChainFacts,
                        anchors: tuple[x509.Certificate, ...] | None,
                        store: str | None) -> str | None:
    """Why an issuer said missing may be in the trust store after all: a certificate there
    that cryptography cannot parse but OpenSSL may read, whose subject may be the issuer
    sought (engine/chainunparsed.store_may_hold_issuer); None when none may be."""
    if f.missing_issuer is None or anchors is None or store is None:
        return None
    try:
        unparsed = unparsed_certificates(store)
    except (OSError, ValueError):
        return None
    if not unparsed or not store_may_hold_issuer(ders, unparsed, anchors):
        return None
    many = f"{len(unparsed)} certificates" if len(unparsed) > 1 else "a certificate"
    return (f"the issuer {f.missing_issuer} was found neither sent nor in the trust store "
            f"{store}, but the store holds {many} cryptography cannot parse, which OpenSSL "
            "may read: whether the chain is complete cannot be told")


CHECK = ActiveCheck("chain", "certificate chain order and completeness", run, ChainDetails)
