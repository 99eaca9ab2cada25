"""Scenarios: what the ServerHello / HelloRetryRequest chooses, key shares, the TLS 1.2
flight's contents (certificates, ServerKeyExchange) and alerts at every step."""
from __future__ import annotations

import os

from tlsprobe.wire import extensions as ext
from tlsprobe.wire.hello import DOWNGRADE_TLS12

from .catalog import (
    EXIT_ALERT,
    EXIT_LIMIT,
    EXIT_OK,
    EXIT_PROTOCOL,
    HOLD,
    _flight_then_hold,
    scenario,
)
from .server import Conn, Script
from .tls import (
    SECP256R1,
    SECP521R1,
    X25519,
    alert,
    certificate_12,
    handshake_records,
    hello_retry_request,
    identity,
    server_hello,
    server_hello_12,
    server_hello_13,
    server_hello_done,
    ske_ecdhe,
    tls12_flight,
)

FATAL, WARNING = 2, 1
HANDSHAKE_FAILURE, UNRECOGNIZED_NAME = 40, 112
P256_ARGS = ("--groups", "secp256r1:x25519", "--key-shares", "secp256r1")


# -- choices the client never offered ------------------------------------------------------
@scenario("TLS 1.2 ServerHello with RC4-MD5, never offered", EXIT_PROTOCOL,
          r"cipher suite .*0x0004.* not offered \(protocol violation, RFC 5246 7\.4\.1\.3")
async def suite_not_offered_12(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_12(ch, suite=0x0004))


@scenario("TLS 1.3 ServerHello with TLS_AES_128_CCM_8_SHA256, never offered", EXIT_PROTOCOL,
          r"cipher suite .*0x1305.* not offered \(protocol violation, RFC 8446 4\.1\.3")
async def suite_not_offered_13(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, suite=0x1305))


# -- a suite the client offered, but not for the version the server selects ----------------
@scenario("TLS 1.2 ServerHello choosing TLS_AES_128_GCM_SHA256 (a TLS 1.3 suite the hello "
          "offered)", EXIT_PROTOCOL,
          r"TLS 1\.2 ServerHello chose TLS_AES_128_GCM_SHA256 \(0x1301\), a TLS 1\.3 cipher "
          r"suite \(protocol violation, RFC 8446 B\.4")
async def tls13_suite_in_tls12(conn: Conn) -> None:
    ch = await conn.client_hello()
    random = os.urandom(32)
    await _flight_then_hold(conn, server_hello_12(ch, suite=0x1301, random=random),
                            certificate_12([identity().der]), ske_ecdhe(ch, random),
                            server_hello_done())


@scenario("TLS 1.3 ServerHello choosing ECDHE-ECDSA-AES128-GCM-SHA256 (a TLS 1.2 suite the "
          "hello offered)", EXIT_PROTOCOL,
          r"TLS 1\.3 ServerHello chose .*0xc02b\), a TLS 1\.2 \(or earlier\) cipher suite "
          r"\(protocol violation, RFC 8446 B\.4")
async def tls12_suite_in_tls13(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, suite=0xC02B))


@scenario("HelloRetryRequest choosing ECDHE-ECDSA-AES128-GCM-SHA256 (a TLS 1.2 suite)",
          EXIT_PROTOCOL, r"HelloRetryRequest chose .*0xc02b\), a TLS 1\.2 \(or earlier\) "
          r"cipher suite \(protocol violation, RFC 8446 B\.4", args=P256_ARGS)
async def tls12_suite_in_hrr(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, hello_retry_request(ch, group=X25519, suite=0xC02B))


@scenario("selects TLS 1.1 in supported_versions", EXIT_PROTOCOL,
          r"chose TLS 1\.1, which was not offered")
async def version_not_offered(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, version_ext=0x0302))


@scenario("key share for secp521r1, a group never offered", EXIT_PROTOCOL,
          r"key share for secp521r1.*no share")
async def share_group_not_offered(conn: Conn) -> None:
    ch = await conn.client_hello()
    share = os.urandom(133)
    await _flight_then_hold(conn, server_hello_13(ch, group=SECP521R1, share=share))


@scenario("key share for secp256r1, offered but without a client share", EXIT_PROTOCOL,
          r"key share for secp256r1.*no share")
async def share_group_without_client_share(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, group=SECP256R1,
                                                  share=b"\x04" + os.urandom(64)))


@scenario("TLS 1.3 ServerHello whose key_share is cut after the group", EXIT_PROTOCOL,
          r"(?i)key_share")
async def malformed_key_share(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello(ch, suite=0x1301, extensions=[
        ext.supported_versions_server(0x0304), ext.Extension(51, b"\x00\x1d")]))


@scenario("TLS 1.3 ServerHello without key_share", EXIT_PROTOCOL, r"without key_share")
async def tls13_without_key_share(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello(ch, suite=0x1301, extensions=[
        ext.supported_versions_server(0x0304)]))


@scenario("two ServerHellos", EXIT_PROTOCOL, r"second ServerHello")
async def second_server_hello(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_12(ch), server_hello_12(ch))


@scenario("TLS 1.2 ServerHello with the TLS 1.3 downgrade sentinel", EXIT_PROTOCOL,
          r"(?i)downgrade")
async def downgrade_sentinel(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, *tls12_flight(ch, random=os.urandom(24) + DOWNGRADE_TLS12))


@scenario("ServerHello with DEFLATE compression, never offered", EXIT_PROTOCOL,
          r"(?i)compression")
async def compression_not_offered(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, *tls12_flight(ch, compression=1))


@scenario("TLS 1.3 ServerHello echoing a different legacy_session_id", EXIT_PROTOCOL,
          r"(?i)session.?id")
async def session_id_not_echoed(conn: Conn) -> None:
    ch = await conn.client_hello()
    share = server_hello_13(ch)
    sid_at = 4 + 2 + 32
    n = share[sid_at]
    await _flight_then_hold(conn, share[:sid_at + 1] + bytes(n) + share[sid_at + 1 + n:])


# -- HelloRetryRequest -------------------------------------------------------------------
@scenario("two HelloRetryRequests", EXIT_PROTOCOL, r"second HelloRetryRequest")
async def hrr_twice(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(hello_retry_request(ch, group=SECP256R1)))
    ch2 = await conn.client_hello()
    await _flight_then_hold(conn, hello_retry_request(ch2, group=SECP256R1))


@scenario("HelloRetryRequest for x25519, already shared", EXIT_PROTOCOL,
          r"x25519.*share was already sent")
async def hrr_group_already_shared(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, hello_retry_request(ch, group=X25519))


@scenario("HelloRetryRequest that changes nothing", EXIT_PROTOCOL, r"changes nothing")
async def hrr_nothing_changed(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, hello_retry_request(ch, group=None))


@scenario("HelloRetryRequest for secp521r1, never offered", EXIT_PROTOCOL,
          r"secp521r1.*not offered")
async def hrr_group_not_offered(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, hello_retry_request(ch, group=SECP521R1))


@scenario("after an HRR for secp256r1, a ServerHello with x25519", EXIT_PROTOCOL,
          r"key share for x25519.*(no share|HelloRetryRequest asked for secp256r1)")
async def hrr_then_other_group(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(hello_retry_request(ch, group=SECP256R1)))
    await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, group=X25519))


# -- key shares ----------------------------------------------------------------------------
@scenario("x25519 key share of 31 bytes", EXIT_PROTOCOL, r"invalid server key share.*x25519")
async def share_wrong_size(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, share=os.urandom(31)))


@scenario("x25519 key share of low order (all zero)", EXIT_PROTOCOL,
          r"invalid server key share.*x25519")
async def share_low_order(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, share=bytes(32)))


@scenario("secp256r1 key share not on the curve", EXIT_PROTOCOL,
          r"invalid server key share.*secp256r1.*not on the curve", args=P256_ARGS)
async def share_not_on_curve(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, group=SECP256R1,
                                                  share=b"\x04" + bytes(63) + b"\x01"))


@scenario("X25519MLKEM768 ciphertext share of 1000 bytes", EXIT_PROTOCOL,
          r"invalid server key share.*X25519MLKEM768")
async def hybrid_share_wrong_size(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, server_hello_13(ch, group=0x11EC, share=os.urandom(1000)))


@scenario("TLS 1.2 ServerKeyExchange point not on secp256r1", EXIT_PROTOCOL,
          r"(?i)not on the curve|invalid.*(share|point|public)")
async def ske_point_not_on_curve(conn: Conn) -> None:
    ch = await conn.client_hello()
    random = os.urandom(32)
    await _flight_then_hold(conn, server_hello_12(ch, random=random),
                            certificate_12([identity().der]),
                            ske_ecdhe(ch, random, group=SECP256R1,
                                      public=b"\x04" + bytes(63) + b"\x01"),
                            server_hello_done())


# -- certificates and signatures ----------------------------------------------------------
def _flight_with_certs(ders: list[bytes]) -> Script:
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        flight = tls12_flight(ch)
        await _flight_then_hold(conn, flight[0], certificate_12(ders), *flight[2:])
    return script


scenario("TLS 1.2 Certificate with an empty list", EXIT_PROTOCOL,
         r"(?i)empty certificate|no certificate|without a Certificate",
         name="empty_certificate_list")(_flight_with_certs([]))
scenario("certificate that is not DER", EXIT_PROTOCOL, r"(?i)certificate.*(DER|pars|invalid)",
         name="garbage_der_certificate")(_flight_with_certs([b"\x30\x82\xff\xff" + bytes(60)]))
scenario("certificate with an EC key on an unknown curve", EXIT_OK, "",
         stdout=r"(?i)not supported|unsupported",
         name="certificate_unknown_curve")(_flight_with_certs([identity().der.replace(
             bytes.fromhex("2a8648ce3d030107"), bytes.fromhex("2a8648ce3d03017f"))]))
scenario("a valid leaf followed by 2000 one-byte certificates", EXIT_LIMIT,
         r"chain of 2001 certificates, more than tlsprobe's limit of 16 \(--max-chain",
         name="long_chain_after_valid_leaf")(_flight_with_certs([identity().der] +
                                                                [b"\x30"] * 2000))
scenario("2000 one-byte certificates", EXIT_LIMIT,
         r"chain of 2000 certificates, more than tlsprobe's limit of 16 \(--max-chain",
         name="many_tiny_certificates")(_flight_with_certs([b"\x30"] * 2000))


@scenario("ServerKeyExchange with a bad ECDSA signature", EXIT_PROTOCOL, r"(?i)signature")
async def bad_ske_signature(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, *tls12_flight(ch, bad_signature=True))


# -- alerts at every step ------------------------------------------------------------------
def _alert_after(n: int, level: int, description: int, hrr: bool = False) -> Script:
    """Alert after the n-th message of the TLS 1.2 flight (or after an HRR); a fatal alert
    is followed by silence, a warning by a close (so either reading of warnings must end)."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        if hrr:
            await conn.send(handshake_records(hello_retry_request(ch, group=SECP256R1)))
            await conn.client_hello()
        elif n:
            await conn.send(handshake_records(*tls12_flight(ch)[:n]))
        await conn.send(alert(level, description))
        if level == WARNING:
            conn.close()
            return
        await conn.hold(HOLD)
    return script


for _n, _step in ((0, "ClientHello"), (1, "ServerHello"), (2, "Certificate"),
                  (3, "ServerKeyExchange")):
    scenario(f"fatal handshake_failure alert after the {_step}", EXIT_ALERT,
             r"fatal alert handshake_failure \(40\)",
             name=f"fatal_alert_after_{_step.lower()}")(_alert_after(_n, FATAL, HANDSHAKE_FAILURE))
    scenario(f"warning unrecognized_name alert after the {_step} then a close",
             EXIT_ALERT, r"warning alert unrecognized_name \(112\)|closed the connection",
             name=f"warning_alert_after_{_step.lower()}")(
                 _alert_after(_n, WARNING, UNRECOGNIZED_NAME))
scenario("fatal alert after a HelloRetryRequest", EXIT_ALERT, r"fatal alert handshake_failure",
         name="fatal_alert_after_hrr")(_alert_after(0, FATAL, HANDSHAKE_FAILURE, hrr=True))


@scenario("warning unrecognized_name alert, then a correct TLS 1.2 flight", EXIT_OK, "",
          stdout=r"ECDHE-ECDSA-AES128-GCM-SHA256")
async def warning_alert_then_flight(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(alert(WARNING, UNRECOGNIZED_NAME))
    await _flight_then_hold(conn, *tls12_flight(ch))
