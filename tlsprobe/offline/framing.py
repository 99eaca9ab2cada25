"""Where TLS records start in one direction of a TCP stream.

TLS is found by content, not by port. A direction's bytes reach the record framer through an
`Aligner`, which decides where the records begin:

* at the start of the stream when the first bytes are a plausible record header (or an
  SSLv2-format ClientHello);
* after a plain-text preamble (STARTTLS dialogue, proxy CONNECT, a database's SSL request):
  at the first ClientHello (client side) or ServerHello/alert record (server side);
* inside OpenVPN over TCP (the stream starts with a length and a hard reset): the records
  are the control channel's payloads (offline.openvpn_channel);
* inside MS-TDS (SQL Server: the stream starts with a PRELOGIN packet): the handshake is in
  PRELOGIN payloads, the records after it on the stream itself (offline.tds);
* in a connection captured mid-stream, or after bytes were lost (a gap), at the first offset
  from which a chain of plausible record headers follows.

Scanning is bounded: a preamble longer than `MAX_PREAMBLE` means "not TLS", and a resync
keeps at most `MAX_SCAN` bytes while it looks.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from tlsprobe.offline.tds import TdsChannel, tds_start
from tlsprobe.wire.record import MAX_CIPHERTEXT, looks_like_tls

if TYPE_CHECKING:  # imported when a stream turns out to be OpenVPN
    from tlsprobe.offline.openvpn_channel import ControlChannel

MAX_PREAMBLE: Final = 64 << 10
MAX_SCAN: Final = 64 << 10
MIDSTREAM_CHAIN: Final = 3  # records in a row that start TLS in a stream captured mid-way
CLIENT: Final = 0
SERVER: Final = 1

# The searches through bytes not yet known to be TLS (up to 64 KiB a direction: most of a
# third-party capture's non-TLS streams, often compressed or encrypted, every byte value
# about as common as any) look for the byte every pattern has second, major version 3,
# with `bytes.find` (memchr: a fraction of an instruction a byte), and test the bytes
# around each one found. A regular expression's own scan took 7 instructions a byte, a
# `find` of a two-byte prefix 6; a `find` call costs some 1,700 instructions compiled (a
# 0x03 comes every ~300 bytes), so the start of a stream walks its new bytes once for both
# searches (`find_start`) where it made two or three regular-expression scans (issue 35,
# seventh round). A set-first pattern was ten times slower still.
MAJOR: Final = b"\x03"
# a handshake record whose fragment starts with a ClientHello or ServerHello; a server alert
_CH_SH: Final = re.compile(rb"\x16\x03[\x00-\x04][\x00-\x48].[\x01\x02]\x00", re.DOTALL)
_ALERT: Final = re.compile(rb"\x15\x03[\x00-\x04]\x00\x02")
#: bytes one `_HELLO` match spans at most: a search that found nothing resumes this many
#: bytes minus one before the end (a match cannot start earlier without having been found)
HELLO_SPAN: Final = 7


def plausible_length(buf: bytes | bytearray, i: int) -> int | None:
    """Record length when buf[i:i+5] is a plausible TLS record header, else None."""
    if i + 5 > len(buf):
        return None
    if not 20 <= buf[i] <= 24 or buf[i + 1] != 3 or buf[i + 2] > 4:
        return None
    length = (buf[i + 3] << 8) | buf[i + 4]
    return length if 0 < length <= MAX_CIPHERTEXT else None


def chain_ok(buf: bytes | bytearray, i: int, need: int = 2) -> bool | None:
    """Do `need` plausible records follow each other from `i`? None: need more bytes.

    One plausible header alone is too weak a sign inside arbitrary bytes (a cipher suite
    list holds many 0x00 0x1X pairs), so two whole records are asked for."""
    n = len(buf)
    count = 0
    while count < need:
        if i + 5 > n:
            return None
        length = plausible_length(buf, i)
        if length is None:
            return False
        i += 5 + length
        count += 1
        if i > n:
            return None
    return True


def find_hello(buf: bytes | bytearray, direction: int,
               start: int = 0) -> tuple[int | None, int]:
    """(offset of the first hello record header (or, server side, an alert record) from
    `start`, or None; offset where the next search of this buffer, grown, should resume).
    Resuming keeps a stream fed in small segments linear, not quadratic, in its length."""
    major = buf.find(MAJOR, start + 1)
    while major >= 0:
        at = major - 1
        lead = buf[at]
        if lead == 0x16 and _CH_SH.match(buf, at) is not None or \
                lead == 0x15 and direction == SERVER and _ALERT.match(buf, at) is not None:
            return at, at
        major = buf.find(MAJOR, major + 1)
    return None, max(start, len(buf) - HELLO_SPAN + 1)


def find_chain(buf: bytes | bytearray, start: int = 0,
               need: int = 2) -> tuple[int | None, int]:
    """(offset of a chain of `need` plausible records or None, offset where scanning
    should resume)."""
    last = len(buf) - 1
    major = buf.find(MAJOR, start + 1)
    while major >= 0:
        i = major - 1
        if major < last and buf[major + 1] <= 4 and 20 <= buf[i] <= 24:  # a header at i
            verdict = chain_ok(buf, i, need)
            if verdict:
                return i, i
            if verdict is None:
                return None, i  # undecided: wait for more bytes from here
        major = buf.find(MAJOR, major + 1)
    return None, max(start, len(buf) - 4)


def find_start(buf: bytes | bytearray, direction: int, hello_from: int, chain_from: int,
               need: int) -> tuple[int | None, int, int | None, int]:
    """`find_hello(buf, direction, hello_from)` and `find_chain(buf, chain_from, need)` in
    one walk over the bytes (what the start of a stream not yet known to be TLS asks for
    each new segment): (hello offset or None, where its search resumes, chain offset or
    None, where its search resumes). When a hello is found, the chain's two values are
    not searched for (the hello is taken: nothing reads them)."""
    last = len(buf) - 1
    chain: int | None = None
    chain_resume = -1  # the chain search's verdict not reached yet
    major = buf.find(MAJOR, min(hello_from, chain_from) + 1)
    while major >= 0:
        i = major - 1
        lead = buf[i]
        if i >= hello_from and (
                lead == 0x16 and _CH_SH.match(buf, i) is not None or
                lead == 0x15 and direction == SERVER and _ALERT.match(buf, i) is not None):
            return i, i, None, chain_from
        if chain_resume < 0 and i >= chain_from and 20 <= lead <= 24 and major < last and \
                buf[major + 1] <= 4:  # a header at i
            verdict = chain_ok(buf, i, need)
            if verdict:
                chain = chain_resume = i
            elif verdict is None:
                chain_resume = i  # undecided: wait for more bytes from here
        major = buf.find(MAJOR, major + 1)
    return (None, max(hello_from, last + 2 - HELLO_SPAN), chain,
            chain_resume if chain_resume >= 0 else max(chain_from, last - 3))


def tcp_start(buf: bytes | bytearray) -> bool:
    """The first bytes of an OpenVPN-over-TCP direction: a 2-byte length, then a hard
    reset (opcode 1, 2, 7, 8 or 10 with key id 0). A TLS record never starts so: its first
    byte would make a length above 5,000."""
    if len(buf) < 3:
        return False
    length = (buf[0] << 8) | buf[1]
    return 14 <= length <= 2048 and buf[2] & 7 == 0 and buf[2] >> 3 in (1, 2, 7, 8, 10)


_SSLV2_ROLES: Final = {1: CLIENT, 4: SERVER}
HELLO_ROLES: Final = {1: CLIENT, 2: SERVER}  # a hello's sender by its type


def role_of(first: bytes | bytearray) -> int | None:
    """Which side sent these first record bytes: CLIENT for a ClientHello (or an SSLv2
    hello), SERVER for a ServerHello, None when the first record does not tell."""
    if first and first[0] & 0x80:
        return _SSLV2_ROLES.get(first[2]) if len(first) >= 3 else None
    if len(first) >= 6 and first[0] == 22:
        return HELLO_ROLES.get(first[5])
    return None


class Aligner:
    """One direction's byte stream in, record-aligned bytes out.

    `state`: "start" (nothing seen), "aligned" (bytes pass straight through), "resync"
    (after a gap or a framing error), "dead" (not TLS). `skipped` counts bytes dropped
    before alignment (preamble, partial records); `preamble` keeps the first bytes of a
    plain-text preamble for the report."""

    __slots__ = (
        "_buf",
        "_hello_dir",
        "_hello_from",
        "_plain",
        "_scan_from",
        "direction",
        "midstream",
        "preamble",
        "resyncs",
        "skipped",
        "state",
        "tunnel",
    )

    def __init__(self, direction: int) -> None:
        self.direction = direction
        self.state = "start"
        self._buf = bytearray()
        # where the next hello search and chain search of `_buf` start (each scan resumes
        # where the last one stopped: a stream in 1-byte segments is read in linear time)
        self._hello_from = 0
        self._hello_dir = direction  # the direction whose pattern `_hello_from` is for
        self._scan_from = 0
        #: the first bytes were read and start no record, tunnel or SSLv2 hello (a verdict
        #: that more bytes cannot change): only the searches are left for the next ones
        self._plain = False
        self.skipped = 0
        self.preamble = b""
        self.midstream = False
        self.resyncs = 0
        #: the OpenVPN control channel or MS-TDS packets the records come out of
        self.tunnel: ControlChannel | TdsChannel | None = None

    def feed(self, data: bytes) -> bytes:
        """The bytes from which records can be framed ("" while still looking)."""
        if self.state == "aligned":
            return data
        if self.state == "dead":
            return b""
        if self.state == "tunnel":
            return self._unwrap(data)
        if self.state == "start" and not self._buf and len(data) >= 5 and \
                20 <= data[0] <= 24 and data[1] == 3 and data[2] <= 4:
            self.state = "aligned"  # the usual case: the stream starts with a record
            return data
        self._buf += data
        if self.state == "start":
            return self._start()
        return self._resync()

    def _unwrap(self, data: bytes) -> bytes:
        """TLS bytes out of the OpenVPN packets (the records start with the first one)."""
        tunnel = self.tunnel
        if tunnel is None:  # not reached: the state is "tunnel" once it is set
            return b""
        out = tunnel.feed(data)
        if tunnel.unreadable is not None:
            self.state = "dead"
        elif tunnel.raw:
            self.state = "aligned"  # (MS-TDS) the records now come without packets
        return out

    def lost(self) -> None:
        """Bytes of this direction were lost or framing broke: look for records again (in
        an OpenVPN stream the packet framing is lost with them: nothing more is read)."""
        if self.state == "tunnel":
            self.state = "dead"
            if self.tunnel is not None:
                self.tunnel.unreadable = "bytes lost in the capture"
            return
        if self.state == "aligned":
            self.state = "resync"
            self.resyncs += 1
            self._buf = bytearray()
            self._hello_from = self._scan_from = 0

    def _take(self, at: int) -> bytes:
        out = bytes(self._buf[at:])
        self.skipped += at
        self._buf = bytearray()
        self._hello_from = self._scan_from = 0
        self.state = "aligned"
        return out

    def _start(self) -> bytes:
        buf = self._buf
        if not self._plain:
            out = self._first_bytes(buf)
            if out is not None:
                return out
        # a hello after a preamble; else, inside bytes not yet known to be TLS (captured
        # mid-stream), three records in a row, as two can be a binary protocol's small
        # integers (DCE/RPC's 18 03 01 03 03): both searched in one walk
        direction = self.direction
        hello_from = self._hello_from if self._hello_dir == direction else 0
        self._hello_dir = direction
        at, self._hello_from, chain, self._scan_from = find_start(
            buf, direction, hello_from, self._scan_from, MIDSTREAM_CHAIN)
        if at is not None:
            self.preamble = bytes(buf[:min(at, 256)])
            return self._take(at)
        if chain is not None:
            self.midstream = True
            self.preamble = b""
            return self._take(chain)
        if len(buf) > MAX_PREAMBLE:
            self.state = "dead"
            self.skipped += len(buf)
            self._buf = bytearray()
        return b""

    def _find_hello(self, buf: bytearray) -> int | None:
        """`find_hello` resumed where this direction's last search stopped (from the start
        again once the roles were swapped: the server's pattern also takes alerts)."""
        direction = self.direction
        start = self._hello_from if self._hello_dir == direction else 0
        self._hello_dir = direction
        at, self._hello_from = find_hello(buf, direction, start)
        return at

    def _first_bytes(self, buf: bytearray) -> bytes | None:
        """What the stream's first bytes say: OpenVPN or MS-TDS framing, a record or an
        SSLv2 hello at the start (the bytes to frame), too few bytes to tell (b""), or
        None: none of these, look for records further on (`_plain` once that is final)."""
        if tcp_start(buf):  # OpenVPN over TCP: a length, then a hard reset
            from tlsprobe.offline.openvpn_channel import ControlChannel
            self.tunnel = ControlChannel(tcp=True)
            self.state = "tunnel"
            self._buf = bytearray()
            return self._unwrap(bytes(buf))
        tds = tds_start(buf)
        if tds is None:
            return b""  # a PRELOGIN packet's start: wait for the rest of it
        if tds:
            self.tunnel = TdsChannel()
            self.state = "tunnel"
            self._buf = bytearray()
            return self._unwrap(bytes(buf))
        if len(buf) >= 3 and buf[0] & 0x80 and buf[2] == 4 and self.direction == SERVER:
            return self._take(0)  # an SSL 2.0 SERVER-HELLO
        verdict = looks_like_tls(bytes(buf[:5]))
        if verdict is None:
            return b""
        if verdict:
            return self._take(0)
        # (tcp_start and the SSLv2 test are final from 3 bytes on, tds_start's False is)
        self._plain = len(buf) >= 3 and not buf[0] & 0x80
        return None

    def _resync(self) -> bytes:
        buf = self._buf
        at = self._find_hello(buf)
        chain, resume = find_chain(buf, self._scan_from)
        if at is not None and (chain is None or at <= chain):
            return self._take(at)
        if chain is not None:
            return self._take(chain)
        self._scan_from = resume
        if len(buf) > MAX_SCAN:
            drop = len(buf) - 8
            del buf[:drop]
            self.skipped += drop
            self._scan_from = max(0, self._scan_from - drop)
            self._hello_from = max(0, self._hello_from - drop)
        return b""

    def reset_with(self, data: bytes) -> bytes:
        """Framing failed inside `data` (bytes not yet framed): search them for records."""
        if self.state == "tunnel":
            return b""  # unwrapped bytes are not OpenVPN packets: not fed back
        self.lost()
        return self.feed(data) if data else b""


class Settled:
    """What an `Aligner` shows of a direction that needs none (yet): one shared, read-only
    instance for the directions with nothing seen (`START`) and one for those whose stream
    began with a record and lost nothing since (`ALIGNED`), most of a capture's. The fast
    reader swaps in a real Aligner (`own_aligner`) before anything would change one."""

    __slots__ = ("state",)
    midstream = False
    preamble = b""
    tunnel = None
    skipped = 0
    resyncs = 0

    def __init__(self, state: str) -> None:
        self.state = state


START: Final = Settled("start")
ALIGNED: Final = Settled("aligned")


def own_aligner(aligner: Aligner | Settled, direction: int) -> Aligner:
    """A real Aligner in the state the shared one shows (itself if already real)."""
    if type(aligner) is Aligner:
        return aligner
    real = Aligner(direction)
    real.state = aligner.state
    return real
