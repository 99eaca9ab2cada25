"""The containers: which reader a capture needs (by magic), and its raw packets.

Each reader's `packets()` is the record loop of its container (pcap.py, pcapng.py,
netmon.py); stream.py's loop reads them, `read_packets` copies them out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tlsprobe.capture.events import CaptureError, CaptureStats
from tlsprobe.capture.live import LiveCapture
from tlsprobe.capture.netmon import NetmonReader, is_netmon_magic
from tlsprobe.capture.pcap import PcapReader, is_pcap_magic
from tlsprobe.capture.pcapng import SECRETS_RECORD, PcapngReader, is_pcapng_magic
from tlsprobe.capture.source import CaptureSource, OpenedSource, open_source

_OTHER_FORMATS: Final = {b"RTSS": "Microsoft Network Monitor 1.x",
                         b"XCP\x00": "NetXRay/Sniffer", b"\x00\x00\x01\xba": "MPEG",
                         b"PK\x03\x04": "zip archive"}


#: a container's reader: `packets()` is its record loop (a live capture's too)
CaptureReader = PcapReader | PcapngReader | NetmonReader | LiveCapture


def open_reader(source: CaptureSource | LiveCapture, stats: CaptureStats
                ) -> tuple[CaptureReader, OpenedSource]:
    """Open a capture and pick the reader by magic (a `LiveCapture` is its own reader).
    Raises CaptureError (one line)."""
    if isinstance(source, LiveCapture):
        return source.open(stats)   # capture.live.LiveCapture: packets as they pass
    opened = open_source(source)
    head = opened.head
    reader: CaptureReader
    if is_pcap_magic(head):
        reader = PcapReader(opened, stats)
    elif is_pcapng_magic(head):
        reader = PcapngReader(opened, stats)
    elif is_netmon_magic(head):
        try:
            reader = NetmonReader(opened, stats)
        except CaptureError:
            opened.close()
            raise
    else:
        opened.close()
        what = "empty file" if not head else _OTHER_FORMATS.get(head[:4])
        kind = f" ({what})" if what else f" (starts with {head.hex()})"
        inner = "gzip-compressed data, " if opened.gzip else ""
        raise CaptureError(f"{opened.name}: {inner}not a pcap, pcapng or Network Monitor "
                           f"capture{kind}")
    stats.file_format = reader.format_name + (" (gzip)" if opened.gzip else "")
    return reader, opened


def read_packets(source: CaptureSource,
                 stats: CaptureStats | None = None) -> Iterator[tuple[int, float, int, bytes, int]]:
    """Raw packets: (frame, ts, link_type, data, original length), data copied out."""
    stats = stats if stats is not None else CaptureStats()
    reader, opened = open_reader(source, stats)
    try:
        for frame, ts, lt, buf, start, end, orig in reader.packets():
            if lt != SECRETS_RECORD:
                yield frame, ts, lt, bytes(buf[start:end]), orig
    finally:
        opened.close()


__all__ = ["CaptureReader", "open_reader", "read_packets"]
