"""Loss, reordering and a stateless reset between tlsprobe and aioquic's server: a UDP relay
on loopback (`Relay`) drops, holds or forges datagrams by their position, and keeps what each
side sent, so the tests assert on what the server received (padding, how many Initial
packets carried the ClientHello) as well as on tlsprobe's output."""
from __future__ import annotations

import json
import os
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tlsprobe.errors import EXIT_NETWORK
from tlsprobe.net import quic_wire as w


class Relay:
    """Forwards datagrams between one client and `server_port`. `drop_client`: positions of
    client datagrams not forwarded (or those `drop_if` names); `swap_handshake`: the server's first datagram with a
    Handshake packet is delivered right after its next one; `server_pass`: whether a server
    datagram is delivered (given the datagrams delivered so far); `forge`: called with each
    client datagram, what it returns is sent back to the client; `alter`: what a server
    datagram becomes on its way to the client; `alter_client`: what a client datagram becomes
    on its way to the server. The server's datagrams go to the client address that sent
    last; with `newest_only`, to the newest one (connections one after the other, each from
    a socket of its own: an earlier one's late datagram, its CONNECTION_CLOSE, does not take
    the server's answers away)."""

    def __init__(self, server_port: int) -> None:
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.connect(("127.0.0.1", server_port))
        self.port = self.front.getsockname()[1]
        self.drop_client: set[int] = set()
        self.drop_if: Callable[[bytes], bool] = lambda _: False
        self.swap_handshake = False
        self.server_pass: Callable[[list[bytes]], bool] = lambda _: True
        self.forge: Callable[[bytes], list[bytes]] = lambda _: []
        self.alter: Callable[[bytes], bytes] = lambda data: data
        self.alter_client: Callable[[bytes], bytes] = lambda data: data
        self.from_client: list[bytes] = []     # as tlsprobe sent them
        self.client_times: list[float] = []    # when each arrived
        self.to_server: list[bytes] = []       # as the server received them
        self.from_server: list[bytes] = []
        self.to_client: list[bytes] = []       # in the order tlsprobe got them
        self._held: bytes | None = None
        self._client: tuple[str, int] | None = None
        self._senders: set[tuple[str, int]] = set()
        self.newest_only = False
        self._stop = threading.Event()
        self._moved = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _deliver(self, data: bytes) -> None:
        assert self._client is not None
        self.to_client.append(data)
        self.front.sendto(data, self._client)

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.front, self.back], [], [], 0.1)
            if self.front in ready:
                data, sender = self.front.recvfrom(65535)
                if not self.newest_only or sender not in self._senders:
                    self._client = sender
                self._senders.add(sender)
                with self._moved:
                    self.from_client.append(data)
                    self.client_times.append(time.monotonic())
                    self._moved.notify_all()
                if len(self.from_client) - 1 not in self.drop_client and \
                        not self.drop_if(data):
                    sent = self.alter_client(data)
                    self.to_server.append(sent)
                    self.back.send(sent)
                for forged in self.forge(data):
                    self._deliver(forged)
            if self.back in ready:
                try:
                    data = self.back.recv(65535)
                except OSError:
                    continue
                self.from_server.append(data)
                if not self.server_pass(self.to_client):
                    continue
                data = self.alter(data)
                if self.swap_handshake and "Handshake" in kinds(data):
                    if self._held is None:
                        self._held = data
                        continue
                    self.swap_handshake = False
                    self._deliver(data)
                    data = self._held
                self._deliver(data)

    def wait_client(self, done: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until `done()` holds of what the client sent (tlsprobe's last datagrams may
        still be in the relay's socket when the command returns)."""
        with self._moved:
            return self._moved.wait_for(done, timeout)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.front.close()
        self.back.close()


@pytest.fixture
def relay() -> Iterator[Callable[[Any], Relay]]:
    made: list[Relay] = []

    def make(server: Any) -> Relay:
        made.append(Relay(server.port))
        return made[-1]

    yield make
    for r in made:
        r.close()


def kinds(datagram: bytes) -> list[str]:
    """The packet types in one datagram (v1)."""
    try:
        return [p.kind for p in w.split_datagram(datagram, 8)]
    except ValueError:
        return ["?"]


def _crypto_offsets(relay: Relay, dcid: bytes) -> list[tuple[int, int]]:
    """(datagram position, CRYPTO offset) of every CRYPTO frame in the client's Initial
    packets that reached the server, opened with the Initial keys of `dcid`."""
    keys = w.PacketKeys.initial(dcid, "client")
    found = []
    for i, datagram in enumerate(relay.to_server):
        for packet in w.split_datagram(datagram, 8):
            if packet.kind == "Initial":
                _, payload = w.unprotect(keys, packet.data, packet.pn_offset, -1)
                found += [(i, f.offset) for f in w.parse_frames(payload) if f.type == 0x06]
    return found


def test_lost_first_initial_and_reordered_handshake_packets(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    # the first of the two Initial packets of our ClientHello is lost: aioquic acknowledges
    # the second, which must not stop our retransmission; the server's two datagrams with
    # Handshake packets arrive swapped (the later one before the Initial with the
    # ServerHello). The handshake completes.
    server = quic_server("x25519,secp256r1")
    r = relay(server)
    r.drop_client = {0}
    r.swap_handshake = True
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--msg", "--json")
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout)
    assert probe["key_exchange"]["group"]["name"] == "x25519"
    assert probe["quic"]["handshake_done"] is True
    # the handshake time includes the retransmission timer's wait (0.5 s)
    assert probe["timings"]["handshake_ms"] >= 450
    # what the server received: every datagram with an Initial packet at least 1200 bytes,
    # the ClientHello in several Initial packets, its first part only after a retransmission
    initial = [d for d in r.to_server if "Initial" in kinds(d)]
    assert initial and all(len(d) >= 1200 for d in initial)
    first_dcid = r.from_client[0][6:6 + r.from_client[0][5]]
    offsets = _crypto_offsets(r, first_dcid)
    assert len({o for _, o in offsets}) >= 2, offsets    # one hello, several packets
    assert offsets[0][1] > 0                              # its first part was lost ...
    assert any(o == 0 for _, o in offsets)                # ... and sent again
    assert re.search(r"^> Initial v1 .*CRYPTO\(offset=0, ", res.stderr, re.M)
    # the server's Handshake datagrams reached tlsprobe swapped
    hs = [d for d in r.from_server if "Handshake" in kinds(d)]
    got = [d for d in r.to_client if "Handshake" in kinds(d)]
    assert len(hs) >= 2 and got[:2] == [hs[1], hs[0]]


def test_no_handshake_done_closes_after_the_wait(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    # the server's 1-RTT packets (its HANDSHAKE_DONE) are lost: after our Finished we wait
    # CLOSE_WAIT for it (sending the Finished again once), then send CONNECTION_CLOSE
    # anyway; the TLS handshake stands
    from tlsprobe.net.quic import CLOSE_WAIT
    server = quic_server("x25519,secp256r1")
    r = relay(server)
    r.server_pass = lambda _: "1-RTT" not in kinds(r.from_server[-1])
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--json")
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout)
    assert probe["quic"]["handshake_done"] is False and probe["quic"]["closed_by_us"] == 0
    assert probe["finished_verified"] is True
    # our first 1-RTT packet is the CONNECTION_CLOSE, CLOSE_WAIT after our Finished, which
    # went twice (the second half way)
    assert r.wait_client(lambda: any("1-RTT" in kinds(d) for d in r.from_client))
    close = next(i for i, d in enumerate(r.from_client) if "1-RTT" in kinds(d))
    fin = [i for i, d in enumerate(r.from_client)
           if kinds(d) == ["Handshake"] and len(d) >= 70]
    assert len(fin) == 2 and fin[1] < close
    t = r.client_times
    assert t[close] - t[fin[0]] >= CLOSE_WAIT - 0.1 and t[fin[1]] - t[fin[0]] >= 0.4


def test_lost_finished_is_sent_again(quic_server: Any, relay: Callable[[Any], Relay],
                                     run_cli: Callable[..., Any]) -> None:
    # our Finished (the first Handshake datagram of ours longer than an ACK alone) is lost:
    # no HANDSHAKE_DONE comes, the Finished goes again and the server confirms
    server = quic_server("x25519,secp256r1")
    r = relay(server)
    lost: list[bytes] = []

    def finished(datagram: bytes) -> bool:
        if lost or kinds(datagram) != ["Handshake"] or len(datagram) < 70:
            return False
        lost.append(datagram)
        return True
    r.drop_if = finished
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--msg")
    assert res.returncode == 0, res.stderr
    assert lost and "HANDSHAKE_DONE received: yes" in res.stdout
    sent = re.findall(r"^> Handshake v1 .*CRYPTO\(offset=0, (\d+) bytes\)", res.stdout, re.M)
    assert len(sent) == 2 and sent[0] == sent[1]


def test_forged_retry_and_version_negotiation_do_not_stop_the_handshake(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    # before the server's answer, our first datagram is also answered with a Retry whose
    # integrity tag is wrong (discarded: RFC 9001 5.8) and a Version Negotiation that lists
    # our version (ignored: RFC 9000 6.2); the real server's handshake goes on
    server = quic_server("x25519,secp256r1")
    r = relay(server)

    def forge(datagram: bytes) -> list[bytes]:
        if len(r.from_client) > 1:
            return []
        dcid = datagram[6:6 + datagram[5]]
        scid = datagram[7 + len(dcid):7 + len(dcid) + datagram[6 + len(dcid)]]
        back = bytes([len(scid)]) + scid
        return [b"\xf0\x00\x00\x00\x01" + back + b"\x04abcd" + b"token" + bytes(16),
                b"\x80\x00\x00\x00\x00" + back + bytes([len(dcid)]) + dcid +
                bytes.fromhex("ff00001d00000001")]
    r.forge = forge
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5")
    assert res.returncode == 0, res.stderr
    assert "Retry with a bad integrity tag ignored: 1" in res.stdout
    assert "Retry: yes" not in res.stdout and "HANDSHAKE_DONE received: yes" in res.stdout
    assert r.to_client[0].startswith(b"\xf0") and r.to_client[1].startswith(b"\x80")


TOKEN = bytes.fromhex("5eed" * 8)


def _reset() -> bytes:
    """A stateless reset: a short header's first bits, unpredictable bytes, the token."""
    return bytes([0x40 | (os.urandom(1)[0] & 0x3F)]) + os.urandom(24) + TOKEN


def test_stateless_reset_ends_the_probe_as_a_reset(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    # the server's first flight is cut after its first datagram with Handshake packets
    # (EncryptedExtensions: the stateless_reset_token); then every datagram of ours is
    # answered with a stateless reset. One answering our very first Initial, before the
    # token is known, is ignored (RFC 9000 10.3.1).
    server = quic_server("x25519", reset_token=TOKEN.hex())
    r = relay(server)
    r.server_pass = lambda delivered: not any("Handshake" in kinds(d) for d in delivered)
    r.forge = lambda data: [_reset()] if len(r.from_client) == 1 or any(
        "Handshake" in kinds(d) for d in r.to_client) else []
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--json", timeout=30)
    assert res.returncode == EXIT_NETWORK, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line == f"tlsprobe: 127.0.0.1:{r.port}: connection reset: the server sent a " \
        "stateless reset (RFC 9000 10.3)"
    quic = json.loads(res.stdout)["quic"]
    params = {p["name"]: p["value"] for p in quic["transport_parameters"]}
    assert params["stateless_reset_token"] == TOKEN.hex()
    # after the reset nothing more is sent (RFC 9000 10.3.1): no CONNECTION_CLOSE
    assert quic["ignored"] >= 1 and quic["closed_by_us"] is None


def test_stateless_reset_shape() -> None:
    keys = w.PacketKeys.initial(b"\x01" * 8, "server")
    assert w.is_stateless_reset(b"\x41" + bytes(20) + TOKEN, TOKEN, keys, b"\x07" * 8, -1)
    for data, token in ((b"\xc1" + bytes(20) + TOKEN, TOKEN),      # a long header
                        (b"\x41" + bytes(3) + TOKEN, TOKEN),       # under 21 bytes
                        (b"\x41" + bytes(20) + TOKEN, bytes(16)),  # another token
                        (b"\x41" + bytes(20) + TOKEN, b"")):       # no token known
        assert not w.is_stateless_reset(data, token, keys, b"\x07" * 8, -1)
    # a 1-RTT packet of ours that opens is not a reset, whatever its last 16 bytes
    packet = w.seal(keys, w.short_header(b"\x07" * 8, 5), 5, 2, b"\x01" * 30)
    assert not w.is_stateless_reset(packet, packet[-16:], keys, b"\x07" * 8, 4)


def test_scan_over_a_lossy_path(quic_server: Any, relay: Callable[[Any], Relay],
                                run_cli: Callable[..., Any]) -> None:
    # scan --quic's connections (one at a time through the relay) share the retransmission
    # timer: the second Initial packet of the first ClientHello that spans two is lost
    # (aioquic acknowledges the first), the answer is the same as without loss
    server = quic_server("secp384r1,x25519")
    r = relay(server)
    dropped: list[bytes] = []

    def second_part(datagram: bytes) -> bool:
        if dropped or "Initial" not in kinds(datagram):
            return False
        [packet] = w.split_datagram(datagram, 8)
        keys = w.PacketKeys.initial(packet.dcid, "client")
        try:
            frames = w.parse_frames(w.unprotect(keys, packet.data, packet.pn_offset, -1)[1])
        except ValueError:      # after a Retry or the server's connection ID: not a hello
            return False
        if any(f.type == 0x06 and f.offset > 0 for f in frames):
            dropped.append(datagram)
        return bool(dropped)
    r.drop_if = second_part
    res = run_cli("scan", f"127.0.0.1:{r.port}", "--quic", "--checks", "groups", "--json",
                  "--no-progress", "--timeout", "5", "--per-host", "1", "--retries", "0")
    assert res.returncode == 0, res.stderr
    g13 = json.loads(res.stdout)["groups"][0]
    assert sorted(g["name"] for g in g13["supported"]) == ["secp384r1", "x25519"]
    assert g13["inconclusive"] == [] or {g["name"] for g in g13["inconclusive"]} <= {
        "curveSM2MLKEM768", "X25519Kyber768Draft00"}
    assert g13["order"] == "unknown"
    assert dropped                                   # the loss happened


def test_packets_before_unreadable_bytes_of_a_datagram_are_read(
        quic_server: Any, relay: Callable[[Any], Relay], run_cli: Callable[..., Any]) -> None:
    # RFC 9000 12.2: each coalesced packet is processed on its own. Every server datagram
    # of long-header packets gets the start of a packet it cannot hold (a cut long header):
    # the whole datagram was dropped, ServerHello included, and the probe timed out
    server = quic_server("x25519,secp256r1")
    r = relay(server)
    cut = b"\xc0\x00\x00\x00\x01\x08\x01\x02"
    r.alter = lambda data: data + cut if "1-RTT" not in kinds(data) else data
    res = run_cli(f"127.0.0.1:{r.port}", "--quic", "--cafile", server.ca, "--timeout", "5",
                  "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["handshake_complete"] and report["quic"]["handshake_done"]
    altered = sum(1 for d in r.to_client if d.endswith(cut))
    assert altered >= 2 and report["quic"]["ignored"] >= altered   # each tail counted
