"""Scenarios: servers that try to make the probe spend CPU or time past its limit (issue 10
item 4), and a composite DH modulus (item 7). The DH ones need the full handshake (the
parameters are used at ServerHelloDone), so they are `full`; each server sends its flight
and then holds the connection until the probe closes it.

test_deadlines.py measures these more closely (the probe's own CPU time, the connection's
duration as the server saw it); here they run with the generic hostile checks.
"""
from __future__ import annotations

import itertools

from tlsprobe.kex.ffdhe_primes import FFDHE_GROUPS

from .catalog import (EXIT_ALERT, EXIT_NETWORK, EXIT_PROTOCOL, FATAL, HANDSHAKE_FAILURE, HOLD,
                      scenario)
from .dhe import COMPOSITE_2013, M9941, dhe_flight, wants_dhe_tls12
from .server import Conn
from .tls import alert, certificate_12, handshake_records, server_hello_12

#: ffdhe8192 (RFC 7919): a well-known prime, served with a new generator each connection
FFDHE8192_G = itertools.count(5, 2)


async def _dhe_then_hold(conn: Conn, p: int, g: int) -> None:
    """The DHE flight when the hello offers it (an audit's other hellos get an alert)."""
    ch = await conn.client_hello()
    if not wants_dhe_tls12(ch):
        await conn.send(alert(FATAL, HANDSHAKE_FAILURE))
        return
    await conn.send(handshake_records(*dhe_flight(ch, p, g)))
    await conn.hold(HOLD)


@scenario("DHE with a composite 2013-bit modulus (no small factor)", EXIT_PROTOCOL,
          r"(?i)not prime", full=True)
async def dhe_composite_modulus(conn: Conn) -> None:
    await _dhe_then_hold(conn, COMPOSITE_2013, 2)


# Not in the catalogue: the probe stops there (exit 0 today; issue 10 item 8 makes a probe
# that stops at a DH prime it will not use exit non-zero). test_deadlines.py runs it.
async def dhe_huge_unknown_prime(conn: Conn) -> None:
    await _dhe_then_hold(conn, M9941, 3)


@scenario("DHE with ffdhe8192 and a different generator on every connection", EXIT_ALERT,
          r"handshake_failure", full=True)
async def dhe_known_prime_varying_g(conn: Conn) -> None:
    """Answers the probe's ClientKeyExchange with an alert: the probe got that far."""
    ch = await conn.client_hello()
    p = FFDHE_GROUPS[0x0104][1]
    await conn.send(handshake_records(*dhe_flight(ch, p, next(FFDHE8192_G))))
    await conn.handshake_message(16, "ClientKeyExchange")
    await conn.send(alert(FATAL, HANDSHAKE_FAILURE))
    await conn.hold(HOLD)


@scenario("trickles TLS 1.2 ServerHellos one byte every 0.2 s to any hello", EXIT_NETWORK,
          r"total time limit", slow=True)
async def trickle_any_hello(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.trickle(handshake_records(server_hello_12(ch)) * 20, 0.2)


# Not in the catalogue (test_deadlines.py runs it): a fast trickle, one byte every 2 ms, of
# a ServerHello and a 200 kB Certificate, so that the probe reads a thousand one-byte
# segments before its total limit and --pcap-out has that many packets to write.
async def trickle_fast(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.trickle(handshake_records(server_hello_12(ch), certificate_12([bytes(200000)])),
                       0.002)
