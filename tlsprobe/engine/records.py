"""The client's side of the record layer: what it sends, and the keys in force each way.

Every byte the client sends goes through `ClientRecords`: as plaintext records of the
current record-layer version, or under the write protection once one is installed. The
bytes are also fed to the session.Flow as the client's direction, so the trace shows both
directions in order; the Flow gets a twin of each protection to show our own encrypted
records in clear. ClientHandshake (engine.client) builds on this and decides when the
version and the keys change.
"""

from __future__ import annotations

from collections.abc import Callable

from tlsprobe.engine.common import MAX_FRAGMENT, TLS10, RecordDeprotector, plain_records
from tlsprobe.engine.protection import RecordProtection
from tlsprobe.engine.verdict import (
    Output,
    ReadKeys,
    SendChangeCipherSpec,
    SendMessage,
    SendRecord,
    WriteKeys,
)
from tlsprobe.session.flow import CLIENT, SERVER, Event, Flow

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA = 20, 21, 22, 23


class ClientRecords:
    """Output buffer, record-layer version and record protection of one client."""

    def __init__(self, flow: Flow) -> None:
        self._flow = flow
        self._events: list[Event] = []
        self._sent_types: set[int] = set()   # handshake types we sent
        self._record_version = TLS10
        self._write: RecordProtection | None = None
        self._read: RecordProtection | None = None
        self._out = bytearray()

    def take_output(self) -> bytes:
        """The bytes queued for the server since the last call."""
        data, self._out = bytes(self._out), bytearray()
        return data

    def _emit(self, data: bytes) -> None:
        self._out += data
        self._events.extend(self._flow.feed(CLIENT, data))

    def _send_record(self, content_type: int, payload: bytes) -> None:
        """Send `payload` as records, protected once `set_write` was called."""
        if self._write is None:
            self._emit(plain_records(content_type, self._record_version, payload))
            return
        for i in range(0, max(len(payload), 1), MAX_FRAGMENT):
            self._emit(self._write.encrypt(content_type, payload[i:i + MAX_FRAGMENT]))

    def _send_handshake(self, raw: bytes) -> None:
        """Send one whole handshake message (the transcript is the caller's)."""
        self._sent_types.add(raw[0])
        self._send_record(HANDSHAKE, raw)

    def _send_change_cipher_spec(self) -> None:
        self._emit(plain_records(CHANGE_CIPHER_SPEC, self._record_version, b"\x01"))

    def _set_write(self, make: Callable[[], RecordProtection]) -> None:
        """Protect what we send from now on; a twin protection lets the Flow decrypt our own
        records, so the trace shows our Finished and requests in clear."""
        self._write = make()
        self._flow.set_deprotector(CLIENT, RecordDeprotector(make()))

    def _set_read(self, protection: RecordProtection) -> None:
        """Decrypt the server's records from the next one on."""
        self._read = protection
        self._flow.set_deprotector(SERVER, RecordDeprotector(protection))

    def protections(self) -> tuple[RecordProtection | None, RecordProtection | None]:
        """The (write, read) protections in force: a renegotiation runs under them until
        its own ChangeCipherSpecs (probes/checks/renegotiation.py)."""
        return self._write, self._read

    def _perform(self, out: Output) -> None:
        """Carry out one output of a version half's verdict (engine.verdict)."""
        if isinstance(out, SendMessage):
            self._send_handshake(out.raw)
        elif isinstance(out, SendRecord):
            self._send_record(out.content_type, out.payload)
        elif isinstance(out, SendChangeCipherSpec):
            self._send_change_cipher_spec()
        elif isinstance(out, WriteKeys):
            self._set_write(out.make)
        elif isinstance(out, ReadKeys):
            self._set_read(out.protection)
