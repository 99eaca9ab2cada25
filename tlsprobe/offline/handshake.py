"""A captured connection's accumulated `Facts` -> `model.facts.HandshakeFacts`.

The same record the live engine builds (engine.facts.facts_of), so `offline.build`
describes a capture through the same `model.describe` as the probe. What a capture cannot
know is None and, where there is a reason to give, named in `unknown`: a TLS 1.3 flight
without its key log, a ServerKeyExchange or an abbreviated handshake lost in a capture gap,
a ServerHello whose supported_versions could not be read.
"""

from __future__ import annotations

from typing import Final

from tlsprobe.model.facts import (
    AlertFact,
    ExtensionsSeen,
    HandshakeFacts,
    HandshakeTimings,
    KeyExchangeFacts,
    MessageFact,
    Resumption,
    certificate_requested_of,
    hello_facts,
    wire_text,
)
from tlsprobe.offline.facts import CLIENT, SERVER, Facts
from tlsprobe.wire.hello_fields import PRE_SHARED_KEY, ServerHelloInfo

CLIENT_HELLO: Final = 1
SERVER_HELLO: Final = 2
FINISHED: Final = 20
#: server messages of a full TLS 1.0-1.2 handshake (Certificate, ServerKeyExchange,
#: ServerHelloDone): an abbreviated one has none of them
_FULL_HANDSHAKE: Final = (11, 12, 14)
_NO_SERVER_KEY_EXCHANGE: Final = ("RSA", "PSK", "RSA_PSK")

__all__ = ["handshake_facts", "key_exchange_facts", "resumption_of", "version_unknown"]


def version_unknown(sh: ServerHelloInfo) -> bool:
    """A malformed supported_versions extension hides the version chosen (legacy_version
    is not it)."""
    return "supported_versions" in sh.problems


def _psk_chosen(sh: ServerHelloInfo) -> bool:
    # the extension is there only when a PSK was chosen, readable or not
    return sh.psk_identity is not None or PRE_SHARED_KEY in sh.extensions


def key_exchange_facts(f: Facts) -> KeyExchangeFacts | None:
    """How the capture shows the key exchange (None: no ServerHello seen)."""
    sh = f.server_hello
    if sh is None:
        return None
    # a version not known: a key_share sent still names the group chosen (or, unreadable,
    # says that it is not known)
    if f.tls13 or version_unknown(sh) and (
            sh.key_share is not None or "key_share" in sh.problems):
        if sh.key_share is None:
            if "key_share" in sh.problems:  # sent but unreadable: not a psk_ke handshake
                return KeyExchangeFacts(source="malformed")
            return KeyExchangeFacts(source="none", kind="PSK" if _psk_chosen(sh) else None)
        group, server_len = sh.key_share
        hello = f.client_hellos[-1] if f.client_hellos else None
        return KeyExchangeFacts(
            # (a second ClientHello answers a HelloRetryRequest, also one not captured)
            source="hello_retry_request" if f.hrr is not None or f.hello_retry_unseen()
            else "key_share",
            kind="TLS13", group=group, server_share_bytes=server_len,
            client_share_bytes=hello_share(hello.key_shares, group) if hello else None)
    kx, ske, client_len = f.key_exchange, f.ske, f.cke_length
    if ske is None and f.missing_server_key_exchange() is not None:
        # lost in a capture gap: not captured, not absent
        return KeyExchangeFacts(source="not_captured", kind=kx, client_share_bytes=client_len)
    if ske is None or kx in _NO_SERVER_KEY_EXCHANGE:
        # its absence is a fact once the server's flight went past its place (or the
        # server resumed: its ChangeCipherSpec came)
        reached = f.ccs[SERVER] or any(d == SERVER and t in (13, 14)
                                       for d, t, _, _ in f.messages)
        return KeyExchangeFacts(source="rsa" if kx == "RSA" else "none" if reached
                                else "not_reached", kind=kx, client_share_bytes=client_len)
    kind = ske.kind or kx
    if kind == "ECJPAKE" and ske.named_curve is not None:
        # the curve only: its key pairs and proofs are no key share
        return KeyExchangeFacts(source="server_key_exchange", kind=kind,
                                group=ske.named_curve)
    if ske.named_curve is not None:
        return KeyExchangeFacts(source="server_key_exchange", kind=kind,
                                group=ske.named_curve, server_share_bytes=ske.public_length,
                                client_share_bytes=client_len)
    if ske.dh_p is not None:
        from tlsprobe.kex.dhprime import dh_group_name
        p = int.from_bytes(ske.dh_p, "big")
        return KeyExchangeFacts(source="server_key_exchange", kind=kind, dh_prime=p,
                                dh_group_name=dh_group_name(p),
                                server_share_bytes=ske.public_length,
                                client_share_bytes=client_len)
    return KeyExchangeFacts(source="server_key_exchange", kind=kind,
                            explicit_curve=ske.explicit_curve, client_share_bytes=client_len)


def hello_share(shares: tuple[tuple[int, int], ...], group: int) -> int | None:
    """The length of the key share offered for `group` (None: none offered)."""
    return next((n for g, n in shares if g == group), None)


def resumption_of(f: Facts) -> Resumption | None:
    """How the server resumed the session, as far as the capture shows (None: a full
    handshake, or not known: `Facts.resumption_unknown` says why)."""
    sh = f.server_hello
    if sh is None:
        return None
    if f.tls13:
        return "psk" if _psk_chosen(sh) else None
    if f.resumption_unknown() is not None:
        return None  # the server's messages may be in the bytes lost
    full = any(t in _FULL_HANDSHAKE for d, t, _, _ in f.messages if d == SERVER)
    if f.ccs[SERVER] and not full:
        hello = f.client_hellos[-1] if f.client_hellos else None
        return "session_ticket" if hello is not None and hello.session_ticket else "session_id"
    return None


def _unknown(f: Facts) -> tuple[tuple[str, str], ...]:
    out = []
    sh = f.server_hello
    if sh is not None and version_unknown(sh):
        out.append(("version", "the ServerHello's supported_versions could not be read"))
    missing = f.missing_server_key_exchange()
    if missing is not None:
        out.append(("key_exchange", missing))
    resumption = f.resumption_unknown()
    if resumption is not None:
        out.append(("resumption", resumption))
    if f.tls13 and not f.decrypted:
        for name in ("certificates", "signature_scheme", "alpn", "ticket_lifetime"):
            out.append((name, "sent encrypted (TLS 1.3) and no key log to read it"))
    if f.ske is not None and f.ske.dh_p is not None:
        out.append(("dh_generator", "not read from captures (its length only)"))
    out.append(("ocsp_response_bytes", "not read from captures"))
    out.append(("finished_verified", "a capture does not verify the Finished messages"))
    out.append(("signature_verified", "a capture does not verify the server's signature"))
    return tuple(out)


def _server_types(f: Facts) -> list[int]:
    """The types of the server's handshake messages read; a TLS 1.0-1.2 server's
    ChangeCipherSpec stands for the Finished it announces (encrypted: read with keys only)."""
    types = [t for d, t, _, _ in f.messages if d == SERVER]
    return types + [FINISHED] if f.ccs[SERVER] and not f.tls13 else types


def handshake_facts(f: Facts) -> HandshakeFacts:
    """What the captured handshake established (`Facts` as accumulated so far)."""
    sh, hrr = f.server_hello, f.hrr
    hellos = tuple(hello_facts(h) for h in f.client_hellos)
    alpn = sh.alpn if sh is not None and sh.alpn is not None else f.alpn_ee
    extensions = [ExtensionsSeen(CLIENT, CLIENT_HELLO, h.extensions) for h in hellos]
    if hrr is not None:
        extensions.append(ExtensionsSeen(SERVER, SERVER_HELLO, hrr.extensions, hrr=True))
    if sh is not None:
        extensions.append(ExtensionsSeen(SERVER, SERVER_HELLO, sh.extensions))
    ch, sh_ts, done = f.ch_ts, f.sh_ts, f.done_ts
    return HandshakeFacts(
        client_hellos=hellos,
        version=(None if version_unknown(sh) else sh.selected_version) if sh is not None
        else f.sslv2_server,
        cipher_suite=sh.cipher_suite if sh is not None else None,
        key_exchange=key_exchange_facts(f),
        hrr=hrr is not None, hrr_group=hrr.hrr_group if hrr is not None else None,
        signature_scheme=f.signature_scheme, certificates=tuple(f.certificates),
        alpn=wire_text(alpn) if alpn is not None else None,
        ticket_lifetime=f.ticket_lifetime,
        certificate_requested=certificate_requested_of(_server_types(f)),
        resumption=resumption_of(f),
        messages=tuple(MessageFact(d, t, hrr_, decrypted)
                       for d, t, hrr_, decrypted in f.messages),
        extensions=tuple(extensions),
        alerts=tuple(AlertFact(d, level, desc) if level >= 0 else AlertFact(d, None, None)
                     for d, level, desc, _ in f.alerts),
        handshake_complete=f.decrypted and f.finished[0] and f.finished[1],
        timings=HandshakeTimings(
            server_hello_ms=(sh_ts - ch) * 1000 if ch is not None and sh_ts is not None
            else None,
            handshake_ms=(done - ch) * 1000 if ch is not None and done is not None else None),
        unknown=_unknown(f))
