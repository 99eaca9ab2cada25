"""One TCP connection of a capture: its endpoints, byte counts, reader and facts.

A connection is created on the capture's StreamOpen and dropped on its StreamClose, so the
table of open connections is as large as the capture layer's (bounded, least recently used
connections evicted there). `reader` is the fast reader, or the Flow reader when a trace is
wanted or keys are known; both expose `halves` (one per direction, with `counting` set once
nothing more is to be learnt from that side), `feed`, `gap`, `swapped`, `release`,
`decryptor` and `trace_lines`.
"""

from __future__ import annotations

from typing import Any

from tlsprobe.capture import ConnKey
from tlsprobe.model.capture import BriefReport, ConnectionReport, ReportText
from tlsprobe.offline.build import Endpoints, brief_of, build_report, json_text_of
from tlsprobe.offline.facts import HRR_NOT_CAPTURED, Facts


class Connection:
    __slots__ = (
        "facts",
        "first_frame",
        "first_ts",
        "gap_bytes",
        "halves",
        "key",
        "last_frame",
        "last_ts",
        "nbytes",
        "reader",
    )

    def __init__(self, key: ConnKey, ts: float, frame: int, reader: Any, facts: Facts) -> None:
        self.key = key
        self.facts = facts
        self.reader = reader
        self.halves = reader.halves
        self.first_ts = ts
        self.last_ts = ts
        self.first_frame = frame
        self.last_frame = frame
        self.nbytes = [0, 0]
        self.gap_bytes = 0

    def gap(self, direction: int, size: int, ts: float = 0.0, frame: int = 0) -> None:
        self.gap_bytes += size
        self.facts.lost(direction, size)
        half = self.halves[direction]
        if not half.counting:
            self.reader.gap(half, ts, frame, size)

    def swapped(self, key: ConnKey) -> None:
        """The capture now orients this connection the other way round."""
        self.key = key
        self.halves.reverse()
        self.nbytes.reverse()
        self.reader.swapped = False

    @property
    def is_tls(self) -> bool:
        f = self.facts
        return bool(f.client_hellos or f.server_hellos or f.alerts or
                    any(h.aligner.state in ("aligned", "resync") for h in self.halves) or
                    self._openvpn())

    def _openvpn(self) -> bool:
        """OpenVPN over TCP, established: the server's first packet answers the client's
        hard reset (offline.openvpn_channel.answers). A stream whose first bytes only look
        like a length and a reset is not taken for OpenVPN (nor for TLS)."""
        first, second = self.halves[0].aligner.tunnel, self.halves[1].aligner.tunnel
        if first is None or second is None or first.kind != "openvpn" or \
                second.kind != "openvpn" or first.first is None or second.first is None:
            return False
        from tlsprobe.offline.openvpn_channel import answers
        return answers(second.first, first.first)

    def _framing(self) -> None:
        """TLS unwrapped from OpenVPN or MS-TDS: said in the report, and why when it could
        not be read (an OpenVPN connection is listed even then, never silently absent)."""
        first, second = self.halves
        if first.aligner.tunnel is None and second.aligner.tunnel is None:
            return  # the usual case, without building a list
        tunnels = [h.aligner.tunnel for h in self.halves if h.aligner.tunnel is not None]
        why = next((t.unreadable for t in tunnels if t.unreadable is not None), None)
        if any(t.kind == "tds" for t in tunnels):
            if self.facts.client_hellos or self.facts.server_hellos:
                self.facts.framing = "tds"
                if why is not None:
                    self.facts.problem(f"MS-TDS: {why}")
            return
        if not (self.facts.client_hellos or self.facts.server_hellos or self._openvpn()):
            return  # not established as OpenVPN: nothing said of it
        self.facts.framing = "openvpn"
        if why is None and not self.facts.client_hellos and \
                all(t.hmac is None for t in tunnels):
            from tlsprobe.offline.openvpn_channel import TLS_CRYPT
            why = "no TLS record found in the control channel: " + TLS_CRYPT
        if why is not None:
            self.facts.problem(f"OpenVPN: {why}")

    def report(self, file: str, close: str | None) -> ConnectionReport:
        return build_report(self._where(file, close), self.facts)

    def json_text(self, file: str, close: str | None) -> ReportText:
        """The JSON text of this connection's report (neither the report nor its
        Endpoints built: what `_where` and `report` give, written directly)."""
        midstream, preamble = self._start()
        self._remarks()
        return json_text_of(file, self.key, self.first_frame, self.last_frame, self.first_ts,
                            self.last_ts, self.nbytes, close, midstream, preamble,
                            self.gap_bytes, self.facts)

    def brief(self) -> BriefReport:
        """What the table and the statistics show of this connection (its report's values,
        the report not built)."""
        self._remarks()
        # the key unpacked at once: each of a NamedTuple's fields is a generic attribute
        # lookup in the compiled build
        cid, client_ip, client_port, server_ip, server_port = self.key
        return brief_of(cid, "tcp", "tls", f"{client_ip}:{client_port}",
                        f"{server_ip}:{server_port}", self.first_frame, self.facts)

    def _where(self, file: str, close: str | None) -> Endpoints:
        """The connection's endpoints, after the remarks its report makes (framing, lost
        messages) are added to its facts."""
        k = self.key
        midstream, preamble = self._start()
        where = tuple.__new__(Endpoints, (  # Endpoints(...) without its Python-level __new__
            file, k.id, "tcp", "tls", k.client_ip, k.client_port, k.server_ip, k.server_port,
            self.first_frame, self.last_frame, self.first_ts, self.last_ts, self.nbytes[0],
            self.nbytes[1], close, midstream, preamble, self.gap_bytes))
        self._remarks()
        return where

    def _start(self) -> tuple[bool, bytes]:
        """How the stream started: captured mid-stream, and the plain text before the TLS
        records (its first 256 bytes), as the report gives them."""
        first, second = self.halves[0].aligner, self.halves[1].aligner
        return first.midstream or second.midstream, (first.preamble or second.preamble)[:256]

    def _remarks(self) -> None:
        """The remarks a report makes, added to the facts: framing, lost messages."""
        first, second = self.halves
        if first.aligner.tunnel is not None or second.aligner.tunnel is not None:
            self._framing()  # (checked here first: most connections have no tunnel)
        facts = self.facts
        if facts.lost_sides:
            for missing in (facts.missing_server_key_exchange(), facts.resumption_unknown(),
                            facts.missing_certificate(), facts.request_unknown()) \
                    if facts.handshake_gap[1] else (facts.resumption_unknown(),):
                if missing is not None:
                    facts.problem(missing)
            if facts.hello_retry_unseen():
                facts.problem(HRR_NOT_CAPTURED)
