"""policy/changes.py diff_reports: the direction rules a CI gate relies on, on a real scan
document (tests/golden) edited one fact at a time, and what is never a change (a fact one
scan did not establish)."""
from __future__ import annotations

import copy
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tlsprobe.model.changes import ChangeKind, Direction
from tlsprobe.policy.changes import DocumentError, check_document, diff_reports

GOLDEN = Path(__file__).parents[1] / "golden" / "data"
REG, IMP, NEU = Direction.regression, Direction.improvement, Direction.neutral


@pytest.fixture
def doc() -> dict[str, Any]:
    d: dict[str, Any] = json.loads((GOLDEN / "scan_openssl_rsa.json").read_text())["stdout"][0]
    d["port"] = 443
    return d


def only(old: dict[str, Any], new: dict[str, Any], **kw: Any) -> tuple[Any, ...]:
    return tuple((c.kind, c.what, c.direction) for c in diff_reports(old, new, **kw))


def test_the_same_document_has_no_change(doc: dict[str, Any]) -> None:
    assert diff_reports(doc, copy.deepcopy(doc)) == ()


def _version(d: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in d["versions"] if v["version"]["name"] == name)


def test_versions(doc: dict[str, Any]) -> None:
    new = copy.deepcopy(doc)
    _version(new, "TLS 1.0")["status"] = "supported"
    assert only(doc, new) == ((ChangeKind.version_gained, "TLS 1.0", REG),)
    assert only(new, doc) == ((ChangeKind.version_lost, "TLS 1.0", IMP),)
    _version(new, "TLS 1.0")["status"] = "inconclusive"    # not established: no change
    assert only(doc, new) == ()
    gone = copy.deepcopy(doc)
    _version(gone, "TLS 1.3")["status"] = "not_supported"
    assert (ChangeKind.version_lost, "TLS 1.3", REG) in only(doc, gone)


def _groups(d: dict[str, Any], version: str) -> dict[str, Any]:
    return next(g for g in d["groups"] if g["version"]["name"] == version)


def test_groups_post_quantum_and_weak(doc: dict[str, Any]) -> None:
    new = copy.deepcopy(doc)
    g13 = _groups(new, "TLS 1.3")
    pq = next(g for g in g13["not_supported"] if g["name"] == "X25519MLKEM768")
    g13["not_supported"].remove(pq)
    g13["supported"].insert(0, pq)
    assert (ChangeKind.group_added, "X25519MLKEM768", IMP) in only(doc, new)
    assert (ChangeKind.group_removed, "X25519MLKEM768", REG) in only(new, doc)
    g12 = _groups(new, "TLS 1.2")
    weak = next(g for g in g12["not_supported"] if g["name"] == "secp192r1")
    g12["not_supported"].remove(weak)
    g12["supported"].append(weak)
    assert (ChangeKind.group_added, "secp192r1", REG) in only(doc, new)


def test_group_order(doc: dict[str, Any]) -> None:
    new = copy.deepcopy(doc)
    g13 = _groups(new, "TLS 1.3")
    g13["supported"].reverse()
    assert only(doc, new) == ((ChangeKind.group_order_changed, "group order", NEU),)


def _check(d: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in d["check_results"] if c["name"] == name)


def test_check_verdicts_by_the_severity_of_their_finding(doc: dict[str, Any]) -> None:
    new = copy.deepcopy(doc)
    _check(new, "heartbleed").update(verdict="vulnerable", severity="critical")
    assert only(doc, new) == ((ChangeKind.check_changed, "heartbleed", REG),)
    assert only(new, doc) == ((ChangeKind.check_changed, "heartbleed", IMP),)
    _check(new, "heartbleed").update(verdict="inconclusive", severity="info")
    assert only(doc, new) == ((ChangeKind.check_changed, "heartbleed", NEU),)
    lost = copy.deepcopy(doc)
    _check(lost, "ems").update(verdict="not supported", severity="low")
    assert only(doc, lost) == ((ChangeKind.check_changed, "ems", REG),)


def test_rating_trust_pq_and_reachability(doc: dict[str, Any]) -> None:
    new = copy.deepcopy(doc)
    new["rating"]["grade"] = "A"
    assert only(new, doc) == ((ChangeKind.rating_changed, "rating", REG),)
    trusted = copy.deepcopy(doc)
    trusted["trust"]["status"] = "trusted"
    assert only(trusted, doc) == ((ChangeKind.trust_changed, "certificate chain", REG),)
    pq = copy.deepcopy(doc)
    pq["post_quantum"][0]["verdict"] = "yes"
    assert only(pq, doc) == ((ChangeKind.pq_changed, "post-quantum capability", REG),)
    down = dict(doc, error="connection refused", error_kind="network")
    assert only(doc, down) == ((ChangeKind.unreachable, "target", REG),)
    assert only(down, doc) == ((ChangeKind.reachable, "target", IMP),)
    assert only(down, down) == ()


def test_a_provisional_grade_moves_only_where_it_is_established(doc: dict[str, Any]) -> None:
    # a provisional grade is an upper bound (a rule that could lower it was not applied):
    # A (provisional) -> B does not establish a regression; B -> A (provisional) no
    # improvement; but A -> B (provisional) is a regression (B or lower)
    upper = copy.deepcopy(doc)
    upper["rating"].update(grade="A", provisional=True)
    lower = copy.deepcopy(doc)
    lower["rating"].update(grade="B", provisional=False)
    assert only(upper, lower) == ((ChangeKind.rating_changed, "rating", NEU),)
    assert "provisional" in diff_reports(upper, lower)[0].reason
    firm_a = dict(upper, rating=dict(upper["rating"], provisional=False))
    assert only(lower, upper) == ((ChangeKind.rating_changed, "rating", NEU),)
    assert only(lower, firm_a) == ((ChangeKind.rating_changed, "rating", IMP),)
    provisional_b = dict(lower, rating=dict(lower["rating"], provisional=True))
    assert only(firm_a, provisional_b) == ((ChangeKind.rating_changed, "rating", REG),)
    assert only(provisional_b, firm_a) == ((ChangeKind.rating_changed, "rating", IMP),)


def test_certificate_expiring_soon(doc: dict[str, Any]) -> None:
    at = datetime(2026, 12, 6, tzinfo=UTC)
    old, new = copy.deepcopy(doc), copy.deepcopy(doc)
    old["certificates"][0]["not_after"] = (at + timedelta(days=300)).isoformat()
    new["certificates"][0]["not_after"] = (at + timedelta(days=10)).isoformat()
    new["certificates"][0]["sha256"] = "00" * 32
    got = only(old, new, at=at)
    assert (ChangeKind.certificate_renewed, "CN=localhost", NEU) in got
    assert (ChangeKind.certificate_expiring, "CN=localhost", REG) in got
    assert only(old, new) == ((ChangeKind.certificate_renewed, "CN=localhost", NEU),), \
        "without a scan time no expiry is stated"


def _with_ecdsa(d: dict[str, Any], status: str, not_after: str) -> dict[str, Any]:
    leaf = dict(d["certificates"][0], key_type="EC secp256r1", sha256="ec" * 32,
                not_after=not_after)
    return dict(d, other_certificates=[{
        "key_type": "ECDSA", "version": d["versions"][0]["version"], "offer": "TLS 1.2",
        "certificates": [leaf], "trust": {"status": status, "reason": "why"}}])


def test_every_chain_both_scans_established_is_compared(doc: dict[str, Any]) -> None:
    """The other key types' chains (`other_certificates`) by key type, named; a chain one
    scan did not see is no change; one certificate replaced by one of another key type is
    still a renewal of the server's certificate."""
    at = datetime(2026, 12, 6, tzinfo=UTC)
    far, near = (at + timedelta(days=300)).isoformat(), (at + timedelta(days=10)).isoformat()
    old, new = _with_ecdsa(doc, "trusted", far), _with_ecdsa(doc, "untrusted", near)
    got = diff_reports(old, new, at=at)
    assert [(c.kind, c.what, c.direction) for c in got] == [
        (ChangeKind.certificate_expiring, "CN=localhost", REG),
        (ChangeKind.trust_changed, "ECDSA certificate chain", REG)]
    assert got[0].reason == "ECDSA certificate expires within 30 days of the scan"
    assert only(new, old) == ((ChangeKind.trust_changed, "ECDSA certificate chain", IMP),)
    assert "other_certificates" in doc and doc.get("other_certificates_note") is None
    assert only(doc, new) == ((ChangeKind.certificate_added, "ECDSA certificate chain", NEU),)
    assert only(new, doc) == ((ChangeKind.certificate_removed, "ECDSA certificate chain", NEU),)
    assert doc["trust"]["status"] == "untrusted"
    ecdsa_only = dict(old, certificates=old["other_certificates"][0]["certificates"],
                      trust=old["other_certificates"][0]["trust"], other_certificates=[])
    assert only(doc, ecdsa_only) == ((ChangeKind.certificate_renewed, "CN=localhost", NEU),
                                     (ChangeKind.trust_changed, "certificate chain", IMP))


def test_a_chain_one_scan_saw_is_added_or_removed_only_when_both_searched(
        doc: dict[str, Any]) -> None:
    """Added or removed needs both searches complete (a baseline from before the search has
    no `other_certificates`; a search cut short has its note) and, unless both documents say
    their search told key types apart by signature schemes, no chain of the other scan that
    serves the same TLS 1.2 authentication (an ECDSA and an Ed25519 certificate both answer
    ECDHE_ECDSA suites: an earlier tlsprobe's search in TLS 1.2 found one of them)."""
    far = (datetime(2026, 12, 6, tzinfo=UTC) + timedelta(days=300)).isoformat()
    new = _with_ecdsa(doc, "trusted", far)
    added = ((ChangeKind.certificate_added, "ECDSA certificate chain", NEU),)
    assert only(doc, new) == added
    (change,) = diff_reports(doc, new)
    assert (change.old, change.new) == ("none", "CN=localhost")
    assert change.reason == ("the server now presents a ECDSA certificate (both scans "
                             "searched for every key type)")
    before = {k: v for k, v in doc.items() if k not in ("other_certificates",
                                                        "other_certificates_note")}
    assert only(before, new) == () and only(new, before) == ()
    cut = dict(doc, other_certificates_note="TLS 1.2 hello with ECDHE_ECDSA suites only: reset")
    assert only(cut, new) == () and only(new, cut) == ()
    ed = copy.deepcopy(new)
    ed["other_certificates"][0]["key_type"] = "Ed25519"
    ed["other_certificates"][0]["certificates"][0]["key_type"] = "Ed25519"
    assert only(doc, ed) == ((ChangeKind.certificate_added, "Ed25519 certificate chain", NEU),)
    # an earlier tlsprobe's documents (no other_certificates_search): its TLS 1.2 search
    # offered suites only, and could not tell an ECDSA certificate from an Ed25519 one
    old_new, old_ed = ({k: v for k, v in d.items() if k != "other_certificates_search"}
                       for d in (new, ed))
    assert only(old_new, old_ed) == () and only(old_ed, old_new) == ()
    # this tlsprobe's (its search tells them apart by signature schemes, and says so): an
    # ECDSA chain replaced by an Ed25519 one, and an Ed25519 chain beside the ECDSA one
    assert doc["other_certificates_search"] == "signature schemes"
    assert set(only(new, ed)) == {
        (ChangeKind.certificate_added, "Ed25519 certificate chain", NEU),
        (ChangeKind.certificate_removed, "ECDSA certificate chain", NEU)}
    both = copy.deepcopy(ed)
    both["other_certificates"].insert(0, new["other_certificates"][0])
    assert only(new, both) == ((ChangeKind.certificate_added, "Ed25519 certificate chain", NEU),)
    assert only(both, new) == ((ChangeKind.certificate_removed, "Ed25519 certificate chain",
                                NEU),)
    assert only(old_new, both) == () and only(both, old_new) == ()


@pytest.mark.parametrize("value", [[], "text", {"tool": "sslyze"}, {"tool": "tlsprobe",
                                   "kind": "probe", "host": "a", "port": 1},
                                   {"tool": "tlsprobe", "kind": "audit"}])
def test_what_is_no_scan_document(value: object) -> None:
    with pytest.raises(DocumentError, match="^here: "):
        check_document(value, "here")


_ODD: list[Any] = [None, 1, -1, 1.5, "x", [], {}, [1], [None], {"a": 1}, True, "supported",
                   "yes", [{"name": 1}], {"name": None}]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in items:
        out += _paths(child, (*path, key))
    return out


def _mutated(doc: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    """`doc` with a few members anywhere replaced by values of other JSON types."""
    doc = copy.deepcopy(doc)
    paths = _paths(doc)[1:]
    for _ in range(rnd.randint(1, 8)):
        path = rnd.choice(paths)
        try:
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = rnd.choice(_ODD)
        except (KeyError, IndexError, TypeError):
            pass        # an earlier replacement removed this path
    return doc


def test_odd_member_types_never_raise(doc: dict[str, Any]) -> None:
    """A baseline file is user input: a scan document whose members have other JSON types
    gives changes or none, never an exception (the command would exit 70)."""
    other = json.loads((GOLDEN / "scan_openssl_ecdsa_tls12.json").read_text())["stdout"][0]
    rnd = random.Random(33)
    for _ in range(400):
        a = _mutated(rnd.choice([doc, other]), rnd)
        b = _mutated(rnd.choice([doc, other]), rnd)
        for change in diff_reports(a, b) + diff_reports(b, a):
            assert isinstance(change.what, str)
