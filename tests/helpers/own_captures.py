"""Real bytes for the offline tests: the handshake messages and stream chunks of the
project's own captures (captures/, recorded on loopback)."""

from __future__ import annotations

from pathlib import Path

from tlsprobe.capture import StreamData, iter_stream_events
from tlsprobe.session.flow import Flow, MessageEvent

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def chunks(name: str, conn: int = 0) -> list[tuple[int, bytes]]:
    """(direction, bytes) of every TCP payload of a capture's connection `conn` (its first
    by default), in order."""
    out = []
    for ev in iter_stream_events(str(CAPTURES / name)):
        if isinstance(ev, StreamData) and ev.conn.id == conn:
            out.append((ev.direction, ev.data))
    return out


def messages(name: str) -> list[tuple[int, bytes, object]]:
    """(direction, raw handshake message, decoded) of a capture's first connection."""
    flow = Flow(annotate=False)
    out = []
    for direction, data in chunks(name):
        for ev in flow.feed(direction, data):
            if isinstance(ev, MessageEvent) and not ev.protected:
                out.append((direction, ev.raw, ev.decoded))
    return out


def all_hellos() -> list[tuple[bytes, object]]:
    """Every ClientHello and ServerHello of the project's captures (raw, decoded)."""
    out = []
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        for _, raw, decoded in messages(pcap.name):
            if raw[0] in (1, 2):
                out.append((raw, decoded))
    return out
