"""What tshark reads, tlsprobe reads too: data after a RST, IP fragments, link type 108.
Each capture is a real loopback handshake (captures/tls12_x25519.pcap) replayed into
packets built here; where tshark is installed its view of the same file is checked too."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from tests.helpers.capbuild import TSHARK, Conv, ether, ipv4, ipv6, pcap_bytes, pcap_jsonl, real_chunks, \
    records, tshark_fields
CLIENT, SERVER = ("127.0.0.1", 40000), ("127.0.0.1", 443)


def handshake_types(path: Path) -> list[str]:
    """tshark's handshake message types in the file, in order."""
    return [t for row in tshark_fields(path, "tls.handshake", "tls.handshake.type")
            for t in row.split(",")]


def first_connection(run_cli, name: str, *args: str) -> tuple[int, dict, str]:
    code, conns, _, err = pcap_jsonl(run_cli, name, *args)
    return code, conns[0], err


def reset_after_server_hello(reset_flags: str) -> list[bytes]:
    """The client resets (or half-closes, then resets) once it has the ServerHello; the
    server's Certificate, ServerKeyExchange and ServerHelloDone were in flight and are
    captured after the RST."""
    chunks = real_chunks()
    c = Conv(CLIENT, SERVER)
    sh, *rest = records(chunks[1][1])
    pkts = c.handshake() + [c.c(chunks[0][1]), c.s(sh)]
    for flag in reset_flags.split(","):
        pkts.append(c.c(b"", flag))
    return pkts + [c.s(r) for r in rest]


@pytest.mark.parametrize("flags", ["R", "RA", "FA,R"])
def test_server_flight_after_the_clients_rst_is_read(run_cli, tmp_path: Path,
                                                     flags: str) -> None:
    (tmp_path / "rst.pcap").write_bytes(pcap_bytes([ether(p) for p in
                                                    reset_after_server_hello(flags)]))
    code, conn, err = first_connection(run_cli, "rst.pcap")
    assert code == 0, err
    assert conn["messages"] == [">>> ClientHello", "<<< ServerHello", "<<< Certificate",
                                "<<< ServerKeyExchange", "<<< ServerHelloDone"]
    assert conn["key_exchange"]["group"]["name"] == "x25519"
    assert conn["certificates"] and conn["close"] == "rst"
    assert conn["last_frame"] == len(reset_after_server_hello(flags))
    if TSHARK:
        assert handshake_types(tmp_path / "rst.pcap") == ["1", "2", "11", "12", "14"]


def _replay() -> list[bytes]:
    c = Conv(CLIENT, SERVER)
    pkts = c.handshake()
    for direction, data in real_chunks():
        pkts.append(c.c(data) if direction == 0 else c.s(data))
    return pkts


def _fragments_v4(packet: bytes, size: int) -> list[bytes]:
    ihl = (packet[0] & 15) * 4
    src, dst = (".".join(map(str, packet[12:16])), ".".join(map(str, packet[16:20])))
    body = packet[ihl:]
    return [ipv4(src, dst, packet[9], body[o:o + size], ident=0x4242, frag_offset=o,
                 more_fragments=o + size < len(body)) for o in range(0, len(body), size)]


def test_client_hello_in_ipv4_fragments_out_of_order(run_cli, tmp_path: Path) -> None:
    pkts = _replay()
    frags = _fragments_v4(pkts[3], 64)  # the ClientHello, in 64-byte fragments
    pkts[3:4] = [frags[-1], *frags[1:-1], frags[0]]
    (tmp_path / "frag.pcap").write_bytes(pcap_bytes([ether(p) for p in pkts]))
    code, conn, err = first_connection(run_cli, "frag.pcap")
    assert code == 0, err
    assert conn["sni"] == "localhost" and conn["gap_bytes"] == 0
    assert conn["fingerprints"]["ja3"] is not None
    assert conn["cipher"]["iana_name"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    if TSHARK:
        assert tshark_fields(tmp_path / "frag.pcap", "tls.handshake.type == 1",
                             "tls.handshake.extensions_server_name") == ["localhost"]


def test_server_flight_in_ipv6_fragments(run_cli, tmp_path: Path) -> None:
    c = Conv(("::1", 40000), ("::1", 443))
    pkts = c.handshake()
    for direction, data in real_chunks():
        if direction == 1 and len(data) > 1000:
            seg = c.s(data)[40:]  # the TCP segment of the server's first flight
            pieces = [seg[o:o + 512] for o in range(0, len(seg), 512)]
            for i, piece in reversed(list(enumerate(pieces))):
                frag = struct.pack("!HI", (i * 512) | (i < len(pieces) - 1), 99)
                pkts.append(ipv6("::1", "::1", 6, piece, ext=[(44, frag)]))
        else:
            pkts.append(c.c(data) if direction == 0 else c.s(data))
    (tmp_path / "frag6.pcap").write_bytes(pcap_bytes([ether(p) for p in pkts]))
    code, conn, err = first_connection(run_cli, "frag6.pcap")
    assert code == 0, err
    assert "<<< Certificate" in conn["messages"] and conn["certificates"]
    if TSHARK:
        assert "11" in handshake_types(tmp_path / "frag6.pcap")


def test_link_type_108_capture(run_cli, tmp_path: Path) -> None:
    """LINKTYPE_LOOP (OpenBSD loopback): big-endian AF before the IP packet."""
    (tmp_path / "loop.pcap").write_bytes(pcap_bytes([struct.pack(">I", 2) + p
                                                     for p in _replay()], 108))
    code, conn, err = first_connection(run_cli, "loop.pcap")
    assert code == 0, err
    assert conn["sni"] == "localhost" and conn["version"]["name"] == "TLS 1.2"
    if TSHARK:
        assert handshake_types(tmp_path / "loop.pcap")[:2] == ["1", "2"]


def _client_hello_variant(how: str) -> tuple[list, int]:
    """The real handshake with its ClientHello damaged (`how` = "overrun": the extensions
    block claims 7 bytes more than the message holds) or cut by a snaplen of 200 bytes."""
    chunks = real_chunks()
    hello = bytearray(chunks[0][1])
    if how == "overrun":
        p = 5 + 4 + 2 + 32
        p += 1 + hello[p]
        p += 2 + int.from_bytes(hello[p:p + 2], "big")
        p += 1 + hello[p]
        struct.pack_into("!H", hello, p, int.from_bytes(hello[p:p + 2], "big") + 7)
    c = Conv(CLIENT, SERVER)
    frames: list = [ether(p) for p in c.handshake()]
    first = ether(c.c(bytes(hello)))
    frames.append((1003.5, first[:200], len(first)) if how == "snaplen" else first)
    for direction, data in chunks[1:]:
        frames.append(ether(c.c(data) if direction == 0 else c.s(data)))
    return frames, len(first)


def test_malformed_client_hello_fields_before_the_damage_and_the_server_hello(
        run_cli, tmp_path: Path) -> None:
    frames, _ = _client_hello_variant("overrun")
    (tmp_path / "bad.pcap").write_bytes(pcap_bytes(frames))
    code, conn, err = first_connection(run_cli, "bad.pcap")
    assert code == 0, err
    assert conn["sni"] == "localhost" and len(conn["offer"]["cipher_suites"]) == 28
    assert conn["messages"][:3] == [">>> ClientHello", "<<< ServerHello", "<<< Certificate"]
    assert conn["cipher"]["iana_name"] == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    assert conn["fingerprints"]["ja3"] is None and conn["fingerprints"]["ja3s"] is not None
    assert conn["problems"] == ["malformed ClientHello from the client: block of 107 bytes, "
                                "only 100 left in handshake.ClientHello.extensions at offset "
                                "99 (the fields before it are reported)"]


@pytest.mark.parametrize("reader", ["fast", "flow"])
def test_client_hello_cut_by_the_snaplen_still_gives_its_sni(run_cli, tmp_path: Path,
                                                             reader: str) -> None:
    """Both readers: the fast one, and the Flow reader that --msg (or --keylog) uses."""
    frames, size = _client_hello_variant("snaplen")
    (tmp_path / "cut.pcap").write_bytes(pcap_bytes(frames))
    code, conn, err = first_connection(run_cli, "cut.pcap",
                                       *(["--msg"] if reader == "flow" else []))
    assert code == 7 and "1 packets cut short by the capture's snaplen" in err
    assert conn["sni"] == "localhost" and conn["gap_bytes"] == size - 200
    assert conn["messages"][:2] == [">>> ClientHello", "<<< ServerHello"]
    assert conn["fingerprints"]["ja3"] is None and conn["fingerprints"]["ja4"] is None
    assert conn["problems"] == ["ClientHello cut short by the capture (141 of 201 bytes "
                                "captured): the fields before the cut are reported"]


def test_partial_client_hello_on_every_prefix() -> None:
    """Every prefix of a real ClientHello: never an exception; each field either absent
    or equal to the whole hello's; the whole hello gives the same fields as the strict
    reader."""
    from tlsprobe.wire.hello_summary import parse_client_hello
    from tlsprobe.wire.hello_partial import partial_client_hello
    msg = real_chunks()[0][1][5:]
    whole = parse_client_hello(msg)
    assert partial_client_hello(msg) == whole._replace(partial=True)
    for n in range(len(msg)):
        info = partial_client_hello(msg[:n])
        if n < 38:
            assert info is None
            continue
        assert info is not None and info.partial and info.random == whole.random
        assert info.cipher_suites in ((), whole.cipher_suites)
        assert whole.extensions[:len(info.extensions)] == info.extensions
        assert info.sni in (None, whole.sni) and info.problems == ()
