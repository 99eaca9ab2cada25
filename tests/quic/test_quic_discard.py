"""Packets RFC 9000 tells a client to discard are discarded, not taken for the server's
answer (issue 30, 2.9): a Version Negotiation packet after a valid Retry (6.2, 17.2.1), a
Retry with an empty token (17.2.5.2), a Retry whose source connection ID is the destination
connection ID of our Initial (17.2.5.1) and a second Retry (17.2.5.2). A UDP relay on
loopback (test_quic_loss.Relay) forges them, with valid integrity tags, beside aioquic's
real answers; the handshake goes on as it would without them, for the probe and the audit."""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.quic.test_quic_loss import Relay, relay  # noqa: F401  (the relay fixture, shared)

from tlsprobe.net import quic_wire as w

V1 = 1


def _ids(datagram: bytes) -> tuple[bytes, bytes]:
    """(DCID, SCID) of the long-header packet a datagram starts with."""
    dcid = datagram[6:6 + datagram[5]]
    at = 6 + len(dcid)
    return dcid, datagram[at + 1:at + 1 + datagram[at]]


def retry(client_initial: bytes, *, token: bytes, scid: bytes | None = None,
          odcid: bytes | None = None) -> bytes:
    """A Retry answering `client_initial`, its integrity tag valid for `odcid` (default: the
    Initial's DCID); `scid` default: 8 new random bytes."""
    dcid, client_scid = _ids(client_initial)
    new = os.urandom(8) if scid is None else scid
    packet = (b"\xf0" + V1.to_bytes(4, "big") + bytes([len(client_scid)]) + client_scid +
              bytes([len(new)]) + new + token)
    return packet + w.retry_tag(odcid if odcid is not None else dcid, packet, V1)


def version_negotiation(client_initial: bytes) -> bytes:
    """A Version Negotiation listing only a version we do not speak."""
    dcid, scid = _ids(client_initial)
    return (b"\x80" + bytes(4) + bytes([len(scid)]) + scid + bytes([len(dcid)]) + dcid +
            bytes.fromhex("ff00001d"))


@pytest.mark.parametrize("case", ["empty-token", "scid-is-our-dcid"])
def test_a_retry_the_client_must_discard(quic_server: Any, relay: Callable[[Any], Relay],
                                         run_cli: Callable[..., Any], case: str) -> None:
    server = quic_server("x25519,secp256r1")
    r = relay(server)

    def forge(datagram: bytes) -> list[bytes]:
        if len(r.from_client) > 1:
            return []
        if case == "empty-token":
            return [retry(datagram, token=b"")]
        return [retry(datagram, token=b"token", scid=_ids(datagram)[0])]
    r.forge = forge
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["error"] is None and data["version"]["name"] == "TLS 1.3"
    assert data["quic"]["retry_source_connection_id"] is None
    assert r.to_client[0].startswith(b"\xf0")   # the forged Retry did reach tlsprobe
    # every long-header packet went to our first DCID or the server's own connection ID,
    # none with the Retry's token: the Retry changed nothing
    allowed = {_ids(r.from_client[0])[0]} | {_ids(d)[1] for d in r.from_server if d[0] & 0x80}
    assert all(_ids(d)[0] in allowed for d in r.from_client if d[0] & 0x80)
    assert all(b"token" not in d for d in r.from_client)


def test_version_negotiation_and_a_second_retry_after_a_valid_retry(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    """aioquic asks for address validation (its Retry); the client's next Initial is then
    answered with a Version Negotiation not listing v1 and a second valid Retry: both
    discarded, the handshake completes with the first Retry's connection ID."""
    server = quic_server("x25519,secp256r1", retry=True)
    r = relay(server)
    odcid: list[bytes] = []
    after: list[bytes] = []   # the client's first Initial after the Retry

    def forge(datagram: bytes) -> list[bytes]:
        if not odcid:
            odcid.append(_ids(datagram)[0])
        if after or not datagram[0] & 0x80 or _ids(datagram)[0] == odcid[0]:
            return []
        after.append(datagram)
        return [version_negotiation(datagram),
                retry(datagram, token=b"second", odcid=odcid[0])]
    r.forge = forge
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["error"] is None and data["version"]["name"] == "TLS 1.3"
    quic = data["quic"]
    assert quic["version_negotiation"] is None
    assert after and quic["retry_source_connection_id"] == _ids(after[0])[0].hex()
    assert quic["ignored"] >= 2


def test_scan_discards_a_version_negotiation_after_a_retry(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    """The audit's connections too: every second Initial (after aioquic's Retry) also gets a
    Version Negotiation without v1; the versions are established as without it."""
    server = quic_server("x25519,secp256r1", retry=True)
    r = relay(server)
    seen: dict[bytes, bytes] = {}   # the client's SCID -> its first DCID

    def forge(datagram: bytes) -> list[bytes]:
        if datagram[0] & 0xF0 != 0xC0:   # Initial packets only
            return []
        dcid, scid = _ids(datagram)
        if seen.get(scid, dcid) != dcid:   # a new DCID of this connection: after the Retry
            return [version_negotiation(datagram)]
        seen.setdefault(scid, dcid)
        return []
    r.forge = forge
    res = run_cli("scan", f"127.0.0.1:{r.port}", "--quic", "--checks", "versions", "--json",
                  "--no-progress", "--no-policy", "--timeout", "3", timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["error"] is None
    spoken = {v["version"]["name"]: v["status"] for v in report["versions"]}
    assert spoken["TLS 1.3"] == "supported", report["versions"]


@pytest.mark.parametrize("answer, named", [
    # RFC 9000 6.2: a Version Negotiation that lists the client's version is discarded
    (lambda d: (b"\x80" + bytes(4) + bytes([len(_ids(d)[1])]) + _ids(d)[1] +
                bytes([len(_ids(d)[0])]) + _ids(d)[0] + bytes.fromhex("6b3343cf00000001")),
     "a Version Negotiation packet that lists our version v1 (RFC 9000 6.2)"),
    # RFC 9000 17.2.3: only a client sends 0-RTT packets
    (lambda d: (b"\xd1" + V1.to_bytes(4, "big") + bytes([len(_ids(d)[1])]) + _ids(d)[1] +
                b"\x08" + bytes(8) + b"\x40\x20" + bytes(32)),
     "a 0-RTT packet from the server")])
def test_every_discarded_packet_is_counted_and_named(
        udp_peer: Any, run_cli: Callable[..., Any], answer: Callable[[bytes], bytes],
        named: str) -> None:
    # a peer answering each datagram with a packet the client must discard: the timeout
    # line names it, the JSON counts it (it was dropped in silence)
    sock, _, answers = udp_peer
    answers.append(answer)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  "--json", timeout=30)
    assert res.returncode == 3, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith(f"(last: {named})"), line
    quic = json.loads(res.stdout)["quic"]
    assert quic["ignored"] == quic["datagrams_received"] > 0
    assert quic["version_negotiation"] is None
