"""A stateless reset (RFC 9000 10.3) in `scan --quic` is named as the probe names it, not
taken for a TCP reset: aioquic's server behind a UDP relay on loopback (test_quic_loss.Relay)
whose every connection is cut after the server's first datagram with Handshake packets
(EncryptedExtensions: the stateless_reset_token), each later datagram of ours answered with
a stateless reset."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.quic.test_quic_loss import TOKEN, Relay, _reset, kinds, relay  # noqa: F401


def _server_cid(datagram: bytes) -> bytes:
    """The Source Connection ID of a server's long-header packet: the server's own CID,
    one per connection (tlsprobe's, the Destination CID, may be the same in all)."""
    at = 6 + datagram[5]
    return datagram[at + 1:at + 1 + datagram[at]]


def _cut_and_reset(r: Relay) -> None:
    """Per connection (one at a time: --per-host 1, each from a UDP port of its own): the
    server's datagrams stop after its first with Handshake packets; our datagrams after it
    get a stateless reset."""
    start, clients = [0], [None]
    r.newest_only = True

    def cut() -> bool:   # a Handshake packet from a server CID an earlier connection did not
        earlier = {_server_cid(d) for d in r.to_client[:start[0]] if d[0] & 0x80}   # have:
        return any("Handshake" in kinds(d) and _server_cid(d) not in earlier   # the server
                   for d in r.to_client[start[0]:] if d[0] & 0x80)   # still retransmits to
        # the connections cut before (its relayed answers all come from one socket), and a
        # loaded machine let those arrive once the next connection began: taken for its
        # cut, the next connection's answers were held back (a timeout, 1 run in 4)

    def forge(datagram: bytes) -> list[bytes]:
        if r._client != clients[0]:      # a new connection
            clients[0], start[0] = r._client, len(r.to_client)
            return []
        return [_reset()] if cut() else []
    r.forge = forge
    r.server_pass = lambda delivered: not cut()


def test_scan_names_a_stateless_reset(quic_server: Any, relay: Callable[[Any], Relay],
                                      run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519", reset_token=TOKEN.hex())
    r = relay(server)
    _cut_and_reset(r)
    res = run_cli("scan", f"127.0.0.1:{r.port}", "--quic", "--json",
                  "--no-progress", "--no-policy", "--timeout", "3", "--per-host", "1",
                  "--retries", "0", timeout=120)
    assert res.returncode == 0, res.stderr   # TLS 1.3 was answered; the rest inconclusive
    report = json.loads(res.stdout)
    assert sum(1 for d in r.to_client if d[0] & 0xC0 == 0x40 and d.endswith(TOKEN)) >= 1
    detail = report["trust"]["detail"]
    assert report["trust"]["status"] == "not_checked"
    assert "connection reset: the server sent a stateless reset (RFC 9000 10.3), after the " \
        "ServerHello" in detail, detail
    assert "reset by peer" not in res.stdout and "reset after the ServerHello" not in res.stdout
