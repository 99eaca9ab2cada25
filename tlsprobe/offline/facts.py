"""What one connection's handshake messages, alerts and records said, as they arrive.

Both readers feed the same accumulator: the fast reader (record framing of its own, hellos
summarised by `wire.hello_summary`) and the Flow reader (session.Flow, used for the `--msg`
trace and for key-log decryption). Messages arrive as whole raw handshake messages, so one
piece of code turns them into facts whichever reader framed them; the Flow reader also passes
its decoded message, which is used for what only decryption reveals (TLS 1.3 Certificate,
EncryptedExtensions, CertificateVerify). `offline.build` turns the facts into a report.
Parse contexts and hello summaries are remembered in the analysis's `AnalysisCaches`.
"""

from __future__ import annotations

from typing import Final

from tlsprobe import registry
from tlsprobe.model.describe import message_name
from tlsprobe.offline.caches import AnalysisCaches
from tlsprobe.offline.choices import EARLY_DATA, server_hello_choices, tag_length
from tlsprobe.wire.buffer import DecodeError
from tlsprobe.wire.certificate import Certificate, CertificateVerify
from tlsprobe.wire.context import ParseContext
from tlsprobe.wire.handshake import Decoded, decode_handshake
from tlsprobe.wire.hello_fields import ClientHelloInfo, ServerHelloInfo
from tlsprobe.wire.hello_info import client_hello_info, server_hello_info
from tlsprobe.wire.hello_summary import parse_client_hello, parse_server_hello
from tlsprobe.wire.summary import (
    ServerKeyExchangeInfo,
    certificate_list,
    certificate_request_summary,
    client_key_exchange_length,
    parse_server_key_exchange,
    ticket_lifetime,
)

CLIENT: Final = 0
SERVER: Final = 1
MAX_MESSAGES: Final = 64      # message names kept per connection
MAX_PROBLEMS: Final = 16
MAX_HELLOS: Final = 8
#: ServerHello verdicts remembered by hello shapes (`Facts._server_hello`)
MAX_CHOICES: Final = 4096

CH: Final = 1
SH: Final = 2
NST: Final = 4
EE: Final = 8
CERT: Final = 11
SKE: Final = 12
CR: Final = 13
SHD: Final = 14
CV: Final = 15
CKE: Final = 16
FIN: Final = 20
#: `Facts.client_auth`: (CertificateRequest seen, its signature schemes, the CAs it names
#: (DER distinguished names), the client's certificate chain: None before its Certificate)
#: (requested, schemes, authorities, the client's chain or None, certificate types)
ClientAuthFacts = tuple[bool, tuple[int, ...], tuple[bytes, ...], tuple[bytes, ...] | None,
                        tuple[int, ...]]
#: `Facts.hello_retry_unseen`'s problem text
HRR_NOT_CAPTURED: Final = ("HelloRetryRequest not captured (the client sent a second "
                           "ClientHello, which answers one): its group is not known")
_DTLS_AS_TLS: Final = {0xFEFF: 0x0302, 0x0100: 0x0302, 0xFEFD: 0x0303, 0xFEFC: 0x0304}

# Shared initial values of the Facts fields that most connections never change: a
# connection gets a list of its own on its first change (the methods below), so that an
# open connection that only sent its ClientHello holds none (memory, and the time to make
# them). Nothing may change these in place.
_NO_SERVER_HELLOS: Final[list[ServerHelloInfo]] = []
_NO_CERTIFICATES: Final[list[bytes]] = []
_NO_ALERTS: Final[list[tuple[int, int, int, bool]]] = []
_NO_PROBLEMS: Final[list[str]] = []
_NEITHER: Final[list[bool]] = [False, False]
#: `Facts.handshake_gap` of a connection that lost nothing (shared, never changed)
_NO_GAP: Final[list[int]] = [0, 0, 0, 0, 0, 0, 0]
#: a ChangeCipherSpec record's size: a gap of just this, between whole records, before the
#: side's CCS was read, followed by a handshake record that starts no message, held that
#: side's CCS (what follows is its encrypted Finished), not the head of a message
CCS_RECORD: Final = 6
#: the fewest bytes the body of each message has (RFC 5246 7.4, RFC 8446 4): a capture gap
#: between whole records that is smaller than one record holding such a message cannot
#: have held one (`Facts.gap_may_hold`)
MIN_BODY_CERTIFICATE: Final = 3        # certificate_list<0..2^24-1> (TLS 1.3: + context 1)
MIN_BODY_SERVER_KEY_EXCHANGE: Final = 1
MIN_BODY_CERTIFICATE_REQUEST: Final = 4  # certificate_types<1..>, CAs<0..> (TLS 1.0)
MIN_BODY_SERVER_HELLO_DONE: Final = 0
MIN_BODY_HELLO_RETRY: Final = 38       # version, random, session id, suite, compression
#: the (sender, type, HRR, decrypted) notes of the messages, one object each (at most
#: 2 x 256 x 2 x 2): a connection's list of them holds no tuples of its own
_NOTES: Final[dict[tuple[int, int, bool, bool], tuple[int, int, bool, bool]]] = {}
#: the notes of the usual messages (neither a HelloRetryRequest nor decrypted), by
#: `direction << 8 | type`: the same objects as `_NOTES` holds, looked up without making
#: and hashing a tuple per message
_PLAIN_NOTES: Final[tuple[tuple[int, int, bool, bool], ...]] = tuple(
    _NOTES.setdefault((d, t, False, False), (d, t, False, False))
    for d in (CLIENT, SERVER) for t in range(256))


class Facts:
    """Mutable per-connection accumulator (one per connection, dropped when reported)."""

    __slots__ = (
        "alerts",
        "alpn_ee",
        "caches",
        "ccs",
        "certificates",
        "ch_frame",
        "ch_ts",
        "cipher_suite",
        "cke_length",
        "client_auth",
        "client_hellos",
        "decrypted",
        "done_ts",
        "dtls",
        "encrypted",
        "encrypted_alert",
        "finished",
        "framing",
        "handshake_gap",
        "hello_shape",
        "hrr",
        "key_exchange",
        "keyless",
        "lost_sides",
        "messages",
        "more_messages",
        "named_group",
        "problems",
        "quic_version",
        "server_hello",
        "server_hellos",
        "server_shape",
        "sh_frame",
        "sh_ts",
        "signature_scheme",
        "ske",
        "sslv2_server",
        "ticket_lifetime",
        "tls13",
        "tls13_certificates",
        "unsure_ccs",
        "version",
    )

    def __init__(self, caches: AnalysisCaches | None = None) -> None:
        #: the analysis's memo and budgets (a fresh one: nothing shared)
        self.caches = caches if caches is not None else AnalysisCaches()
        self.client_hellos: list[ClientHelloInfo] = []
        #: the hello memo's token of the first ClientHello's shape (HelloShapes.last)
        self.hello_shape: int | None = None
        self.server_hellos = _NO_SERVER_HELLOS
        self.server_hello: ServerHelloInfo | None = None
        #: the hello memo's token of `server_hello`'s shape (HelloShapes.server_last)
        self.server_shape: int | None = None
        self.framing: str | None = None  # TLS carried inside another protocol ("openvpn")
        self.quic_version: int | None = None  # the QUIC version of a QUIC handshake
        self.hrr: ServerHelloInfo | None = None
        self.version: int | None = None
        self.cipher_suite: int | None = None
        self.key_exchange: str | None = None
        self.named_group: int | None = None
        self.tls13 = False
        self.ske: ServerKeyExchangeInfo | None = None
        self.cke_length: int | None = None
        self.certificates = _NO_CERTIFICATES
        self.tls13_certificates = False
        #: (CertificateRequest seen, its schemes, its CA count, the client's chain or None
        #: before its Certificate): None while neither was read
        self.client_auth: ClientAuthFacts | None = None
        self.alerts = _NO_ALERTS  # (sender, level, desc, decrypted)
        self.messages: list[tuple[int, int, bool, bool]] = []  # (sender, type, hrr, decrypted)
        self.more_messages = 0
        self.ticket_lifetime: int | None = None
        self.alpn_ee: bytes | None = None
        self.signature_scheme: int | None = None
        self.finished = _NEITHER
        self.ccs = _NEITHER
        self.encrypted = _NEITHER   # the side has sent a protected record
        #: the side whose first protected TLS 1.3 record can only hold an alert (None: none)
        self.encrypted_alert: int | None = None
        #: bit 1 << direction: the capture missed bytes of that side (a swapped
        #: connection's roles may lag)
        self.lost_sides = 0
        #: per side, bytes lost after the ServerHello, before that side's CCS (TLS 1.0-1.2)
        #: or its Finished (TLS 1.3: never read without keys); then per side the largest
        #: gap before that (the ServerHello's too), (bit 1 << side) whether one cut a
        #: record or message, and per side the size of the last one (`gap_may_hold`)
        self.handshake_gap = _NO_GAP
        self.problems = _NO_PROBLEMS
        self.ch_ts: float | None = None
        self.sh_ts: float | None = None
        self.done_ts: float | None = None
        self.ch_frame: int | None = None
        self.sh_frame: int | None = None
        self.decrypted = False
        self.keyless = False  # decrypted, but one side's records without keys (TLS 1.3)
        self.sslv2_server: int | None = None   # an SSL 2.0 SERVER-HELLO's version
        self.dtls = False
        #: bit 1 << direction: that side sent a CCS that may have started protection (its
        #: ServerHello lost, a TLS 1.3 client): its next handshake record decides
        self.unsure_ccs = 0

    # -- state the readers consult ----------------------------------------------------------
    def context(self, direction: int) -> ParseContext:
        version = self.version
        if self.dtls and version is not None:  # message layouts follow the TLS version
            version = _DTLS_AS_TLS.get(version, version)
        return self.caches.context(version, self.cipher_suite, self.key_exchange,
                                   self.named_group, direction == SERVER)

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS and text not in self.problems:
            if self.problems is _NO_PROBLEMS:
                self.problems = []
            self.problems.append(text)

    def protected(self, direction: int, content_type: int) -> bool:
        """Is a record of this type from this side protected (as session.Flow decides)?"""
        if self.tls13:
            return content_type == 23
        return self.ccs[direction] and content_type != 20

    @property
    def sslv2_session(self) -> bool:
        """The client spoke SSLv2 format (records in SSLv2 form may follow)."""
        return bool(self.client_hellos and self.client_hellos[0].sslv2)

    def mark_encrypted(self, direction: int, ts: float) -> None:
        if self.encrypted is _NEITHER:
            self.encrypted = [False, False]
        self.encrypted[direction] = True
        if self.done_ts is None and self.encrypted[0] and self.encrypted[1] and \
                self.encrypted_alert is None:  # (an alert in place of a Finished: no end)
            self.done_ts = ts

    def first_protected(self, direction: int, length: int) -> None:
        """The first protected record of `direction` in TLS 1.3, `length` bytes of
        ciphertext, seen without its key. A record of the AEAD tag + 3 bytes holds a
        TLSInnerPlaintext of 2 bytes and its content type (RFC 8446 5.2/5.4; padding only
        makes a record longer), and the first protected record of a side holds a whole
        handshake message of 4 bytes or more unless it is an alert: the server's is its
        EncryptedExtensions (6 bytes or more), the client's after the ServerHello its
        Finished (36 or more), Certificate or EndOfEarlyData, never application data. So
        such a record is taken for an alert (only a handshake message cut into 2-byte
        records, which RFC 8446 5.1 allows and no implementation is known to do, would look
        the same). Not decided when the client offered early data (its 0-RTT records may
        still be in flight) or may have (its ClientHello not read whole), when bytes were
        lost before (the first record may be in them) or the suite's tag length is not
        known. Called once per connection and side."""
        if not self.tls13 or self.server_hello is None or self.encrypted[direction] or \
                self.encrypted_alert is not None or self.lost_sides:
            return
        if direction == CLIENT:
            if not self.client_hellos:
                return
            for hello in self.client_hellos:  # (a loop, not any(): once per connection)
                if hello.partial or EARLY_DATA in hello.extensions:
                    return
        tag = tag_length(self.cipher_suite)
        if tag is not None and length == tag + 3:
            self.encrypted_alert = direction
            self.alert(direction, -1, -1)

    # -- records ------------------------------------------------------------------------
    def change_cipher_spec(self, direction: int) -> None:
        """TLS 1.0-1.2: that side's later records are protected. Also when the capture
        started after the hellos (nothing says TLS 1.3, whose CCS changes nothing)."""
        if self.server_hello is not None and not self.tls13 or \
                self.server_hello is None and self.hrr is None and (
                    not self.client_hellos or self._offers_before_tls13_only()):
            if self.ccs is _NEITHER:
                self.ccs = [False, False]
            self.ccs[direction] = True
        elif self.server_hello is None:
            # TLS 1.2 (protected from here) or TLS 1.3's middlebox CCS (plaintext may
            # follow: the ServerHello after a HelloRetryRequest, a second ClientHello)
            self.unsure_ccs |= 1 << direction

    def _offers_before_tls13_only(self) -> bool:
        """Every ClientHello offered only versions before TLS 1.3 (read whole, with a
        well-formed supported_versions if any): then a CCS starts protection whatever
        the ServerHello that a capture gap took chose."""
        for hello in self.client_hellos:
            if hello.partial or hello.sslv2 or "supported_versions" in hello.problems:
                return False
            offered = hello.supported_versions if 43 in hello.extensions else ()
            for version in (hello.legacy_version, *offered):
                if self.dtls:
                    version = _DTLS_AS_TLS.get(version, version)
                if version >= 0x0304 and not registry.is_grease(version):
                    return False
        return True

    def lost(self, direction: int, size: int) -> None:
        """`size` bytes of `direction` were never captured: counted when they fell inside
        a handshake (after the ServerHello, before that side's CCS in TLS 1.0-1.2, its
        Finished in TLS 1.3), where they may have held handshake messages."""
        self.lost_sides |= 1 << direction
        if self.finished[direction] if self.tls13 else self.ccs[direction]:
            return
        gap = self.handshake_gap
        if gap is _NO_GAP:
            gap = self.handshake_gap = [0, 0, 0, 0, 0, 0, 0]
        gap[2 + direction] = max(gap[2 + direction], size)
        gap[5 + direction] = size
        if self.server_hello is not None:
            gap[direction] += size

    def gap_cut(self, direction: int, tail: bool = False) -> None:
        """A gap of `direction` cut a record or a handshake message (the reader held part of
        one when it came, or dropped bytes after it to find the next record or, `tail`,
        the rest of a message): it may have held part of any message. (Not a tail after
        a gap of a ChangeCipherSpec record's size where that side's CCS was not read: the
        gap held the CCS, the record after it is the encrypted Finished.)"""
        if self.finished[direction] if self.tls13 else self.ccs[direction]:
            return
        gap = self.handshake_gap
        if gap is _NO_GAP:
            gap = self.handshake_gap = [0, 0, 0, 0, 0, 0, 0]
        elif tail and not self.tls13 and gap[5 + direction] == CCS_RECORD and \
                not gap[4] & 1 << direction:
            return
        gap[4] |= 1 << direction

    def gap_may_hold(self, direction: int, body: int) -> bool:
        """Whether the gaps of `direction`'s handshake may have held a message whose body
        has at least `body` bytes: yes after a gap that cut a record or message (part of
        one); else only a gap as large as a record holding the message whole (its header,
        the message's header and body, TLS 1.3's content type and shortest tag, 8 bytes)."""
        gap = self.handshake_gap
        if gap[4] & 1 << direction:
            return True
        return gap[2 + direction] >= 5 + 4 + body + (1 + 1 + 8 if self.tls13 else 0)

    def missing_server_key_exchange(self) -> str | None:
        """The problem text when the key exchange needs a ServerKeyExchange that a gap
        may have swallowed (not to be reported as absent)."""
        gap = self.handshake_gap[SERVER]
        if gap and not self.tls13 and self.ske is None and self.key_exchange not in (
                None, "RSA", "PSK", "RSA_PSK") and \
                self.gap_may_hold(SERVER, MIN_BODY_SERVER_KEY_EXCHANGE):
            return f"ServerKeyExchange not captured (gap of {gap} bytes)"
        return None

    def resumption_unknown(self) -> str | None:
        """The problem text when a TLS 1.0-1.2 server sent its CCS without any Certificate,
        ServerKeyExchange or ServerHelloDone (an abbreviated handshake's shape) and how it
        resumed is not shown, or went on to protected records after a gap that took its CCS
        (whether it resumed is not shown): bytes lost there (a full handshake's messages may
        be in them), or no ticket offered and no session ID the client sent echoed (RFC 5246 7.4.1.2:
        the server resumes a session ID by echoing it)."""
        sh = self.server_hello
        if sh is None or self.tls13 or \
                any(d == SERVER and t in (11, 12, 14) for d, t, _, _ in self.messages):
            return None
        gap = self.handshake_gap[SERVER]
        # no ChangeCipherSpec read but protected records after a gap: it was in the bytes
        # lost, and the handshake's shape (abbreviated or full) is not shown
        if gap and (self.gap_may_hold(SERVER, MIN_BODY_SERVER_HELLO_DONE) if self.ccs[SERVER]
                    else self.encrypted[SERVER]):
            return f"resumption not known (gap of {gap} bytes in the server's handshake)"
        if not self.ccs[SERVER]:
            return None
        hello = self.client_hellos[-1] if self.client_hellos else None
        if hello is None:  # (the server echoes a session ID in a ticket's resumption too)
            return "resumption mechanism not known: the ClientHello was not captured"
        if hello.session_ticket or sh.session_id and sh.session_id == hello.session_id:
            return None
        return ("resumption mechanism not known: the server went from its ServerHello to its "
                "ChangeCipherSpec (an abbreviated handshake), but no ticket was offered and it "
                "echoed no session ID the client sent")

    def missing_certificate(self) -> str | None:
        """The problem text when the server's handshake lost bytes where its Certificate
        may have been and none was read (its chain is then not known, not absent): a
        suite authenticated by a certificate (not PSK, SRP or anonymous), no Certificate
        read, not resumed (TLS 1.3: its PSK; TLS 1.0-1.2: `resumption_unknown` speaks)."""
        gap = self.handshake_gap[SERVER]
        sh = self.server_hello
        if not gap or sh is None or self.certificates or self.ccs[SERVER] and not any(
                d == SERVER and t in (11, 12, 14) for d, t, _, _ in self.messages) or \
                not self.gap_may_hold(SERVER, MIN_BODY_CERTIFICATE + self.tls13):
            return None
        if self.tls13:
            if not self.decrypted or sh.psk_identity is not None:
                return None
        else:
            suite = registry.cipher_suite(self.cipher_suite) \
                if self.cipher_suite is not None else None
            if suite is None or suite.is_anon or suite.auth in ("PSK", "SRP", "KRB5",
                                                                "ECCPWD"):
                return None
        return f"Certificate not captured (gap of {gap} bytes)"

    def request_unknown(self) -> str | None:
        """The problem text when the client sent a Certificate but no CertificateRequest
        was read and the server's handshake lost bytes where it may have been: whether the
        server asked for one (and what) is not known, not "no" (`client_auth.requested`
        null; model.facts.certificate_requested_of's rule for a capture's gaps)."""
        gap, auth = self.handshake_gap[SERVER], self.client_auth
        if not gap or auth is None or auth[0] or self.tls13 and not self.decrypted or \
                not self.gap_may_hold(SERVER, MIN_BODY_CERTIFICATE_REQUEST):
            return None
        return f"CertificateRequest not known (gap of {gap} bytes in the server's handshake)"

    def hello_retry_unseen(self) -> bool:
        """TLS 1.3 over TCP: the client sent a second ClientHello, other than its first,
        which answers a HelloRetryRequest (RFC 8446 4.1.2), and none was read where the
        server's bytes were lost in a capture gap. (Not a hello sent twice the same, nor
        QUIC's after a Retry: no server bytes are lost there.)"""
        hellos = self.client_hellos
        return bool(self.tls13 and self.hrr is None and self.lost_sides & 1 << SERVER and
                    len(hellos) > 1 and hellos[1] != hellos[0] and
                    self.gap_may_hold(SERVER, MIN_BODY_HELLO_RETRY))

    def alert(self, direction: int, level: int, description: int, decrypted: bool = False) -> None:
        if len(self.alerts) < MAX_MESSAGES:
            if self.alerts is _NO_ALERTS:
                self.alerts = []
            self.alerts.append((direction, level, description, decrypted))

    def sslv2_client_hello(self, info: ClientHelloInfo, ts: float, frame: int) -> None:
        self._client_hello(info, ts, frame)
        self._note(CLIENT, CH, False, False)

    def sslv2_record(self, direction: int, record: bytes, ts: float, frame: int) -> None:
        """The first record of a side in SSLv2 format (a ClientHello, or an SSL 2.0
        server's SERVER-HELLO)."""
        from tlsprobe.wire.hello_info import (
            parse_sslv2_server_hello,
            sslv2_client_hello_info,
        )
        from tlsprobe.wire.record import SSLv2ClientHello
        try:
            if direction == CLIENT:
                self.sslv2_client_hello(sslv2_client_hello_info(SSLv2ClientHello.parse(record)),
                                        ts, frame)
            else:
                hello = parse_sslv2_server_hello(record)
                self.sslv2_server = hello.version
                self.certificates = [hello.certificate] if hello.certificate else []
                if self.sh_ts is None:
                    self.sh_ts, self.sh_frame = ts, frame
        except DecodeError as exc:
            self.problem(f"malformed SSLv2 record from the {_side(direction)}: {exc}")

    # -- handshake messages ---------------------------------------------------------------
    def on_message(self, direction: int, msg: bytes, ts: float, frame: int,
                   decrypted: bool = False, decoded: Decoded | None = None) -> None:
        """One whole handshake message (header included) from `direction`."""
        t = msg[0]
        try:
            if t == CH and direction == CLIENT:
                self._client_hello(self._parse_ch(msg, decoded), ts, frame)
            elif t == SH and direction == SERVER:
                self._server_hello(self._parse_sh(msg, decoded), ts, frame,
                                   self.caches.hellos.server_last)
            elif t == SHD:
                pass  # nothing to read (tested before the rest: one of a full handshake)
            elif t == SKE and direction == SERVER and not self.tls13:
                self.ske = parse_server_key_exchange(msg, self.context(SERVER))
                if self.ske.named_curve is not None:
                    self.named_group = self.ske.named_curve
                if self.ske.signature_scheme is not None:
                    self.signature_scheme = self.ske.signature_scheme
            elif t == CKE and direction == CLIENT and not self.tls13:
                self.cke_length = client_key_exchange_length(msg, self.context(CLIENT))
            elif t == CERT and direction == SERVER:
                if not self.certificates:
                    ctx = self.context(SERVER)
                    self.certificates = list(decoded.message.certificates) if (
                        decoded is not None and isinstance(decoded.message, Certificate)) \
                        else self.caches.certificates(msg, ctx)
                    self.tls13_certificates = ctx.tls13
            elif t == NST and direction == SERVER:
                self.ticket_lifetime = ticket_lifetime(msg)
            elif t == EE and direction == SERVER:
                self._encrypted_extensions(msg, decoded)
            elif t == CV and direction == SERVER and (decoded is not None or decrypted):
                # (decrypted without a decoded message: a QUIC Handshake packet's)
                cv = (decoded or decode_handshake(msg, self.context(SERVER))).message
                self.signature_scheme = cv.algorithm if isinstance(cv, CertificateVerify) \
                    else None
            elif t == FIN and decrypted:
                if self.finished is _NEITHER:
                    self.finished = [False, False]
                self.finished[direction] = True
            elif t == CR and direction == SERVER:
                self._certificate_request(msg)
            elif t == CERT:  # the client's (the server's: above)
                self._client_certificate(msg, decoded)
        except DecodeError as exc:
            if t == CH and direction == CLIENT and self._partial_hello(msg, ts, frame):
                self.problem(f"malformed ClientHello from the client: {exc} (the fields "
                             "before it are reported)")
            else:
                self.problem(f"malformed {message_name(t)} from the {_side(direction)}: {exc}")
        messages = self.messages
        if len(messages) >= MAX_MESSAGES:
            self.more_messages += 1
        elif decrypted or t == SH and self.hrr is not None and self.server_hello is None:
            self._note(direction, t, t == SH and self.hrr is not None and
                       self.server_hello is None, decrypted)
        else:  # (`_note`'s, looked up: every message)
            messages.append(_PLAIN_NOTES[direction << 8 | t])

    def _certificate_request(self, msg: bytes) -> None:
        """The server's first CertificateRequest: what it asks the client for."""
        auth = self.client_auth
        if auth is None or not auth[0]:
            schemes, authorities, types = certificate_request_summary(msg, self.context(SERVER))
            self.client_auth = (True, schemes, authorities, auth[3] if auth else None, types)

    def _client_certificate(self, msg: bytes, decoded: Decoded | None) -> None:
        """The client's first Certificate: its chain (empty: it has none to send)."""
        auth = self.client_auth
        if auth is not None and auth[3] is not None:
            return
        chain = tuple(decoded.message.certificates) if decoded is not None and \
            isinstance(decoded.message, Certificate) else \
            tuple(certificate_list(msg, self.context(CLIENT)))
        self.client_auth = (auth[0], auth[1], auth[2], chain, auth[4]) if auth else \
            (False, (), (), chain, ())

    def _partial_hello(self, msg: bytes, ts: float, frame: int) -> bool:
        """A ClientHello that is malformed or cut: its whole fields count (True when any)."""
        from tlsprobe.wire.hello_partial import partial_client_hello
        info = partial_client_hello(msg)
        if info is None:
            return False
        self._client_hello(info, ts, frame)
        return True

    def cut_client_hello(self, msg: bytes, ts: float, frame: int) -> None:
        """The start of a ClientHello whose rest the capture lost (snaplen, gap): its whole
        fields are reported and the cut is said."""
        if self.client_hellos or not self._partial_hello(msg, ts, frame):
            return
        declared = 4 + int.from_bytes(msg[1:4], "big")
        self.problem(f"ClientHello cut short by the capture ({len(msg)} of {declared} bytes "
                     "captured): the fields before the cut are reported")
        self._note(CLIENT, CH, False, False)

    def _note(self, direction: int, t: int, hrr: bool, decrypted: bool) -> None:
        if len(self.messages) < MAX_MESSAGES:
            note = (direction, t, hrr, decrypted)
            self.messages.append(_NOTES.setdefault(note, note))
        else:
            self.more_messages += 1

    def _parse_ch(self, msg: bytes, decoded: Decoded | None) -> ClientHelloInfo:
        try:
            info = parse_client_hello(msg, self.caches.hellos)
            if not self.client_hellos:
                self.hello_shape = self.caches.hellos.last
            return info
        except DecodeError:
            decoded = decoded or decode_handshake(msg)  # the codec's error text wins
            return client_hello_info(decoded.message, len(msg))

    def _parse_sh(self, msg: bytes, decoded: Decoded | None) -> ServerHelloInfo:
        try:
            return parse_server_hello(msg, self.caches.hellos)
        except DecodeError:
            decoded = decoded or decode_handshake(msg)
            return server_hello_info(decoded.message, len(msg))

    def _client_hello(self, info: ClientHelloInfo, ts: float, frame: int) -> None:
        if len(self.client_hellos) < MAX_HELLOS:
            self.client_hellos.append(info)
        if self.ch_ts is None:
            self.ch_ts, self.ch_frame = ts, frame
        for name in info.problems:
            self.problem(f"malformed {name} extension in the ClientHello")

    def _server_hello(self, info: ServerHelloInfo, ts: float, frame: int,
                      shape: int | None) -> None:
        """`shape`: the hello memo's token of this ServerHello (HelloShapes.server_last)."""
        if self.server_hellos is _NO_SERVER_HELLOS:
            self.server_hellos = [info]  # (the usual: one)
        elif len(self.server_hellos) < MAX_HELLOS:
            self.server_hellos.append(info)
        # what follows depends only on the two hellos' shapes (their fields but the
        # randoms and session ids) when both are the memo's: worked out once per pair
        key = (self.hello_shape, shape, self.dtls) if shape is not None and \
            self.hello_shape is not None and len(self.client_hellos) == 1 else None
        choices = self.caches.choices
        said = choices.get(key) if key is not None else None
        if said is None:
            said = server_hello_choices(info, self.client_hellos[-1] if self.client_hellos
                                        else None, self.dtls)
            if key is not None:
                if len(choices) >= MAX_CHOICES:
                    choices.clear()
                choices[key] = said
        problems, hrr, version, suite, tls13, key_exchange, group = said
        for text in problems:
            self.problem(text)
        if hrr:
            self.hrr = info
            return
        self.server_hello = info
        self.server_shape = shape
        if self.sh_ts is None:
            self.sh_ts, self.sh_frame = ts, frame
        self.version, self.cipher_suite, self.tls13 = version, suite, tls13
        self.key_exchange = key_exchange
        if group is not None:
            self.named_group = group

    def _encrypted_extensions(self, msg: bytes, decoded: Decoded | None) -> None:
        decoded = decoded or decode_handshake(msg, self.context(SERVER))
        ext = decoded.message.extension(16)
        if ext is not None:
            names = ext.decode("encrypted_extensions")
            self.alpn_ee = names[0] if len(names) == 1 else None


def _side(direction: int) -> str:
    return "client" if direction == CLIENT else "server"
