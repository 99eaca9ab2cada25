"""Summary statistics over the reported connections: how many per version, cipher suite,
group (and where it was chosen), with the totals. Counters only, so memory stays flat."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Final, Generic, TypeVar

from tlsprobe.model.capture import BriefReport, ConnectionReport, ReportText
from tlsprobe.model.probe import Cipher, Codepoint, KeyExchange

NONE: Final = "(none)"
UNKNOWN: Final = "(unknown)"  # a ServerHello whose choice of version could not be read
_RESUMED: Final = {"session_id": "session ID", "session_ticket": "session ticket", "psk": "PSK"}
_V = TypeVar("_V")


class _Tally(Generic[_V]):
    """A value counted by identity, and its count (the value is kept: its id stays its
    own)."""

    __slots__ = ("count", "value")

    def __init__(self, value: _V) -> None:
        self.value = value
        self.count = 1


def _tally(table: dict[int, _Tally[_V]], value: _V) -> None:
    seen = table.get(id(value))
    if seen is None:
        table[id(value)] = _Tally(value)
    else:
        seen.count += 1


class Statistics:
    """Counters keyed by the reports' codepoints; names are made at the end. The values a
    report builder interns are counted by identity (no hashing of nested dataclasses per
    report); equal values that are distinct objects merge when the names are made."""

    def __init__(self) -> None:
        self.connections = 0
        self.handshakes = 0          # a ServerHello was seen
        self.client_only = 0         # a ClientHello but no ServerHello
        self.hello_retry_requests = 0
        self.resumed = 0
        # id(value) -> the value and its count (UNKNOWN: a version that could not be read)
        self._versions: dict[int, _Tally[Codepoint | str | None]] = {}
        self._suites: dict[int, _Tally[Cipher | None]] = {}
        self._groups: dict[int, _Tally[KeyExchange | None]] = {}
        self.protocols: Counter[str] = Counter()
        self._alerts: Counter[tuple[str, str]] = Counter()
        self._resumed_groups: Counter[str] = Counter()  # resumption kind -> count

    def add(self, r: ConnectionReport | BriefReport | ReportText) -> None:
        version: Codepoint | str | None
        if type(r) is BriefReport:  # (the table's and --stats' report: its fields at once)
            (_, _, protocol, _, _, _, _, offer, version, cipher, kx, hrr, _, resumption,
             alerts, _, _, _, _, _) = r
        elif isinstance(r, ReportText):  # AnalyzerOptions.json_text: nothing to count
            raise TypeError("statistics need reports, not their JSON text")
        else:
            protocol, offer, version, cipher, kx = (r.protocol, r.offer, r.version, r.cipher,
                                                    r.key_exchange)
            hrr, resumption, alerts = r.hello_retry_request, r.resumption, r.alerts
        self.connections += 1
        self.protocols[protocol] += 1
        if version is not None:
            self.handshakes += 1
        elif cipher is not None:  # a ServerHello, its version not known
            self.handshakes += 1
            version = UNKNOWN
        elif offer is not None:
            self.client_only += 1
        if hrr is not None:
            self.hello_retry_requests += 1
        if resumption is not None:
            self.resumed += 1
        _tally(self._versions, version)
        _tally(self._suites, cipher)
        if resumption is not None and (kx is None or kx.group is None) and \
                (kx is None or not kx.dh_group_name):
            # an abbreviated handshake (or TLS 1.3 psk_ke): no key exchange of its own
            self._resumed_groups[resumption] += 1
        else:
            _tally(self._groups, kx)
        for a in alerts:
            self._alerts[(a.direction, a.name)] += 1

    @property
    def versions(self) -> list[tuple[str, int]]:
        return _merge(((t.value, t.count) for t in self._versions.values()),
                      lambda v: v if isinstance(v, str) else NONE if v is None else v.label())

    @property
    def suites(self) -> list[tuple[str, int]]:
        return _merge(((t.value, t.count) for t in self._suites.values()),
                      lambda c: f"{c.iana_name} ({c.hex})" if c else NONE)

    @property
    def groups(self) -> list[tuple[str, int]]:
        def name(kx: KeyExchange | None) -> str:
            if kx is None:
                return NONE
            if kx.group is not None:
                return str(kx.group.label())
            if kx.dh_group_name:
                return f"DHE {kx.dh_group_name}"
            return f"{kx.kind} (no group)"
        rows = _merge(((t.value, t.count) for t in self._groups.values()), name)
        if self._resumed_groups:
            merged = Counter(dict(rows))
            for how, n in self._resumed_groups.items():
                merged[f"resumed ({_RESUMED.get(how, how)}), no key exchange"] += n
            rows = _none_last(merged.most_common())
        return rows

    @property
    def alerts(self) -> list[tuple[str, int]]:
        return _merge(self._alerts.items(), lambda a: f"{a[0]} {a[1]}")

    def to_dict(self) -> dict[str, object]:
        def table(rows: list[tuple[str, int]]) -> list[dict[str, str | int]]:
            return [{"name": k, "connections": v} for k, v in rows]
        return {"connections": self.connections, "handshakes": self.handshakes,
                "client_hello_only": self.client_only,
                "hello_retry_requests": self.hello_retry_requests, "resumed": self.resumed,
                "protocols": dict(self.protocols), "versions": table(self.versions),
                "cipher_suites": table(self.suites), "groups": table(self.groups),
                "alerts": table(self.alerts)}

    def tables(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """(title, rows) for the rich renderer, most frequent first."""
        out = [("Versions", self.versions), ("Cipher suites", self.suites),
               ("Groups", self.groups)]
        alerts = self.alerts
        if alerts:
            out.append(("Alerts", alerts))
        return out


def _merge(pairs: Iterable[tuple[_V, int]], name: Callable[[_V], str]
           ) -> list[tuple[str, int]]:
    """(value, count) pairs -> (name, count) rows, most frequent first, "(none)" last."""
    out: Counter[str] = Counter()
    for key, n in pairs:
        out[name(key)] += n
    return _none_last(out.most_common())


def _none_last(rows: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The "(none)" row (no version, suite or group) after every named one."""
    return sorted(rows, key=lambda row: row[0] == NONE)  # stable: counts order kept
