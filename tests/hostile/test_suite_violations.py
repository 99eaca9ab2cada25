"""A ServerHello whose cipher suite is not defined for the version it selects is a named
protocol violation everywhere it is seen (issue 30, 2.9): the probe's error (exit 6, RFC 8446
B.4; tests/hostile/scenarios_negotiation.py), and in the audit neither an answer nor
"tolerated". The server here speaks TLS 1.2 only, and answers a hello that offers TLS 1.3
suites with one of them (TLS_AES_128_GCM_SHA256) in a TLS 1.2 ServerHello; a hello without
them gets an ordinary ECDHE-ECDSA handshake."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from .catalog import HOLD
from .server import Conn, HostileServer
from .tls import (
    alert,
    certificate_12,
    handshake_records,
    identity,
    server_hello_12,
    server_hello_done,
    ske_ecdhe,
)

ECDSA_SUITES = (0xC02B, 0xC02C, 0xCCA9, 0xC023, 0xC024, 0xC009, 0xC00A)
RULE = "protocol violation, RFC 8446 B.4: TLS 1.3 cipher suites cannot be used for TLS 1.2"


async def tls13_suite_when_offered(conn: Conn) -> None:
    ch = await conn.client_hello()
    suite = 0x1301 if 0x1301 in ch.cipher_suites else \
        next((s for s in ch.cipher_suites if s in ECDSA_SUITES), None)
    if suite is None:
        await conn.send(alert(2, 40))
        return
    random = os.urandom(32)
    await conn.send(handshake_records(server_hello_12(ch, suite=suite, random=random),
                                      certificate_12([identity().der]), ske_ecdhe(ch, random),
                                      server_hello_done()))
    await conn.hold(HOLD)


def test_audit_names_the_violation_and_never_says_tolerated(
        hostile_server: HostileServer, run_cli: Callable[..., Any]) -> None:
    listener = hostile_server.serve(tls13_suite_when_offered)
    res = run_cli("scan", f"127.0.0.1:{listener.port}", "--checks",
                  "versions,tls13_intolerance", "--json", "--no-progress", "--no-policy",
                  "--timeout", "2", timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    report = json.loads(res.stdout)
    check = next(c for c in report["check_results"] if c["name"] == "tls13_intolerance")
    # the hello offering TLS 1.3 got a broken answer, the plain TLS 1.2 hello a good one
    assert check["verdict"] == "not tolerated", check
    assert f"TLS 1.2 ServerHello chose TLS_AES_128_GCM_SHA256 (0x1301), a TLS 1.3 cipher " \
        f"suite ({RULE})" in check["reason"]
    assert "the plain hello, asked in between, is answered with ServerHello TLS 1.2" in \
        check["reason"]
    assert any(f["code"] == "check.tls13_intolerance" for f in report["findings"])
    versions = {v["version"]["name"]: v for v in report["versions"]}
    assert versions["TLS 1.2"]["status"] == "supported"
    # the TLS 1.3 offer's answer is not an answer: not "supported", the violation named
    assert versions["TLS 1.3"]["status"] != "supported"
    assert RULE in versions["TLS 1.3"]["detail"], versions["TLS 1.3"]
