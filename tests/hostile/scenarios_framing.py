"""Scenarios: controls, closing at handshake boundaries, truncation, lengths, wrong types."""
from __future__ import annotations

import asyncio
import os

from .catalog import (
    EXIT_ALERT,
    EXIT_LIMIT,
    EXIT_NETWORK,
    EXIT_NOT_TLS,
    EXIT_OK,
    EXIT_PROTOCOL,
    HOLD,
    _flight_then_hold,
    scenario,
)
from .server import Conn, Script
from .tls import (
    ALERT,
    APPDATA,
    HANDSHAKE,
    SECP256R1,
    certificate_12,
    handshake_records,
    hello_retry_request,
    identity,
    raw_record,
    record,
    server_hello_12,
    server_hello_13,
    tls12_flight,
)


# -- controls: the server done right, so that every break below is the only fault ---------
@scenario("nothing (TLS 1.2 control)", EXIT_OK, "", stdout=r"ECDHE-ECDSA-AES128-GCM-SHA256")
async def control_tls12(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, *tls12_flight(ch))


# -- closing at every handshake boundary ---------------------------------------------------
@scenario("closes before reading anything", (EXIT_NETWORK, EXIT_ALERT),
          r"reset by peer|closed the connection before sending ServerHello")
async def close_on_accept(conn: Conn) -> None:
    conn.close()


@scenario("closes after reading the ClientHello", EXIT_ALERT,
          r"closed the connection before sending ServerHello")
async def close_after_client_hello(conn: Conn) -> None:
    await conn.client_hello()
    conn.close()


def _close_after(n: int) -> Script:
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        await conn.send(handshake_records(*tls12_flight(ch)[:n]))
        conn.close()
    return script


for _n, _label in ((1, "ServerHello"), (2, "Certificate"), (3, "ServerKeyExchange")):
    scenario(f"closes after its TLS 1.2 {_label}", EXIT_ALERT,
             r"closed the connection before sending the rest of its flight",
             name=f"close_after_{_label.lower()}_12")(_close_after(_n))


@scenario("closes after a HelloRetryRequest and the second ClientHello", EXIT_ALERT,
          r"closed the connection before sending ServerHello")
async def close_after_hrr(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(hello_retry_request(ch, group=SECP256R1)))
    await conn.client_hello()
    conn.close()


# -- truncation -----------------------------------------------------------------------------
@scenario("closes in the middle of a record", EXIT_ALERT,
          r"(?i)middle of a record|truncated record|incomplete record")
async def truncated_record(conn: Conn) -> None:
    ch = await conn.client_hello()
    data = handshake_records(server_hello_13(ch))
    await conn.send(data[:len(data) // 2])
    conn.close()


@scenario("closes in the middle of a handshake message", EXIT_ALERT,
          r"(?i)middle of a(n?| handshake) message|truncated|incomplete")
async def truncated_message(conn: Conn) -> None:
    ch = await conn.client_hello()
    msg = server_hello_13(ch)
    await conn.send(record(HANDSHAKE, msg[:len(msg) // 2]))
    conn.close()


@scenario("sends half a record, then nothing", EXIT_NETWORK, r"timed out", slow=True)
async def truncated_record_then_silence(conn: Conn) -> None:
    ch = await conn.client_hello()
    data = handshake_records(server_hello_13(ch))
    await conn.send(data[:len(data) // 2])
    await conn.hold(HOLD)


# -- lengths beyond the data or the limits ------------------------------------------------
@scenario("declares a 65535-byte record", EXIT_PROTOCOL, r"record length 65535 over")
async def record_length_over_limit(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(raw_record(HANDSHAKE, 0xFFFF, bytes(0xFFFF)))
    await conn.hold(HOLD)


@scenario("declares a 16 MiB handshake message and starts sending it", EXIT_LIMIT,
          r"message length 16777215 over")
async def handshake_length_16mb(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(record(HANDSHAKE, b"\x02\xff\xff\xff" + bytes(2**14 - 4)))
    chunk = record(HANDSHAKE, bytes(2**14))
    for _ in range(1024):  # the rest of the 16 MiB, unless the client hangs up first
        await conn.send(chunk)


@scenario("sends a 300 KB Certificate message", EXIT_LIMIT, r"message length \d+ over")
async def certificate_over_limit(conn: Conn) -> None:
    ch = await conn.client_hello()
    flight = tls12_flight(ch)
    big = certificate_12([identity().der] + [os.urandom(10_000) for _ in range(30)])
    await _flight_then_hold(conn, flight[0], big, *flight[2:])


@scenario("ServerHello whose extensions block is longer than the message", EXIT_PROTOCOL,
          r"malformed ServerHello")
async def server_hello_bad_inner_length(conn: Conn) -> None:
    ch = await conn.client_hello()
    msg = bytearray(server_hello_13(ch))
    ext_len_at = 4 + 2 + 32 + 1 + len(ch.legacy_session_id) + 2 + 1
    msg[ext_len_at:ext_len_at + 2] = (0xFFF0).to_bytes(2, "big")
    await _flight_then_hold(conn, bytes(msg))


# -- wrong content or handshake types -----------------------------------------------------
@scenario("record of content type 99 after its ServerHello", EXIT_PROTOCOL,
          r"unknown content type 99")
async def unknown_content_type(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(server_hello_12(ch)))
    await asyncio.sleep(0.3)  # a separate segment (see record_then_garbage for the same one)
    await conn.send(record(99, b"\x00" * 10))
    await conn.hold(HOLD)


@scenario("record version 4.3 after its ServerHello", EXIT_PROTOCOL, r"record version major 4")
async def record_version_major(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(server_hello_12(ch)))
    await asyncio.sleep(0.3)
    await conn.send(record(HANDSHAKE, b"\x0e\x00\x00\x00", version=0x0403))
    await conn.hold(HOLD)


@scenario("a ServerHello record and garbage in the same write, then silence", EXIT_PROTOCOL,
          r"unknown content type 0")
async def record_then_garbage(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(server_hello_12(ch)) + bytes(8))
    await conn.hold(HOLD)


@scenario("a ServerHello and a 16 MiB message header in the same record, then silence",
          EXIT_LIMIT, r"message length 16777215 over")
async def message_then_bad_header(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(record(HANDSHAKE, server_hello_12(ch) + b"\x0b\xff\xff\xff"))
    await conn.hold(HOLD)


@scenario("answers with a record of content type 99", EXIT_NOT_TLS, r"not a TLS server")
async def unknown_content_type_first(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(record(99, b"\x00" * 10))
    await conn.hold(HOLD)


@scenario("Certificate before ServerHello", EXIT_PROTOCOL, r"Certificate before ServerHello")
async def certificate_first(conn: Conn) -> None:
    await conn.client_hello()
    await _flight_then_hold(conn, certificate_12([identity().der]))


@scenario("handshake message of unknown type 99", EXIT_PROTOCOL, r"(?i)0x63|99|unknown")
async def unknown_handshake_type(conn: Conn) -> None:
    await conn.client_hello()
    await _flight_then_hold(conn, b"\x63\x00\x00\x02ab")


@scenario("answers with a ClientHello", EXIT_PROTOCOL, r"ClientHello before ServerHello")
async def client_hello_from_server(conn: Conn) -> None:
    ch = await conn.client_hello()
    await _flight_then_hold(conn, b"\x01" + len(ch.serialize()).to_bytes(3, "big") +
                            ch.serialize())


@scenario("application data before any handshake", EXIT_PROTOCOL,
          r"(?i)application data before")
async def application_data_first(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(record(APPDATA, b"GET / HTTP/1.0\r\n\r\n"))
    await conn.hold(HOLD)


@scenario("a malformed 3-byte alert", EXIT_PROTOCOL, r"malformed .*alert|alert.*malformed")
async def malformed_alert(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(record(ALERT, b"\x02\x28\x00"))
    await conn.hold(HOLD)
