"""The fast reader: record and handshake framing of its own, only what the report needs.

Used when no trace is asked for and no key is known. Each direction frames records until it
sends its first protected record; from then on its bytes are only counted (`counting`),
which is where most of a capture's packets go. Handshake messages are reassembled from
handshake records (several per record, one over several records) with a bounded buffer and
handed to `Facts`. After a gap the partial record and message are dropped and the
`Aligner` finds the next plausible record header.

The framing loop is the wire codec's (wire.record, wire.handshake: same header checks,
same limits) hand-inlined: the codec's incremental readers build a record object per record
and a Decoded per message, which on a capture's hundreds of thousands of records costs
most of the throughput this reader is here for. tests/offline/test_streams.py checks it
against the Flow reader (session.Flow over the codec) on the same captures.
"""

from __future__ import annotations

from typing import Final

from tlsprobe.offline.facts import CLIENT, Facts
from tlsprobe.offline.framing import (
    ALIGNED,
    HELLO_ROLES,
    START,
    Aligner,
    Settled,
    own_aligner,
    role_of,
)
from tlsprobe.wire.alert import ciphertext_alert
from tlsprobe.wire.handshake import MESSAGE_TYPES, tiles_messages
from tlsprobe.wire.record import MAX_CIPHERTEXT, sslv2_record_size

MAX_MESSAGE: Final = 1 << 18
#: partial handshake messages held by all connections of an analysis together (counted
#: in its `AnalysisCaches.held`): past this, a message still growing beyond
#: `SMALL_MESSAGE` is given up (a capture of many connections that each start a huge
#: message must not make memory grow without bound)
MAX_HELD: Final = 64 << 20
SMALL_MESSAGE: Final = 1 << 14
MAX_OPAQUE_RECORDS: Final = 8
# the shared "nothing held" values of a direction's partial record and message (most
# directions never hold one): never changed in place (`_keep` and `_handshake` give a
# direction its own list or bytearray first)
_NO_PARTS: Final[list[bytes]] = []
_NO_MESSAGE: Final = bytearray()


class FastHalf:
    """One direction: its aligner, partial record and partial handshake message."""

    __slots__ = (
        "after_gap",
        "aligner",
        "app_records",
        "counting",
        "direction",
        "first",
        "have",
        "hs",
        "need",
        "parts",
    )

    def __init__(self, direction: int) -> None:
        self.direction = direction
        # shared until this direction needs an Aligner of its own (framing.Settled)
        self.aligner: Aligner | Settled = START
        # bytes of an incomplete record (or SSLv2 hello): kept as they came, joined once
        # `need` bytes are there (a record over many segments is copied once, not per one)
        self.parts = _NO_PARTS
        self.have = 0
        self.need = 0
        self.hs = _NO_MESSAGE
        self.after_gap = False
        self.counting = False
        self.first = True
        self.app_records = 0


class FastReader:
    """Feeds one connection's two directions into `facts`."""

    __slots__ = ("caches", "facts", "halves", "swapped")
    decryptor = None  # (the Flow reader's when keys are known: this one never decrypts)

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.caches = facts.caches  # the analysis's budget of held partial messages
        self.halves = [FastHalf(0), FastHalf(1)]
        self.swapped = False

    def swap(self) -> None:
        """Content shows the client is the other side: exchange the halves' roles. The
        connection reorders `halves` once the capture has flipped its directions."""
        for half in self.halves:
            half.direction ^= 1
            if type(half.aligner) is Aligner:
                half.aligner.direction ^= 1
        self.swapped = True

    def release(self) -> None:
        """The connection is done: its partial messages no longer count against MAX_HELD."""
        first, second = self.halves
        if first.hs or second.hs:  # (rare: most connections end holding nothing)
            for half in self.halves:
                if half.hs:
                    self.caches.held -= len(half.hs)
                    half.hs = _NO_MESSAGE

    def trace_lines(self) -> list[str] | None:
        """No trace from this reader (the Flow reader keeps one)."""
        return None

    def feed_side(self, direction: int, data: bytes, ts: float, frame: int) -> None:
        """`feed` the half at index `direction` (a session whose sides never swap), unless
        it only counts bytes now."""
        half = self.halves[direction]
        if not half.counting:
            self.feed(half, data, ts, frame)

    def gap_side(self, direction: int, ts: float, frame: int) -> None:
        """`gap` on the half at index `direction`, unless it only counts bytes now."""
        half = self.halves[direction]
        if not half.counting:
            self.gap(half, ts, frame)

    def gap(self, half: FastHalf, ts: float = 0.0, frame: int = 0, size: int = 0) -> None:
        """Bytes of the half were lost (`size`: how many, 0 not known): the partial record
        and message are dropped and the next record header looked for."""
        if half.counting:
            return
        if half.parts or half.hs:  # (it cut a record or a message)
            self.facts.gap_cut(half.direction)
        if half.direction == CLIENT and not self.facts.client_hellos:
            self._cut_hello(half, ts, frame)
        half.parts = _NO_PARTS
        half.have = 0
        self.caches.held -= len(half.hs)
        half.hs = _NO_MESSAGE
        half.after_gap = True
        if half.aligner is not START:  # nothing seen yet: nothing to look for again
            half.aligner = aligner = own_aligner(half.aligner, half.direction)
            aligner.lost()

    def _cut_hello(self, half: FastHalf, ts: float, frame: int) -> None:
        """Bytes are lost on the client side before any whole ClientHello: the start of one
        held in the partial message or record still gives its whole fields."""
        record = b"".join(half.parts)
        body = record[5:] if record[:1] == b"\x16" and len(record) > 5 else b""
        msg = bytes(half.hs) + body if half.hs else body
        if len(msg) >= 4 and msg[0] == 1:
            self.facts.cut_client_hello(msg, ts, frame)

    def feed(self, half: FastHalf, data: bytes, ts: float, frame: int) -> None:
        """One segment of a direction: frame its records and read them (the loop that
        every handshake byte goes through, so the common cases are inline)."""
        aligner = half.aligner
        if aligner is not ALIGNED:
            if aligner is START and len(data) >= 5 and 20 <= data[0] <= 24 and \
                    data[1] == 3 and data[2] <= 4:
                half.aligner = ALIGNED  # the usual start: a record, nothing to align
            elif aligner.state != "aligned":
                half.aligner = aligner = own_aligner(aligner, half.direction)
                skipped = aligner.skipped
                data = aligner.feed(data)
                if aligner.state == "dead":
                    half.counting = True
                elif half.after_gap and aligner.skipped > skipped:
                    self.facts.gap_cut(half.direction)  # (the rest of a record it cut)
        if half.parts and data:
            half.parts.append(data)
            half.have += len(data)
            if half.have < half.need:
                return
            data = b"".join(half.parts)
            half.parts = _NO_PARTS
        facts = self.facts
        while data:
            if half.first:
                if data[0] == 22 and len(data) >= 6 and \
                        HELLO_ROLES.get(data[5], half.direction) == half.direction:
                    half.first = False  # a record from the side expected to send it
                else:
                    data = self._first(half, data, ts, frame)
                    if not data:
                        return
            direction = half.direction
            p, n = 0, len(data)
            while p + 5 <= n:
                ct = data[p]
                length = (data[p + 3] << 8) | data[p + 4]
                if not 20 <= ct <= 24 or data[p + 1] != 3 or length > MAX_CIPHERTEXT:
                    data = self._bad_header(half, data, p)  # re-aligned bytes to frame
                    break
                end = p + 5 + length
                if end > n:  # a record cut short: wait for the rest of it
                    self._keep(half, data[p:] if p else data, end - p)
                    return
                if ct == 23 if facts.tls13 else facts.ccs[direction] and ct != 20:
                    if facts.tls13:  # (once per side: it is only counted from here)
                        facts.first_protected(direction, length)
                    facts.mark_encrypted(direction, ts)  # protected: nothing more to learn
                    half.counting = True
                    return
                if ct == 22:  # (first: most records of a handshake)
                    if facts.unsure_ccs and self._protected_after_ccs(half, data[p + 5:end],
                                                                      ts):
                        return
                    # one whole message (its length's high byte 0: a record is shorter)
                    if not half.hs and not half.after_gap and length >= 4 and \
                            data[p + 6] == 0 and ((data[p + 7] << 8) | data[p + 8]) + 4 == length:
                        facts.on_message(direction, data[p + 5:end], ts, frame)
                    else:
                        self._handshake(half, data[p + 5:end], ts, frame)
                elif ct == 20:
                    facts.change_cipher_spec(direction)
                else:
                    self._record(half, ct, data[p + 5:end], ts)
                    if half.counting:  # (only `_record` of these ends the framing)
                        return
                p = end
            else:  # every whole record read; maybe the start of a header is left
                if p < n:
                    self._keep(half, data[p:] if p else data, 5)
                return
            # a bad header: `data` is now what follows the next plausible record start

    def _protected_after_ccs(self, half: FastHalf, fragment: bytes, ts: float) -> bool:
        """The first handshake record after a CCS that may or may not have started
        protection (the ServerHello that says which was lost, see
        `Facts.change_cipher_spec`): ciphertext unless it is whole plaintext messages.
        True when it is protected (this side is then only counted)."""
        facts = self.facts
        bit = 1 << half.direction
        if not facts.unsure_ccs & bit:
            return False
        facts.unsure_ccs &= ~bit
        if tiles_messages(fragment):
            return False
        facts.mark_encrypted(half.direction, ts)
        half.counting = True
        return True

    def _keep(self, half: FastHalf, rest: bytes, need: int) -> None:
        """An incomplete record (or hello) waits for `need` bytes in all."""
        half.parts = [rest]
        half.have = len(rest)
        half.need = need

    def _first(self, half: FastHalf, buf: bytes, ts: float, frame: int) -> bytes:
        """The first record bytes of a direction: who sent them (a ClientHello from the
        side taken for the server swaps the roles), and an SSLv2-format hello."""
        role = role_of(buf)
        if role is not None and role != half.direction and not self.facts.client_hellos:
            self.swap()
        half.first = False
        if buf[0] & 0x80:
            return self._sslv2(half, buf, ts, frame)
        return buf

    def _bad_header(self, half: FastHalf, buf: bytes, p: int) -> bytes:
        """No record header at `p`: the bytes from there to search for records again."""
        if buf[p] & 0x80 and self.facts.sslv2_session:
            half.counting = True  # SSL 2.0 records after an SSLv2 hello: not TLS
            return b""
        self.facts.problem(f"no TLS record header where one was expected ({_side(half)})")
        self.caches.held -= len(half.hs)
        half.hs = _NO_MESSAGE
        half.after_gap = True
        half.aligner = aligner = own_aligner(half.aligner, half.direction)
        return aligner.reset_with(buf[p:])

    def _sslv2(self, half: FastHalf, buf: bytes, ts: float, frame: int) -> bytes:
        """An SSLv2-format first record: read it; returns what follows it (b"" when the
        record is incomplete (kept for later) or the side is done)."""
        total = sslv2_record_size(buf)
        if total is None or len(buf) < total:
            half.first = True
            self._keep(half, bytes(buf), total or len(buf) + 1)
            return b""
        self.facts.sslv2_record(half.direction, bytes(buf[:total]), ts, frame)
        if half.direction != CLIENT:  # an SSL 2.0 server: nothing more to read
            half.counting = True
            return b""
        return buf[total:]

    def _record(self, half: FastHalf, ct: int, fragment: bytes, ts: float) -> None:
        facts = self.facts
        if ct == 21:
            if ciphertext_alert(fragment):  # protected after a change of keys not seen
                facts.mark_encrypted(half.direction, ts)
                half.counting = True
                return
            if len(fragment) % 2:
                facts.problem(f"malformed alert record from the {_side(half)}")
                return
            for i in range(0, len(fragment), 2):
                facts.alert(half.direction, fragment[i], fragment[i + 1])
        elif ct == 23:  # (a ChangeCipherSpec is read in `feed`)
            half.app_records += 1
            if half.app_records >= MAX_OPAQUE_RECORDS:
                # application data with no visible handshake (captured mid-stream) or
                # early data: nothing more to learn from this side
                facts.mark_encrypted(half.direction, ts)
                half.counting = True

    def _handshake(self, half: FastHalf, fragment: bytes, ts: float, frame: int) -> None:
        hs = half.hs
        if half.after_gap and not hs:
            if len(fragment) < 4 or fragment[0] not in MESSAGE_TYPES or \
                    int.from_bytes(fragment[1:4], "big") > MAX_MESSAGE:
                self.facts.gap_cut(half.direction, tail=True)
                return  # the middle of a message whose start was lost
            half.after_gap = False
        if not hs and len(fragment) >= 4 and \
                4 + int.from_bytes(fragment[1:4], "big") == len(fragment):
            self.facts.on_message(half.direction, fragment, ts, frame)  # the common case
            return
        if hs is _NO_MESSAGE:
            hs = half.hs = bytearray()
        before = len(hs)
        hs += fragment
        while len(hs) >= 4:
            size = 4 + int.from_bytes(hs[1:4], "big")
            if size > MAX_MESSAGE:
                self.facts.problem(f"handshake message of {size} bytes from the "
                                   f"{_side(half)}: over the limit, skipped")
                break
            if len(hs) < size:
                if len(hs) > SMALL_MESSAGE and \
                        self.caches.held + len(hs) - before > MAX_HELD:
                    self.facts.problem(f"handshake message of {size} bytes from the "
                                       f"{_side(half)}: too much buffered, skipped")
                    break
                self.caches.held += len(hs) - before
                return
            msg = bytes(hs[:size])
            del hs[:size]
            self.facts.on_message(half.direction, msg, ts, frame)
        else:
            self.caches.held += len(hs) - before
            return
        self.caches.held -= before  # the partial message is dropped
        half.hs = _NO_MESSAGE
        half.after_gap = True


def _side(half: FastHalf) -> str:
    return "client" if half.direction == CLIENT else "server"
