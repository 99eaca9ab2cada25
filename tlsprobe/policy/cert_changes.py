"""The certificate changes between two scan documents of one target (policy/changes.py
`diff_reports`; docs/CHANGES.md): for each chain both scans established, matched by the
leaf's key type, a renewal, a leaf now expiring, a trust change; and a key type's chain
added or removed, stated only when both scans' searches for the server's chains were
complete and, unless both documents say their search told key types apart by signature
schemes (`other_certificates_search`, which this tlsprobe's search does,
probes/audit/certs.py), no chain of the other scan serves the same TLS 1.2 authentication
(an earlier tlsprobe, whose document may be the baseline, searched in TLS 1.2 with suites
only, which cannot tell an ECDSA certificate from an Ed25519 one, nor an RSA one from an
RSA-PSS one).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from tlsprobe.model.changes import Change, ChangeKind, Direction
from tlsprobe.model.encode import JsonObject
from tlsprobe.model.server_certs import AUTH_OF, SEARCH, key_family_of
from tlsprobe.policy.doc_read import doc_time, parse_time
from tlsprobe.policy.doc_read import items as _list
from tlsprobe.policy.doc_read import obj as _obj
from tlsprobe.policy.doc_read import text as _str

__all__ = ["EXPIRY_DAYS", "certificate_changes"]

#: a leaf expiring within this many days of the scan is `certificate_expiring`
EXPIRY_DAYS = 30

REG, IMP, NEU = Direction.regression, Direction.improvement, Direction.neutral


def _chains(doc: JsonObject) -> dict[str, tuple[JsonObject, JsonObject]]:
    """{key type: (leaf, trust)} of every chain the document holds: the default one first,
    then each other key type's (`other_certificates`)."""
    out: dict[str, tuple[JsonObject, JsonObject]] = {}
    certs = _list(doc.get("certificates"))
    if certs:
        leaf = _obj(certs[0])
        out[key_family_of(str(leaf.get("key_type") or ""))] = (leaf, _obj(doc.get("trust")))
    for item in _list(doc.get("other_certificates")):
        other, chain = _obj(item), _list(_obj(item).get("certificates"))
        if chain:
            out.setdefault(str(other.get("key_type")), (_obj(chain[0]), _obj(other.get("trust"))))
    return out


def certificate_changes(old: JsonObject, new: JsonObject, when: datetime | None
                        ) -> Iterator[Change]:
    """Each chain of a key type both scans established (a client may get any of them), the
    new default one first: renewed, expiring, trust. Two scans of one chain each compare it
    whatever its key type (the server's one certificate replaced); a chain one scan did not
    see is added or removed only as the module text says."""
    a, b = _chains(old), _chains(new)
    pairs = [(k, a[k], b[k]) for k in b if k in a]
    if not pairs and len(a) == len(b) == 1:
        pairs = [("", next(iter(a.values())), next(iter(b.values())))]
    first = next(iter(b), "")
    for kind, (leaf_a, trust_a), (leaf_b, trust_b) in pairs:
        label = "" if kind in ("", first) else f"{kind} "
        yield from _certificate(leaf_a, leaf_b, when, doc_time(old), label)
        yield from _trust(trust_a, trust_b, label)
    if pairs and pairs[0][0] and _searched(old) and _searched(new):
        yield from _presence(a, b, _by_schemes(old) and _by_schemes(new))


def _expiring(leaf: JsonObject, when: datetime | None) -> bool:
    end = parse_time(_str(leaf.get("not_after")))
    return when is not None and end is not None and end - when < timedelta(days=EXPIRY_DAYS)


def _certificate(a: JsonObject, b: JsonObject, when: datetime | None, then: datetime | None,
                 label: str) -> Iterator[Change]:
    if a.get("sha256") != b.get("sha256"):
        yield Change(ChangeKind.certificate_renewed, str(b.get("subject") or "certificate"),
                     f"{a.get('sha256')} (not after {a.get('not_after')})",
                     f"{b.get('sha256')} (not after {b.get('not_after')})", NEU, None,
                     f"the {label}leaf certificate's SHA-256 fingerprint changed")
    if _expiring(b, when) and not _expiring(a, then):
        yield Change(ChangeKind.certificate_expiring, str(b.get("subject") or "certificate"),
                     str(a.get("not_after")), str(b.get("not_after")), REG, None,
                     f"{label}certificate expires within {EXPIRY_DAYS} days of the scan"
                     if label else f"expires within {EXPIRY_DAYS} days of the scan")


def _trust(old: JsonObject, new: JsonObject, label: str) -> Iterator[Change]:
    was, now = _str(old.get("status")), _str(new.get("status"))
    if {was, now} == {"trusted", "untrusted"}:
        yield Change(ChangeKind.trust_changed, f"{label}certificate chain", str(was), str(now),
                     REG if now == "untrusted" else IMP, None, str(new.get("reason") or ""))


def _searched(doc: JsonObject) -> bool:
    """Whether the document's search for every chain the server presents was complete: a
    chain, the `other_certificates` member (a scan before the search has none) and no note
    saying the search was cut short."""
    return bool(_list(doc.get("certificates"))) and "other_certificates" in doc and \
        doc.get("other_certificates_note") is None


def _by_schemes(doc: JsonObject) -> bool:
    """The document's search told the key types of one TLS 1.2 authentication apart by
    their signature schemes (`other_certificates_search`: this tlsprobe's search)."""
    return doc.get("other_certificates_search") == SEARCH


def _presence(a: dict[str, tuple[JsonObject, JsonObject]],
              b: dict[str, tuple[JsonObject, JsonObject]], schemes: bool) -> Iterator[Change]:
    """A key type's chain in one scan only: added (in `b` only) or removed (in `a` only),
    neutral; unless both searches told key types apart by signature schemes (`schemes`),
    only when no chain of the other serves its TLS 1.2 authentication (module text)."""
    for here, there, added in ((b, a, True), (a, b, False)):
        served = {AUTH_OF.get(k) for k in there}
        for kind, (leaf, _) in here.items():
            if kind in there or kind not in AUTH_OF or (AUTH_OF[kind] in served
                                                        and not schemes):
                continue
            subject = str(leaf.get("subject") or "certificate")
            yield Change(ChangeKind.certificate_added if added else
                         ChangeKind.certificate_removed, f"{kind} certificate chain",
                         "none" if added else subject, subject if added else "none", NEU,
                         None, f"the server {'now presents' if added else 'no longer presents'}"
                         f" a {kind} certificate (both scans searched for every key type)")
