"""Facts of one connection -> its `ConnectionReport`, in the live probe's words.

The describing rules are the probe's (model.describe: the offer, the key exchange's kind,
where the group was chosen, share sizes, "Server Temp Key", certificates, message names),
with one addition the capture gives: for TLS 1.2 `client_share_bytes` is the
ClientKeyExchange key length (ECDH point, DH public value or the encrypted premaster
secret). Registry lookups, certificate parsing and whole report derivations are remembered
in the analysis's `AnalysisCaches` (a capture repeats the same offers and certificates
thousands of times); nothing is cached process-wide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar, cast

from tlsprobe import registry
from tlsprobe.model import describe
from tlsprobe.offline import fingerprints
from tlsprobe.offline.caches import MAX_ENTRIES, AnalysisCaches
from tlsprobe.offline.facts import CLIENT, SERVER, Facts
from tlsprobe.wire.hello_fields import PRE_SHARED_KEY, ClientHelloInfo, ServerHelloInfo
from tlsprobe.model.capture import (
    SHAPE_JSON,
    BriefReport,
    ConnectionReport,
    ConnectionTimings,
    Fingerprints,
    ReportText,
    connection_json,
    shape_json,
    violation_of,
)
from tlsprobe.model.encode import number
from tlsprobe.model.probe import ENCRYPTED_ALERT, AlertInfo, Cipher, Codepoint, KeyExchange, Offer

_T = TypeVar("_T")


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


def _memo(caches: AnalysisCaches, key: tuple[Any, ...], make: Callable[..., _T],
          *args: Any) -> _T:
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
                values: tuple[int, ...]) -> tuple[Any, ...]:
    return _memo(caches, (kind, values), lambda: tuple(_MAKE[kind](v) for v in values))


_MAKE: dict[str, Callable[[int], Any]] = {
    "version": Codepoint.version, "group": Codepoint.group,
    "sigscheme": Codepoint.sigscheme, "cipher": Cipher.of,
    "extension": lambda code: Codepoint(code, f"0x{code:04x}", registry.extension_name(code)),
    "compression": lambda method: Codepoint(  # RFC 3749: 1 DEFLATE, 64 LZS, others by hex
        method, f"0x{method:02x}", {0: "null", 1: "DEFLATE", 64: "LZS"}.get(
            method, f"0x{method:02x}")),
}


def _one(caches: AnalysisCaches, kind: str, value: int) -> Any:
    return _codepoints(caches, kind, (value,))[0]


def _text(data: bytes) -> str:
    return data.decode("ascii", "backslashreplace")


def offer_of(hello: ClientHelloInfo, caches: AnalysisCaches) -> Offer:
    """The live probe's Offer of a ClientHello summary (interned: clients repeat)."""
    args = (hello.supported_versions or (hello.legacy_version,), hello.cipher_suites,
            hello.supported_groups, tuple(g for g, _ in hello.key_shares),
            hello.signature_algorithms, tuple(_text(p) for p in hello.alpn), hello.sni,
            hello.size)
    return _memo(caches, ("offer",) + args, describe.offer, *args)


def _sslv2_specs(caches: AnalysisCaches, specs: tuple[int, ...]) -> tuple[Cipher, ...]:
    """An SSLv2-format ClientHello's cipher specs (interned: clients repeat themselves)."""
    return _memo(caches, ("sslv2", specs),
                 lambda: tuple(describe.sslv2_cipher(s) for s in specs))


def _named_group(caches: AnalysisCaches, kind: str, source: str, group: int,
                 server_len: int | None, client_len: int | None) -> KeyExchange:
    """A named-group key exchange in s_client's words (a capture repeats the same few)."""
    args = (kind, source, group, server_len, client_len)
    return _memo(caches, ("kx",) + args, describe.named_group_key_exchange, *args)


def key_exchange_of(f: Facts, caches: AnalysisCaches) -> KeyExchange | None:
    sh = f.server_hello
    if sh is None:
        return None
    # a version not known: a key_share sent still names the group chosen (or, unreadable,
    # says that it is not known)
    if f.tls13 or _version_unknown(sh) and (
            sh.key_share is not None or "key_share" in sh.problems):
        if sh.key_share is None:
            if "key_share" in sh.problems:  # sent but unreadable: not a psk_ke handshake
                return KeyExchange(kind="unknown", source="malformed")
            return KeyExchange(kind="PSK", source="none")
        group, server_len = sh.key_share
        hello = f.client_hellos[-1] if f.client_hellos else None
        client_len = next((n for g, n in hello.key_shares if g == group), None) \
            if hello is not None else None
        return _named_group(caches, describe.key_share_kind(group),
                            "hello_retry_request" if f.hrr is not None else "key_share",
                            group, server_len, client_len)
    kx, ske = f.key_exchange, f.ske
    missing = f.missing_server_key_exchange() if ske is None else None
    if missing is not None:   # lost in a capture gap: not captured, not absent
        return KeyExchange(kind=kx or "unknown", source="not_captured",
                           client_share_bytes=f.cke_length)
    if ske is None or kx in ("RSA", "PSK", "RSA_PSK"):
        return KeyExchange(kind=kx or "unknown", source="rsa" if kx == "RSA" else "none",
                           client_share_bytes=f.cke_length)
    if ske.kind == "ECJPAKE" and ske.named_curve is not None:
        # the curve only: its key pairs and proofs are no key share
        return KeyExchange(kind="ECJPAKE", source="server_key_exchange",
                           group=_one(caches, "group", ske.named_curve))
    if ske.named_curve is not None:
        return _named_group(caches, "ECDHE", "server_key_exchange", ske.named_curve,
                            ske.public_length, f.cke_length)
    if ske.dh_p is not None:
        from tlsprobe.kex.dhprime import dh_group_name
        p = int.from_bytes(ske.dh_p, "big")
        return describe.dhe_key_exchange(p, dh_group_name(p), ske.public_length,
                                         f.cke_length)
    if ske.explicit_curve:
        return describe.explicit_curve_key_exchange(f.cke_length)
    return KeyExchange(kind=ske.kind or kx or "unknown", source="server_key_exchange",
                       client_share_bytes=f.cke_length)


def _version_unknown(sh: ServerHelloInfo) -> bool:
    """A malformed supported_versions extension hides the version chosen (legacy_version
    is not it)."""
    return "supported_versions" in sh.problems


def resumption_of(f: Facts) -> str | None:
    sh = f.server_hello
    if sh is None:
        return None
    if f.tls13:
        # the extension is there only when a PSK was chosen, readable or not
        return "psk" if sh.psk_identity is not None or PRE_SHARED_KEY in sh.extensions \
            else None
    if f.resumption_unknown() is not None:
        return None  # the server's messages may be in the bytes lost
    full = any(t in (11, 12, 14) for d, t, _, _ in f.messages if d == SERVER)
    if f.ccs[SERVER] and not full:
        hello = f.client_hellos[-1] if f.client_hellos else None
        return "session_ticket" if hello is not None and hello.session_ticket else "session_id"
    return None


def _message_names(f: Facts, caches: AnalysisCaches) -> tuple[str, ...]:
    out = [_memo(caches, ("message",) + m, describe.message_label, *m) for m in f.messages]
    if f.more_messages:
        out.append(f"... {f.more_messages} more")
    return tuple(out)


def _derive(f: Facts, transport: str,
            caches: AnalysisCaches) -> tuple:  # type: ignore[type-arg]
    """Everything in a report that depends only on the handshake's messages, not on the
    connection's addresses, randoms or times."""
    hello = f.client_hellos[0] if f.client_hellos else None
    sh = f.server_hello
    prints = Fingerprints()
    if hello is not None or sh is not None:
        whole = hello is not None and not hello.sslv2 and not hello.partial
        j3 = fingerprints.ja3(hello) if whole else (None, None)  # type: ignore[arg-type]
        j3s = fingerprints.ja3s(sh) if sh is not None else (None, None)
        j4 = fingerprints.ja4(hello, transport) if whole else (None, None)  # type: ignore[arg-type]
        prints = _memo(caches, ("prints", j3, j3s, j4), Fingerprints, j3[0], j3[1], j3s[0],
                       j3s[1], j4[0], j4[1])
    alpn = sh.alpn if sh is not None and sh.alpn is not None else f.alpn_ee
    scheme = f.signature_scheme
    return (
        hello.sni if hello is not None else None,
        offer_of(hello, caches) if hello is not None else None,
        _codepoints(caches, "extension", hello.extensions) if hello else (),
        _codepoints(caches, "extension", sh.extensions) if sh else (),
        (None if _version_unknown(sh) else _one(caches, "version", sh.selected_version))
        if sh is not None else
        _one(caches, "version", f.sslv2_server) if f.sslv2_server is not None else None,
        _one(caches, "cipher", sh.cipher_suite) if sh is not None else None,
        key_exchange_of(f, caches),
        _one(caches, "group", f.hrr.hrr_group) if f.hrr is not None and
        f.hrr.hrr_group is not None else None,
        _one(caches, "sigscheme", scheme) if scheme is not None else None,
        _text(alpn) if alpn is not None else None, resumption_of(f),
        tuple(_memo(caches, ("cert", der), describe.certificate_info, der)
              for der in f.certificates),
        tuple(_alert_info(d, level, desc) for d, level, desc, _ in f.alerts),
        _message_names(f, caches), prints, [None])



def _alert_info(direction: int, level: int, description: int) -> AlertInfo:
    """An alert of the report; level -1: a protected record that can only hold an alert
    (Facts.first_protected), its level and description encrypted."""
    side = "client" if direction == CLIENT else "server"
    if level < 0:
        return AlertInfo(side, None, None, ENCRYPTED_ALERT)
    return AlertInfo(side, level, description, registry.alert_name(description))


def _shape(f: Facts, transport: str) -> tuple:  # type: ignore[type-arg]
    """What `_derive` depends on, without the per-connection values (randoms, session ids,
    times): the key under which a capture's repeated handshakes share their derivation."""
    hello = f.client_hellos[0] if f.client_hellos else None
    sh, hrr = f.server_hello, f.hrr
    shape = f.hello_shape  # hellos of one memo token have the same [3:] (a cheaper key)
    return (transport, hello[0] if hello else None,
            (hello[3:] if shape is None else shape) if hello else None,
            f.client_hellos[-1][3:] if len(f.client_hellos) > 1 else None,
            f.server_shape if f.server_shape is not None else (sh[0],) + sh[3:] if sh
            else None, (hrr[0],) + hrr[3:] if hrr else None,
            f.ske, f.cke_length, f.tls13, f.ccs[0], f.ccs[1], f.key_exchange,
            f.handshake_gap[1] > 0,  # (what a capture gap may have hidden is not stated)
            tuple(f.certificates), tuple(f.alerts), tuple(f.messages), f.more_messages,
            f.ticket_lifetime, f.alpn_ee, f.signature_scheme, f.sslv2_server, f.framing)


def _derived(f: Facts, transport: str) -> tuple:  # type: ignore[type-arg]
    """`_derive` of this handshake, remembered by its shape in the analysis caches."""
    shapes = f.caches.reports
    key = _shape(f, transport)
    derived = shapes.get(key)
    if derived is None:
        if len(shapes) >= MAX_ENTRIES:
            shapes.clear()
        derived = shapes[key] = _derive(f, transport, f.caches)
    return derived


def brief_of(cid: int, transport: str, protocol: str, client: str, server: str,
             first_frame: int, f: Facts) -> BriefReport:
    """What the table and the statistics show of a finished connection (see
    `BriefReport`): the values `build_report` would give them (`client`, `server`:
    "address:port")."""
    (sni, offer, _ce, _se, version, cipher, kx, hrr, _scheme, alpn, resumption, _certs,
     alerts, _messages, prints, _json) = _derived(f, transport)
    return tuple.__new__(BriefReport, (
        cid, transport, protocol, client, server, first_frame, sni, offer, version, cipher,
        kx, hrr, alpn, resumption, alerts, prints, f.encrypted[0] and f.encrypted[1],
        violation_of(f.problems) if f.problems else None))


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
        text = ("%.3f" % value).rstrip("0")
        return text + "0" if text[-1] == "." else text
    return number(round(value, 3))


def _timings_json(first_ts: float | None, last_ts: float | None, f: Facts) -> str:
    """The report's "timings" object as `to_json` writes it (`_elapsed`'s values, the
    milliseconds by `_ms_json`), without the intermediate tuple."""
    ch, sh, done = f.ch_ts, f.sh_ts, f.done_ts
    ms = _ms_json
    whole = "null" if first_ts is None or last_ts is None else ms((last_ts - first_ts) * 1000)
    return (f'{{"start": {number(first_ts)}, "server_hello_ms": '
            f'{"null" if ch is None or sh is None else ms((sh - ch) * 1000)}, '
            f'"handshake_ms": {"null" if ch is None or done is None else ms((done - ch) * 1000)}, '
            f'"duration_ms": {whole}}}')


def _own(midstream: bool, preamble: bytes, f: Facts) -> tuple:  # type: ignore[type-arg]
    """The report's values that are the connection's own (not its handshake shape's, not
    its endpoints as they are): client_hellos, client_random, session_ticket_lifetime,
    encrypted, decrypted, handshake_complete, midstream, preamble, problems, compression,
    sslv2_cipher_specs."""
    caches = f.caches
    hellos = f.client_hellos
    decrypted = f.decrypted
    sh = f.server_hello
    return (len(hellos), hellos[0].random.hex() if hellos else None, f.ticket_lifetime,
            f.encrypted[0] and f.encrypted[1], decrypted,
            (f.finished[0] and f.finished[1]) if decrypted else None,
            midstream or (not hellos and bool(f.server_hellos)),
            _printable(preamble) if preamble else None, tuple(f.problems),
            _one(caches, "compression", sh.compression_method)
            if sh is not None and sh.compression_method else None,
            _sslv2_specs(caches, hellos[0].sslv2_cipher_specs) if hellos and hellos[0].sslv2
            else ())


def build_report(where: Endpoints, f: Facts, transport: str = "tcp") -> ConnectionReport:
    """The report of one finished connection (its handshake's derivation remembered in the
    analysis caches of its facts)."""
    (sni, offer, client_ext, server_ext, version, cipher, kx, hrr, scheme, alpn, resumption,
     certificates, alerts, messages, prints, shape_json) = _derived(f, transport)
    (file, cid, transport_name, protocol, client_ip, client_port, server_ip, server_port,
     first_frame, last_frame, _first_ts, _last_ts, client_bytes, server_bytes, close,
     _midstream, _preamble, gap_bytes) = where
    (client_hellos, client_random, ticket_lifetime, encrypted, decrypted, complete,
     midstream, preamble, problems, compression, sslv2) = _own(where.midstream,
                                                               where.preamble, f)
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
        certificates, alerts, messages, prints, timings, client_bytes, server_bytes,
        encrypted, decrypted, complete, close, midstream, preamble, gap_bytes, problems,
        compression, sslv2, f.framing))


def json_text_of(file: str, key: Any, first_frame: int, last_frame: int, first_ts: float,
                 last_ts: float, nbytes: list[int], close: str | None, midstream: bool,
                 preamble: bytes, gap_bytes: int, f: Facts, transport: str = "tcp"
                 ) -> ReportText:
    """`build_report(Endpoints(file, key.id, transport, "tls", ...), f).to_json()` of a TCP
    connection (`key`: its ConnKey), written without building the report or its Endpoints
    (what `pcap --jsonl` writes of most connections): the shape's part of the text is
    remembered with its derivation, the rest written from the connection's values."""
    derived = _derived(f, transport)
    shared = derived[-1]
    dumps = f.caches.encoder().encode
    cid, client_ip, client_port, server_ip, server_port = key
    (client_hellos, client_random, ticket_lifetime, encrypted, decrypted, complete,
     midstream, text, problems, compression, sslv2) = _own(midstream, preamble, f)
    return tuple.__new__(ReportText, (cid, connection_json(
        dumps, shared[0] or shape_json(shared, dumps, dict(zip(_SHAPE_FIELDS,
                                                               derived)).__getitem__),
        file, cid, transport, "tls", f"{client_ip}:{client_port}",
        f"{server_ip}:{server_port}", client_ip, client_port, server_ip, server_port,
        first_frame, last_frame, client_hellos, client_random, ticket_lifetime,
        _timings_json(first_ts, last_ts, f), nbytes[0], nbytes[1], encrypted, decrypted,
        complete, close, midstream, text, gap_bytes, problems, compression, sslv2,
        f.framing)))


#: the report fields of `_derive`'s values, in its order
_SHAPE_FIELDS = ("sni", "offer", "client_extensions", "server_extensions", "version",
                 "cipher", "key_exchange", "hello_retry_request", "signature_scheme", "alpn",
                 "resumption", "certificates", "alerts", "messages", "fingerprints")
_TIMINGS_FIELDS = tuple(field.name for field in dataclasses.fields(ConnectionTimings))
_REPORT_FIELDS = tuple(field.name for field in dataclasses.fields(ConnectionReport))


def _frozen(cls: type[_T], names: tuple[str, ...], shape_json: list[Any],
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


_ESCAPES = {9: "\\t", 10: "\\n", 13: "\\r"}


def _printable(data: bytes, limit: int = 120) -> str:
    """Plain text before the TLS records on one line; other bytes as \\xNN."""
    return "".join(chr(b) if 32 <= b < 127 else _ESCAPES.get(b, f"\\x{b:02x}")
                   for b in data[:limit])


