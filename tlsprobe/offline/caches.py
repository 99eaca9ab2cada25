"""The memo and the memory budget of one capture analysis (nothing process-global).

A capture repeats the same few clients and servers thousands of times, so the offline path
remembers what it derived: hello summaries by shape (wire.hello_summary.HelloShapes), parse
contexts, and the parts of a report that depend only on the handshake (offline.build).
The fast reader also counts the bytes of partial handshake messages that all connections
of the capture hold together (`held`, bounded by offline.fast.MAX_HELD).

One `AnalysisCaches` belongs to one `CaptureAnalysis` and goes with it: two analyses (in a
row, or interleaved in one process) share nothing, and an analysis stopped early leaves no
budget behind for the next one.
"""

from __future__ import annotations

from typing import Any, Final

from tlsprobe.model.encode import JsonEncoder
from tlsprobe.offline.choices import Choices
from tlsprobe.wire.context import ParseContext
from tlsprobe.wire.hello_summary import HelloShapes
from tlsprobe.wire.summary import certificate_list

#: entries of each memo before it is emptied (a capture of endlessly varied handshakes
#: must not make memory grow without bound)
MAX_ENTRIES: Final = 8192
#: Certificate messages remembered (each up to a few kilobytes)
MAX_CERT_MESSAGES: Final = 1024


class AnalysisCaches:
    """Per-analysis memo tables; `held`: bytes of partial handshake messages held by the
    fast readers of this analysis's open connections."""

    __slots__ = ("_encoder", "briefs", "certs", "choices", "contexts", "held", "hellos", "memo",
                 "reports", "sessions")

    def __init__(self) -> None:
        self.held = 0
        self.hellos = HelloShapes()
        self.contexts: dict[tuple[int | None, int | None, str | None, int | None, bool],
                            ParseContext] = {}
        #: report parts by handshake shape (offline.build)
        self.reports: dict[tuple[object, ...], tuple[object, ...]] = {}
        #: the same for the table's and the statistics' brief reports, which show no
        #: certificate: derived without parsing one (offline.build `brief_of`)
        self.briefs: dict[tuple[object, ...], tuple[object, ...]] = {}
        #: describing memo of offline.build: (kind, arguments) -> value
        self.memo: dict[tuple[Any, ...], Any] = {}
        #: DER lists of the Certificate messages met, by (message, TLS 1.3 form)
        self.certs: dict[tuple[bytes, bool], tuple[bytes, ...]] = {}
        #: what a ServerHello said against its ClientHello, by the pair of their shapes
        #: and DTLS (offline.choices: `server_hello_choices`)
        self.choices: dict[tuple[int, int, bool], Choices] = {}
        #: TLS 1.0-1.2 master secrets of the connections decrypted so far, by session id
        #: (b"i" + id) and session ticket (b"t" + ticket): what a later connection of the
        #: capture that resumes the session uses, as tshark's session cache (offline.decrypt)
        self.sessions: dict[bytes, bytes] = {}
        self._encoder: JsonEncoder | None = None

    def remember_session(self, key: bytes, master: bytes) -> None:
        """A session's master secret under `key` (bounded like the other memos)."""
        if len(self.sessions) >= MAX_ENTRIES:
            self.sessions.clear()
        self.sessions[key] = master

    def encoder(self) -> JsonEncoder:
        """The JSON encoder of the reports this analysis writes as text (it remembers the
        text of the values they share: offers, suites, certificates)."""
        if self._encoder is None:
            from tlsprobe.model.capture import capture_encoder
            self._encoder = capture_encoder()
        return self._encoder

    def context(self, version: int | None, suite: int | None, kx: str | None,
                group: int | None, server: bool) -> ParseContext:
        """The ParseContext of these negotiated values (the same few in a capture)."""
        key = (version, suite, kx, group, server)
        ctx = self.contexts.get(key)
        if ctx is None:
            if len(self.contexts) >= MAX_ENTRIES:
                self.contexts.clear()
            ctx = self.contexts[key] = ParseContext(
                version=version, cipher_suite=suite, key_exchange=kx, named_group=group,
                is_server_message=server)
        return ctx

    def certificates(self, msg: bytes, ctx: ParseContext) -> list[bytes]:
        """`certificate_list(msg, ctx)`, remembered: a server sends the same chain to every
        client, so its message is split once, and connections with the same chain get the
        same DER objects (whose hashes Python keeps: the report shape key hashes them once).
        Raises DecodeError when malformed (not remembered)."""
        key = (msg, ctx.tls13)
        ders = self.certs.get(key)
        if ders is None:
            if len(self.certs) >= MAX_CERT_MESSAGES:
                self.certs.clear()
            ders = self.certs[key] = tuple(certificate_list(msg, ctx))
        return list(ders)
