"""A long Retry token (RFC 9000 17.2.5: its length is the server's choice): our Initial
datagrams grow past 1,200 bytes to carry it (14.1 sets 1,200 as the least), so the
handshake goes on; only a token that leaves no room in the largest UDP datagram is
tlsprobe's limit (exit 8), never the server's protocol error. Against aioquic through a
relay that lengthens its Retry token (and gives the server back its own), and scripted
peers."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.quic.test_quic_discard import _ids, retry
from tests.quic.test_quic_loss import Relay, relay  # noqa: F401  (the relay fixture, shared)

from tlsprobe.errors import EXIT_LIMIT, EXIT_NETWORK
from tlsprobe.net import quic_conn, quic_wire as w

LONG = b"L" * 1500      # a token 1,200-byte Initial datagrams cannot carry


def _hello(datagrams: list[bytes], dcid: bytes, token: bytes) -> bytes:
    """The Initial CRYPTO data of `datagrams` sent to `dcid` with `token`, in order."""
    keys = w.PacketKeys.initial(dcid, "client")
    data: dict[int, bytes] = {}
    for datagram in datagrams:
        for packet in w.split_datagram(datagram, 8):
            if packet.kind == "Initial" and packet.dcid == dcid:
                assert packet.token == token
                _, payload = w.unprotect(keys, packet.data, packet.pn_offset, -1)
                data.update((f.offset, f.data) for f in w.parse_frames(payload)
                            if f.type == 0x06)
    out = b""
    for offset in sorted(data):
        assert offset == len(out)
        out += data[offset]
    return out


def test_a_long_retry_token_from_aioquic(quic_server: Any, relay: Callable[[Any], Relay],
                                         run_cli: Callable[..., Any]) -> None:
    # aioquic's Retry reaches tlsprobe with a 1,500-byte token; the relay puts aioquic's own
    # token back into the Initial packets that carry the long one: the handshake completes
    server = quic_server("x25519,secp256r1", retry=True)
    r = relay(server)
    real: list[bytes] = []

    def lengthen(datagram: bytes) -> bytes:
        if datagram[0] & 0xF0 != 0xF0 or real:
            return datagram
        [packet] = w.split_datagram(datagram, 8)
        real.append(packet.scid)
        real.append(datagram[packet.pn_offset:-16])
        return retry(r.from_client[0], token=LONG, scid=packet.scid)

    def shorten(datagram: bytes) -> bytes:
        [packet] = w.split_datagram(datagram, 8)
        if packet.kind != "Initial" or packet.token != LONG:
            return datagram
        keys = w.PacketKeys.initial(real[0], "client")   # the Retry's: RFC 9001 5.2
        pn, payload = w.unprotect(keys, packet.data, packet.pn_offset, -1)
        payload += bytes(max(0, 1200 - 40 - len(real[1]) - len(payload)))   # >= 1200
        header = w.long_header(0, packet.dcid, packet.scid, pn, len(payload), real[1])
        return w.seal(keys, header, pn, 2, payload)
    r.alter, r.alter_client = lengthen, shorten
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["error"] is None and data["version"]["name"] == "TLS 1.3"
    assert data["quic"]["retry_source_connection_id"] == real[0].hex()
    carried = [d for d in r.from_client if LONG in d]
    assert carried and all(1200 < len(d) <= quic_conn.MAX_INITIAL for d in carried)
    assert _hello(carried, real[0], LONG) == _hello(r.from_client[:2], _ids(
        r.from_client[0])[0], b"")


def test_a_long_retry_token_from_a_scripted_peer(udp_peer: Any,
                                                 run_cli: Callable[..., Any]) -> None:
    # a peer that answers with a Retry of a 1,500-byte token, then says nothing: every
    # Initial after it carries the token and the whole ClientHello; a timeout (exit 3)
    sock, got, answers = udp_peer
    scid = b"\x07" * 8
    answers.append(lambda d: retry(got[0], token=LONG, scid=scid) if len(got) == 1 else b"")
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  timeout=30)
    assert res.returncode == EXIT_NETWORK, res.stderr
    assert "timed out" in res.stderr
    got.complete()
    after = [d for d in got if _ids(d)[0] == scid]
    assert after and all(1200 < len(d) <= 2 * 1200 for d in after)
    first = _ids(got[0])[0]
    assert _hello(after, scid, LONG) == _hello([d for d in got if _ids(d)[0] == first],
                                               first, b"")


def test_a_retry_token_no_udp_datagram_can_carry(udp_peer: Any,
                                                 run_cli: Callable[..., Any]) -> None:
    # a 65,400-byte token leaves under 100 bytes in the largest UDP datagram: our limit
    sock, got, answers = udp_peer
    answers.append(lambda d: retry(got[0], token=b"H" * 65400) if len(got) == 1 else b"")
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  "--json", timeout=30)
    assert res.returncode == EXIT_LIMIT, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert "Retry token of 65400 bytes" in line and "tlsprobe's limit" in line, line
    assert json.loads(res.stdout)["error_kind"] == "limit"
