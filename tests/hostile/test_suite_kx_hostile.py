"""The suites table's key exchange against scripted servers (tests/hostile/server.py) that no
packaged server imitates: a DHE prime far larger than any standard one (2^9941 - 1), shown as
it is; and a server that answers every TLS 1.2 hello with a ServerHello and then never sends
the rest of its flight, which must cost the suites phase one slow connection, not one per
suite (the suites phase reads each pick's first flight to size its key exchange)."""
from __future__ import annotations

import json

from tlsprobe import registry

from . import scenarios_deadline as sd
from .catalog import FATAL, HANDSHAKE_FAILURE, HOLD
from .runner import run_tlsprobe
from .server import Conn, HostileServer
from .tls import alert, handshake_records, server_hello_12

TIMEOUT = 1.0


def _scan(port: int) -> dict[str, object]:
    out = run_tlsprobe("scan", f"127.0.0.1:{port}", "--checks", "suites", "--json",
                       "--no-progress", "--timeout", str(TIMEOUT), "--retries", "0",
                       hard_timeout=120.0)
    assert out.returncode in (0, 1), out.stderr
    report: dict[str, object] = json.loads(out.stdout)
    return report


def _suites(report: dict[str, object], version: str) -> dict[str, object]:
    suites = report["suites"]
    assert isinstance(suites, list)
    (audit,) = [s for s in suites if s["version"]["name"] == version]
    return audit


def test_a_huge_dh_prime_is_shown_as_it_is(hostile_server: HostileServer) -> None:
    """DHE with the 9941-bit Mersenne prime (prime, not safe, over the size tlsprobe checks):
    "DH 9941", its size as sent, not weak (it is large), no group named."""
    listener = hostile_server.serve(sd.dhe_huge_unknown_prime)
    audit = _suites(_scan(listener.port), "TLS 1.2")
    rows = audit["rows"]
    assert [r["suite"]["iana_name"] for r in rows] == ["TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"]
    (row,) = rows
    assert (row["kx_kind"], row["kx_bits"], row["kx_label"], row["kx_group"], row["weak"]) == \
        ("DHE", 9941, "DH 9941", None, False)


def _first_tls12_suite(suites: list[int]) -> int | None:
    for code in suites:
        suite = registry.cipher_suite(code)
        if suite is not None and not suite.is_scsv and 0x0303 in suite.versions:
            return code
    return None


async def hello_then_silence(conn: Conn) -> None:
    """A TLS 1.2 ServerHello for the first suite offered, then nothing (the Certificate,
    ServerKeyExchange and ServerHelloDone never come); other versions get an alert."""
    ch = await conn.client_hello()
    versions = ch.supported_versions or [ch.legacy_version]
    suite = _first_tls12_suite(list(ch.cipher_suites))
    if 0x0303 not in versions or 0x0304 in versions or suite is None:
        await conn.send(alert(FATAL, HANDSHAKE_FAILURE))
        return
    await conn.send(handshake_records(server_hello_12(ch, suite=suite)))
    await conn.hold(HOLD)


def test_a_flight_that_never_comes_costs_one_slow_connection(
        hostile_server: HostileServer) -> None:
    """Every TLS 1.2 suite is "accepted" with a bare ServerHello: the first pick waits for
    the rest of the flight until the read timeout, the others stop at their ServerHello; no
    row claims a key exchange, a note says why. Without the cut, each of the ~300 picks
    would wait its timeout (minutes)."""
    listener = hostile_server.serve(hello_then_silence)
    audit = _suites(_scan(listener.port), "TLS 1.2")
    rows = audit["rows"]
    assert len(rows) > 100 and all(r["kx_label"] in ("unknown", "PSK", "SRP", "KRB5",
                                                     "ECCPWD", "GOST", "CECPQ1")
                                   and r["kx_bits"] is None for r in rows)
    assert any("first flight was not read whole" in n for n in audit["notes"]), audit["notes"]
    slow = [end - start for start, end in listener.spans if end - start >= 0.9 * TIMEOUT]
    # the versions phase's TLS 1.2 hellos and the first suites pick wait; nothing else
    assert len(slow) <= 6, (len(slow), len(listener.spans))
