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


def replayed(name: str, drop: tuple[str, ...] = (), end_after: str | None = None,
             conn: int = 0) -> bytes:
    """A classic pcap of a capture's connection `conn` (its first) sent again one TLS record per TCP
    segment (its real bytes), with the records named in `drop` lost in capture gaps (their
    sequence numbers skipped, so that the peer's acknowledgements pass over them) and the
    capture ending, the connection still open, after the record `end_after`. Records are
    named "s:hs13" (the server's CertificateRequest), "c:ct20" (the client's
    ChangeCipherSpec), "s:ct23#2" (the server's second application data record): side,
    handshake type or content type, and optionally which one of that name."""
    from tests.helpers.capbuild import Conv, ether, pcap_bytes
    flow: list[tuple[int, bytearray]] = []
    for direction, data in chunks(name, conn):
        if flow and flow[-1][0] == direction:
            flow[-1][1].extend(data)
        else:
            flow.append((direction, bytearray(data)))
    conv = Conv(client=("127.0.0.1", 40000), server=("127.0.0.1", 4433))
    packets, seen = conv.handshake(), {}
    for direction, data in flow:
        i = 0
        while i < len(data):
            record = bytes(data[i:i + 5 + int.from_bytes(data[i + 3:i + 5], "big")])
            i += len(record)
            label = f"{'cs'[direction]}:" + (f"hs{record[5]}" if record[0] == 22
                                             else f"ct{record[0]}")
            seen[label] = seen.get(label, 0) + 1
            names = (label, f"{label}#{seen[label]}")
            if set(names) & set(drop):
                if direction == 0:
                    conv.cseq += len(record)
                else:
                    conv.sseq += len(record)
            else:
                packets.append(conv.c(record) if direction == 0 else conv.s(record))
            if end_after in names:
                return pcap_bytes([(1000.0 + n / 1000, ether(p)) for n, p in enumerate(packets)])
    packets += [conv.c(b"", "FA"), conv.s(b"", "FA")]
    return pcap_bytes([(1000.0 + n / 1000, ether(p)) for n, p in enumerate(packets)])
