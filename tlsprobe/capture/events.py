"""Values produced by the capture layer: connection keys, stream events, stats, warnings.

Events are NamedTuples (cheap to build: one is made per TCP payload segment, so they sit on
the hot path) and are told apart with ``isinstance`` or ``match``.  `CaptureStats` counts
what was read, what was skipped and why, so a report can say how complete its view is.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field, fields
from typing import Any, Final, NamedTuple, Self, cast

from tlsprobe.errors import TlsprobeError


class CaptureError(TlsprobeError):
    """Nothing at all can be read from the input (unknown format, unreadable file).

    Damage after a readable start is not an error: it ends the reading with a warning in
    `CaptureStats.warnings` and the events read so far stay valid. Exit 2, TlsprobeError's
    default (no class attribute here: compiled, it would be lost, see test_compiled_shapes)."""


class ConnKey(NamedTuple):
    """One TCP connection: endpoints oriented client -> server and an id in order of appearance.

    `id` counts from 0 in the order connections are first seen (like tshark's tcp.stream,
    though tshark also numbers flows that never carry payload)."""

    id: int
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int

    @property
    def client(self) -> str:
        """``ip:port`` as tshark prints it (IPv6 without brackets)."""
        return f"{self.client_ip}:{self.client_port}"

    @property
    def server(self) -> str:
        return f"{self.server_ip}:{self.server_port}"

    def swapped(self) -> ConnKey:
        """The same connection with client and server exchanged."""
        return ConnKey(self.id, self.server_ip, self.server_port, self.client_ip, self.client_port)


class StreamOpen(NamedTuple):
    """A new connection (SYN, or the first payload of a connection captured mid-stream)."""

    conn: ConnKey
    ts: float
    frame: int


class StreamData(NamedTuple):
    """In-order bytes of one direction (0 = client -> server, 1 = server -> client)."""

    conn: ConnKey
    direction: int
    data: bytes
    ts: float
    frame: int


#: A "plain" data event (`CaptureStream.plain_data`, pipe.py's `PipedStream.plain_data`):
#: StreamData's fields in a plain tuple, the connection's id in the key's place, ``(id,
#: direction, data, ts, frame)``. Made with a tuple display and handed out as it is
#: (``tuple`` of a tuple is that tuple, no copy): typed as the StreamData whose fields it
#: holds, by position. A StreamData, a tuple subclass, costs about four times as much to
#: make and free.
as_data: Final = cast(Callable[[tuple[ConnKey | int, int, bytes, float, int]], StreamData],
                      tuple)


class StreamGap(NamedTuple):
    """`size` bytes of one direction were never captured; the stream continues after them.

    `seq` is the TCP sequence number of the first missing byte: two holes of the same size
    flushed by the same packet (the end of a connection) are two events that differ only
    there."""

    conn: ConnKey
    direction: int
    size: int
    ts: float
    frame: int
    seq: int = 0


class StreamSkipped(NamedTuple):
    """What one direction of an ignored connection (`CaptureStream.ignore`) carried since it
    was ignored: `size` bytes in order and `gaps` bytes never captured; `ts` and `frame` are
    those of the last segment counted. At most one per direction, just before StreamClose."""

    conn: ConnKey
    direction: int
    size: int
    gaps: int
    ts: float
    frame: int


class StreamClose(NamedTuple):
    """End of a connection. `reason`: "fin", "rst", "reused" (a new SYN on the same 4-tuple),
    "evicted" (connection table full, least recently used) or "end" (end of the capture)."""

    conn: ConnKey
    reason: str
    ts: float
    frame: int = 0


class Datagram(NamedTuple):
    """One UDP payload (QUIC, DTLS). `truncated` counts bytes the capture did not keep."""

    src: str
    sport: int
    dst: str
    dport: int
    data: bytes
    ts: float
    frame: int
    truncated: int = 0


class Secrets(NamedTuple):
    """A pcapng Decryption Secrets Block. `secrets_type` 0x544c534b ("TLSK") is an
    SSLKEYLOGFILE text; `offset` is the block's position in the (uncompressed) file."""

    secrets_type: int
    data: bytes
    offset: int


Event = StreamOpen | StreamData | StreamGap | StreamSkipped | StreamClose | Datagram | Secrets

SECRETS_TLS_KEYLOG: Final = 0x544C534B


MAX_TUNNEL_DEPTH: Final = 6  # nested encapsulations followed (decode.py)
FRAGMENT_V4: Final = -4
FRAGMENT_V6: Final = -6
#: decode.py's answer for an 802.11 A-MSDU of several packets: ``(AMSDU, off, end, depth,
#: 0, 0)``, its subframes read one by one (decode.amsdu_packets) off the per-packet path
AMSDU: Final = -11
#: link types netmon.py gives Network Monitor's own records (network types 0xFFE0-0xFFFF:
#: events, network and process information, DNS cache, filter): no traffic, not a loss
NETMON_METADATA: Final = 0x10000 + 0xFFE0


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


#: skip reasons said as losses (`CaptureStats.losses`), in this order: (reason, what is
#: counted, what happened to it)
_LOSS_NOTES: Final = (
    ("capwap_fragment", "CAPWAP data fragment",
     "(frames CAPWAP split, not reassembled; skipped)"),
    ("gre_other", "GRE packet", "carrying a protocol type tlsprobe does not read (skipped)"),
    ("wlan_amsdu", "802.11 frame", ("aggregating several packets (A-MSDU) inside a "
                                    "reassembled IP fragment (not split; skipped)")),
    ("tunnel_too_deep", "packet",
     f"encapsulated deeper than {MAX_TUNNEL_DEPTH} levels (skipped)"),
)


class CaptureWarning(NamedTuple):
    """Why reading stopped early (or something odd was met), and where in the file."""

    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.message} at file offset {self.offset}"


@dataclass(frozen=True)
class LiveCounts:
    """What a live capture's interfaces say they received and dropped (libpcap's
    pcap_stats: `dropped` by the kernel or libpcap for want of buffer space,
    `interface_dropped` by the network interface or its driver), summed and per interface
    (name, received, dropped, interface_dropped)."""

    interfaces: tuple[str, ...]
    filter: str
    received: int = 0
    dropped: int = 0
    interface_dropped: int = 0
    per_interface: tuple[tuple[str, int, int, int], ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"interfaces": list(self.interfaces), "filter": self.filter,
                "received": self.received, "dropped": self.dropped,
                "interface_dropped": self.interface_dropped,
                "per_interface": [{"interface": n, "received": r, "dropped": d,
                                   "interface_dropped": i}
                                  for n, r, d, i in self.per_interface]}


@dataclass
class CaptureStats:
    """What the capture layer read and skipped. Counters only grow while iterating."""

    file_format: str = ""
    packets: int = 0
    link_types: dict[int, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    snaplen_cut: int = 0
    ip_first_fragments: int = 0
    ip_fragments: int = 0
    ip_reassembled: int = 0
    ip_fragments_incomplete: int = 0
    ip_fragment_bytes_lost: int = 0
    ip_fragment_duplicates: int = 0
    ip_length_exceeds_packet: int = 0
    tcp_connections: int = 0
    tcp_segments: int = 0
    tcp_retransmissions: int = 0
    tcp_overlaps: int = 0
    tcp_overlap_conflicts: int = 0
    tcp_out_of_order: int = 0
    tcp_gaps: int = 0
    tcp_gap_bytes: int = 0
    tcp_after_close: int = 0
    tcp_evicted: int = 0
    tcp_evicted_idle: int = 0  # of tcp_evicted: idle for their timeout of capture time
    tcp_evicted_limit: int = 0  # of tcp_evicted: over the open-connection limit
    tcp_evicted_in_progress: int = 0  # of tcp_evicted_limit: carrying unread payload
    tcp_pending_flushes: int = 0
    tcp_resyncs: int = 0
    udp_datagrams: int = 0
    secrets_blocks: int = 0
    warnings: list[CaptureWarning] = field(default_factory=list)
    #: a live capture's counts (capture.live.LiveCapture.counts: received, dropped by the
    #: kernel or libpcap, dropped by the interface, per interface); None for a file
    live: LiveCounts | None = None
    #: packets a pcapng file says the capturing system dropped while it was taken (its
    #: Interface Statistics Blocks' isb_ifdrop: the last of each interface, summed)
    recorded_dropped: int = 0

    def update(self, other: CaptureStats) -> None:
        """Every field taken from `other` (pipe.py: the reader process's final stats). By
        field name, not `__dict__`: a class compiled by mypyc has none."""
        for f in fields(other):
            setattr(self, f.name, getattr(other, f.name))

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    def warn(self, offset: int, message: str) -> None:
        self.warnings.append(CaptureWarning(offset, message))

    def losses(self) -> list[str]:
        """One line per kind of packet whose data was skipped for a reason other than the
        snaplen (that one has its own wording): said as notes, and `tlsprobe pcap` exits
        7, so that "no TLS found" is never said over data that was not read."""
        out = []
        skipped = self.skipped
        n = skipped.get("bad_interface_id", 0)
        if n:
            out.append(f"{_count(n, 'packet')} on an interface no pcapng interface block "
                       "defines (skipped)")
        for reason, n in sorted(skipped.items()):
            if reason.startswith("link_type_") and not \
                    NETMON_METADATA <= int(reason[10:]) < NETMON_METADATA + 0x20:
                out.append(f"{_count(n, 'packet')} of link type {reason[10:]}, which tlsprobe "
                           "does not read (skipped)")
        for reason, noun, words in _LOSS_NOTES:
            n = skipped.get(reason, 0)
            if n:
                out.append(f"{_count(n, noun)} {words}")
        if self.ip_length_exceeds_packet:
            out.append(f"{_count(self.ip_length_exceeds_packet, 'packet')} whose IP length "
                       "exceeds the bytes on the wire (the bytes present were read)")
        if self.ip_fragments_incomplete:
            out.append(f"{_count(self.ip_fragments_incomplete, 'IP datagram')} whose "
                       f"fragments never all arrived ({_count(self.ip_fragment_bytes_lost, 'byte')}"
                       " skipped; first fragments read)")
        out.extend(self.live_losses())
        if self.recorded_dropped:
            out.append(f"{_count(self.recorded_dropped, 'packet')} dropped while the capture "
                       "was taken, as its interface statistics record (not in the file; "
                       "connections with gaps may have lost handshake messages there)")
        return out

    def dropped(self) -> int:
        """Packets a live capture lost before tlsprobe read them (0 for a file)."""
        live = self.live
        return live.dropped + live.interface_dropped if live is not None else 0

    def live_losses(self) -> list[str]:
        """The packets the kernel, libpcap or the interface dropped during a live capture
        (their connections may show gaps): never silent."""
        live = self.live
        if live is None or not self.dropped():
            return []
        text = (f"{_count(live.dropped, 'packet')} dropped by the kernel or libpcap and "
                f"{_count(live.interface_dropped, 'packet')} by the interface during the "
                f"live capture, of {_count(live.received, 'packet')} received (connections "
                "with gaps may have lost handshake messages there)")
        return [text]

    @property
    def complete(self) -> bool:
        """True when the whole file was read without a warning."""
        return not self.warnings

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready view (link types and reasons as string keys)."""
        return {
            "file_format": self.file_format, "packets": self.packets,
            "link_types": {str(k): v for k, v in sorted(self.link_types.items())},
            "skipped": dict(sorted(self.skipped.items())), "snaplen_cut": self.snaplen_cut,
            "ip_first_fragments": self.ip_first_fragments,
            "ip_fragments": {"fragments": self.ip_fragments, "reassembled": self.ip_reassembled,
                             "incomplete": self.ip_fragments_incomplete,
                             "bytes_lost": self.ip_fragment_bytes_lost,
                             "duplicates": self.ip_fragment_duplicates},
            "ip_length_exceeds_packet": self.ip_length_exceeds_packet,
            "tcp": {"connections": self.tcp_connections, "segments": self.tcp_segments,
                    "retransmissions": self.tcp_retransmissions, "overlaps": self.tcp_overlaps,
                    "overlap_conflicts": self.tcp_overlap_conflicts,
                    "out_of_order": self.tcp_out_of_order, "gaps": self.tcp_gaps,
                    "gap_bytes": self.tcp_gap_bytes, "after_close": self.tcp_after_close,
                    "evicted": self.tcp_evicted,
                    "evicted_by": {"idle": self.tcp_evicted_idle,
                                   "limit": self.tcp_evicted_limit,
                                   "limit_in_progress": self.tcp_evicted_in_progress},
                    "pending_flushes": self.tcp_pending_flushes,
                    "resyncs": self.tcp_resyncs},
            "udp_datagrams": self.udp_datagrams, "secrets_blocks": self.secrets_blocks,
            "warnings": [{"offset": w.offset, "message": w.message} for w in self.warnings],
        } | ({"live": self.live.to_dict()} if self.live is not None else {}) | (
            {"recorded_dropped": self.recorded_dropped} if self.recorded_dropped else {})


class EventIterator:
    """The iterator surface of `CaptureStream` and pipe.py's `PipedStream`: the events of
    the generator `_gen`; as a context manager, `close` at the end."""

    _gen: Generator[Event, None, None]

    def __iter__(self) -> Iterator[Event]:
        return self._gen

    def __next__(self) -> Event:
        return next(self._gen)

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
