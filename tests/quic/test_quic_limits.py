"""The QUIC rows of docs/LIMITS.md, each held in place: bounded Initial transmissions, one
Retry, the Version Negotiation lists, and the bounded buffers of the connection, the info it
fills and the scan's datagram queue. Scripted UDP peers (conftest `udp_peer`) and unit tests
on the sans-IO connection: cheap."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tlsprobe.errors import EXIT_LIMIT, EXIT_NETWORK, EXIT_PROTOCOL
from tlsprobe.net import quic, quic_conn, quic_info, quic_params as qp, quic_wire as w


def _cids(datagram: bytes) -> tuple[bytes, bytes]:
    """(dcid, scid) of the client's Initial long header."""
    dcid = datagram[6:6 + datagram[5]]
    p = 6 + len(dcid)
    return dcid, datagram[p + 1:p + 1 + datagram[p]]


def test_initial_transmissions_are_bounded(udp_peer: Any,
                                          run_cli: Callable[..., Any]) -> None:
    # a silent server: our two-packet ClientHello goes out at 0, 0.5, 1.5 and 3.5 s, then
    # no more until the 5 s read limit, and a CONNECTION_CLOSE ends it; every datagram padded
    sock, got, _ = udp_peer
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "5",
                  timeout=30)
    assert res.returncode == EXIT_NETWORK
    [line] = res.stderr.strip().splitlines()
    assert f"after {quic.MAX_TRIES} Initial transmissions" in line, line
    got.complete()  # the CONNECTION_CLOSE, sent just before the CLI exited
    assert all(len(d) >= 1200 for d in got)
    keys = w.PacketKeys.initial(_cids(got[0])[0], "client")
    frames = [{f.type for f in w.parse_frames(w.unprotect(keys, p.data, p.pn_offset, -1)[1])}
              for d in got for p in w.split_datagram(d, 8)]
    assert frames == [{0x06, 0x00}] * (2 * quic.MAX_TRIES) + [{0x1C, 0x00}]


def test_one_retry_is_followed_and_a_second_ignored(udp_peer: Any,
                                                    run_cli: Callable[..., Any]) -> None:
    sock, got, answers = udp_peer
    first: list[bytes] = []

    def retry(datagram: bytes) -> bytes:
        dcid, scid = _cids(datagram)
        first.append(dcid)
        n = len(first)
        header = (b"\xf0\x00\x00\x00\x01" + bytes([len(scid)]) + scid + b"\x08" +
                  bytes([n]) * 8 + b"token%d" % n)
        return header + w.retry_tag(first[0], header)
    answers.append(retry)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  "--json", timeout=30)
    assert res.returncode == EXIT_NETWORK
    [line] = res.stderr.strip().splitlines()
    assert "timed out" in line and "(last: a second Retry (RFC 9000 17.2.5.2))" in line, line
    assert json.loads(res.stdout)["quic"]["retry_source_connection_id"] == "01" * 8
    # after the first Retry: its connection ID and token, never the later ones'
    [after] = {(p.dcid, p.token) for d in got[2:] for p in w.split_datagram(d, 8)}
    assert after == (b"\x01" * 8, b"token1")


def test_version_negotiation_lists_are_bounded(udp_peer: Any,
                                               run_cli: Callable[..., Any]) -> None:
    sock, _, answers = udp_peer
    offered = [0xFF000000 + i for i in range(40)]

    def negotiate(datagram: bytes) -> bytes:
        dcid, scid = _cids(datagram)
        return (b"\x80\x00\x00\x00\x00" + bytes([len(scid)]) + scid + bytes([len(dcid)]) +
                dcid + b"".join(v.to_bytes(4, "big") for v in offered))
    answers.append(negotiate)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "5",
                  "--json", timeout=30)
    assert res.returncode == EXIT_PROTOCOL
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("(its Version Negotiation offers: " +
                         ", ".join(f"0x{v:08x}" for v in offered[:8]) + ")")
    kept = json.loads(res.stdout)["quic"]["version_negotiation"]
    assert kept == [f"0x{v:08x}" for v in offered[:32]]


def test_info_keeps_bounded_lists() -> None:
    info = quic_info.QuicInfo(b"\x01" * 8, b"\x02" * 8)
    for i in range(quic_info.MAX_IGNORED + 5):
        info.ignore(f"thing {i}")
    assert len(info.ignored) == quic_info.MAX_IGNORED
    assert info.ignored_count == quic_info.MAX_IGNORED + 5
    assert info.ignored[-1] == f"thing {quic_info.MAX_IGNORED + 4}"   # the last is named
    for i in range(quic_info.MAX_LOG + 5):
        info.note(">", "Initial", i, b"\x02" * 8, b"\x01" * 8, b"\x01")
    assert len(info.log) == quic_info.MAX_LOG
    for _ in range(quic_info.MAX_KEPT + 5):
        info.keep(False, b"x")
    assert len(info.datagrams) == quic_info.MAX_KEPT


def _server_packet(ptype: int, scid: bytes, pn: int, frames: bytes,
                   keys: w.PacketKeys) -> bytes:
    frames += bytes(max(0, 20 - len(frames)))
    header = w.long_header(ptype, scid, b"\x05" * 8, pn, len(frames),
                           b"" if ptype == 0 else None)
    return w.seal(keys, header, pn, 2, frames)


def test_packets_waiting_for_keys_are_bounded_and_big_acks_ignored() -> None:
    info = quic_info.QuicInfo(b"\x01" * 8, b"\x02" * 8)
    conn = quic_conn.QuicConnection(info)
    other = w.PacketKeys.initial(b"\x09" * 8, "server")
    for pn in range(quic_conn.MAX_WAITING + 8):     # Handshake packets before their keys
        conn.datagram(_server_packet(2, info.scid, pn, b"\x01", other))
    assert len(conn.waiting) == quic_conn.MAX_WAITING
    # the 8 dropped are counted and named, not dropped in silence
    assert info.ignored_count == 8 and info.ignored[-1] == \
        f"Handshake packet: more than {quic_conn.MAX_WAITING} waiting for their keys"
    # an ACK frame with more ranges than are read: the packet is ignored
    ack = b"\x02" + w.varint(5000) + b"\x00" + w.varint(300) + b"\x00" + b"\x00\x00" * 300
    with pytest.raises(ValueError, match="300 ranges"):
        w.parse_frames(ack)
    conn.datagram(_server_packet(0, info.scid, 0, ack,
                                 w.PacketKeys.initial(info.original_dcid, "server")))
    assert info.ignored[-1] == "Initial packet: ACK frame with 300 ranges"
    assert not conn.heard


def test_scan_datagram_queue_is_bounded() -> None:
    from tlsprobe.net.quic_async import MAX_QUEUED, _Datagrams
    queue = _Datagrams()
    for _ in range(MAX_QUEUED + 10):
        queue.datagram_received(b"x", ("127.0.0.1", 1))
    queue.error_received(ConnectionRefusedError())
    assert queue.queue.qsize() == MAX_QUEUED


def test_transport_parameters_are_bounded_and_checked() -> None:
    many = b"".join(w.varint(0x4000 + i) + b"\x00" for i in range(qp.MAX_PARAMETERS + 1))
    with pytest.raises(ValueError, match=f"more than {qp.MAX_PARAMETERS}"):
        qp.parse_parameters(many)
    odcid = b"\x02" * 8
    assert qp.server_problem([(0x00, odcid)], odcid, w.QUIC_V1, False) is None
    v1 = w.QUIC_V1.to_bytes(4, "big")
    cases: list[tuple[list[tuple[int, int | bytes]], int, bool]] = [
        ([(0x00, odcid), (0x11, v1 + v1)], w.QUIC_V2, False), ([(0x00, odcid)], w.QUIC_V2, True)]
    for params, version, negotiated in cases:
        assert "does not confirm QUIC v2" in str(
            qp.server_problem(params, odcid, version, negotiated))
    assert "original_destination_connection_id" in str(
        qp.server_problem([(0x00, b"\x03" * 8)], odcid, w.QUIC_V1, False))
    assert "stateless_reset_token is not 16 bytes" in str(
        qp.server_problem([(0x00, odcid), (0x02, bytes(15))], odcid, w.QUIC_V1, False))
    assert qp.server_problem([(0x00, odcid), (0x02, bytes(16))], odcid, w.QUIC_V1,
                             False) is None


def test_a_trickling_server_ends_at_the_total_deadline(udp_peer: Any,
                                                      run_cli: Callable[..., Any]) -> None:
    # a server that sends its Initial CRYPTO data one byte per packet, each 0.4 s after our
    # ACK: no read ever times out, the total limit (3 x --timeout) ends the probe
    import time
    sock, got, answers = udp_peer
    hello = bytes.fromhex("020000ff0303") + bytes(64)
    first: list[bytes] = []

    def trickle(datagram: bytes) -> bytes:
        if not first:
            first.append(_cids(datagram)[0])
        n = len(got) - 1
        time.sleep(0.4)
        frames = w.crypto_frame(n, hello[n:n + 1]) + bytes(20)
        header = w.long_header(0, _cids(got[0])[1], b"\x05" * 8, n, len(frames), b"")
        return w.seal(w.PacketKeys.initial(first[0], "server"), header, n, 2, frames)
    answers.append(trickle)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "1",
                  timeout=30)
    assert res.returncode == EXIT_NETWORK, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert "total time limit" in line and "after" not in line, line
    assert 4 <= len(got) <= 12     # a trickle: a few ACKs, not a flood


def test_a_packet_number_is_processed_once(udp_peer: Any,
                                           run_cli: Callable[..., Any]) -> None:
    # the same server Initial (packet number 0: part of a ServerHello) comes again after
    # each of our datagrams, as a network that duplicates packets delivers it: read once
    # (RFC 9000 12.3), so --max-records 1 is not passed; before, each copy was processed
    # and counted, and the line said the server sent more than 1 packet with CRYPTO data
    sock, got, answers = udp_peer
    first: list[bytes] = []

    def initial(datagram: bytes) -> bytes:
        if not first:
            first.append(datagram)
        dcid, scid = _cids(first[0])
        frames = w.crypto_frame(0, b"\x02\x00\x00\x40" + bytes(8)) + bytes(20)
        header = w.long_header(0, scid, b"\x05" * 8, 0, len(frames), b"")
        return w.seal(w.PacketKeys.initial(dcid, "server"), header, 0, 2, frames)
    answers.append(initial)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  "--max-records", "1", "--json", timeout=30)
    assert res.returncode == EXIT_NETWORK, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("(last: Initial packet number 0 again (RFC 9000 12.3))"), line
    quic = json.loads(res.stdout)["quic"]
    assert quic["ignored"] == quic["datagrams_received"] - 1 > 0


def test_max_bytes_counts_the_servers_datagrams(udp_peer: Any,
                                               run_cli: Callable[..., Any]) -> None:
    # a peer answering each of our datagrams with 3 KB it cannot read: over TCP --max-bytes
    # stops such a stream; over QUIC it counted only CRYPTO data and the probe waited for
    # its read limit (exit 3). Now the datagrams' bytes count, as the option says
    sock, got, answers = udp_peer
    answers.extend([b"\x40" + bytes(1499)] * 2)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "3",
                  "--max-bytes", "5000", "--json", timeout=30)
    assert res.returncode == EXIT_LIMIT, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("server sent more than 5000 bytes in QUIC datagrams, tlsprobe's "
                         "limit (--max-bytes raises it)"), line
    report = json.loads(res.stdout)
    assert report["error_kind"] == "limit"
    assert report["quic"]["datagrams_received"] == 4   # 6,000 bytes: stopped at once
