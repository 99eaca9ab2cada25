"""TLS inside MS-TDS (SQL Server before TDS 8): the handshake travels in PRELOGIN packets.

A TDS 7 client that encrypts sends a PRELOGIN packet (type 0x12) of options, the server
answers with its own (type 0x04); then each side's TLS handshake flights go out as the
payloads of further PRELOGIN packets (MS-TDS 3.2.5.2, up to the negotiated packet size,
4096 bytes by default, so a record can run over several), and once the handshake is done
the TLS records follow on the TCP stream itself (the TDS packets are inside them). tshark
reads them so; without this the packet headers break the record framing and a server
flight longer than one packet loses its certificate and key exchange.

`tds_start` says whether a direction's first bytes are a PRELOGIN packet; a `TdsChannel`
then turns the direction's bytes into TLS bytes (the framing layer's "tunnel" state).
TDS 8 ("strict" encryption) starts with TLS itself and needs none of this.
"""

from __future__ import annotations

from typing import Final

#: MS-TDS 2.2.3.1.1 packet types
TDS_TYPES: Final = frozenset({0x01, 0x02, 0x03, 0x04, 0x06, 0x07, 0x0E, 0x0F, 0x10, 0x11, 0x12})
PRELOGIN: Final = 0x12
RESPONSE: Final = 0x04


def tds_start(buf: bytes | bytearray) -> bool | None:
    """Whether a direction starts with a PRELOGIN packet (the client's, type 0x12, or the
    server's answer, type 0x04): an end-of-message status, a length that holds the option
    table, window 0, and an option table (5-byte entries, VERSION first, 0xFF at its end)
    whose entries lie inside the packet. None: too few bytes to tell."""
    if len(buf) < 9:
        return None if len(buf) < 1 or buf[0] in (PRELOGIN, RESPONSE) else False
    length = (buf[2] << 8) | buf[3]
    if buf[0] not in (PRELOGIN, RESPONSE) or buf[1] != 0x01 or buf[7] != 0 or \
            not 8 + 6 <= length <= 4096 or buf[8] != 0x00:
        return False
    if len(buf) < length:
        return None
    body = buf[8:length]
    p = 0
    while p < len(body) and body[p] != 0xFF:
        if p + 5 > len(body):
            return False
        offset, size = (body[p + 1] << 8) | body[p + 2], (body[p + 3] << 8) | body[p + 4]
        if offset + size > len(body):
            return False
        p += 5
    return p < len(body)


class TdsChannel:
    """One direction's TCP bytes in, the TLS bytes they carry out: PRELOGIN payloads from
    the first one that starts with a record header, then (`raw`) the stream itself."""

    __slots__ = ("_buf", "_tls", "raw", "unreadable")
    kind = "tds"

    def __init__(self) -> None:
        self._buf = bytearray()
        self._tls = False
        self.raw = False
        self.unreadable: str | None = None

    def feed(self, data: bytes) -> bytes:
        if self.raw:
            return data
        buf = self._buf
        buf += data
        out = []
        p = 0
        while p < len(buf):
            if 20 <= buf[p] <= 24:  # a record where a packet header would be: handshake done
                self.raw = True
                out.append(bytes(buf[p:]))
                p = len(buf)
                break
            if len(buf) - p < 8:
                break
            length = (buf[p + 2] << 8) | buf[p + 3]
            if buf[p] not in TDS_TYPES or length < 8:
                self.unreadable = "no MS-TDS packet header where one was expected"
                p = len(buf)
                break
            if len(buf) - p < length:
                break
            if buf[p] == PRELOGIN:
                payload = buf[p + 8:p + length]
                if self._tls or payload[:2] == b"\x16\x03":
                    self._tls = True
                    out.append(bytes(payload))
            p += length
        del buf[:p]
        return b"".join(out)
