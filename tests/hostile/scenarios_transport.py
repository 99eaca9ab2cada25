"""Scenarios: not TLS at all, time (trickle, silence, never reading), resets and endless
streams. These test the probe's timeouts and its memory bounds more than its codec."""
from __future__ import annotations

import asyncio
import socket

from .catalog import (
    EXIT_ALERT,
    EXIT_NETWORK,
    EXIT_NOT_TLS,
    EXIT_PROTOCOL,
    HOLD,
    scenario,
)
from .server import Conn
from .tls import (
    APPDATA,
    CCS,
    HANDSHAKE,
    handshake_records,
    record,
    server_hello_12,
    server_hello_13,
    sslv2_server_hello,
    tls12_flight,
)


# -- not TLS ----------------------------------------------------------------------------
@scenario("answers with an SSLv2 SERVER-HELLO", (EXIT_NOT_TLS, EXIT_PROTOCOL), r"SSLv2|SSL 2")
async def sslv2_answer(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(sslv2_server_hello())
    await conn.hold(HOLD)


@scenario("answers with an HTTP response", EXIT_NOT_TLS, r"not a TLS server.*HTTP")
async def http_answer(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    conn.close()


@scenario("greets with an SMTP banner before reading", EXIT_NOT_TLS,
          r"not a TLS server.*SMTP")
async def smtp_banner(conn: Conn) -> None:
    await conn.send(b"220 mail.hostile.test ESMTP ready\r\n")
    await conn.hold(HOLD)


@scenario("answers with binary garbage", EXIT_NOT_TLS, r"not a TLS server")
async def garbage_answer(conn: Conn) -> None:
    await conn.client_hello()
    await conn.send(bytes(range(0x30, 0x80)))
    await conn.hold(HOLD)


# -- time -------------------------------------------------------------------------------
@scenario("trickles a ServerHello one byte per second", EXIT_NETWORK,
          r"total time limit", slow=True)
async def trickle(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.trickle(handshake_records(server_hello_13(ch)), 1.0)


@scenario("reads the ClientHello and never answers", EXIT_NETWORK, r"timed out", slow=True)
async def no_answer(conn: Conn) -> None:
    await conn.client_hello()
    await conn.hold(HOLD)


@scenario("accepts the connection and never reads", EXIT_NETWORK, r"timed out", slow=True)
async def never_reads(conn: Conn) -> None:
    sock = conn.writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    conn.reader._transport.pause_reading()  # type: ignore[attr-defined]
    await conn.hold(HOLD, watch=False)


@scenario("sends half a ServerHello, then a TCP RST", EXIT_NETWORK, r"reset")
async def rst_mid_server_hello(conn: Conn) -> None:
    ch = await conn.client_hello()
    data = handshake_records(server_hello_13(ch))
    await conn.send(data[:30])
    await asyncio.sleep(0.2)
    conn.reset()


@scenario("sends a TCP RST right after the ClientHello", EXIT_NETWORK,
          r"reset.*before ServerHello")
async def rst_after_client_hello(conn: Conn) -> None:
    await conn.client_hello()
    conn.reset()


@scenario("sends a TLS 1.2 ServerHello and Certificate, then a TCP RST", EXIT_NETWORK,
          r"reset")
async def rst_mid_flight(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(*tls12_flight(ch)[:2]))
    await asyncio.sleep(0.2)
    conn.reset()


# -- endless streams --------------------------------------------------------------------
async def _endless(conn: Conn, prefix: bytes, unit: bytes) -> None:
    await conn.send(prefix)
    while True:  # bounded by the server's own MAX_SEND_BYTES / MAX_SCRIPT_SECONDS
        await conn.send(unit)


@scenario("endless 16 KiB application-data records before any handshake", EXIT_PROTOCOL,
          r"(?i)application data before")
async def endless_application_data(conn: Conn) -> None:
    await conn.client_hello()
    await _endless(conn, b"", record(APPDATA, bytes(2**14)) * 4)


@scenario("endless ChangeCipherSpec records before any handshake", EXIT_PROTOCOL,
          r"(?i)ChangeCipherSpec")
async def endless_change_cipher_spec(conn: Conn) -> None:
    await conn.client_hello()
    await _endless(conn, b"", record(CCS, b"\x01") * 1000)


@scenario("endless empty handshake records", EXIT_PROTOCOL, r"(?i)empty|zero.length")
async def endless_empty_handshake_records(conn: Conn) -> None:
    await conn.client_hello()
    await _endless(conn, b"", record(HANDSHAKE, b"") * 1000)


@scenario("TLS 1.2 ServerHello, then endless unknown handshake messages", EXIT_PROTOCOL,
          r"(?i)unexpected|unknown|0x63")
async def endless_handshake_messages(conn: Conn) -> None:
    ch = await conn.client_hello()
    unit = handshake_records(*[b"\x63\x00\x01\x00" + bytes(256)] * 60)
    await _endless(conn, handshake_records(server_hello_12(ch)), unit)


@scenario("TLS 1.2 ServerHello, then endless HelloRequests (4000 a record)", EXIT_PROTOCOL,
          r"HelloRequest")
async def endless_hello_requests(conn: Conn) -> None:
    """Each is legal alone (RFC 5246 7.4.1.1: ignored during a handshake); without a bound
    the client read them until its event limit, 0.25 s of CPU per scan connection."""
    ch = await conn.client_hello()
    await _endless(conn, handshake_records(server_hello_12(ch)),
                   handshake_records(b"\x00\x00\x00\x00" * 4000))


@scenario("endless warning alerts", EXIT_ALERT, r"warning alert")
async def endless_warning_alerts(conn: Conn) -> None:
    await conn.client_hello()
    await _endless(conn, b"", record(21, b"\x01\x70") * 1000)
