"""TLS inside other framing: OpenVPN's control channel (TCP and UDP, with and without
tls-auth, packets out of order and retransmitted) and CAPWAP DTLS are unwrapped; what is not
(an OpenVPN control channel under tls-crypt) is listed with the reason, never silently
absent (RDP over UDP: test_rdpudp.py). The TLS bytes are a real loopback handshake (captures/), the framing is
built here as OpenVPN and CAPWAP send it; tshark's view is checked where it has one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.helpers.capbuild import (TSHARK, Conv, OpenVpn, dtls_client_hello, ether, ipv4, pcap_bytes,
                      pcap_jsonl, real_chunks, tcp_framed, tshark_fields, udp)
CLIENT, SERVER = ("127.0.0.1", 40000), ("127.0.0.1", 1194)
ALL = [">>> ClientHello", "<<< ServerHello", "<<< Certificate", "<<< ServerKeyExchange",
       "<<< ServerHelloDone", ">>> ClientKeyExchange", "<<< NewSessionTicket"]


def encrypted(data: bytes) -> bytes:
    """Stand-in for tls-crypt: the control payload is ciphertext."""
    return os.urandom(len(data))


def openvpn_tcp(hmac: int, wrap=lambda d: d) -> list[bytes]:  # noqa: ANN001
    ov = OpenVpn(hmac)
    c = Conv(CLIENT, SERVER)
    pkts = c.handshake() + [c.c(tcp_framed(ov.reset(0))), c.s(tcp_framed(ov.reset(1)))]
    for direction, data in real_chunks():
        blob = b"".join(tcp_framed(p) for p in ov.control(direction, wrap(data)))
        pkts.append(c.c(blob) if direction == 0 else c.s(blob))
        ack = tcp_framed(ov.ack(1 - direction))
        pkts.append(c.s(ack) if direction == 0 else c.c(ack))
    return pkts + [c.c(tcp_framed(ov.data(0))), c.s(tcp_framed(ov.data(1)))]


def openvpn_udp(hmac: int, wrap=lambda d: d) -> list[bytes]:  # noqa: ANN001
    """Each flight's packets sent last first, then the first again (a retransmission)."""
    ov = OpenVpn(hmac)
    pkts: list[bytes] = []

    def send(side: int, payload: bytes) -> None:
        (sip, sp), (dip, dp) = (CLIENT, SERVER) if side == 0 else (SERVER, CLIENT)
        pkts.append(ipv4(sip, dip, 17, udp(sp, dp, payload)))
    send(0, ov.reset(0))
    send(1, ov.reset(1))
    for direction, data in real_chunks():
        flight = ov.control(direction, wrap(data))
        for p in [*reversed(flight), flight[0]]:
            send(direction, p)
        send(1 - direction, ov.ack(1 - direction))
    send(0, ov.data(0))
    send(1, ov.data(1))
    return pkts


def connections(run_cli, name: str) -> tuple[int, list[dict], str]:
    code, conns, _, err = pcap_jsonl(run_cli, name)
    return code, conns, err


@pytest.mark.parametrize("transport", ["tcp", "udp"])
@pytest.mark.parametrize("hmac", [0, 20, 32, 64])
def test_openvpn_control_channel_handshake_is_read(run_cli, tmp_path: Path, transport: str,
                                                   hmac: int) -> None:
    build = openvpn_tcp if transport == "tcp" else openvpn_udp
    (tmp_path / "vpn.pcap").write_bytes(pcap_bytes([ether(p) for p in build(hmac)]))
    code, conns, err = connections(run_cli, "vpn.pcap")
    assert code == 0, err
    [conn] = conns
    assert (conn["transport"], conn["framing"]) == (transport, "openvpn")
    assert conn["sni"] == "localhost" and conn["messages"] == ALL
    assert conn["cipher"]["iana_name"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    assert conn["key_exchange"]["group"]["name"] == "x25519" and conn["problems"] == []
    assert (conn["client"], conn["server"]) == ("127.0.0.1:40000", "127.0.0.1:1194")
    if TSHARK and hmac == 0:  # tshark reads plain OpenVPN on port 1194 (not tls-auth)
        assert set(tshark_fields(tmp_path / "vpn.pcap", "tls.handshake.type == 1",
                                 "tls.handshake.extensions_server_name")) == {"localhost"}


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_openvpn_under_tls_crypt_is_listed_with_the_reason(run_cli, tmp_path: Path,
                                                          transport: str) -> None:
    build = openvpn_tcp if transport == "tcp" else openvpn_udp
    (tmp_path / "crypt.pcap").write_bytes(pcap_bytes([ether(p) for p in
                                                      build(0, encrypted)]))
    code, conns, err = connections(run_cli, "crypt.pcap")
    assert code == 0, err
    [conn] = conns
    assert conn["framing"] == "openvpn" and conn["messages"] == [] and conn["sni"] is None
    assert conn["problems"] and conn["problems"][0].startswith("OpenVPN: ")
    assert "tls-crypt" in conn["problems"][0]
    code, out, _ = run_cli("pcap", "crypt.pcap", "--no-progress")
    assert "no TLS connections found" not in out


def test_capwap_dtls_is_unwrapped(run_cli, tmp_path: Path) -> None:
    """CAPWAP control (UDP 5246): a 4-byte preamble (version 0, type 1: DTLS), then DTLS.
    The DTLS ClientHello is made from the real TLS one (DTLS 1.2 record and handshake
    headers, empty cookie)."""
    record = dtls_client_hello()
    ap, ac = ("192.0.2.10", 50000), ("192.0.2.1", 5246)
    frames = [ether(ipv4(ap[0], ac[0], 17, udp(ap[1], ac[1], b"\x01\x00\x00\x00" + record)))]
    (tmp_path / "capwap.pcap").write_bytes(pcap_bytes(frames))
    code, conns, err = connections(run_cli, "capwap.pcap")
    assert code == 0, err
    [conn] = conns
    assert (conn["protocol"], conn["framing"], conn["sni"]) == ("dtls", "capwap", "localhost")
    if TSHARK:
        assert tshark_fields(tmp_path / "capwap.pcap", None,
                             "dtls.handshake.extensions_server_name") == ["localhost"]


def test_tls_auth_hmac_that_reads_as_eight_acks_is_not_taken_for_no_hmac() -> None:
    """A tls-auth HMAC whose first byte is 8 frames the first payload at the same offset as
    "no HMAC, 8 acks" would (seen in a real capture): the replay id and time decide."""
    from tlsprobe.offline.openvpn import ControlChannel
    ov = OpenVpn(20, hmac_first=8)
    ov.reset(0)
    ov.reset(1)
    ov.ack(0)
    tls = b"".join(data for direction, data in real_chunks() if direction == 1)
    packets = ov.control(1, tls[:100])
    ov.hmac_first = 3  # HMACs differ from packet to packet
    packets += ov.control(1, tls[100:], size=100)
    channel = ControlChannel(tcp=False)
    out = b"".join(channel.packet(p) for p in packets)
    assert channel.hmac == 20 and out == tls
