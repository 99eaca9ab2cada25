"""The diff of two scan documents of one target: `diff_reports(old, new) -> Change records`.

The documents are `scan --json` objects (dicts as `json.loads` returns them): the JSON is the
stable contract, so a baseline saved by an older tlsprobe still compares. Only what BOTH scans
established is compared: a version, group, suite or verdict that one scan did not test or
found inconclusive is no change (never a fact not established). The direction rules, the ones
a CI gate (`scan --fail-on-change`) relies on, are listed in docs/CHANGES.md:

- regression: a weak version (SSL 2.0/3.0, TLS 1.0/1.1) or a weak group, suite or signature
  scheme gained; a good version (TLS 1.2/1.3) or a post-quantum group lost; a post-quantum
  verdict yes -> no; a check whose finding got more severe (low or above); a chain (each
  key type's both scans established) trusted -> not trusted; the rating down (from a grade
  that was not provisional); a leaf expiring within EXPIRY_DAYS; the target unreachable;
- improvement: the opposite moves;
- neutral: everything else (a renewed certificate, a certificate of a key type added or
  removed, a changed order, a strong suite added).
The certificate changes are in cert_changes.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from tlsprobe.escaping import quoted_value
from tlsprobe.model.changes import UNESTABLISHED, Change, ChangeKind, Direction
from tlsprobe.model.encode import JsonObject, JsonValue
from tlsprobe.model.rating import Grade, grade_rank
from tlsprobe.model.units import host_key
from tlsprobe.policy.cert_changes import EXPIRY_DAYS, certificate_changes
from tlsprobe.policy.doc_read import doc_time
from tlsprobe.policy.doc_read import items as _list
from tlsprobe.policy.doc_read import obj as _obj
from tlsprobe.policy.doc_read import text as _str

__all__ = [
    "EXPIRY_DAYS",
    "WEAK_VERSIONS",
    "DocumentError",
    "check_document",
    "diff_reports",
    "doc_time",
    "other_record",
    "target_key",
]

REG, IMP, NEU = Direction.regression, Direction.improvement, Direction.neutral
#: deprecated by RFC 8996 (and RFC 7568, RFC 6176): gaining one is a regression
WEAK_VERSIONS = frozenset({"SSL 2.0", "SSL 3.0", "TLS 1.0", "TLS 1.1"})
#: a certificate expiring within this many days of the scan is a regression
#: groups deprecated by RFC 8422 section 5.1.1 (binary and small curves, explicit curves)
WEAK_GROUPS = frozenset(range(1, 23)) | {0xFF01, 0xFF02}
_PQ_KINDS = ("MLKEM",)
_SEVERITY = {"low": 1, "medium": 2, "high": 3, "critical": 4}   # info counts as none


class DocumentError(ValueError):
    """A file or line that is not a tlsprobe scan document (its one-line message says
    which and why)."""


def check_document(doc: object, where: str) -> JsonObject:
    """`doc` if it is a tlsprobe scan document; DocumentError with one line saying what else
    it is."""
    if not isinstance(doc, dict):
        raise DocumentError(f"{where}: not a tlsprobe scan document (a JSON "
                         f"{type(doc).__name__.replace('dict', 'object')}, not an object)")
    if doc.get("tool") != "tlsprobe" or doc.get("kind") != "audit":
        raise DocumentError(f"{where}: not a tlsprobe scan document (tool "
                         f"{quoted_value(doc.get('tool'))}, kind {quoted_value(doc.get('kind'))}; expected the "
                         "output of tlsprobe scan --json)")
    if not isinstance(doc.get("host"), str) or not isinstance(doc.get("port"), int):
        raise DocumentError(f"{where}: a scan document without host and port")
    return doc


def other_record(doc: object) -> bool:
    """Whether `doc` is a record tlsprobe writes beside its scan documents (`tool`
    "tlsprobe", another `kind`, e.g. a summary line): readers skip it."""
    return isinstance(doc, dict) and doc.get("tool") == "tlsprobe" and doc.get("kind") != "audit"


def target_key(doc: JsonObject) -> tuple[str, int]:
    """host:port of a checked scan document, the host as `host_key` makes it (a name in
    lower case, an IP address in its canonical form)."""
    port = doc.get("port")
    return host_key(str(doc.get("host"))), port if isinstance(port, int) else 0


def diff_reports(old: JsonObject, new: JsonObject, *,
                 at: datetime | None = None) -> tuple[Change, ...]:
    """The changes from scan document `old` to `new` of one target, in report order.
    `at`: when `new` was scanned if the document has no `started_at` (for "expiring
    soon"; without either no expiry change is stated)."""
    old_error, new_error = _str(old.get("error")), _str(new.get("error"))
    if old_error and new_error:
        return ()
    if new_error:
        return (Change(ChangeKind.unreachable, "target", "reachable", new_error, REG,
                       reason="the new scan could not audit the target"),)
    if old_error:
        return (Change(ChangeKind.reachable, "target", old_error, "reachable", IMP,
                       reason="the target answers again"),)
    return (*_versions(old, new), *_groups(old, new), *_suites(old, new),
            *_sigschemes(old, new), *_pq(old, new), *_checks(old, new),
            *certificate_changes(old, new, doc_time(new) or at),
            *_rating(old, new))


def _name(item: JsonValue) -> str:
    o = _obj(item)
    return str(o.get("name") or o.get("iana_name") or o.get("hex") or o.get("id"))


def _per_version(doc: JsonObject, member: str) -> dict[str, JsonObject]:
    out: dict[str, JsonObject] = {}
    for entry in _list(doc.get(member)):
        version = _str(_obj(_obj(entry).get("version")).get("name"))
        if version:
            out[version] = _obj(entry)
    return out


def _version_status(doc: JsonObject) -> dict[str, str]:
    """"supported" or "not_supported" per version the scan established: by the versions
    phase, else by a group audit's `spoken` (`--checks groups`, a survey's default, runs no
    versions phase; its group audit of TLS 1.3 and 1.2 still establishes whether each is
    spoken). A version neither established is absent."""
    status = {version: said for version, entry in _per_version(doc, "versions").items()
              if (said := _str(entry.get("status"))) in ("supported", "not_supported")}
    for version, entry in _per_version(doc, "groups").items():
        spoken = entry.get("spoken")
        if version not in status and isinstance(spoken, bool):
            status[version] = "supported" if spoken else "not_supported"
    return status


def _versions(old: JsonObject, new: JsonObject) -> Iterator[Change]:
    a, b = _version_status(old), _version_status(new)
    for version, after in b.items():
        before = a.get(version)
        if {before, after} != {"supported", "not_supported"}:
            continue        # the same, or not established on one side
        weak = version in WEAK_VERSIONS
        if after == "supported":
            yield Change(ChangeKind.version_gained, version, "not supported", "supported",
                         REG if weak else IMP, version, "a deprecated version (RFC 8996)"
                         if weak else "a current version")
        else:
            yield Change(ChangeKind.version_lost, version, "supported", "not supported",
                         IMP if weak else REG, version, "a deprecated version (RFC 8996)"
                         if weak else "clients of this version lose access")


def _group_sets(entry: JsonObject) -> tuple[list[str], set[str], dict[str, int]]:
    supported = [_name(g) for g in _list(entry.get("supported"))]
    refused = {_name(g) for g in _list(entry.get("not_supported"))}
    codes = {_name(g): int(c) for g in _list(entry.get("supported")) + _list(
        entry.get("not_supported")) if isinstance(c := _obj(g).get("id"), int)}
    return supported, refused, codes


def _group_direction(name: str, code: int | None, added: bool) -> tuple[Direction, str]:
    if any(k in name.upper() for k in _PQ_KINDS) or "KYBER" in name.upper():
        return (IMP, "a post-quantum group") if added else (REG, "a post-quantum group")
    if code in WEAK_GROUPS:
        return (REG, "a weak group (RFC 8422)") if added else (IMP, "a weak group (RFC 8422)")
    return NEU, ""


def _groups(old: JsonObject, new: JsonObject) -> Iterator[Change]:
    a, b = _per_version(old, "groups"), _per_version(new, "groups")
    for version, entry in b.items():
        before = a.get(version)
        if before is None or not (before.get("spoken") and entry.get("spoken")):
            continue
        old_list, old_no, codes = _group_sets(before)
        new_list, new_no, new_codes = _group_sets(entry)
        codes.update(new_codes)
        for name in new_list:
            if name in old_no:
                d, why = _group_direction(name, codes.get(name), True)
                yield Change(ChangeKind.group_added, name, "not supported", "supported", d,
                             version, why)
        for name in old_list:
            if name in new_no:
                d, why = _group_direction(name, codes.get(name), False)
                yield Change(ChangeKind.group_removed, name, "supported", "not supported", d,
                             version, why)
        kept_old = [g for g in old_list if g in new_list]
        kept_new = [g for g in new_list if g in old_list]
        orders = (before.get("order"), entry.get("order"))
        modes = {o for o in orders if o in ("server", "client")}
        if (kept_old != kept_new and orders == ("server", "server")) or len(modes) == 2:
            yield Change(ChangeKind.group_order_changed, "group order",
                         f"{orders[0]}: {', '.join(old_list)}",
                         f"{orders[1]}: {', '.join(new_list)}", NEU, version)


def _suite_weak(item: JsonValue, rows: dict[str, bool]) -> bool:
    name = _name(item)
    if name in rows:
        return rows[name]
    from tlsprobe.registry import cipher_suite
    code = _obj(item).get("id")
    suite = cipher_suite(code) if isinstance(code, int) else None
    return bool(suite is not None and suite.weaknesses)


def _suites(old: JsonObject, new: JsonObject) -> Iterator[Change]:
    a, b = _per_version(old, "suites"), _per_version(new, "suites")
    for version, entry in b.items():
        before = a.get(version)
        if before is None:
            continue
        rows = {_name(_obj(r).get("suite")): bool(_obj(r).get("weak"))
                for doc in (before, entry) for r in _list(doc.get("rows"))}
        old_items = {_name(s): s for s in _list(before.get("supported"))}
        new_items = {_name(s): s for s in _list(entry.get("supported"))}
        if before.get("complete") is True:      # what the old scan lacked, it refused
            for name, item in new_items.items():
                if name not in old_items:
                    weak = _suite_weak(item, rows)
                    yield Change(ChangeKind.suite_added, name, "not supported", "supported",
                                 REG if weak else NEU, version, "a weak suite" if weak else "")
        if entry.get("complete") is True:
            for name, item in old_items.items():
                if name not in new_items:
                    weak = _suite_weak(item, rows)
                    yield Change(ChangeKind.suite_removed, name, "supported", "not supported",
                                 IMP if weak else NEU, version, "a weak suite" if weak else "")


def _weak_scheme(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in ("sha1", "md5", "sha224")) or low.startswith("dsa")


def _sigschemes(old: JsonObject, new: JsonObject) -> Iterator[Change]:
    a, b = _per_version(old, "signature_schemes"), _per_version(new, "signature_schemes")
    for version, entry in b.items():
        before = a.get(version, {})
        if before.get("status") != "established" or entry.get("status") != "established":
            continue
        old_set = [_name(s) for s in _list(before.get("supported"))]
        new_set = [_name(s) for s in _list(entry.get("supported"))]
        for name in new_set:
            if name not in old_set:
                weak = _weak_scheme(name)
                yield Change(ChangeKind.sigscheme_added, name, "not supported", "supported",
                             REG if weak else NEU, version, "a weak hash" if weak else "")
        for name in old_set:
            if name not in new_set:
                weak = _weak_scheme(name)
                yield Change(ChangeKind.sigscheme_removed, name, "supported", "not supported",
                             IMP if weak else NEU, version, "a weak hash" if weak else "")


def _pq(old: JsonObject, new: JsonObject) -> Iterator[Change]:
    before = {_str(_obj(v).get("check")): _obj(v) for v in _list(old.get("post_quantum"))}
    for v in _list(new.get("post_quantum")):
        check = _str(_obj(v).get("check"))
        was, now = _str(before.get(check, {}).get("verdict")), _str(_obj(v).get("verdict"))
        if check is None or {was, now} != {"yes", "no"}:
            continue
        direction = IMP if now == "yes" else REG
        yield Change(ChangeKind.pq_changed, f"post-quantum {check}", str(was), str(now),
                     direction, None, str(_obj(v).get("subject") or ""))


def _severity(result: JsonObject) -> int:
    return _SEVERITY.get(str(result.get("severity")), 0)


def _checks(old: JsonObject, new: JsonObject) -> Iterator[Change]:
    before = {_str(_obj(c).get("name")): _obj(c) for c in _list(old.get("check_results"))}
    for c in _list(new.get("check_results")):
        result = _obj(c)
        name = _str(result.get("name"))
        prior = before.get(name)
        if name is None or prior is None:
            continue
        was, now = prior.get("verdict"), result.get("verdict")
        if was == now or not isinstance(was, str) or not isinstance(now, str):
            continue
        rise = _severity(result) - _severity(prior)
        if "inconclusive" in (was, now):
            direction, why = NEU, UNESTABLISHED
        elif rise:
            direction = REG if rise > 0 else IMP
            why = f"finding {prior.get('severity') or 'none'} -> {result.get('severity') or 'none'}"
        else:
            direction, why = NEU, "no finding either way"
        yield Change(ChangeKind.check_changed, name, was, now, direction, None, why)


def _grade(doc: JsonObject) -> Grade | None:
    text = _str(_obj(doc.get("rating")).get("grade"))
    try:
        return Grade(text) if text else None
    except ValueError:
        return None


def _provisional(doc: JsonObject) -> bool:
    """Whether the document's grade is provisional: an upper bound, since a rule that
    could lower it was not applied (a check not run or inconclusive)."""
    return _obj(doc.get("rating")).get("provisional") is True


def _rating(old: JsonObject, new: JsonObject) -> Iterator[Change]:
    """The grade moved. A provisional grade is only an upper bound, so a move down is a
    regression only when the old grade was established, a move up an improvement only when
    the new one is; otherwise it is neutral, not established on one side."""
    was, now = _grade(old), _grade(new)
    if was is None or now is None or was is now:
        return
    down = grade_rank(now) - grade_rank(was)
    label = str(_obj(new.get("rating")).get("label") or "")
    unsure = _provisional(old) if down > 0 else _provisional(new) if down < 0 else False
    if unsure:
        side = "old" if down > 0 else "new"
        label = f"{UNESTABLISHED} (the {side} grade is provisional); {label}"
    yield Change(ChangeKind.rating_changed, "rating", was.value, now.value,
                 NEU if unsure or down == 0 else REG if down > 0 else IMP, None, label)
