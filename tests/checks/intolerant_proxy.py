"""A loopback proxy in front of a real server that behaves like the intolerant middleboxes
and servers the tolerance checks look for (tlsprobe/probes/checks/_tolerance.py).

It reads the client's ClientHello (from the first TCP segment it receives, then on to the
end of the handshake message), applies its `rules`, and either forwards everything to the
backend and relays both ways, or refuses as such boxes do:

- "segment": the first segment does not hold the whole first record -> TCP reset. Middleboxes
  that parse the first segment of a connection alone reset or drop hellos larger than one
  MSS: the failure behind the X25519MLKEM768 rollout (tldr.fail).
- "record": the first record does not hold the whole ClientHello -> TCP reset (a parser that
  reads the hello out of one record, as some load balancers and embedded stacks did).
- "max_hello=N": a ClientHello (handshake message, header included) over N bytes -> TCP
  reset (the large-hello failures of F5 BIG-IP, Cisco and other middleboxes: hellos above
  512 bytes, and above the MTU, reset or dropped).
- "max_suites=N": a ClientHello listing more than N cipher suites -> TCP reset (the F5
  BIG-IP and old-server bug of a fixed table of 128 suites).
- "grease": a GREASE value (RFC 8701) among suites, extensions, groups or versions -> close
  without an answer (servers that refuse unknown values instead of ignoring them).
- "unknown_version": a legacy_version above TLS 1.2 or an unknown supported_versions value
  (not SSL 3.0..TLS 1.3, not GREASE) -> a fatal protocol_version alert (version-intolerant
  servers).
- "tls13": supported_versions lists TLS 1.3 -> close without an answer (a TLS 1.2 server
  or box that chokes on the TLS 1.3 extensions).

`log` keeps, per connection, the first segment's length, the first record's fragment length,
the hello's length and the rule that refused it (None: forwarded), so that tests check what
actually went over the wire.
"""
from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass

from tests.helpers.faultproxy import pipe, serve_loopback
from tlsprobe.wire.ext_decoders import is_grease
from tlsprobe.wire.handshake import decode_handshake
from tlsprobe.wire.hello import ClientHello

KNOWN_VERSIONS = {0x0300, 0x0301, 0x0302, 0x0303, 0x0304}
PROTOCOL_VERSION_ALERT = bytes([21, 3, 3, 0, 2, 2, 70])


@dataclass
class Seen:
    first_segment: int
    first_record: int
    hello: int
    refused_by: str | None
    suites: int = 0


def _grease(h: ClientHello) -> bool:
    values = list(h.cipher_suites) + [e.type for e in h.extensions] + \
        list(h.supported_groups) + list(h.supported_versions)
    return any(is_grease(v) for v in values)


def _unknown_version(h: ClientHello) -> bool:
    return h.legacy_version > 0x0303 or any(
        v not in KNOWN_VERSIONS and not is_grease(v) for v in h.supported_versions)


def _suite_count(hello: bytes) -> int:
    """The number of cipher suites a ClientHello lists (0 when it does not decode)."""
    try:
        h = decode_handshake(hello).message
    except Exception:   # a test helper: what does not decode counts none
        return 0
    return len(h.cipher_suites) if isinstance(h, ClientHello) else 0


class IntolerantProxy:
    def __init__(self, backend: tuple[str, int], *rules: str) -> None:
        self.backend = backend
        self.rules = set(rules)
        self.max_hello = next((int(r.split("=")[1]) for r in rules
                               if r.startswith("max_hello=")), None)
        self.max_suites = next((int(r.split("=")[1]) for r in rules
                                if r.startswith("max_suites=")), None)
        self.log: list[Seen] = []
        self._lock = threading.Lock()
        self.sock, self.port = serve_loopback(self._accept)

    def refused(self) -> list[str]:
        with self._lock:
            return [s.refused_by for s in self.log if s.refused_by]

    def _accept(self, conn: socket.socket) -> None:
        threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _judge(self, first_segment: int, first_record: int, hello: bytes) -> str | None:
        if "segment" in self.rules and first_segment < 5 + first_record:
            return "segment"
        if "record" in self.rules and first_record < len(hello):
            return "record"
        if self.max_hello is not None and len(hello) > self.max_hello:
            return "max_hello"
        try:
            h = decode_handshake(hello).message
        except Exception:   # a test helper: what does not decode is forwarded as it is
            return None
        if not isinstance(h, ClientHello):
            return None
        if self.max_suites is not None and len(h.cipher_suites) > self.max_suites:
            return "max_suites"
        if "grease" in self.rules and _grease(h):
            return "grease"
        if "unknown_version" in self.rules and _unknown_version(h):
            return "unknown_version"
        if "tls13" in self.rules and 0x0304 in h.supported_versions:
            return "tls13"
        return None

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            data = conn.recv(65536)
            first_segment = len(data)
            got = _hello(conn, data)
        except OSError:
            conn.close()
            return
        if got is None:
            conn.close()
            return
        data, first_record, hello = got
        rule = self._judge(first_segment, first_record, hello)
        with self._lock:
            self.log.append(Seen(first_segment, first_record, len(hello), rule,
                                 _suite_count(hello)))
        if rule in ("segment", "record", "max_hello", "max_suites"):
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            return
        if rule == "unknown_version":
            conn.sendall(PROTOCOL_VERSION_ALERT)
        if rule is not None:
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()
            return
        try:
            upstream = socket.create_connection(self.backend, timeout=5)
        except OSError:
            conn.close()
            return
        upstream.sendall(data)
        conn.settimeout(None)
        upstream.settimeout(None)
        t = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
        t.start()
        pipe(conn, upstream)
        t.join(10)
        for s in (conn, upstream):
            s.close()

    def close(self) -> None:
        self.sock.close()


def _hello(conn: socket.socket, data: bytes) -> tuple[bytes, int, bytes] | None:
    """Read on until the first handshake message is whole: (all bytes read, the first
    record's fragment length, the handshake message), None if the client stopped first."""
    while True:
        fragments, at, first_record = b"", 0, -1
        while len(data) >= at + 5:
            length = int.from_bytes(data[at + 3:at + 5], "big")
            if len(data) < at + 5 + length:
                break
            if first_record < 0:
                first_record = length
            if data[at] == 22:
                fragments += data[at + 5:at + 5 + length]
            at += 5 + length
        if len(fragments) >= 4 and len(fragments) >= 4 + int.from_bytes(fragments[1:4], "big"):
            return data, first_record, fragments[:4 + int.from_bytes(fragments[1:4], "big")]
        more = conn.recv(65536)
        if not more:
            return None
        data += more
