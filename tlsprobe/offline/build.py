"""Facts of one connection -> its `ConnectionReport`, in the live probe's words.

The handshake's `model.facts.HandshakeFacts` (offline.handshake) are described by the
probe's rules (model.describe: the offer, the key exchange's kind, where the group was
chosen, share sizes, "Server Temp Key", certificates, message names, alerts). Registry
lookups, certificate parsing and whole report derivations are remembered
in the analysis's `AnalysisCaches` (a capture repeats the same offers and certificates
thousands of times); nothing is cached process-wide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple, TypeVar, cast

from tlsprobe import registry
from tlsprobe.escaping import escaped_bytes
from tlsprobe.model import describe
from tlsprobe.model.capture import (
    SHAPE_JSON,
    BriefReport,
    ClientAuth,
    ConnectionReport,
    ConnectionTimings,
    Fingerprints,
    ReportText,
    shape_json,
    violation_of,
)
from tlsprobe.model.capture_json import connection_json, number
from tlsprobe.model.facts import HandshakeFacts, hello_facts
from tlsprobe.model.probe import (
    AlertInfo,
    CertificateInfo,
    Cipher,
    Codepoint,
    KeyExchange,
    Offer,
)
from tlsprobe.offline.caches import MAX_ENTRIES, AnalysisCaches
from tlsprobe.offline.facts import CLIENT, SERVER, ClientAuthFacts, Facts
from tlsprobe.offline.handshake import handshake_facts, key_exchange_facts
from tlsprobe.wire import fingerprints
from tlsprobe.wire.hello_fields import ClientHelloInfo

if TYPE_CHECKING:
    from tlsprobe.capture.events import ConnKey

_T = TypeVar("_T")
#: the bytes of a plain-text preamble a report shows (escaped, "..." when cut)
PREAMBLE_SHOWN: Final = 120


class Endpoints(NamedTuple):
    """Who and where: what the capture layer knows of a connection."""

    file: str
    id: int
    transport: str
    protocol: str
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int
    first_frame: int
    last_frame: int
    first_ts: float | None
    last_ts: float | None
    client_bytes: int = 0
    server_bytes: int = 0
    close: str | None = None
    midstream: bool = False
    preamble: bytes = b""
    gap_bytes: int = 0


def _memo(caches: AnalysisCaches, key: tuple[object, ...], make: Callable[..., _T],
          *args: object) -> _T:
    """make(*args), remembered in this analysis under `key` (a capture repeats the same
    offers, certificates and key exchanges thousands of times)."""
    memo = caches.memo
    value = memo.get(key, memo)
    if value is memo:
        if len(memo) >= MAX_ENTRIES:
            memo.clear()
        value = memo[key] = make(*args)
    return cast(_T, value)


def _codepoints(caches: AnalysisCaches, kind: str,
                values: tuple[int, ...]) -> tuple[Codepoint, ...]:
    make = _MAKE[kind]
    return _memo(caches, (kind, values), lambda: tuple(make(v) for v in values))


_MAKE: Final[dict[str, Callable[[int], Codepoint]]] = {
    "version": Codepoint.version, "group": Codepoint.group,
    "sigscheme": Codepoint.sigscheme, "certificate_type": Codepoint.certificate_type,
    "extension": lambda code: Codepoint(code, f"0x{code:04x}", registry.extension_name(code)),
    "compression": lambda method: Codepoint(  # RFC 3749: 1 DEFLATE, 64 LZS, others by hex
        method, f"0x{method:02x}", {0: "null", 1: "DEFLATE", 64: "LZS"}.get(
            method, f"0x{method:02x}")),
}


def _one(caches: AnalysisCaches, kind: str, value: int) -> Codepoint:
    return _codepoints(caches, kind, (value,))[0]


def _cipher(caches: AnalysisCaches, suite: int) -> Cipher:
    return _memo(caches, ("cipher", suite), Cipher.of, suite)


def offer_of(hello: ClientHelloInfo, caches: AnalysisCaches) -> Offer:
    """The live probe's Offer of a ClientHello summary (interned: clients repeat)."""
    facts = hello_facts(hello)
    return _memo(caches, ("offer", facts), describe.hello_offer, facts)


def _sslv2_specs(caches: AnalysisCaches, specs: tuple[int, ...]) -> tuple[Cipher, ...]:
    """An SSLv2-format ClientHello's cipher specs (interned: clients repeat themselves)."""
    return _memo(caches, ("sslv2", specs),
                 lambda: tuple(describe.sslv2_cipher(s) for s in specs))


def key_exchange_of(f: Facts, caches: AnalysisCaches) -> KeyExchange | None:
    """The key exchange in the probe's words (model.describe.key_exchange of its facts)."""
    facts = key_exchange_facts(f)
    return _memo(caches, ("kx", facts), describe.key_exchange, facts) if facts else None


def _message_names(facts: HandshakeFacts, more: int,
                   caches: AnalysisCaches) -> tuple[str, ...]:
    out = [_memo(caches, ("message", m), describe.message_label, m.sender, m.msg_type, m.hrr,
                 m.protected) for m in facts.messages]
    if more:
        out.append(f"... {more} more")
    return tuple(out)


class Derived(NamedTuple):
    """Everything in a report that depends only on the handshake's messages (`_derive`),
    with the holder of its shape's shared JSON text (model.capture.SHAPE_JSON)."""

    sni: str | None
    offer: Offer | None
    client_extensions: tuple[Codepoint, ...]
    server_extensions: tuple[Codepoint, ...]
    version: Codepoint | None
    cipher: Cipher | None
    key_exchange: KeyExchange | None
    hello_retry_request: Codepoint | None
    signature_scheme: Codepoint | None
    alpn: str | None
    resumption: str | None
    certificates: tuple[CertificateInfo, ...]
    client_auth: ClientAuth | None
    alerts: tuple[AlertInfo, ...]
    messages: tuple[str, ...]
    fingerprints: Fingerprints
    shape_json: list[tuple[str, ...] | None]


def _fingerprints(f: Facts, transport: str, caches: AnalysisCaches) -> Fingerprints:
    hello = f.client_hellos[0] if f.client_hellos else None
    sh = f.server_hello
    if hello is None and sh is None:
        return Fingerprints()
    j3: tuple[str | None, str | None] = (None, None)
    j4: tuple[str | None, str | None] = (None, None)
    if hello is not None and not hello.sslv2 and not hello.partial:
        j3, j4 = fingerprints.ja3(hello), fingerprints.ja4(hello, transport)
    j3s = fingerprints.ja3s(sh) if sh is not None else (None, None)
    return _memo(caches, ("prints", j3, j3s, j4), Fingerprints, j3[0], j3[1], j3s[0],
                 j3s[1], j4[0], j4[1])


def _derive(f: Facts, transport: str, caches: AnalysisCaches, brief: bool) -> Derived:
    """Everything in a report that depends only on the handshake's messages, not on the
    connection's addresses, randoms or times: its HandshakeFacts described as the probe
    describes them (model.describe). `brief`: for a `BriefReport`, which shows no
    certificate, so none is parsed (cryptography's X.509 parse and the summary cost some
    0.3 ms a certificate: most of a table row of a connection to a server not met before)."""
    facts = handshake_facts(f)
    hello = facts.client_hello
    version, suite, scheme = facts.version, facts.cipher_suite, facts.signature_scheme
    client_ext = facts.extensions_of(CLIENT, 1)
    server_ext = facts.extensions_of(SERVER, 2)
    kx = facts.key_exchange
    return Derived(
        hello.sni if hello is not None else None,
        _memo(caches, ("offer", hello), describe.hello_offer, hello) if hello else None,
        _codepoints(caches, "extension", client_ext) if client_ext else (),
        _codepoints(caches, "extension", server_ext) if server_ext else (),
        _one(caches, "version", version) if version is not None else None,
        _cipher(caches, suite) if suite is not None else None,
        _memo(caches, ("kx", kx), describe.key_exchange, kx) if kx is not None else None,
        _one(caches, "group", facts.hrr_group) if facts.hrr_group is not None else None,
        _one(caches, "sigscheme", scheme) if scheme is not None else None,
        facts.alpn, facts.resumption,
        () if brief else _chain(caches, facts.certificates),
        None if brief or f.client_auth is None else _client_auth(
            caches, f.client_auth, f.request_unknown() is None),
        tuple(describe.alert_info(a, live=False) for a in facts.alerts),
        _message_names(facts, f.more_messages, caches), _fingerprints(f, transport, caches),
        [None])


def _chain(caches: AnalysisCaches, ders: tuple[bytes, ...]) -> tuple[CertificateInfo, ...]:
    return tuple(_memo(caches, ("cert", der), describe.certificate_info, der) for der in ders)


def _client_auth(caches: AnalysisCaches, auth: ClientAuthFacts, known: bool) -> ClientAuth:
    """`known`: whether the server's handshake was read where a CertificateRequest would
    be (else, none read, `requested` is None: not known; `Facts.request_unknown`)."""
    # cryptography imported only for a CertificateRequest, not at start-up
    from tlsprobe.model.pubkey import distinguished_name
    requested, schemes, authorities, chain, types = auth
    names = tuple(_memo(caches, ("dn", der), distinguished_name, der) for der in authorities)
    return ClientAuth(requested if requested or known else None, _codepoints(caches, "sigscheme", schemes) if schemes else (),
                      len(authorities), True if chain is not None else None,
                      _chain(caches, chain) if chain else (), names,
                      _codepoints(caches, "certificate_type", types) if types else ())


def _derived(f: Facts, transport: str, brief: bool = False) -> Derived:
    """`_derive` of this handshake, remembered by its shape in the analysis caches (the
    brief derivations, without certificates, in a table of their own). The shape is what
    `_derive` depends on, without the per-connection values (randoms, session ids,
    times): the key under which a capture's repeated handshakes share their derivation
    (made here, not in a function of its own: once per connection)."""
    shapes = f.caches.briefs if brief else f.caches.reports
    hello = f.client_hellos[0] if f.client_hellos else None
    sh, hrr = f.server_hello, f.hrr
    shape = f.hello_shape  # hellos of one memo token have the same [3:] (a cheaper key)
    key = (transport, hello[0] if hello else None,
           (hello[3:] if shape is None else shape) if hello else None,
           f.client_hellos[-1][3:] if len(f.client_hellos) > 1 else None,
           f.server_shape if f.server_shape is not None else (sh[0],) + sh[3:] if sh
           else None, (hrr[0],) + hrr[3:] if hrr else None,
           f.ske, f.cke_length, f.tls13, f.ccs[0], f.ccs[1], f.key_exchange,
           # (what a capture gap may have hidden is not stated, and what it could have
           # held, by its size: a lost HelloRetryRequest, ServerKeyExchange; most
           # connections lost nothing)
           f.lost_sides and (f.handshake_gap[1] > 0, f.hello_retry_unseen(),
                             f.missing_server_key_exchange()),
           # (whether the server echoed the client's session ID: how it resumed)
           sh[2] == f.client_hellos[-1][2] if sh and f.client_hellos else None,
           tuple(f.certificates) if f.certificates else (),  # (no call for none)
           f.client_auth,
           tuple(f.alerts) if f.alerts else (), tuple(f.messages), f.more_messages,
           f.ticket_lifetime, f.alpn_ee, f.signature_scheme, f.sslv2_server, f.framing)
    derived = shapes.get(key)
    if derived is None:
        if len(shapes) >= MAX_ENTRIES:
            shapes.clear()
        derived = shapes[key] = _derive(f, transport, f.caches, brief)
    return cast(Derived, derived)


def brief_of(cid: int, transport: str, protocol: str, client: str, server: str,
             first_frame: int, f: Facts, derive_as: str = "tcp") -> BriefReport:
    """What the table and the statistics show of a finished connection (see
    `BriefReport`): the values `build_report` would give them (`client`, `server`:
    "address:port"; `derive_as`: the transport the handshake is described for, its
    fingerprints' "quic", "dtls" or "tcp", as `build_report`'s `transport`)."""
    (sni, offer, _ce, _se, version, cipher, kx, hrr, _scheme, alpn, resumption, _certs,
     _auth, alerts, _messages, prints, _json) = _derived(f, derive_as, True)
    return tuple.__new__(BriefReport, (
        cid, transport, protocol, client, server, first_frame, sni, offer, version, cipher,
        kx, hrr, alpn, resumption, alerts, prints, f.encrypted[0] and f.encrypted[1],
        violation_of(f.problems) if f.problems else None, handshake_complete(f),
        None if f.quic_version is None else quic_codepoint(f.quic_version)))


def _elapsed(where: Endpoints, f: Facts) -> tuple[float | None, float | None,
                                                   float | None, float | None]:
    """The report's timings before rounding: start, then ms to the ServerHello, to both
    sides encrypting, and first to last packet."""
    first_ts, last_ts, ch_ts = where.first_ts, where.last_ts, f.ch_ts
    return (first_ts,
            (f.sh_ts - ch_ts) * 1000 if ch_ts is not None and f.sh_ts is not None else None,
            (f.done_ts - ch_ts) * 1000 if ch_ts is not None and f.done_ts is not None
            else None,
            (last_ts - first_ts) * 1000 if first_ts is not None and last_ts is not None
            else None)


def _ms_json(value: float | None) -> str:
    """`number(round(value, 3))` (a report's milliseconds), without making the rounded
    float: under 1e9 the text of the rounded value is its 3-decimal form without trailing
    zeros (round and the format convert to decimal the same, correctly rounded way, and
    below 2**43 distinct 3-decimal numbers are distinct floats, so that form is the
    shortest that reads back as the rounded value: its repr)."""
    if value is None:
        return "null"
    if -1e9 < value < 1e9:
        text = f"{value:.3f}".rstrip("0")
        return text + "0" if text[-1] == "." else text
    return number(round(value, 3))


def _timings_json(first_ts: float | None, last_ts: float | None, f: Facts) -> str:
    """The report's "timings" object as `to_json` writes it (`_elapsed`'s values, the
    milliseconds by `_ms_json`), without the intermediate tuple."""
    ch, sh, done = f.ch_ts, f.sh_ts, f.done_ts
    whole = "null" if first_ts is None or last_ts is None else _ms_json((last_ts - first_ts) * 1000)
    return (f'{{"start": {number(first_ts)}, "server_hello_ms": '
            f'{"null" if ch is None or sh is None else _ms_json((sh - ch) * 1000)}, '
            f'"handshake_ms": {"null" if ch is None or done is None else _ms_json((done - ch) * 1000)}, '
            f'"duration_ms": {whole}}}')


#: `_own`'s values (a plain tuple: one is made per connection)
_Own = tuple[int, str | None, int | None, bool, bool, bool | None, bool, str | None,
             tuple[str, ...], Codepoint | None, tuple[Cipher, ...]]


#: the ends of a connection after which a Finished not read was never sent (the others:
#: None, reported while open; "end" of the capture; "evicted" from the table)
_ENDED: Final = ("fin", "rst", "reused")


def handshake_complete(f: Facts, close: str | None = "fin") -> bool | None:
    """Both Finished messages read (None: not decrypted, or one side's records without
    keys, so not known; or a Finished not read may still come, the connection open at the
    capture's end (`close`), or be in bytes of its side the capture lost): the value of a
    report's and a brief report's `handshake_complete`, defined once."""
    if not f.decrypted or f.keyless:
        return None
    client, server = f.finished
    if client and server:
        return True
    lost = f.lost_sides
    if close not in _ENDED or not client and lost & 1 or not server and lost & 2:
        return None
    return False


def _own(midstream: bool, preamble: bytes, f: Facts, close: str | None) -> _Own:
    """The report's values that are the connection's own (not its handshake shape's, not
    its endpoints as they are): client_hellos, client_random, session_ticket_lifetime,
    encrypted, decrypted, handshake_complete, midstream, preamble, problems, compression,
    sslv2_cipher_specs."""
    caches = f.caches
    hellos = f.client_hellos
    decrypted = f.decrypted
    sh = f.server_hello
    return (len(hellos), hellos[0].random.hex() if hellos else None, f.ticket_lifetime,
            f.encrypted[0] and f.encrypted[1], decrypted, handshake_complete(f, close),
            midstream or (not hellos and bool(f.server_hellos)),
            escaped_bytes(preamble, PREAMBLE_SHOWN) if preamble else None, tuple(f.problems),
            _one(caches, "compression", sh.compression_method)
            if sh is not None and sh.compression_method else None,
            _sslv2_specs(caches, hellos[0].sslv2_cipher_specs) if hellos and hellos[0].sslv2
            else ())


def build_report(where: Endpoints, f: Facts, transport: str = "tcp") -> ConnectionReport:
    """The report of one finished connection (its handshake's derivation remembered in the
    analysis caches of its facts)."""
    (sni, offer, client_ext, server_ext, version, cipher, kx, hrr, scheme, alpn, resumption,
     certificates, client_auth, alerts, messages, prints, shape_json) = _derived(f, transport)
    (file, cid, transport_name, protocol, client_ip, client_port, server_ip, server_port,
     first_frame, last_frame, _first_ts, _last_ts, client_bytes, server_bytes, close,
     _midstream, _preamble, gap_bytes) = where
    (client_hellos, client_random, ticket_lifetime, encrypted, decrypted, complete,
     midstream, preamble, problems, compression, sslv2) = _own(where.midstream,
                                                               where.preamble, f, where.close)
    start, server_hello_ms, handshake_ms, duration_ms = _elapsed(where, f)
    timings = object.__new__(ConnectionTimings)  # ConnectionTimings(...), without __init__
    timings.__dict__.update(zip(_TIMINGS_FIELDS, (
        start, round(server_hello_ms, 3) if server_hello_ms is not None else None,
        round(handshake_ms, 3) if handshake_ms is not None else None,
        round(duration_ms, 3) if duration_ms is not None else None)))
    return _frozen(ConnectionReport, _REPORT_FIELDS, shape_json, (
        file, cid, transport_name, protocol, f"{client_ip}:{client_port}",
        f"{server_ip}:{server_port}", client_ip, client_port, server_ip, server_port,
        first_frame, last_frame, sni, offer, client_hellos, client_random, client_ext,
        server_ext, version, cipher, kx, hrr, scheme, alpn, resumption, ticket_lifetime,
        certificates, client_auth, alerts, messages, prints, timings, client_bytes, server_bytes,
        encrypted, decrypted, complete, close, midstream, preamble, gap_bytes, problems,
        compression, sslv2, f.framing,
        None if f.quic_version is None else quic_codepoint(f.quic_version)))


def quic_codepoint(version: int) -> Codepoint:
    """A QUIC version as a report shows it: its number, hex and name (v1, v2, draft-29).
    wire/quic.py is imported here, for a QUIC connection only: it loads cryptography's
    ciphers, which a capture without QUIC never needs (about 33 ms of every `pcap` run's
    start-up, and 30 M instructions, when it was imported with this module)."""
    from tlsprobe.wire.quic import version_name
    return Codepoint(version, f"0x{version:08x}", version_name(version))


def json_text_of(file: str, key: ConnKey, first_frame: int, last_frame: int, first_ts: float,
                 last_ts: float, nbytes: list[int], close: str | None, midstream: bool,
                 preamble: bytes, gap_bytes: int, f: Facts, transport: str = "tcp"
                 ) -> ReportText:
    """`build_report(Endpoints(file, key.id, transport, "tls", ...), f).to_json()` of a TCP
    connection (`key`: its ConnKey), written without building the report or its Endpoints
    (what `pcap --jsonl` writes of most connections): the shape's part of the text is
    remembered with its derivation, the rest written from the connection's values."""
    derived = _derived(f, transport)
    shared = derived.shape_json
    dumps = f.caches.encoder().encode
    cid, client_ip, client_port, server_ip, server_port = key
    (client_hellos, client_random, ticket_lifetime, encrypted, decrypted, complete,
     midstream, text, problems, compression, sslv2) = _own(midstream, preamble, f, close)
    return tuple.__new__(ReportText, (cid, connection_json(
        dumps, shared[0] or shape_json(shared, dumps, dict(zip(_SHAPE_FIELDS,
                                                               derived)).__getitem__),
        file, cid, transport, "tls", f"{client_ip}:{client_port}",
        f"{server_ip}:{server_port}", client_ip, client_port, server_ip, server_port,
        first_frame, last_frame, client_hellos, client_random, ticket_lifetime,
        _timings_json(first_ts, last_ts, f), nbytes[0], nbytes[1], encrypted, decrypted,
        complete, close, midstream, text, gap_bytes, problems, compression, sslv2,
        f.framing, None if f.quic_version is None else quic_codepoint(f.quic_version))))


#: the report fields of `_derive`'s values, in its order
_SHAPE_FIELDS: Final = ("sni", "offer", "client_extensions", "server_extensions", "version",
                        "cipher", "key_exchange", "hello_retry_request", "signature_scheme", "alpn",
                        "resumption", "certificates", "client_auth", "alerts", "messages",
                        "fingerprints")
_TIMINGS_FIELDS: Final = tuple(field.name for field in dataclasses.fields(ConnectionTimings))
_REPORT_FIELDS: Final = tuple(field.name for field in dataclasses.fields(ConnectionReport))


def _frozen(cls: type[_T], names: tuple[str, ...],
            shape_json: list[tuple[str, ...] | None],
            values: tuple[object, ...]) -> _T:
    """An instance of frozen dataclass `cls` from all its field values in order, without
    the per-field object.__setattr__ calls of the frozen __init__ (4 us of a report's
    ~15): the result is the same immutable instance, equal to cls(*values). It also
    carries its shape's shared JSON text holder (offline_model.SHAPE_JSON), not a field."""
    obj = object.__new__(cls)
    d = obj.__dict__
    d.update(zip(names, values))
    d[SHAPE_JSON] = shape_json
    return obj


