"""Summary statistics over the reported connections: how many per version, cipher suite,
group (and where it was chosen), with the totals. Counters only, so memory stays flat."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tlsprobe.report.offline_model import ConnectionReport

NONE = "(none)"


class Statistics:
    def __init__(self) -> None:
        self.connections = 0
        self.handshakes = 0          # a ServerHello was seen
        self.client_only = 0         # a ClientHello but no ServerHello
        self.hello_retry_requests = 0
        self.resumed = 0
        self.versions: Counter[str] = Counter()
        self.suites: Counter[str] = Counter()
        self.groups: Counter[str] = Counter()
        self.protocols: Counter[str] = Counter()
        self.alerts: Counter[str] = Counter()

    def add(self, r: ConnectionReport) -> None:
        self.connections += 1
        self.protocols[r.protocol] += 1
        if r.version is not None:
            self.handshakes += 1
        elif r.offer is not None:
            self.client_only += 1
        if r.hello_retry_request is not None:
            self.hello_retry_requests += 1
        if r.resumption is not None:
            self.resumed += 1
        self.versions[r.version.label() if r.version else NONE] += 1
        self.suites[f"{r.cipher.iana_name} ({r.cipher.hex})" if r.cipher else NONE] += 1
        kx = r.key_exchange
        if kx is None:
            group = NONE
        elif kx.group is not None:
            group = kx.group.label()
        elif kx.dh_group_name:
            group = f"DHE {kx.dh_group_name}"
        else:
            group = f"{kx.kind} (no group)"
        self.groups[group] += 1
        for a in r.alerts:
            self.alerts[f"{a.direction} {a.name}"] += 1

    def to_dict(self) -> dict[str, Any]:
        def table(c: Counter[str]) -> list[dict[str, Any]]:
            return [{"name": k, "connections": v} for k, v in c.most_common()]
        return {"connections": self.connections, "handshakes": self.handshakes,
                "client_hello_only": self.client_only,
                "hello_retry_requests": self.hello_retry_requests, "resumed": self.resumed,
                "protocols": dict(self.protocols), "versions": table(self.versions),
                "cipher_suites": table(self.suites), "groups": table(self.groups),
                "alerts": table(self.alerts)}

    def tables(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """(title, rows) for the rich renderer, most frequent first."""
        out = [("Versions", self.versions.most_common()),
               ("Cipher suites", self.suites.most_common()),
               ("Groups", self.groups.most_common())]
        if self.alerts:
            out.append(("Alerts", self.alerts.most_common()))
        return out
