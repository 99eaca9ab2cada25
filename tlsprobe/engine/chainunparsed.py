"""A certificate of the server's chain that `cryptography` cannot parse but OpenSSL may read
(BER: wire/spki.py), other than the leaf: does OpenSSL's path go through it?

OpenSSL builds the path from the leaf (build_chain, trusted first): for each certificate it
looks for the issuer in the trust store first, and only when the store has none among the
certificates the server sent, taking the first one in the sent order that its issuer check
accepts (names, key identifier, key family) and that is within its dates. Once an issuer
comes from the store, the sent certificates are not looked at again. So an unparsable
certificate matters only where the sent chain was searched: for a certificate of the path
whose issuer is a sent one (or none was found), when its subject may be that issuer's name
and no parsable certificate before it in the sent order was taken instead. Names are
compared coarser than OpenSSL's canonical form (X509_NAME_cmp: ASCII case and runs of
spaces ignored; here every case, and the attributes of one RDN in any order), so a name
said to differ differs for OpenSSL too; a subject that cannot be read may be any name.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from cryptography import x509

from tlsprobe.engine.chainpath import may_issue, self_signed
from tlsprobe.engine.nameconstraints import same_name
from tlsprobe.model.pubkey import load_certificate
from tlsprobe.wire.spki import subject_name

__all__ = ["Unparsed", "off_path_note", "store_may_hold_issuer", "unparsed_on_path"]

#: how many positions the note on unparsable certificates off the path names
NAMED = 6
#: (position in the sent chain, its DER, cryptography's reason)
Unparsed = tuple[int, bytes, str]


def _coarse(name: x509.Name) -> tuple[tuple[tuple[str, str], ...], ...]:
    return tuple(tuple(sorted((a.oid.dotted_string, " ".join(str(a.value).split()).casefold())
                              for a in rdn)) for rdn in name.rdns)


def _may_be_named(der: bytes, name: x509.Name) -> bool:
    """The subject of the unparsable certificate `der` may be `name` for OpenSSL."""
    try:
        subject = x509.Name.from_bytes(subject_name(der))
    except ValueError:
        return True
    return _coarse(subject) == _coarse(name)


def _taken_before(cert: x509.Certificate, position: int, sent: Sequence[x509.Certificate],
                  positions: Sequence[int], now: datetime.datetime) -> bool:
    """A parsable certificate sent before `position` that OpenSSL takes for `cert`'s
    issuer (its issuer check accepts it, within its dates): the one at `position` is then
    not looked at."""
    return any(pos < position and c is not cert and may_issue(cert, c)
               and c.not_valid_before_utc <= now <= c.not_valid_after_utc
               for c, pos in zip(sent, positions))


def unparsed_on_path(path: Sequence[x509.Certificate], sent: Sequence[x509.Certificate],
                     positions: Sequence[int], unparsed: Sequence[Unparsed],
                     now: datetime.datetime) -> str | None:
    """Why OpenSSL may take one of the `unparsed` certificates for an issuer on `path`
    (the path built from the parsable ones, `sent` with their `positions` in the sent
    chain, leaf first), or None when none of them is looked at."""
    for i, cert in enumerate(path):
        above = path[i + 1] if i + 1 < len(path) else None
        if all(cert is not c for c in sent) or (above is not None and
                                                all(above is not c for c in sent)):
            return None   # an issuer from the trust store: the sent chain is done with
        if above is None and self_signed(cert):
            return None   # the path ends at a self-signed certificate: no issuer sought
        for position, der, reason in unparsed:
            if _may_be_named(der, cert.issuer) and \
                    not _taken_before(cert, position, sent, positions, now):
                subject = cert.subject.rfc4514_string() or "(empty subject)"
                return (f"certificate {position} of the chain cannot be parsed by "
                        f"cryptography ({reason}), and OpenSSL may take it for the issuer of "
                        f"{subject}: the chain was not checked")
    return None


def off_path_note(unparsed: Sequence[Unparsed]) -> str:
    """The note of a verdict that stands beside unparsable certificates off the path."""
    where = ", ".join(str(position) for position, _, _ in unparsed[:NAMED])
    if len(unparsed) > NAMED:   # a hostile server may send hundreds (--max-chain)
        where += f" and {len(unparsed) - NAMED} more"
    many = len(unparsed) > 1
    return (f"certificate{'s' if many else ''} {where} of the chain cannot be parsed by "
            f"cryptography, and OpenSSL's path does not go through {'them' if many else 'it'}")


def store_may_hold_issuer(ders: Sequence[bytes], stored: Sequence[bytes],
                          anchors: Sequence[x509.Certificate]) -> bool:
    """One of the trust store's certificates cryptography cannot parse (`stored`) may be
    the issuer OpenSSL finds there (X509_STORE looks it up by name) for a certificate the
    server sent (`ders`) or a store certificate that is not self-issued (`anchors`: code 2
    names the missing issuer of one): its subject may be one's issuer name, or a sent
    certificate does not parse here either."""
    issuers = [a.issuer for a in anchors if not same_name(a.issuer, a.subject)]
    for der in ders:
        try:
            issuers.append(load_certificate(der).issuer)
        except ValueError:
            return True
    return any(_may_be_named(der, name) for der in stored for name in issuers)
