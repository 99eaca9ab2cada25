"""Scenarios that need the whole handshake (the probe without --first-flight-only): a real
TLS 1.2 server side (ClientKeyExchange read, keys derived, the client's Finished decrypted)
broken at its ChangeCipherSpec and Finished, and the TLS 1.3 control done to the end."""
from __future__ import annotations

import os

from .catalog import EXIT_ALERT, EXIT_OK, EXIT_PROTOCOL, HOLD, scenario
from .server import Conn
from .tls import (
    APPDATA,
    CCS,
    Tls12Server,
    Tls13Server,
    alert,
    handshake_records,
    record,
)


async def _tls12_until_client_finished(conn: Conn) -> Tls12Server:
    ch = await conn.client_hello()
    tls = Tls12Server(ch, conn.hello_raw[-1])
    await conn.send(handshake_records(*tls.flight))
    tls.take_client_key_exchange(await conn.handshake_message(16, "ClientKeyExchange"))
    tls.take_client_finished(await conn.protected_record())
    return tls


async def _send_then_hold(conn: Conn, data: bytes) -> None:
    await conn.send(data)
    await conn.hold(HOLD)


@scenario("nothing (TLS 1.2 full handshake control)", EXIT_OK, "", full=True,
          stdout=r"Handshake\s+complete")
async def control_tls12_full(conn: Conn) -> None:
    tls = await _tls12_until_client_finished(conn)
    await _send_then_hold(conn, tls.finished())


@scenario("nothing (TLS 1.3 full handshake control)", EXIT_OK, "", full=True,
          stdout=r"Handshake\s+complete")
async def control_tls13_full(conn: Conn) -> None:
    ch = await conn.client_hello()
    tls = Tls13Server(ch, conn.hello_raw[-1])
    await _send_then_hold(conn, tls.hello_and_flight(tls.flight()))


@scenario("TLS 1.2 server Finished with a wrong verify_data", EXIT_PROTOCOL, r"(?i)finished",
          full=True)
async def tls12_bad_finished(conn: Conn) -> None:
    tls = await _tls12_until_client_finished(conn)
    await _send_then_hold(conn, tls.finished(bad=True))


@scenario("TLS 1.2 record after ChangeCipherSpec that does not decrypt", EXIT_PROTOCOL,
          r"(?i)decrypt|bad_record_mac|authentic", full=True)
async def tls12_bad_record_mac(conn: Conn) -> None:
    await _tls12_until_client_finished(conn)
    await _send_then_hold(conn, record(CCS, b"\x01") + record(22, os.urandom(40)))


@scenario("TLS 1.2 encrypted Finished without a ChangeCipherSpec", EXIT_PROTOCOL,
          r"(?i)ChangeCipherSpec|malformed|unexpected|Finished", full=True)
async def tls12_finished_without_ccs(conn: Conn) -> None:
    tls = await _tls12_until_client_finished(conn)
    await _send_then_hold(conn, tls.finished()[6:])  # the CCS record is the first 6 bytes


@scenario("TLS 1.2 closes after its ChangeCipherSpec", EXIT_ALERT,
          r"closed the connection before", full=True)
async def tls12_close_after_ccs(conn: Conn) -> None:
    await _tls12_until_client_finished(conn)
    await conn.send(record(CCS, b"\x01"))
    conn.close()


@scenario("TLS 1.2 plaintext fatal alert instead of its Finished", EXIT_ALERT,
          r"fatal alert handshake_failure", full=True)
async def tls12_alert_instead_of_finished(conn: Conn) -> None:
    await _tls12_until_client_finished(conn)
    await _send_then_hold(conn, alert(2, 40))


@scenario("TLS 1.2 application data before its Finished", EXIT_PROTOCOL,
          r"(?i)application data|unexpected|before", full=True)
async def tls12_appdata_before_finished(conn: Conn) -> None:
    await _tls12_until_client_finished(conn)
    await _send_then_hold(conn, record(APPDATA, b"early"))


@scenario("TLS 1.2 closes after reading the client's Finished, before its own CCS", EXIT_ALERT,
          r"closed the connection before", full=True)
async def tls12_close_before_ccs(conn: Conn) -> None:
    await _tls12_until_client_finished(conn)
    conn.close()
