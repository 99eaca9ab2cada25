"""Scenarios: well-formed messages that break a rule about extensions, versions or alerts
(RFC 8446 4.1.3 and 4.2, RFC 5246 7.2 and 7.4.1.4, RFC 7301 3.1-3.2, RFC 5746 3.4), and a
DH prime the client will not use. Each must end the handshake (exit 6) with the rule named.

The builders here also serve test_server_extensions.py, which sends every extension the
client can receive, well-formed and malformed, in every message that can carry it."""
from __future__ import annotations

import os
from collections.abc import Callable

from tlsprobe import kex
from tlsprobe.wire import extensions as ext
from tlsprobe.wire.extensions import Extension
from tlsprobe.wire.handshake import frame

from .catalog import EXIT_PROTOCOL, HOLD, scenario
from .server import Conn, Script
from .tls import (
    HANDSHAKE,
    TLS12_SUITE,
    TLS13,
    TLS13_SUITE,
    X25519,
    Tls13Server,
    alert,
    certificate_12,
    client_share,
    handshake_records,
    identity,
    server_hello,
    server_hello_done,
    ske_ecdhe,
)

ILLEGAL_PARAMETER, DECODE_ERROR, HANDSHAKE_FAILURE, UNSUPPORTED_EXTENSION = 47, 50, 40, 110
#: DHE-RSA-AES128-GCM-SHA256, which the probe offers by default
DHE_SUITE = 0x009E


def ext_block(exts: list[Extension]) -> bytes:
    """An extensions<0..2^16-1> vector, whatever the extensions hold."""
    body = b"".join(e.type.to_bytes(2, "big") + len(e.data).to_bytes(2, "big") + e.data
                    for e in exts)
    return len(body).to_bytes(2, "big") + body


def tls12_hello_with(exts: list[Extension]) -> Script:
    """A TLS 1.2 ECDHE-ECDSA first flight whose ServerHello carries exactly `exts`."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        random = os.urandom(32)
        await conn.send(handshake_records(
            server_hello(ch, suite=TLS12_SUITE, random=random, extensions=exts),
            certificate_12([identity().der]), ske_ecdhe(ch, random), server_hello_done()))
        await conn.hold(HOLD)
    return script


def tls13_hello_with(transform: dict[int, Callable[[bytes], bytes]] | None = None,
                     extra: list[Extension] = (), version: int = 0x0303,
                     session_id: bytes | None = None) -> Script:
    """A TLS 1.3 ServerHello (a real x25519 share) with some extension bodies transformed
    or extensions added, then silence: the probe must stop at the ServerHello."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        share, _ = kex.respond(X25519, client_share(ch, X25519) or b"")
        bodies = {43: ext.supported_versions_server(TLS13).data,
                  51: ext.key_share_server(X25519, share).data}
        for t, change in (transform or {}).items():
            bodies[t] = change(bodies[t])
        exts = [Extension(t, d) for t, d in bodies.items()] + list(extra)
        await conn.send(handshake_records(server_hello(ch, suite=TLS13_SUITE, version=version,
                                                       extensions=exts,
                                                       session_id=session_id)))
        await conn.hold(HOLD)
    return script


def hrr_with(exts: list[Extension]) -> Script:
    """A HelloRetryRequest carrying exactly `exts`; a second ClientHello (the retry was
    accepted) gets a fatal handshake_failure alert."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        await conn.send(handshake_records(server_hello(
            ch, suite=TLS13_SUITE, extensions=exts,
            random=bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891"
                                 "c2a211167abb8c5e079e09e2c8a8339c"))))
        await conn.client_hello()
        await conn.send(alert(2, HANDSHAKE_FAILURE))
        await conn.hold(HOLD)
    return script


def tls13_flight_with(*, ee: list[Extension] = (), cr: list[Extension] | None = None,
                      cert: list[Extension] = ()) -> Script:
    """A whole TLS 1.3 server flight whose EncryptedExtensions, CertificateRequest (when
    given) and leaf CertificateEntry carry the given extensions."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        tls = Tls13Server(ch, conn.hello_raw[-1])
        messages = [tls.add(frame(8, ext_block(list(ee))))]
        if cr is not None:
            messages.append(tls.add(frame(13, b"\x00" + ext_block(cr))))
        der = identity().der
        entry = len(der).to_bytes(3, "big") + der + ext_block(list(cert))
        messages.append(tls.add(frame(11, b"\x00" + len(entry).to_bytes(3, "big") + entry)))
        messages += [tls.certificate_verify(), tls.finished()]
        await conn.send(tls.hello_and_flight(messages))
        await conn.hold(HOLD)
    return script


def tls13_ticket_with(exts: list[Extension]) -> Script:
    """A whole TLS 1.3 handshake, then (after the client's Finished) a NewSessionTicket
    carrying `exts` under the server's application traffic key."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        tls = Tls13Server(ch, conn.hello_raw[-1])
        await conn.send(tls.hello_and_flight(tls.flight()))
        await conn.protected_record()  # the client's Finished
        body = (7200).to_bytes(4, "big") + os.urandom(4) + b"\x01\x00" + b"\x00\x10" + \
            os.urandom(16) + ext_block(exts)
        await conn.send(tls.application_protection().encrypt(HANDSHAKE, frame(4, body)))
        await conn.hold(HOLD)
    return script


def _alpn(*names: bytes) -> Extension:
    return ext.alpn(list(names))


# -- RFC 8446 4.2 / RFC 5246 7.4.1.4: duplicates, unsolicited and misplaced extensions ----
scenario("TLS 1.2 ServerHello with ec_point_formats twice", EXIT_PROTOCOL,
         r"ec_point_formats twice .*RFC 5246 7\.4\.1\.4",
         name="duplicate_extension_tls12")(tls12_hello_with(
             [ext.renegotiation_info(), ext.ec_point_formats(), ext.ec_point_formats()]))
scenario("TLS 1.3 ServerHello with supported_versions twice", EXIT_PROTOCOL,
         r"supported_versions twice .*RFC 8446 4\.2",
         name="duplicate_extension_tls13")(tls13_hello_with(
             extra=[ext.supported_versions_server(TLS13)]))
scenario("TLS 1.2 ServerHello with heartbeat, never offered", EXIT_PROTOCOL,
         r"heartbeat .*did not offer \(RFC 5246 7\.4\.1\.4\)",
         name="unsolicited_extension_tls12")(tls12_hello_with([Extension(15, b"\x01")]))
scenario("EncryptedExtensions with record_size_limit, never offered", EXIT_PROTOCOL,
         r"record_size_limit .*did not offer \(RFC 8446 4\.2\)",
         name="unsolicited_extension_ee")(tls13_flight_with(ee=[Extension(28, b"\x40\x00")]))
scenario("key_share in EncryptedExtensions", EXIT_PROTOCOL,
         r"key_share in its EncryptedExtensions.*not allowed \(RFC 8446 4\.2\)",
         name="key_share_in_ee")(tls13_flight_with(
             ee=[ext.key_share_server(X25519, bytes(range(1, 33)))]))
scenario("supported_versions in EncryptedExtensions", EXIT_PROTOCOL,
         r"supported_versions in its EncryptedExtensions.*not allowed \(RFC 8446 4\.2\)",
         name="supported_versions_in_ee")(tls13_flight_with(
             ee=[ext.supported_versions_server(TLS13)]))

# -- RFC 7301: one ALPN protocol, one the client offered -----------------------------------
scenario("EncryptedExtensions choosing ALPN spdy/3, never offered", EXIT_PROTOCOL,
         r"ALPN protocol 'spdy/3'.*RFC 7301 3\.2",
         name="alpn_not_offered_tls13")(tls13_flight_with(ee=[_alpn(b"spdy/3")]))
scenario("TLS 1.2 ServerHello choosing ALPN spdy/3, never offered", EXIT_PROTOCOL,
         r"ALPN protocol 'spdy/3'.*RFC 7301 3\.2",
         name="alpn_not_offered_tls12")(tls12_hello_with([_alpn(b"spdy/3")]))
scenario("EncryptedExtensions with two ALPN protocols", EXIT_PROTOCOL,
         r"2 ALPN protocols .*RFC 7301 3\.1",
         name="alpn_two_protocols")(tls13_flight_with(ee=[_alpn(b"h2", b"http/1.1")]))

# -- RFC 8446 4.1.3, RFC 5746 3.4, RFC 5246 7.2 --------------------------------------------
scenario("TLS 1.3 ServerHello with legacy_version 0x0301", EXIT_PROTOCOL,
         r"legacy_version 0x0301 \(RFC 8446 4\.1\.3",
         name="tls13_legacy_version")(tls13_hello_with(version=0x0301))
scenario("TLS 1.2 ServerHello with a non-empty renegotiation_info", EXIT_PROTOCOL,
         r"non-empty renegotiation_info .*RFC 5746 3\.4",
         name="renegotiation_info_not_empty")(tls12_hello_with(
             [ext.renegotiation_info(os.urandom(12)), ext.ec_point_formats()]))


@scenario("alert of level 3, then a correct TLS 1.2 flight", EXIT_PROTOCOL,
          r"alert of level 3 .*RFC 5246 7\.2")
async def alert_level_3(conn: Conn) -> None:
    ch = await conn.client_hello()
    random = os.urandom(32)
    await conn.send(alert(3, 112))
    await conn.send(handshake_records(
        server_hello(ch, suite=TLS12_SUITE, random=random,
                     extensions=[ext.renegotiation_info(), ext.ec_point_formats()]),
        certificate_12([identity().der]), ske_ecdhe(ch, random), server_hello_done()))
    await conn.hold(HOLD)


# -- a DH prime the client will not use ----------------------------------------------------
def ske_dhe(ch_random: bytes, server_random: bytes, p: int, g: int = 2) -> bytes:
    """A DHE ServerKeyExchange for (p, g), signed ecdsa_secp256r1_sha256."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    size = (p.bit_length() + 7) // 8
    ys = pow(g, 12345, p).to_bytes(size, "big")
    params = b"".join(len(v).to_bytes(2, "big") + v
                      for v in (p.to_bytes(size, "big"), g.to_bytes(1, "big"), ys))
    signature = identity().key.sign(ch_random + server_random + params,
                                    ec.ECDSA(hashes.SHA256()))
    return frame(12, params + (0x0403).to_bytes(2, "big") + len(signature).to_bytes(2, "big")
                 + signature)


@scenario("TLS 1.2 DHE with a 255-bit prime the client refuses", EXIT_PROTOCOL,
          r"DH parameters refused", full=True)
async def dhe_prime_refused(conn: Conn) -> None:
    ch = await conn.client_hello()
    random = os.urandom(32)
    p = 2 ** 255 - 19  # prime, far below the 512 bits the client computes with
    await conn.send(handshake_records(
        server_hello(ch, suite=DHE_SUITE, random=random,
                     extensions=[ext.renegotiation_info()]),
        certificate_12([identity().der]), ske_dhe(ch.random, random, p), server_hello_done()))
    await conn.hold(HOLD)
