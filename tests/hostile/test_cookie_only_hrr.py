"""A HelloRetryRequest that asks for no group, only that a cookie be echoed (RFC 8446
4.1.4, 4.2.2: a stateless server's), then the handshake on the client's first key share:
the probe completes it, and its summary says that a HelloRetryRequest came and asked for no
group; it said "HelloRetryRequest  no" beside "from TLS 1.3 key_share after
HelloRetryRequest"."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .catalog import HOLD
from .server import Conn, HostileServer
from .tls import Tls13Server, handshake_records, hello_retry_request


async def cookie_only_hrr(conn: Conn) -> None:
    ch = await conn.client_hello()
    hrr = hello_retry_request(ch, group=None, cookie=b"stateless-cookie")
    await conn.send(handshake_records(hrr))
    ch2 = await conn.client_hello()
    assert ch2.extension(44) is not None   # the cookie echoed (else the probe fails below)
    tls = Tls13Server(ch2, conn.hello_raw[-1], retry=(conn.hello_raw[0], hrr))
    await conn.send(tls.hello_and_flight(tls.flight()))
    await conn.hold(HOLD)


def _rows(text: str) -> tuple[str, str]:
    group = re.search(r"^Group\s+(.+)$", text, re.MULTILINE)
    hrr = re.search(r"^HelloRetryRequest\s+(.+)$", text, re.MULTILINE)
    assert group is not None and hrr is not None, text
    return group.group(1), hrr.group(1)


def test_cookie_only_hello_retry_request(run_cli, hostile_server: HostileServer,
                                         tmp_path: Path) -> None:
    """The probe's summary, and `tlsprobe pcap --details` of its own capture, alike."""
    listener = hostile_server.serve(cookie_only_hrr)
    where = f"127.0.0.1:{listener.port}"
    pcap = tmp_path / "cookie.pcap"
    res = run_cli(where, "--tls1_3", "--groups", "x25519", "--no-verify",
                  "--first-flight-only", "--timeout", "5", "--pcap-out", pcap)
    assert res.returncode == 0, res.stderr
    expected = ("x25519 (0x001d), from TLS 1.3 key_share after HelloRetryRequest",
                "yes, asking for no group (cookie only)")
    assert _rows(res.stdout) == expected, res.stdout
    res = run_cli("pcap", pcap, "--details")
    assert res.returncode == 0, res.stderr
    assert _rows(res.stdout) == expected, res.stdout
    res = run_cli(where, "--tls1_3", "--groups", "x25519", "--no-verify",
                  "--first-flight-only", "--timeout", "5", "--json")
    data = json.loads(res.stdout)
    assert data["hello_retry_request"] is None   # the group it asked for: none
    assert data["key_exchange"]["source"] == "hello_retry_request", data["key_exchange"]
