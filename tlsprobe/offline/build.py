"""Facts of one connection -> its `ConnectionReport`, in the live probe's words.

The key exchange is described as `probes.facts` describes a probe's (kind, where the group
was chosen, share sizes, "Server Temp Key"), with one addition the capture gives: for TLS 1.2
`client_share_bytes` is the ClientKeyExchange key length (ECDH point, DH public value or the
encrypted premaster secret). Registry lookups and certificate parsing are cached: a capture
repeats the same offers and certificates thousands of times.
"""

from __future__ import annotations

import dataclasses
from functools import cache, lru_cache
from typing import Any, NamedTuple, TypeVar

from tlsprobe import registry
from tlsprobe.offline import fingerprints
from tlsprobe.offline.facts import CLIENT, SERVER, Facts
from tlsprobe.offline.hello import ClientHelloInfo
from tlsprobe.report.offline_model import (
    SHAPE_JSON,
    AlertInfo,
    CertificateInfo,
    Cipher,
    Codepoint,
    ConnectionReport,
    ConnectionTimings,
    Fingerprints,
    KeyExchange,
    Offer,
)
from tlsprobe.report.trace import message_name

_T = TypeVar("_T")
_HYBRID_KIND = {"hybrid": "hybrid", "mlkem": "KEM", "ffdhe": "DHE"}


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


version_cp = lru_cache(maxsize=None)(Codepoint.version)
group_cp = lru_cache(maxsize=None)(Codepoint.group)
sigscheme_cp = lru_cache(maxsize=None)(Codepoint.sigscheme)
cipher_of = lru_cache(maxsize=None)(Cipher.of)


@cache
def extension_cp(code: int) -> Codepoint:
    return Codepoint(code, f"0x{code:04x}", registry.extension_name(code))


@lru_cache(maxsize=4096)
def _codepoints(kind: str, values: tuple[int, ...]) -> tuple:  # type: ignore[type-arg]
    make = {"version": version_cp, "group": group_cp, "sigscheme": sigscheme_cp,
            "cipher": cipher_of, "extension": extension_cp}[kind]
    return tuple(make(v) for v in values)


@lru_cache(maxsize=4096)
def cert_info(der: bytes) -> CertificateInfo:
    """The probe's certificate summary; a key `cryptography` cannot load (explicit-curve
    EC, unknown algorithms) still gives subject and issuer, never an exception."""
    import warnings

    from cryptography.exceptions import UnsupportedAlgorithm

    from tlsprobe.probes.facts import certificate_info
    try:
        with warnings.catch_warnings():  # e.g. a negative serial: reported as it is
            warnings.simplefilter("ignore")
            return certificate_info(der)
    except (UnsupportedAlgorithm, ValueError, TypeError) as exc:
        import hashlib

        from cryptography import x509
        try:
            cert = x509.load_der_x509_certificate(der)
            subject, issuer = cert.subject.rfc4514_string(), cert.issuer.rfc4514_string()
        except ValueError:
            subject, issuer = "(unparsable certificate)", ""
        return CertificateInfo(subject, issuer, f"unsupported key ({exc})", None, "", "", "",
                               "", hashlib.sha256(der).hexdigest())


def _text(data: bytes) -> str:
    return data.decode("ascii", "backslashreplace")


def offer_of(hello: ClientHelloInfo) -> Offer:
    return _offer(hello.supported_versions or (hello.legacy_version,), hello.cipher_suites,
                  hello.supported_groups, tuple(g for g, _ in hello.key_shares),
                  hello.signature_algorithms, hello.alpn, hello.sni, hello.size)


@cache
def compression_cp(method: int) -> Codepoint:
    """A TLS compression method (RFC 3749 registry): 1 DEFLATE, 64 LZS, others by hex."""
    return Codepoint(method, f"0x{method:02x}",
                     {0: "null", 1: "DEFLATE", 64: "LZS"}.get(method, f"0x{method:02x}"))


@cache
def sslv2_cipher(spec: int) -> Cipher:
    """A 3-byte SSLv2 cipher spec: 0x00XXYY is the TLS suite 0xXXYY; the others by their
    SSL 2.0 names; hex as tshark writes specs ("0x050080", "0x000039")."""
    from tlsprobe.offline.hello_codec import SSLV2_CIPHER_SPECS
    if spec < 0x10000:
        tls = cipher_of(spec)
        return Cipher(spec, f"0x{spec:06x}", tls.iana_name, tls.openssl_name)
    name, openssl = SSLV2_CIPHER_SPECS.get(spec, (f"SSL2_UNKNOWN_0x{spec:06x}", None))
    return Cipher(spec, f"0x{spec:06x}", name, openssl)


@lru_cache(maxsize=256)
def sslv2_specs(specs: tuple[int, ...]) -> tuple[Cipher, ...]:
    """An SSLv2-format ClientHello's cipher specs (interned: clients repeat themselves)."""
    return tuple(sslv2_cipher(s) for s in specs)


@lru_cache(maxsize=4096)
def _offer(versions: tuple[int, ...], suites: tuple[int, ...], groups: tuple[int, ...],
           shares: tuple[int, ...], sigalgs: tuple[int, ...], alpn: tuple[bytes, ...],
           sni: str | None, size: int) -> Offer:
    """The live probe's Offer (interned: clients repeat themselves)."""
    return Offer(versions=_codepoints("version", versions),
                 cipher_suites=_codepoints("cipher", suites),
                 groups=_codepoints("group", groups),
                 key_share_groups=_codepoints("group", shares),
                 signature_algorithms=_codepoints("sigscheme", sigalgs),
                 alpn=tuple(_text(p) for p in alpn), sni=sni, client_hello_bytes=size)


@lru_cache(maxsize=4096)
def _fingerprints(j3: tuple[str | None, str | None], j3s: tuple[str | None, str | None],
                  j4: tuple[str | None, str | None]) -> Fingerprints:
    return Fingerprints(j3[0], j3[1], j3s[0], j3s[1], j4[0], j4[1])


@lru_cache(maxsize=4096)
def _ecdhe(kind: str, source: str, group: int, server_len: int | None,
           client_len: int | None) -> KeyExchange:
    """A named-group key exchange with s_client's "Server Temp Key" wording (cached: a
    capture repeats the same few)."""
    from tlsprobe.probes.facts import (
        TEMP_KEY,  # imported when first needed: start-up time
    )
    cp = group_cp(group)
    known = TEMP_KEY.get(group)
    bits, temp = (known[1], f"{known[0]}, {known[1]} bits") if known else \
        (None, f"{cp.name}, {server_len}-byte server share")
    return KeyExchange(kind=kind, source=source, group=cp, server_share_bytes=server_len,
                       client_share_bytes=client_len, bits=bits, server_temp_key=temp)


def key_exchange_of(f: Facts) -> KeyExchange | None:
    sh = f.server_hello
    if sh is None:
        return None
    if f.tls13:
        if sh.key_share is None:
            return KeyExchange(kind="PSK", source="none")
        group, server_len = sh.key_share
        info = registry.group(group)
        hello = f.client_hellos[-1] if f.client_hellos else None
        client_len = next((n for g, n in hello.key_shares if g == group), None) \
            if hello is not None else None
        return _ecdhe(_HYBRID_KIND.get(info.kind if info else "", "ECDHE"),
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
    if ske.named_curve is not None:
        return _ecdhe("ECDHE", "server_key_exchange", ske.named_curve, ske.public_length,
                      f.cke_length)
    if ske.dh_p is not None:
        from tlsprobe.probes.dhgroups import dh_group_name
        p = int.from_bytes(ske.dh_p, "big")
        name = dh_group_name(p)
        code = registry.parse_group(name) if name and name.startswith("ffdhe") else None
        return KeyExchange(kind="DHE", source="dhe_parameters",
                           group=group_cp(code) if code is not None else None,
                           server_share_bytes=ske.public_length,
                           client_share_bytes=f.cke_length, dh_prime_bits=p.bit_length(),
                           dh_group_name=name or f"unknown {p.bit_length()}-bit",
                           bits=p.bit_length(), server_temp_key=f"DH, {p.bit_length()} bits")
    if ske.explicit_curve:
        return KeyExchange(kind="ECDHE", source="server_key_exchange", explicit_curve=True,
                           client_share_bytes=f.cke_length,
                           problem="explicit curve parameters (not a named group)")
    return KeyExchange(kind=ske.kind or kx or "unknown", source="server_key_exchange",
                       client_share_bytes=f.cke_length)


def resumption_of(f: Facts) -> str | None:
    sh = f.server_hello
    if sh is None:
        return None
    if f.tls13:
        return "psk" if sh.psk_identity is not None else None
    full = any(t in (11, 12, 14) for d, t, _, _ in f.messages if d == SERVER)
    if f.ccs[SERVER] and not full:
        hello = f.client_hellos[-1] if f.client_hellos else None
        return "session_ticket" if hello is not None and hello.session_ticket else "session_id"
    return None


@lru_cache(maxsize=1024)
def _message_label(direction: int, t: int, hrr: bool, decrypted: bool) -> str:
    name = "HelloRetryRequest" if hrr else message_name(t)
    return f"{'>>>' if direction == CLIENT else '<<<'} {name}{' (decrypted)' if decrypted else ''}"


def _message_names(f: Facts) -> tuple[str, ...]:
    out = [_message_label(*m) for m in f.messages]
    if f.more_messages:
        out.append(f"... {f.more_messages} more")
    return tuple(out)


def _derive(f: Facts, transport: str) -> tuple:  # type: ignore[type-arg]
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
        prints = _fingerprints(j3, j3s, j4)
    alpn = sh.alpn if sh is not None and sh.alpn is not None else f.alpn_ee
    scheme = f.signature_scheme
    return (
        hello.sni if hello is not None else None,
        offer_of(hello) if hello is not None else None,
        _codepoints("extension", hello.extensions) if hello else (),
        _codepoints("extension", sh.extensions) if sh else (),
        version_cp(sh.selected_version) if sh is not None else
        version_cp(f.sslv2_server) if f.sslv2_server is not None else None,
        cipher_of(sh.cipher_suite) if sh is not None else None,
        key_exchange_of(f),
        group_cp(f.hrr.hrr_group) if f.hrr is not None and f.hrr.hrr_group is not None
        else None,
        sigscheme_cp(scheme) if scheme is not None else None,
        _text(alpn) if alpn is not None else None, resumption_of(f),
        tuple(cert_info(der) for der in f.certificates),
        tuple(AlertInfo("client" if d == CLIENT else "server", level, desc,
                        registry.alert_name(desc)) for d, level, desc, _ in f.alerts),
        _message_names(f), prints, [None])


_SHAPES: dict[tuple, tuple] = {}  # type: ignore[type-arg]
_MAX_SHAPES = 8192


def _shape(f: Facts, transport: str) -> tuple:  # type: ignore[type-arg]
    """What `_derive` depends on, without the per-connection values (randoms, session ids,
    times): the key under which a capture's repeated handshakes share their derivation."""
    hello = f.client_hellos[0] if f.client_hellos else None
    sh, hrr = f.server_hello, f.hrr
    return (transport, hello[0] if hello else None, hello[3:] if hello else None,
            f.client_hellos[-1][3:] if len(f.client_hellos) > 1 else None,
            (sh[0],) + sh[3:] if sh else None, (hrr[0],) + hrr[3:] if hrr else None,
            f.ske, f.cke_length, f.tls13, f.ccs[0], f.ccs[1], f.key_exchange,
            tuple(f.certificates), tuple(f.alerts), tuple(f.messages), f.more_messages,
            f.ticket_lifetime, f.alpn_ee, f.signature_scheme, f.sslv2_server, f.framing)


def build_report(where: Endpoints, f: Facts, transport: str = "tcp") -> ConnectionReport:
    """The report of one finished connection."""
    key = _shape(f, transport)
    derived = _SHAPES.get(key)
    if derived is None:
        if len(_SHAPES) >= _MAX_SHAPES:
            _SHAPES.clear()
        derived = _SHAPES[key] = _derive(f, transport)
    (sni, offer, client_ext, server_ext, version, cipher, kx, hrr, scheme, alpn, resumption,
     certificates, alerts, messages, prints, shape_json) = derived
    (file, cid, transport_name, protocol, client_ip, client_port, server_ip, server_port,
     first_frame, last_frame, first_ts, last_ts, client_bytes, server_bytes, close, midstream,
     preamble, gap_bytes) = where
    hellos = f.client_hellos
    ch_ts = f.ch_ts
    timings = object.__new__(ConnectionTimings)  # ConnectionTimings(...), without __init__
    timings.__dict__.update({
        "start": first_ts,
        "server_hello_ms": round((f.sh_ts - ch_ts) * 1000, 3)
        if ch_ts is not None and f.sh_ts is not None else None,
        "handshake_ms": round((f.done_ts - ch_ts) * 1000, 3)
        if ch_ts is not None and f.done_ts is not None else None,
        "duration_ms": round((last_ts - first_ts) * 1000, 3)
        if first_ts is not None and last_ts is not None else None})
    decrypted = f.decrypted
    return _frozen(ConnectionReport, _REPORT_FIELDS, shape_json, (
        file, cid, transport_name, protocol, f"{client_ip}:{client_port}",
        f"{server_ip}:{server_port}", client_ip, client_port, server_ip, server_port,
        first_frame, last_frame, sni, offer, len(hellos),
        hellos[0].random.hex() if hellos else None, client_ext, server_ext, version,
        cipher, kx, hrr, scheme, alpn, resumption, f.ticket_lifetime, certificates, alerts,
        messages, prints, timings, client_bytes, server_bytes,
        f.encrypted[0] and f.encrypted[1], decrypted,
        (f.finished[0] and f.finished[1]) if decrypted else None,
        close, midstream or (not hellos and bool(f.server_hellos)),
        _printable(preamble) if preamble else None, gap_bytes, tuple(f.problems),
        compression_cp(f.server_hello.compression_method)
        if f.server_hello is not None and f.server_hello.compression_method else None,
        sslv2_specs(hellos[0].sslv2_cipher_specs) if hellos and hellos[0].sslv2 else (),
        f.framing))


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


