"""A ServerHello or HelloRetryRequest that breaks a rule the engine checks is no answer in
the audit, whatever the rule (the design of test_suite_violations.py, where the rule is
RFC 8446 B.4): `tlsprobe probe` exits 6 on it, so the versions check must not call TLS 1.3
spoken on its strength, the tolerance checks must not say "tolerated" (a TLS 1.3 answer the
client rejects is no answer), and the rating must not be A for a server no client offering
TLS 1.3 can connect to. Each server here answers a hello without TLS 1.3 with a whole,
correct TLS 1.2 handshake, and a hello offering TLS 1.3 with one broken hello: the duplicate
supported_versions of RFC 8446 4.2, a legacy_session_id not echoed (RFC 8446 4.1.3), a
HelloRetryRequest asking for the group the client already sent a share for (RFC 8446
4.1.4)."""
from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tlsprobe.wire import extensions as ext

from .catalog import HOLD
from .scenarios_violations import tls13_hello_with
from .server import Conn, HostileServer, Script
from .tls import (
    TLS12_SUITE,
    TLS13,
    X25519,
    Tls12Server,
    certificate_12,
    client_share,
    handshake_records,
    hello_retry_request,
    identity,
    server_hello,
    server_hello_done,
    ske_ecdhe,
)

pytestmark = pytest.mark.timeout(240)


def tls12_or(broken: Callable[[Conn], Any]) -> Script:
    """A correct TLS 1.2 handshake for a hello without TLS 1.3, `broken` for one with it."""
    async def script(conn: Conn) -> None:
        ch = await conn.client_hello()
        if TLS13 in ch.supported_versions and client_share(ch, X25519):
            await broken(conn)
            return
        tls = Tls12Server(ch, conn.hello_raw[-1])
        await conn.send(handshake_records(*tls.flight))
        tls.take_client_key_exchange(await conn.handshake_message(16, "ClientKeyExchange"))
        tls.take_client_finished(await conn.protected_record())
        await conn.send(tls.finished())
        await conn.hold(HOLD)
    return script


def _replay(script: Script) -> Callable[[Conn], Any]:
    """A tls13_hello_with script run on a hello already read (put back for it to read)."""
    async def run(conn: Conn) -> None:
        conn._queue.insert(0, conn.hello_raw.pop())
        conn.hellos.pop()
        await script(conn)
    return run


async def _hrr_for_shared_group(conn: Conn) -> None:
    await conn.send(handshake_records(hello_retry_request(conn.hellos[-1], group=X25519)))
    await conn.hold(HOLD)


SERVERS = {
    "duplicate_supported_versions": (
        _replay(tls13_hello_with(extra=[ext.supported_versions_server(TLS13)])),
        ("server sent supported_versions twice in its ServerHello (RFC 8446 4.2: one "
         "extension of each type)")),
    "session_id_not_echoed": (
        _replay(tls13_hello_with(session_id=b"")),
        "TLS 1.3 ServerHello does not echo the legacy_session_id"),
    "hrr_for_a_shared_group": (
        _hrr_for_shared_group,
        "HelloRetryRequest asks for x25519 (0x001d), for which a share was already sent"),
}


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_broken_tls13_hello_is_no_answer(name: str, hostile_server: HostileServer,
                                           run_cli: Callable[..., Any]) -> None:
    broken, rule = SERVERS[name]
    listener = hostile_server.serve(tls12_or(broken))
    res = run_cli("scan", f"127.0.0.1:{listener.port}", "--checks",
                  "versions,tls13_intolerance,large_hello,grease", "--json", "--no-progress",
                  "--no-policy", "--timeout", "2", timeout=180)
    assert "Traceback" not in res.stderr, res.stderr
    report = json.loads(res.stdout)
    versions = {v["version"]["name"]: v for v in report["versions"]}
    assert versions["TLS 1.2"]["status"] == "supported", versions
    tls13 = versions["TLS 1.3"]
    # answered, but with a hello the client rejects: not spoken, not "not answered"
    assert tls13["status"] == "inconclusive", tls13
    assert f"the full offer was answered with a hello that breaks the protocol: {rule}" in \
        tls13["detail"], tls13
    checks = {c["name"]: c for c in report["check_results"]}
    assert checks["tls13_intolerance"]["verdict"] == "not tolerated", checks
    assert rule in checks["tls13_intolerance"]["reason"]
    for tolerance in ("large_hello", "grease"):   # asked with TLS 1.2, the version spoken
        assert "TLS 1.3" not in checks[tolerance]["reason"], checks[tolerance]
    # no client offering TLS 1.3 connects: the rating warns as for a server without it
    warnings = {w["rule"]: w for w in report["rating"]["warnings"]}
    assert "no_tls13" in warnings, report["rating"]
    assert rule in " ".join(warnings["no_tls13"]["evidence"])


#: an ALPN protocol name no client offers, with a terminal escape, a bell and HTML
EVIL_ALPN = b"\x1b[31m<b>&amp;\"'x\x07"


async def alpn_not_offered_when_asked(conn: Conn) -> None:
    """TLS 1.2 only: a whole handshake for a hello without ALPN; a hello offering ALPN gets
    a first flight whose ServerHello chooses EVIL_ALPN, never offered (RFC 7301 3.2)."""
    ch = await conn.client_hello()
    tls = Tls12Server(ch, conn.hello_raw[-1])
    if ch.extension(16) is not None:
        random = os.urandom(32)
        await conn.send(handshake_records(
            server_hello(ch, suite=TLS12_SUITE, random=random, extensions=[
                ext.renegotiation_info(), ext.ec_point_formats(), ext.alpn([EVIL_ALPN])]),
            certificate_12([identity().der]), ske_ecdhe(ch, random), server_hello_done()))
        await conn.hold(HOLD)
        return
    await conn.send(handshake_records(*tls.flight))
    tls.take_client_key_exchange(await conn.handshake_message(16, "ClientKeyExchange"))
    tls.take_client_finished(await conn.protected_record())
    await conn.send(tls.finished())
    await conn.hold(HOLD)


def test_an_alpn_never_offered_is_no_choice(hostile_server: HostileServer,
                                            run_cli: Callable[..., Any],
                                            tmp_path: Path) -> None:
    """The alpn check's hello answered with a protocol it did not offer: the violation
    (RFC 7301 3.2), inconclusive; neither "not supported" (the server did not ignore ALPN)
    nor the name unescaped in any output (it was written raw into the CSV evidence)."""
    listener = hostile_server.serve(alpn_not_offered_when_asked)
    html, csv_file = tmp_path / "out.html", tmp_path / "out.csv"
    res = run_cli("scan", f"127.0.0.1:{listener.port}", "--checks", "versions,alpn",
                  "--no-progress", "--no-policy", "--timeout", "2", "--html", str(html),
                  "--csv", str(csv_file), "--json-out", str(tmp_path / "out.json"),
                  timeout=180)
    assert "Traceback" not in res.stderr, res.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    alpn = next(c for c in report["check_results"] if c["name"] == "alpn")
    assert alpn["verdict"] == "inconclusive", alpn
    assert "which the client did not offer (RFC 7301 3.2)" in alpn["reason"], alpn
    outputs = {"text": res.stdout, "html": html.read_text(), "csv": csv_file.read_text()}
    for kind, text in outputs.items():
        assert "\x1b" not in text and "\x07" not in text, (kind, text)
    assert "&lt;b&gt;&amp;amp;" in outputs["html"] and "<b>&amp;" not in outputs["html"]
    rows = list(csv.DictReader(io.StringIO(outputs["csv"])))
    row = next(r for r in rows if r["section"] == "check" and r["name"] == "alpn")
    assert row["status"] == "inconclusive" and "RFC 7301 3.2" in row["detail"], row
