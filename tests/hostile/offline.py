"""The offline report the tests build from a capture, the way `tlsprobe pcap` will: capture
layer -> per-connection Flow -> counts of packets, connections and TLS messages, with every
capture warning and TLS decode error as a warning line. Only CaptureError may refuse a file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tlsprobe.capture import CaptureError, StreamClose, StreamData, iter_stream_events
from tlsprobe.session.flow import ErrorEvent, Flow, MessageEvent


@dataclass
class Report:
    packets: int = 0
    connections: int = 0
    tls_messages: int = 0
    warnings: list[str] = field(default_factory=list)
    tls_errors: list[str] = field(default_factory=list)   # reasons of TLS decode errors
    error: str | None = None


def analyse(path: Path) -> Report:
    report = Report()
    try:
        stream = iter_stream_events(path)
    except CaptureError as exc:
        report.error = str(exc)
        return report
    flows: dict[object, Flow] = {}

    def feed(flow: Flow, direction: int, data: bytes) -> None:
        for ev in flow.feed(direction, data):
            if isinstance(ev, MessageEvent):
                report.tls_messages += 1
            elif isinstance(ev, ErrorEvent):
                report.warnings.append(f"TLS: {ev.where}: {ev.error}")
                report.tls_errors.append(ev.error.reason)

    for event in stream:
        if isinstance(event, StreamData):
            feed(flows.setdefault(event.conn, Flow(annotate=False)), event.direction,
                 event.data)
        elif isinstance(event, StreamClose) and event.conn in flows:
            flow = flows.pop(event.conn)
            for direction in (0, 1):  # errors held back for a next read come out now
                feed(flow, direction, b"")
    for flow in flows.values():
        for direction in (0, 1):
            feed(flow, direction, b"")
    report.packets = stream.stats.packets
    report.connections = stream.stats.tcp_connections
    report.warnings += [f"offset {w.offset}: {w.message}" for w in stream.stats.warnings]
    return report
