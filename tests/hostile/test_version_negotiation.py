"""TLS 1.0-1.2 version negotiation that finds no version in common is the server's refusal,
not its protocol violation: an openssl s_server speaking TLS 1.0 alone answers a hello that
offers TLS 1.2 (or 1.1) with a TLS 1.0 ServerHello, as RFC 5246 E.1 has it (the server
names the highest version it has; the client, which offers none such, ends with
protocol_version). The probe said "server chose TLS 1.0, which was not offered", exit 6
(the server broke the protocol), alert illegal_parameter. A version above what the hello
offers, or one named in supported_versions, is still a violation (the hostile catalogue's
version_not_offered; the control here: a scripted server answering a TLS 1.0 hello with a
TLS 1.2 ServerHello)."""
from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import CliResult
from tests.helpers.servers import Server

from .catalog import HOLD
from .server import Conn, HostileServer
from .tls import handshake_records, server_hello_12


def test_a_lower_version_named_in_legacy_version_is_no_common_version(
        server_cache: Callable[..., Server], run_cli: Callable[..., CliResult]) -> None:
    srv = server_cache("openssl", proto="tls1_0")
    for flags, offered in ((("--tls1_2",), "TLS 1.2"), (("--tls1_2", "--tls1_1"),
                                                       "TLS 1.2, TLS 1.1")):
        code, out, err = run_cli(f"127.0.0.1:{srv.port}", *flags, "--no-verify", "--json")
        assert code == 5, err
        assert err.strip().endswith(f"server chose TLS 1.0, which the hello does not offer "
                                    f"(it offers {offered}): no version in common"), err
        data = json.loads(out)
        assert data["error_kind"] == "refused" and data["version"]["name"] == "TLS 1.0"
        assert {"direction": "sent", "level": 2, "description": 70,
                "name": "protocol_version"} in data["alerts"]


async def _tls12_hello_to_anything(conn: Conn) -> None:
    ch = await conn.client_hello()
    await conn.send(handshake_records(server_hello_12(ch)))
    await conn.hold(HOLD)


def test_a_version_above_the_offer_is_still_a_violation(
        hostile_server: HostileServer, run_cli: Callable[..., CliResult]) -> None:
    listener = hostile_server.serve(_tls12_hello_to_anything)
    code, _, err = run_cli(f"127.0.0.1:{listener.port}", "--tls1", "--no-verify",
                           "--timeout", "5")
    assert code == 6, err
    assert err.strip().endswith("server chose TLS 1.2, which was not offered"), err
