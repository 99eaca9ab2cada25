"""Offline input: pcap/pcapng files -> ordered TCP bytes per direction and UDP datagrams.

This package is the capture edge of tlsprobe. It does not parse TLS: it delivers the bytes
the session layer feeds to the wire codec.

Entry point::

    stream = iter_stream_events(path_or_fileobj, *, max_pending_bytes=1 MiB,
                                max_total_pending_bytes=64 MiB, max_connections=65536,
                                max_closed=4096, udp=True) -> CaptureStream
    for event in stream: ...          # Iterator[Event]
    stream.stats                      # CaptureStats: packets, skipped[reason], tcp counters,
                                      #   warnings [CaptureWarning(offset, message)]
    stream.secrets                    # [Secrets(secrets_type, data, offset)] from pcapng DSBs
    stream.tls_keylog() -> bytes      # SSLKEYLOGFILE text of the TLS DSBs
    stream.swap_direction(conn)       # client <-> server (TLS layer saw the ClientHello)
    stream.ignore(conn)               # nothing more to read: later bytes only counted

Input: a path, ``-`` (stdin, not seekable) or a binary file object; pcap (both byte
orders, micro/nanosecond, modified) or pcapng (any number of sections and interfaces),
plain or gzip-compressed (detected by magic); also Microsoft Network Monitor 2.x from a
seekable file. Read in chunks: memory does not grow with the file. `CaptureError` (one-line message) is raised only when nothing can be read (bad
magic, unopenable file); later damage ends the iteration cleanly with a warning naming the
file offset, and the events so far stand.

Events (NamedTuples, in capture order; `frame` is 1-based like tshark's frame.number)::

    StreamOpen(conn, ts, frame)
    StreamData(conn, direction, data, ts, frame)     # direction 0 = client -> server
    StreamGap(conn, direction, size, ts, frame, seq) # bytes never captured (from seq)
    StreamSkipped(conn, direction, size, gaps, ts, frame)  # totals of an ignored connection
    StreamClose(conn, reason, ts, frame)             # fin | rst | reused | evicted | end
    Datagram(src, sport, dst, dport, data, ts, frame, truncated)   # UDP payload
    Secrets(secrets_type, data, offset)              # a Decryption Secrets Block

    ConnKey(id, client_ip, client_port, server_ip, server_port)   # .client / .server "ip:port"

Module map: source (open, gzip, chunked buffer), pcap, pcapng, netmon (containers; readers
picks one by magic), decode (link layers, IP, tunnels), reassembly (one direction's byte
stream), tcp (connections), stream (the loop), events (the values above), pipe
(`PipedStream`: the same surface with the loop in a forked reader process, the same events
and stats; used for large captures; the reader process's side in pipe_reader).
"""

from tlsprobe.capture.events import (
    SECRETS_TLS_KEYLOG,
    CaptureError,
    CaptureStats,
    CaptureWarning,
    ConnKey,
    Datagram,
    Event,
    Secrets,
    StreamClose,
    StreamData,
    StreamGap,
    StreamOpen,
    StreamSkipped,
)
from tlsprobe.capture.readers import read_packets
from tlsprobe.capture.stream import CaptureStream, iter_stream_events

__all__ = [
    "SECRETS_TLS_KEYLOG", "CaptureError", "CaptureStats", "CaptureStream", "CaptureWarning",
    "ConnKey", "Datagram", "Event", "Secrets", "StreamClose", "StreamData", "StreamGap",
    "StreamOpen", "StreamSkipped", "iter_stream_events", "read_packets",
]
