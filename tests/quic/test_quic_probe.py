"""`tlsprobe HOST:PORT --quic` against aioquic's QUIC v1 server on loopback (each configured
with a known group list), and against UDP peers that stay silent or answer garbage."""
from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable
from typing import Any

import pytest

from tlsprobe.errors import EXIT_ALERT, EXIT_NETWORK, EXIT_PROTOCOL, EXIT_USAGE


def _probe(run_cli: Callable[..., Any], server: Any, *args: str) -> Any:
    return run_cli(server.target, "--quic", "--cafile", server.ca, "--timeout", "5", *args)


def test_default_hello_spans_two_initials_and_server_picks_x25519(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1")
    res = _probe(run_cli, server)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Protocol           TLS 1.3 (0x0304)" in out
    assert "Group              x25519 (0x001d), from TLS 1.3 key_share" in out
    assert "Key share sizes    server 32 bytes, client 32 bytes" in out
    assert "ALPN               h3" in out
    assert "Verify return code: 0 (ok)" in out
    assert "Server Finished    verified" in out
    assert re.search(r"^Timing +connect [\d.]+ ms, handshake [\d.]+ ms$", out, re.M)
    assert "QUIC version: 0x00000001 (v1)" in out
    # X25519MLKEM768's 1216-byte share makes the ClientHello too long for one Initial
    assert "ClientHello Initial packets: 2" in out
    assert re.search(r"^  initial_source_connection_id: [0-9a-f]{16}$", out, re.M)
    assert re.search(r"^  original_destination_connection_id: [0-9a-f]{16}$", out, re.M)
    assert "  initial_max_streams_bidi: 128" in out   # aioquic's default
    assert "HANDSHAKE_DONE received: yes" in out
    # QUIC closes with CONNECTION_CLOSE, never a TLS close_notify
    assert "Closed with: CONNECTION_CLOSE NO_ERROR (0x0) sent" in out
    assert "close_notify" not in out


def test_a_p256_share_alone_gets_secp256r1(quic_server: Any,
                                           run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1")
    res = _probe(run_cli, server, "--groups", "secp256r1:x25519", "--key-shares", "secp256r1")
    assert res.returncode == 0, res.stderr
    assert "Group              secp256r1 (0x0017), from TLS 1.3 key_share" in res.stdout
    assert "Key share sizes    server 65 bytes, client 65 bytes" in res.stdout
    assert "ClientHello Initial packets: 1" in res.stdout


@pytest.mark.parametrize("suite, code", [("TLS_AES_128_GCM_SHA256", "0x1301"),
                                         ("TLS_CHACHA20_POLY1305_SHA256", "0x1303")])
def test_each_quic_suite_protects_packets(quic_server: Any, run_cli: Callable[..., Any],
                                          suite: str, code: str) -> None:
    # AES-128 and ChaCha20 header protection and AEADs for the Handshake and 1-RTT packets
    server = quic_server("x25519,secp256r1")
    res = _probe(run_cli, server, "--ciphersuites", suite)
    assert res.returncode == 0, res.stderr
    assert f"Cipher             {suite} ({code})" in res.stdout
    assert "HANDSHAKE_DONE received: yes" in res.stdout


def test_no_common_share_is_the_servers_alert(quic_server: Any,
                                              run_cli: Callable[..., Any]) -> None:
    # aioquic sends no HelloRetryRequest: a CONNECTION_CLOSE 0x128 carries the alert
    server = quic_server("secp384r1")
    res = _probe(run_cli, server)
    assert res.returncode == EXIT_ALERT
    assert res.stderr.strip().splitlines()[-1] == (
        f"tlsprobe: {server.target}: server sent fatal alert handshake_failure (40)")
    ok = _probe(run_cli, server, "--key-shares", "secp384r1")
    assert ok.returncode == 0, ok.stderr
    assert "Group              secp384r1 (0x0018), from TLS 1.3 key_share" in ok.stdout


def test_alpn_option_and_the_servers_no_application_protocol_alert(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    # --alpn replaces h3; aioquic (h3 only) closes with CONNECTION_CLOSE 0x178, reported as
    # the TLS alert it carries; the JSON says what closed the connection
    server = quic_server("x25519,secp256r1")
    res = _probe(run_cli, server, "--alpn", "h3-29", "--json")
    assert res.returncode == EXIT_ALERT
    assert res.stderr.strip().splitlines()[-1] == (
        f"tlsprobe: {server.target}: server sent fatal alert no_application_protocol (120)")
    quic = json.loads(res.stdout)["quic"]
    assert quic["closed_by_server"] == 0x178


def test_retry_is_followed_and_reported(quic_server: Any, run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519", retry=True)
    res = _probe(run_cli, server, "--msg")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    retry_cid = re.search(r"^Retry: yes \(server connection ID ([0-9a-f]+), integrity tag "
                          r"checked\)$", out, re.M)
    assert retry_cid
    assert f"  retry_source_connection_id: {retry_cid.group(1)}" in out
    # the ClientHello is sent again, to the Retry's connection ID
    assert re.search(rf"^> Initial v1 dcid={retry_cid.group(1)} .*CRYPTO\(offset=0, ", out, re.M)


def test_msg_shows_packets_then_the_handshake(quic_server: Any,
                                              run_cli: Callable[..., Any]) -> None:
    server = quic_server("x25519,secp256r1")
    res = _probe(run_cli, server, "--msg")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    first = lines.index(next(x for x in lines if x.startswith(">>> ")))
    packets = lines[:first]
    assert packets[0].startswith("> Initial v1 dcid=") and "CRYPTO(offset=0, " in packets[0]
    assert any(x.startswith("< Handshake v1 ") and "CRYPTO(" in x for x in packets)
    assert any(x.startswith("< 1-RTT v1 ") and "HANDSHAKE_DONE" in x for x in packets)
    assert any("CONNECTION_CLOSE(error=0x0)" in x for x in packets if x.startswith("> "))
    # a short header has no source connection ID: none is shown, either way
    assert [x for x in packets if x[2:].startswith("1-RTT ")] and \
        not [x for x in packets if x[2:].startswith("1-RTT ") and " scid=" in x]
    trace = "\n".join(lines[first:])
    assert "ServerHello" in trace and "EncryptedExtensions (decrypted)" in trace
    assert "quic_transport_parameters (0x0039)" in trace
    assert "ChangeCipherSpec" not in trace and "close_notify" not in trace


def test_hello_retry_request_over_quic_ngtcp2(ngtcp2_server: Any,
                                             run_cli: Callable[..., Any]) -> None:
    # GnuTLS accepts only P-384: our X25519MLKEM768 + x25519 shares get a HelloRetryRequest,
    # and the second ClientHello goes on in the Initial CRYPTO stream
    server = ngtcp2_server("-GROUP-ALL:+GROUP-SECP384R1")
    res = _probe(run_cli, server, "--msg")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Group              secp384r1 (0x0018), from TLS 1.3 key_share after " \
        "HelloRetryRequest" in out
    assert "HelloRetryRequest  secp384r1 (0x0018)" in out
    assert "Key share sizes    server 97 bytes, client 97 bytes" in out
    assert re.search(r"^> Initial v1 .*CRYPTO\(offset=1453, ", out, re.M)  # second hello
    assert "HANDSHAKE_DONE received: yes" in out
    # what we sent: two ClientHellos and the Finished (no ChangeCipherSpec, no close_notify)
    sent = [x for x in out.splitlines() if x.startswith(">>> ") and "RecordHeader" in x]
    assert len(sent) == 3


def test_retry_from_ngtcp2(ngtcp2_server: Any, run_cli: Callable[..., Any]) -> None:
    server = ngtcp2_server("-GROUP-ALL:+GROUP-X25519", validate=True)
    res = _probe(run_cli, server)
    assert res.returncode == 0, res.stderr
    assert "Group              x25519 (0x001d), from TLS 1.3 key_share" in res.stdout
    assert re.search(r"^Retry: yes \(server connection ID [0-9a-f]+, integrity tag checked\)$",
                     res.stdout, re.M)
    assert re.search(r"^  retry_source_connection_id: [0-9a-f]+$", res.stdout, re.M)


def test_hello_retry_request_after_a_retry_ngtcp2(ngtcp2_server: Any,
                                                 run_cli: Callable[..., Any]) -> None:
    # address validation first (Retry: the first ClientHello again, with the token, to the
    # new connection ID), then the HelloRetryRequest in the new Initial keys' packets; the
    # second ClientHello follows in the same Initial CRYPTO stream
    server = ngtcp2_server("-GROUP-ALL:+GROUP-SECP384R1", validate=True)
    res = _probe(run_cli, server, "--msg")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    retry_cid = re.search(r"^Retry: yes \(server connection ID ([0-9a-f]+), integrity tag "
                          r"checked\)$", out, re.M)
    assert retry_cid
    assert "HelloRetryRequest  secp384r1 (0x0018)" in out
    assert "Group              secp384r1 (0x0018), from TLS 1.3 key_share after " \
        "HelloRetryRequest" in out
    assert re.search(rf"^> Initial v1 dcid={retry_cid.group(1)} .*CRYPTO\(offset=0, ", out,
                     re.M)
    assert re.search(r"^> Initial v1 .*CRYPTO\(offset=1453, ", out, re.M)   # second hello
    assert re.search(r"^< Handshake v1 .*CRYPTO\(", out, re.M)
    assert "EncryptedExtensions (decrypted)" in out and "HANDSHAKE_DONE received: yes" in out


def test_options_quic_cannot_honour_are_refused(run_cli: Callable[..., Any]) -> None:
    for extra in (["--tls1_2"], ["--http-get", "/"], ["--starttls", "smtp"],
                  ["--ciphersuites", "TLS_AES_128_CCM_8_SHA256"]):
        res = run_cli("127.0.0.1:9", "--quic", *extra)
        assert res.returncode == EXIT_USAGE, (extra, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1


Peer = tuple[socket.socket, list[bytes], list[Callable[[bytes], bytes] | bytes]]


def test_silent_peer_times_out_after_padded_retransmissions(
        udp_peer: Peer,
        run_cli: Callable[..., Any]) -> None:
    sock, got, _ = udp_peer
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  timeout=30)
    assert res.returncode == EXIT_NETWORK
    [line] = res.stderr.strip().splitlines()
    assert "timed out" in line and "Initial transmissions" in line
    # the first ClientHello (2 packets) and at least one retransmission, all padded
    assert len(got) >= 4 and all(len(d) >= 1200 for d in got)


def test_garbage_answers_are_ignored_and_named(
        udp_peer: Peer,
        run_cli: Callable[..., Any]) -> None:
    sock, got, answers = udp_peer
    answers += [b"\xff" * 50, b"\xc0\x00\x00\x00\x05" + bytes(40), b"\x40garbage"]
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  timeout=30)
    assert res.returncode == EXIT_NETWORK
    [line] = res.stderr.strip().splitlines()
    assert "timed out" in line and "ignored" in line


def test_nothing_listening_is_a_network_error(run_cli: Callable[..., Any]) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    res = run_cli(f"127.0.0.1:{port}", "--quic", "--timeout", "2", timeout=30)
    assert res.returncode == EXIT_NETWORK
    [line] = res.stderr.strip().splitlines()
    # the ICMP port unreachable answers our first datagram; the line says so, as the scan's
    # does (it said "UDP send failed: connection refused", though every datagram went out)
    assert line == f"tlsprobe: 127.0.0.1:{port}: connection refused (ICMP port unreachable: " \
        "nothing listens on that UDP port)", line


def _cids(datagram: bytes) -> tuple[bytes, bytes]:
    """(dcid, scid) of the client's Initial long header."""
    dcid = datagram[6:6 + datagram[5]]
    p = 6 + len(dcid)
    return dcid, datagram[p + 1:p + 1 + datagram[p]]


def test_version_negotiation_without_v1_is_one_line(udp_peer: Peer,
                                                    run_cli: Callable[..., Any]) -> None:
    sock, _, answers = udp_peer

    def negotiate(datagram: bytes) -> bytes:
        dcid, scid = _cids(datagram)
        return (b"\x80\x00\x00\x00\x00" + bytes([len(scid)]) + scid + bytes([len(dcid)]) +
                dcid + bytes.fromhex("6b3343cfff00001d"))
    answers.append(negotiate)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "5",
                  timeout=30)
    assert res.returncode == EXIT_PROTOCOL
    [line] = res.stderr.strip().splitlines()
    # v2 is listed, which tlsprobe speaks though it did not offer it: the line says how
    assert line.endswith("server does not speak QUIC v1 (its Version Negotiation offers: "
                         "0x6b3343cf, 0xff00001d); it offers v2, which tlsprobe would speak, "
                         "but a connection is not started again in another version (RFC 9368 "
                         "2.4): give --quic-version 2"), line


def test_retry_with_a_bad_integrity_tag_is_ignored(udp_peer: Peer,
                                                   run_cli: Callable[..., Any]) -> None:
    sock, _, answers = udp_peer

    def bad_retry(datagram: bytes) -> bytes:
        dcid, scid = _cids(datagram)
        return (b"\xf0\x00\x00\x00\x01" + bytes([len(scid)]) + scid + b"\x04abcd" +
                b"token" + bytes(16))
    answers.append(bad_retry)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  timeout=30)
    assert res.returncode == EXIT_NETWORK
    [line] = res.stderr.strip().splitlines()
    assert "timed out" in line and "(last: Retry with a bad integrity tag)" in line


def _server_initial(datagram: bytes, frames: bytes) -> bytes:
    """A server Initial packet answering the client's first datagram (RFC 9001 Initial keys
    of the client's DCID), carrying `frames`."""
    from tlsprobe.net import quic_wire as w
    dcid, scid = _cids(datagram)
    frames += bytes(max(0, 20 - len(frames)))
    header = w.long_header(0, scid, b"\x05" * 8, 0, len(frames), b"")
    return w.seal(w.PacketKeys.initial(dcid, "server"), header, 0, 2, frames)


def test_connection_close_without_alert_is_one_escaped_line(
        udp_peer: Peer, run_cli: Callable[..., Any]) -> None:
    from tlsprobe.net import quic_wire as w
    sock, _, answers = udp_peer
    answers.append(lambda d: _server_initial(d, b"\x1c\x0a\x06" + w.varint(9) +
                                             b"bad\x1b[2Jxy"))
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "5",
                  "--json", timeout=30)
    assert res.returncode == EXIT_ALERT
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("server closed the QUIC connection with PROTOCOL_VIOLATION (0xa): "
                         "'bad\\x1b[2Jxy'")
    assert "\x1b" not in res.stderr and "\x1b" not in res.stdout
    quic = json.loads(res.stdout)["quic"]
    assert (quic["closed_by_server"], quic["closed_by_server_reason"]) == (0xA, "bad\\x1b[2Jxy")



def test_a_peer_answering_without_handshake_data_is_not_said_silent(
        udp_peer: Peer, run_cli: Callable[..., Any]) -> None:
    # a peer answering each datagram with an Initial PING (keys of our first Initial):
    # thousands of packets come back, none with CRYPTO data; the timeout said "no QUIC
    # answer", which was false
    # (each with a packet number of its own: a copy of one is discarded, RFC 9000 12.3)
    from tlsprobe.net import quic_wire as w
    sock, got, answers = udp_peer

    def ping(datagram: bytes) -> bytes:
        dcid, scid = _cids(got[0])
        pn = len(got) % 60000
        header = w.long_header(0, scid, b"\x05" * 8, pn, 20, b"")
        return w.seal(w.PacketKeys.initial(dcid, "server"), header, pn, 2, b"\x01" + bytes(19))
    answers.append(ping)
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "2",
                  "--json", timeout=30)
    assert res.returncode == EXIT_NETWORK
    [line] = res.stderr.strip().splitlines()
    quic = json.loads(res.stdout)["quic"]
    assert quic["datagrams_received"] > 1 and quic["ignored"] == 0
    assert re.search(r"timed out waiting for the server \(no new handshake data for 2\.0 s; "
                     r"\d+ QUIC packets received in that time\) after \d Initial "
                     r"transmissions$", line), line


def test_an_application_close_is_not_named_as_a_tls_alert(quic_server: Any,
                                                          run_cli: Callable[..., Any]) -> None:
    # aioquic closes each connection once its handshake completes with an application
    # CONNECTION_CLOSE (frame 0x1d) of code 0x100, HTTP/3's H3_NO_ERROR: the report said
    # "CONNECTION_CLOSE 0x100 (TLS alert 0)", and JSON could not tell the two apart
    server = quic_server(close_code="0x100")
    res = _probe(run_cli, server, "--json")
    assert res.returncode == 0, res.stderr
    quic = json.loads(res.stdout)["quic"]
    assert (quic["closed_by_server"], quic["closed_by_server_application"],
            quic["closed_by_server_reason"]) == (0x100, True, "bye")
    text = _probe(run_cli, server, "--msg")
    assert text.returncode == 0, text.stderr
    assert "Server closed with: CONNECTION_CLOSE application error 0x100" in \
        text.stdout.splitlines()
    assert "TLS alert" not in text.stdout
    assert re.search(r"^< 1-RTT v1 .*CONNECTION_CLOSE\(application error=0x100\)", text.stdout,
                     re.M)


def test_bad_transport_parameters_are_closed_with_their_error_code(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    # aioquic announcing a 15-byte stateless_reset_token (RFC 9000 18.2: 16): the client
    # closes with TRANSPORT_PARAMETER_ERROR (RFC 9000 7.4), not NO_ERROR as it did
    server = quic_server(reset_token="01" * 15)
    res = _probe(run_cli, server, "--json")
    assert res.returncode == EXIT_PROTOCOL, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("server's stateless_reset_token is not 16 bytes (RFC 9000 18.2)")
    assert json.loads(res.stdout)["quic"]["closed_by_us"] == 0x8


def test_encrypted_extensions_without_transport_parameters(
        quic_server: Any, run_cli: Callable[..., Any]) -> None:
    # aioquic leaving quic_transport_parameters out of its EncryptedExtensions: RFC 9001 8.2
    # wants missing_extension (0x16d); the line said "server's
    # original_destination_connection_id is not the one we sent", which it never sent
    server = quic_server(no_parameters=True)
    res = _probe(run_cli, server, "--json")
    assert res.returncode == EXIT_PROTOCOL, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.endswith("server's EncryptedExtensions has no quic_transport_parameters "
                         "extension (RFC 9001 8.2: missing_extension)"), line
    quic = json.loads(res.stdout)["quic"]
    assert quic["closed_by_us"] == 0x100 + 109 and quic["transport_parameters"] is None


@pytest.mark.parametrize("code, name", [(0x9, "CONNECTION_ID_LIMIT_ERROR"),
                                        (0xC, "APPLICATION_ERROR"),
                                        (0x11, "VERSION_NEGOTIATION_ERROR")])
def test_every_transport_error_code_is_named(udp_peer: Peer, run_cli: Callable[..., Any],
                                            code: int, name: str) -> None:
    # RFC 9000 20.1's codes (and RFC 9368's 0x11) by name: they were "an error (0xc)"
    sock, _, answers = udp_peer
    answers.append(lambda d: _server_initial(d, bytes([0x1C, code, 0x06, 0x00])))
    res = run_cli(f"127.0.0.1:{sock.getsockname()[1]}", "--quic", "--timeout", "5",
                  timeout=30)
    assert res.returncode == EXIT_ALERT
    [line] = res.stderr.strip().splitlines()
    assert line.endswith(f"server closed the QUIC connection with {name} (0x{code:x})"), line
