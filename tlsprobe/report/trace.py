"""The `--msg` trace: every record in both directions, as `openssl s_client -msg` prints it.

    >>> TLS 1.0, RecordHeader [length 0005]
        16 03 01 01 24
    >>> TLS 1.3, Handshake [length 0124], ClientHello
        01 00 01 20 03 03 cb 79 ...
          named_curve x25519 (0x001d) at +6 (bytes +5..+6)

Under each handshake message come its decoded fields. Offsets count from the first byte of
the message as dumped (the 4-byte handshake header included). A field is located where its
value can be read in the dump: a one-byte field at its byte, a multi-byte integer at its last
(least significant) byte with its full span in brackets, opaque data by its span. So the
ServerKeyExchange named curve reads "at +6" and the ClientKeyExchange key length "at +4",
as the documents behind tlsprobe count them. Plain text only: the live probe and the pcap
reader print exactly the same lines, with what a peer wrote escaped (report/escape.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tlsprobe import registry
from tlsprobe.model.describe import message_name
from tlsprobe.registry import ContentType
from tlsprobe.report.escape import shown
from tlsprobe.session.flow import (
    CLIENT,
    AlertEvent,
    ApplicationDataEvent,
    ChangeCipherSpecEvent,
    ErrorEvent,
    Event,
    InnerContentEvent,
    MessageEvent,
    RecordEvent,
    SSLv2HelloEvent,
)
from tlsprobe.wire.buffer import Annotation, DecodeError
from tlsprobe.wire.hello import ClientHello, ServerHello

ARROW = {CLIENT: ">>>", 1: "<<<"}
CONTENT_NAMES = {20: "ChangeCipherSpec", 21: "Alert", 22: "Handshake", 23: "ApplicationData",
                 24: "Heartbeat"}


def hexdump(data: bytes, indent: str = "    ", width: int = 16) -> Iterator[str]:
    for i in range(0, len(data), width):
        yield indent + " ".join(f"{b:02x}" for b in data[i:i + width])


def version_label(version: int | None) -> str:
    if version is None:
        return "TLS ???"
    name = registry.version_name(version)
    return name


def annotation_line(a: Annotation, indent: str = "      ") -> str:
    end = a.offset + a.length - 1
    if a.kind == "error":
        return f"{indent}!!! {a.name}: {a.value} at +{a.offset}"
    if a.kind in ("int", "len") and a.length <= 1:
        where = f"at +{a.offset}"
    elif a.kind in ("int", "len") and a.length <= 8:
        where = f"at +{end} (bytes +{a.offset}..+{end})"
    elif a.length <= 1:
        where = f"at +{a.offset}"
    else:
        where = f"at +{a.offset}..+{end}"
    return f"{indent}{a.name} {a.value} {where}"


def client_label_version(hello: ClientHello) -> int:
    """The version that labels the client's records until the ServerHello says which one
    was negotiated: the first final (non-draft, non-GREASE) supported_versions entry, in the
    client's order of preference; else its first draft; else legacy_version."""
    offered = [v for v in hello.supported_versions if not registry.is_grease(v)]
    final = [v for v in offered if v >> 8 == 0x03]
    return (final or offered or [hello.legacy_version])[0]


class TraceFormatter:
    """Turns flow events into s_client -msg lines; keeps the protocol version label state."""

    def __init__(self, *, annotations: bool = True, hex_limit: int | None = None) -> None:
        self.annotations = annotations
        self.hex_limit = hex_limit
        self.version: int | None = None

    def _dump(self, data: bytes) -> Iterator[str]:
        if self.hex_limit is not None and len(data) > self.hex_limit:
            yield from hexdump(data[:self.hex_limit])
            yield f"    ... ({len(data) - self.hex_limit} more bytes)"
        else:
            yield from hexdump(data)

    def lines(self, events: Iterable[Event]) -> Iterator[str]:
        for ev in events:
            yield from self.event_lines(ev)

    def event_lines(self, ev: Event) -> Iterator[str]:
        """The lines of one event, untrusted text (SNI, ALPN, names, error texts) escaped."""
        for line in self._event_lines(ev):
            yield shown(line)

    def _event_lines(self, ev: Event) -> Iterator[str]:
        arrow = ARROW[ev.direction]
        if isinstance(ev, RecordEvent):
            rec = ev.record
            yield f"{arrow} {version_label(rec.version)}, RecordHeader [length 0005]"
            yield from hexdump(ev.header)
        elif isinstance(ev, InnerContentEvent):
            if self.version is None or not (self.version >= 0x0304 or self.version >> 8 == 0x7F):
                return  # TLS 1.2 records have no inner content type (s_client prints none)
            yield f"{arrow} {version_label(self.version)}, InnerContent [length 0001]"
            yield f"    {ev.content_type:02x}"
        elif isinstance(ev, MessageEvent):
            yield from self._message(ev)
        elif isinstance(ev, AlertEvent):
            a = ev.alert
            level = {1: "warning", 2: "fatal"}.get(a.level, f"level {a.level}")
            mark = " (decrypted)" if ev.protected else ""
            yield (f"{arrow} {version_label(self.version)}, Alert [length 0002], {level} "
                   f"{registry.alert_name(a.description)}{mark}")
            yield f"    {a.level:02x} {a.description:02x}"
        elif isinstance(ev, ChangeCipherSpecEvent):
            yield f"{arrow} {version_label(self.version)}, ChangeCipherSpec [length {len(ev.raw):04x}]"
            yield from hexdump(ev.raw)
        elif isinstance(ev, ApplicationDataEvent):
            outer = getattr(ev, "content_type", ContentType.application_data)
            if not ev.decrypted and outer in (ContentType.handshake, ContentType.alert):
                # A TLS 1.2 record protected under its real type (the Finished after
                # ChangeCipherSpec, an encrypted alert): named by it, as tshark does.
                kind = "Handshake" if outer == ContentType.handshake else "Alert"
                yield (f"{arrow} {version_label(self.version)}, {kind} "
                       f"[length {ev.length:04x}], encrypted (not decrypted)")
                return
            state = "decrypted" if ev.decrypted else "encrypted, not decrypted"
            yield (f"{arrow} {version_label(self.version)}, ApplicationData "
                   f"[length {ev.length:04x}] ({state})")
        elif isinstance(ev, SSLv2HelloEvent):
            h = ev.hello
            yield (f"{arrow} SSL 2.0, ClientHello [length {len(h.raw):04x}] "
                   f"(SSLv2-compatible, offers {version_label(h.version)})")
            yield from self._dump(h.raw)
        elif isinstance(ev, ErrorEvent):
            yield f"{arrow} !!! malformed {ev.where}: {ev.error}"

    def _message(self, ev: MessageEvent) -> Iterator[str]:
        arrow = ARROW[ev.direction]
        msg = ev.decoded.message if ev.decoded else None
        try:  # extension accessors decode lazily: a malformed one keeps the old label
            if isinstance(msg, ClientHello):
                self.version = client_label_version(msg)
            elif isinstance(msg, ServerHello):
                self.version = msg.selected_version
        except DecodeError:
            pass
        name = message_name(ev.msg_type)
        if isinstance(msg, ServerHello) and msg.is_hello_retry_request:
            name = "HelloRetryRequest"
        mark = " (decrypted)" if ev.protected else ""
        yield (f"{arrow} {version_label(self.version)}, Handshake [length {len(ev.raw):04x}], "
               f"{name}{mark}")
        yield from self._dump(ev.raw)
        if ev.error is not None:
            yield f"      !!! malformed {name}: {ev.error}"
        if self.annotations:
            for a in ev.annotations:
                yield annotation_line(a)


def format_trace(events: Iterable[Event], *, annotations: bool = True,
                 hex_limit: int | None = None) -> str:
    return "\n".join(TraceFormatter(annotations=annotations, hex_limit=hex_limit).lines(events))


__all__ = [
    "CONTENT_NAMES",
    "ContentType",
    "TraceFormatter",
    "annotation_line",
    "format_trace",
    "hexdump",
]
