"""Packet number spaces and their keys, against real servers: a server's Initial must carry no
token (RFC 9000 17.2.2: the client closes with PROTOCOL_VIOLATION), Initial keys are
discarded once our first Handshake packet is out (RFC 9001 4.9.1) and Handshake keys once the
handshake is confirmed by HANDSHAKE_DONE (4.9.2), so our CONNECTION_CLOSE after that goes in a
1-RTT packet alone (RFC 9000 10.2.3). A UDP relay on loopback (test_quic_loss.Relay) alters or
forges the server's packets beside aioquic's (and ngtcp2's) real answers."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tests.quic.test_quic_loss import Relay, kinds, relay  # noqa: F401  (the relay fixture)

from tlsprobe.errors import EXIT_OK, EXIT_PROTOCOL
from tlsprobe.net import quic_wire as w


def _ids(datagram: bytes) -> tuple[bytes, bytes]:
    """(DCID, SCID) of the long-header packet a datagram starts with."""
    dcid = datagram[6:6 + datagram[5]]
    at = 6 + len(dcid)
    return dcid, datagram[at + 1:at + 1 + datagram[at]]


def _server_initial(keys: w.PacketKeys, dcid: bytes, scid: bytes, pn: int, frames: bytes,
                    token: bytes = b"") -> bytes:
    """A server Initial packet sealed with `keys` (a token, against RFC 9000 17.2.2)."""
    frames += bytes(max(0, 4 - len(frames)))
    header = w.long_header(0, dcid, scid, pn, len(frames), token)
    return w.seal(keys, header, pn, 2, frames)


def _with_token(datagram: bytes, keys: w.PacketKeys, token: bytes) -> bytes:
    """`datagram` with its leading Initial packet sealed again, carrying `token`."""
    first = next(w.split_datagram(datagram, 8))
    pn, payload = w.unprotect(keys, first.data, first.pn_offset, -1)
    return _server_initial(keys, first.dcid, first.scid, pn, payload, token) + \
        datagram[len(first.data):]


def test_a_server_initial_with_a_token_is_a_protocol_violation(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1")
    r = relay(server)
    odcid: list[bytes] = []

    def forge(datagram: bytes) -> list[bytes]:
        if not odcid:
            odcid.append(_ids(datagram)[0])
        return []

    def alter(datagram: bytes) -> bytes:
        if kinds(datagram)[0] != "Initial":
            return datagram
        return _with_token(datagram, w.PacketKeys.initial(odcid[0], "server"), b"tok")
    r.forge, r.alter = forge, alter
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--json", timeout=30)
    assert res.returncode == EXIT_PROTOCOL, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("server sent an Initial packet with a token of 3 bytes (RFC 9000 "
                         "17.2.2: a server's Initial has Token Length 0; PROTOCOL_VIOLATION)"), \
        line
    report = json.loads(res.stdout)
    assert report["error_kind"] == "protocol" and not report["handshake_complete"]
    assert report["quic"]["closed_by_us"] == 0xA


def _msg_packets(res: Any) -> list[str]:
    return [x for x in res.stdout.splitlines() if x[:2] in ("> ", "< ")]


@pytest.mark.parametrize("peer", ["aioquic", "ngtcp2"])
def test_close_after_confirmation_is_1rtt_only(
        quic_server: Any, ngtcp2_server: Any, run_cli: Callable[..., Any], peer: str) -> None:
    server = quic_server("x25519,secp256r1") if peer == "aioquic" else ngtcp2_server()
    res = run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5", "--msg",
                  timeout=30)
    assert res.returncode == EXIT_OK, res.stderr
    packets = _msg_packets(res)
    done = next(i for i, x in enumerate(packets)
                if x.startswith("< 1-RTT ") and "HANDSHAKE_DONE" in x)
    after = [x for x in packets[done:] if x.startswith("> ")]
    assert any(x.startswith("> 1-RTT ") and "CONNECTION_CLOSE(error=0x0)" in x for x in after)
    # Handshake keys are gone once the handshake is confirmed (RFC 9001 4.9.2)
    assert not [x for x in after if not x.startswith("> 1-RTT ")], after


def test_initial_keys_are_discarded_after_our_first_handshake_packet(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    """Once our first Handshake packet is out, a server Initial (a PING, sealed with the
    right keys) is ignored, never acknowledged (RFC 9001 4.9.1)."""
    server = quic_server("x25519,secp256r1")
    r = relay(server)
    odcid: list[bytes] = []
    forged: list[bytes] = []

    def forge(datagram: bytes) -> list[bytes]:
        if not odcid:
            odcid.append(_ids(datagram)[0])
        if forged or "Handshake" not in kinds(datagram):
            return []
        client_cid = _ids(datagram)[1]
        forged.append(_server_initial(w.PacketKeys.initial(odcid[0], "server"), client_cid,
                                      _ids(r.from_server[0])[1], 100, b"\x01"))
        return forged

    r.forge = forge
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--msg", "--json", timeout=30)
    assert res.returncode == EXIT_OK, res.stderr
    assert forged
    report = json.loads(res.stdout)
    assert report["handshake_complete"] and report["quic"]["ignored"] >= 1
    packets = [x for x in res.stderr.splitlines() if x[:2] in ("> ", "< ")]
    first = next(i for i, x in enumerate(packets) if x.startswith("> Handshake "))
    assert not [x for x in packets[first:] if x.startswith("> Initial ")], packets
    assert not any("pn=100" in x for x in packets)   # never opened


def _peer_initial(datagram: bytes, frames: bytes) -> bytes:
    """The scripted server's Initial answering the client's first one, carrying `frames`."""
    dcid, scid = _ids(datagram)
    return _server_initial(w.PacketKeys.initial(dcid, "server"), scid, b"\x05" * 8, 0, frames)


@pytest.mark.parametrize("frames, code, said", [
    # largest 5, first range 10: packet numbers below 0
    (b"\x02\x05\x00\x00\x0a", 0x7, "server's Initial packet has an ACK frame whose ranges "
     "reach below packet number 0 (RFC 9000 19.3.1: FRAME_ENCODING_ERROR)"),
    # packet 15 acknowledged: the client sent two or three Initial packets by then
    (b"\x02\x0f\x00\x00\x00", 0xA, "server's Initial packet has an ACK frame for packet "
     "number 15, but tlsprobe sent ")])
def test_an_impossible_ack_is_a_connection_error(udp_peer: Any, run_cli: Callable[..., Any],
                                                 frames: bytes, code: int, said: str) -> None:
    sock, got, answers = udp_peer
    answers.append(lambda d: _peer_initial(d, frames) if d == got[0] else b"")
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "3",
                  "--json", timeout=30)
    assert res.returncode == EXIT_PROTOCOL, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert said in line, line
    assert json.loads(res.stdout)["quic"]["closed_by_us"] == code


def test_handshake_done_not_due_is_not_said_missing(quic_server: Any,
                                                    run_cli: Callable[..., Any]) -> None:
    # --first-flight-only sends no Finished: the server's HANDSHAKE_DONE is not due, and
    # "received: no" (JSON false) read as if the server had failed to send it
    server = quic_server("x25519,secp256r1")
    args = (server.target, "--quic", "--cafile", server.ca, "--timeout", "5")
    stopped = run_cli(*args, "--first-flight-only", "--json", timeout=30)
    assert stopped.returncode == EXIT_OK, stopped.stderr
    assert json.loads(stopped.stdout)["quic"]["handshake_done"] is None
    text = run_cli(*args, "--first-flight-only", timeout=30)
    assert "HANDSHAKE_DONE received: no (not due: tlsprobe did not send its Finished)" in \
        text.stdout.splitlines()
    full = run_cli(*args, "--json", timeout=30)
    assert json.loads(full.stdout)["quic"]["handshake_done"] is True
